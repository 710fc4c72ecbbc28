package controllers

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/resources"
	"github.com/redis-operator/redis-operator/controllers/rotation"
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
			Address:        unreachableVault,
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

// TestAuthTurnedOn: setting a source on a cluster created with
// spec.auth.disabled (its owned Secret holds no password, so the pods run
// without one) starts a rotation from no password instead of writing the
// password into the Secret, which would give restarted pods a password the
// running ones lack. The password stays pending (never in status) and
// auth.conf keeps no requirepass until every node has it; envtest runs no
// pods, so the rotation waits at its first step.
func TestAuthTurnedOn(t *testing.T) {
	ns := newNamespace(t)
	const password = "turned on pw"
	rc := newCluster(t, ns, "plain", func(rc *cachev1beta1.RedisCluster) {
		rc.Spec.Auth = &cachev1beta1.AuthSpec{Disabled: true}
	})
	owned := &corev1.Secret{}
	eventually(t, "owned Secret without a password", func() error {
		return k8s.Get(testCtx, client.ObjectKey{Namespace: ns, Name: "plain-auth"}, owned)
	})
	if _, ok := owned.Data[resources.PasswordKey]; ok {
		t.Fatal("the owned Secret of a cluster with spec.auth.disabled holds a password")
	}
	noAuthConf := string(owned.Data[resources.AuthConfKey])

	src := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "src", Namespace: ns}, Data: map[string][]byte{"password": []byte(password)}}
	if err := k8s.Create(testCtx, src); err != nil {
		t.Fatal(err)
	}
	updateSpec(t, rc, func(rc *cachev1beta1.RedisCluster) {
		rc.Spec.Auth = &cachev1beta1.AuthSpec{SecretRef: &cachev1beta1.SecretKeySelector{Name: src.Name}}
	})
	var got *cachev1beta1.RedisCluster
	eventually(t, "rotation from no password pending", func() error {
		if err := k8s.Get(testCtx, client.ObjectKeyFromObject(owned), owned); err != nil {
			return err
		}
		if string(owned.Data[rotation.NextKey]) != password {
			return errors.New("no pending password")
		}
		got = getCluster(t, rc)
		if got.Status.Credentials == nil || got.Status.Credentials.RotationStep != rotation.AddingPassword {
			return fmt.Errorf("status.credentials %+v", got.Status.Credentials)
		}
		return nil
	})
	if _, ok := owned.Data[resources.PasswordKey]; ok {
		t.Error("the owned Secret gives clients the password before any node has it")
	}
	if string(owned.Data[resources.AuthConfKey]) != noAuthConf {
		t.Errorf("auth.conf changed before every node has the password: %q", owned.Data[resources.AuthConfKey])
	}
	// Later passes keep waiting at the first step: nothing is rewritten.
	before := owned.DeepCopy()
	reconcileUntilQuiet(t, rc)
	if err := k8s.Get(testCtx, client.ObjectKeyFromObject(owned), owned); err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(before.Data, owned.Data) {
		t.Error("a later pass changed the owned Secret's data")
	}
	got = getCluster(t, rc)
	if strings.Contains(fmt.Sprintf("%+v", got.Status), password) {
		t.Error("status shows the password")
	}
	if c := meta.FindStatusCondition(got.Status.Conditions, cachev1beta1.RedisClusterCredentialsReadyCondition); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("credentials %+v", c)
	}
}
