package controllers

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
)

// TestAuthVaultUnreachable: a Vault source that does not answer gives
// CredentialsReady=False/VaultUnreachable, no pods (there is no password to
// start them with), and one Warning event however many passes retry; the
// Vault token never shows in status or events.
func TestAuthVaultUnreachable(t *testing.T) {
	ns := newNamespace(t)
	const token = "hvs.vault-token-never-shown"
	tok := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "vault-token", Namespace: ns}, Data: map[string][]byte{"token": []byte(token)}}
	if err := k8s.Create(testCtx, tok); err != nil {
		t.Fatal(err)
	}
	rc := newCluster(t, ns, "vault", func(rc *cachev1beta1.RedisCluster) {
		rc.Spec.Auth = &cachev1beta1.AuthSpec{Vault: &cachev1beta1.VaultSource{
			Address:        "http://127.0.0.1:1", // nothing listens on port 1
			Path:           "redis/test",
			TokenSecretRef: &cachev1beta1.SecretKeySelector{Name: tok.Name, Key: "token"},
		}}
	})
	var got *cachev1beta1.RedisCluster
	eventually(t, "CredentialsReady=False/VaultUnreachable", func() error {
		got = getCluster(t, rc)
		c := meta.FindStatusCondition(got.Status.Conditions, cachev1beta1.RedisClusterCredentialsReadyCondition)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != cachev1beta1.RedisClusterVaultUnreachableReason {
			return fmt.Errorf("credentials %+v", c)
		}
		return nil
	})
	// Let the retries run (5 s, then 10 s: at least two more reads).
	time.Sleep(16 * time.Second)
	if n := len(statefulSetVersions(t, ns)); n != 0 {
		t.Errorf("%d StatefulSets without a password", n)
	}
	owned := &corev1.Secret{}
	if err := k8s.Get(testCtx, client.ObjectKey{Namespace: ns, Name: "vault-auth"}, owned); err == nil {
		t.Error("an owned Secret exists without a password")
	}
	var events corev1.EventList
	if err := k8s.List(testCtx, &events, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	count := 0
	for _, e := range events.Items {
		if strings.Contains(e.Message, token) {
			t.Errorf("event %s shows the Vault token", e.Reason)
		}
		if e.Reason == cachev1beta1.RedisClusterVaultUnreachableReason {
			count += int(e.Count)
		}
	}
	if count != 1 {
		t.Errorf("%d VaultUnreachable events, want 1", count)
	}
	got = getCluster(t, rc)
	if strings.Contains(fmt.Sprintf("%+v", got.Status), token) {
		t.Error("status shows the Vault token")
	}
}
