package controllers

import (
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/acl"
	"github.com/redis-operator/redis-operator/controllers/resources"
)

// TestExporterUser: with spec.exporter.enabled the sidecar gets its own ACL user: a Secret
// <cluster>-exporter with a generated password, which later passes never replace; its
// hash in auth.conf with the exporter's rules, so pods start with the user; the sidecar
// reads that Secret, whose UID the pod template carries. A Secret deleted by hand comes back
// with a new password and UID, and the template follows (the pods roll). Disabling the
// exporter (no pod runs here, so none has the sidecar) deletes the Secret and the auth.conf
// line.
func TestExporterUser(t *testing.T) {
	ns := newNamespace(t)
	rc := newCluster(t, ns, "exp", func(rc *cachev1beta1.RedisCluster) {
		rc.Spec.Exporter.Enabled = true
	})
	key := client.ObjectKey{Namespace: ns, Name: "exp-exporter"}
	sec := &corev1.Secret{}
	owned := &corev1.Secret{}
	eventually(t, "the exporter's Secret and its user in auth.conf", func() error {
		if err := k8s.Get(testCtx, key, sec); err != nil {
			return err
		}
		if err := k8s.Get(testCtx, client.ObjectKey{Namespace: ns, Name: "exp-auth"}, owned); err != nil {
			return err
		}
		want := acl.ConfLines([]acl.User{{Name: acl.ExporterUser, Rules: acl.ExporterRules, Passwords: []string{string(sec.Data["password"])}}}, resources.QuoteConfigValue)
		if !strings.Contains(string(owned.Data["auth.conf"]), want) {
			return fmt.Errorf("auth.conf %q lacks %q", owned.Data["auth.conf"], want)
		}
		return nil
	})
	pw := string(sec.Data["password"])
	if len(pw) < 43 || string(sec.Data["username"]) != acl.ExporterUser {
		t.Fatalf("exporter Secret: username %q, password of %d characters", sec.Data["username"], len(pw))
	}
	if strings.Contains(string(owned.Data["auth.conf"]), pw) {
		t.Error("auth.conf holds the exporter's plain-text password")
	}
	var sts appsv1.StatefulSet
	sidecarReads := func(uid string) func() error {
		return func() error {
			if err := k8s.Get(testCtx, client.ObjectKey{Namespace: ns, Name: "exp-shard-0"}, &sts); err != nil {
				return err
			}
			if got := sts.Spec.Template.Annotations[resources.ExporterSecretAnnotation]; got != uid {
				return fmt.Errorf("template annotation %s=%q, want the Secret's UID %q", resources.ExporterSecretAnnotation, got, uid)
			}
			for _, c := range sts.Spec.Template.Spec.Containers {
				for _, e := range c.Env {
					if c.Name == resources.ExporterContainerName && e.Name == "REDIS_PASSWORD" && e.ValueFrom.SecretKeyRef.Name == key.Name {
						return nil
					}
				}
			}
			return fmt.Errorf("containers %+v", sts.Spec.Template.Spec.Containers)
		}
	}
	eventually(t, "the sidecar reading the exporter's Secret", sidecarReads(string(sec.UID)))

	// Later passes (a spec change starts one) keep the password.
	got := getCluster(t, rc)
	got.Spec.Config = map[string]string{"maxmemory-policy": "allkeys-lru"}
	if err := k8s.Update(testCtx, got); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the pass of the new generation", func() error {
		if g := getCluster(t, rc); g.Status.ObservedGeneration < got.Generation {
			return fmt.Errorf("observedGeneration %d", g.Status.ObservedGeneration)
		}
		return nil
	})
	if err := k8s.Get(testCtx, key, sec); err != nil || string(sec.Data["password"]) != pw {
		t.Fatalf("the exporter's password changed (or its Secret is gone: %v)", err)
	}

	// Deleted by hand: a new password under a new UID, which the template
	// carries, so that the pods roll and their sidecars start with it.
	if err := k8s.Delete(testCtx, sec); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a new exporter Secret", func() error {
		if err := k8s.Get(testCtx, key, sec); err != nil {
			return err
		}
		if string(sec.Data["password"]) == pw {
			return fmt.Errorf("the same password")
		}
		return nil
	})
	eventually(t, "the template carrying the new Secret's UID", sidecarReads(string(sec.UID)))

	got = getCluster(t, rc)
	got.Spec.Exporter.Enabled = false
	if err := k8s.Update(testCtx, got); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the exporter's Secret and auth.conf line gone", func() error {
		if err := k8s.Get(testCtx, key, &corev1.Secret{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("exporter Secret: %v", err)
		}
		if err := k8s.Get(testCtx, client.ObjectKey{Namespace: ns, Name: "exp-auth"}, owned); err != nil {
			return err
		}
		if strings.Contains(string(owned.Data["auth.conf"]), acl.ExporterUser) {
			return fmt.Errorf("auth.conf %q", owned.Data["auth.conf"])
		}
		return nil
	})
}

// TestExporterRefusesAForeignSecret: a Secret <cluster>-exporter that is not
// the cluster's (someone else's, or another cluster's user Secret whose name
// collides) is never handed to the sidecar: with the exporter enabled the pass
// stops before any StatefulSet is built, with the ExporterSecretConflict event.
func TestExporterRefusesAForeignSecret(t *testing.T) {
	ns := newNamespace(t)
	foreign := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "taken-exporter"},
		StringData: map[string]string{"password": "someone else's"}}
	if err := k8s.Create(testCtx, foreign); err != nil {
		t.Fatal(err)
	}
	rc := newCluster(t, ns, "taken", func(rc *cachev1beta1.RedisCluster) { rc.Spec.Exporter.Enabled = true })
	eventually(t, "the ExporterSecretConflict event", func() error {
		var events corev1.EventList
		if err := k8s.List(testCtx, &events, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.Reason == "ExporterSecretConflict" && e.InvolvedObject.Name == rc.Name {
				return nil
			}
		}
		return fmt.Errorf("%d events, none ExporterSecretConflict", len(events.Items))
	})
	if n := len(statefulSetVersions(t, ns)); n != 0 {
		t.Errorf("%d StatefulSets built while the exporter's Secret is another's", n)
	}
}
