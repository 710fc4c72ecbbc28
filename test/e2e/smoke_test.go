//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/resources"
)

// TestSmoke (label smoke): a 3×1 cluster with a password from a Secret
// forms, serves writes, pauses and resumes, and its deletion removes its
// children and, with deleteClaimPolicy Delete, its claims.
func TestSmoke(t *testing.T) {
	tier(t, tierCI)
	sideBySide(t) // see doc.go
	t.Run("create-3x1", func(t *testing.T) {
		scenario(t, "smoke/create-3x1")
		const name = "smoke"
		ctx := context.Background()
		if err := ensureNamespace(ctx, "e2e-"+name); err != nil {
			t.Fatal(err)
		}
		src := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: "e2e-" + name, Name: "smoke-password"},
			StringData: map[string]string{"password": "e2e-" + randomToken()},
		}
		if err := env.k8s.Create(ctx, src); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		c := newCluster(t, name, func(rc *cachev1beta1.RedisCluster) {
			rc.Spec.Auth = &cachev1beta1.AuthSpec{SecretRef: &cachev1beta1.SecretKeySelector{Name: src.Name, Key: "password"}}
		})
		rc := c.waitReady(5 * time.Minute)
		ids := c.checkConverged(rc)
		c.checkStatusShards(rc, ids)
		if cond := meta.FindStatusCondition(rc.Status.Conditions, cachev1beta1.RedisClusterCredentialsReadyCondition); cond == nil || cond.Status != metav1.ConditionTrue {
			t.Fatalf("CredentialsReady is not True: %s", statusSummary(rc))
		}
		// status.health also folds in the StatefulSets' own status, which
		// the StatefulSet controller may report a moment later.
		c.poll("Healthy", time.Minute, func() (bool, string) {
			rc := c.get()
			return rc.Status.Health != nil && rc.Status.Health.Status == cachev1beta1.HealthHealthy && isReady(rc),
				fmt.Sprintf("health %+v; %s", rc.Status.Health, statusSummary(rc))
		})

		// The password is live: without it every node refuses commands.
		for _, p := range c.pods() {
			ctx, cancel := redisCtx()
			err := c.nodeClient(p.Status.PodIP, "").Ping(ctx).Err()
			cancel()
			if err == nil || !strings.Contains(err.Error(), "NOAUTH") {
				t.Fatalf("PING without password on %s: %v, want NOAUTH", p.Name, err)
			}
		}

		cl := c.clusterClient()
		w := startWriter(t, cl, "smoke", writerOptions{Max: 3000, Interval: time.Millisecond})
		w.waitDone(2 * time.Minute)
		r := w.verify(c.clusterClient())
		if len(r.Failed) > 0 {
			t.Fatalf("writes failed on a healthy cluster: %s", r)
		}

		// Paused: the Paused condition says so, status stays current, and
		// resuming brings the cluster back to Ready.
		paused := time.Now()
		c.update(func(rc *cachev1beta1.RedisCluster) { rc.Spec.Paused = true })
		c.poll("Paused", time.Minute, func() (bool, string) {
			rc := c.get()
			cond := meta.FindStatusCondition(rc.Status.Conditions, cachev1beta1.RedisClusterPausedCondition)
			return cond != nil && cond.Status == metav1.ConditionTrue && rc.Status.ObservedGeneration == rc.Generation, statusSummary(rc)
		})
		// Nothing is pending: a paused healthy cluster is still Ready, not
		// "converging" or "scaling".
		c.waitReady(time.Minute)
		for _, ob := range c.obs.since(paused) {
			if ob.phase != cachev1beta1.PhaseReady {
				t.Fatalf("paused healthy cluster reported phase %s (seen: %s)", ob.phase, c.obs.phasesSince(paused))
			}
		}
		c.update(func(rc *cachev1beta1.RedisCluster) { rc.Spec.Paused = false })
		c.waitReady(2 * time.Minute)

		c.deleteAndCheck(cachev1beta1.DeleteClaimDelete)
	})
}

// waitDone blocks until the writer has written its Max keys.
func (w *writer) waitDone(timeout time.Duration) {
	w.t.Helper()
	select {
	case <-w.done:
	case <-time.After(timeout):
		w.t.Fatalf("the writer did not finish its %d writes within %s", w.opts.Max, timeout)
	}
}

// deleteAndCheck deletes the RedisCluster and checks that it goes away
// (its finalizer removed), that garbage collection removes every child
// (StatefulSets, PodDisruptionBudgets, Services, ConfigMap, Secret, pods),
// and that the claims follow policy: gone with Delete, all kept with Retain.
func (c *cluster) deleteAndCheck(policy cachev1beta1.DeleteClaimPolicy) {
	c.t.Helper()
	ctx := context.Background()
	rc := c.get()
	if rc.Spec.Storage.DeleteClaimPolicy != policy {
		c.t.Fatalf("deleteClaimPolicy is %s, the check expects %s", rc.Spec.Storage.DeleteClaimPolicy, policy)
	}
	claimsBefore := len(c.claims())
	if want := int(rc.Spec.Shards * (1 + rc.Spec.ReplicasPerShard)); claimsBefore != want {
		c.t.Fatalf("%d claims before deletion, want %d", claimsBefore, want)
	}
	if err := env.k8s.Delete(ctx, rc); err != nil {
		c.t.Fatalf("deleting RedisCluster: %v", err)
	}
	c.poll("deleted", 3*time.Minute, func() (bool, string) {
		err := env.k8s.Get(ctx, c.key(), &cachev1beta1.RedisCluster{})
		return apierrors.IsNotFound(err), fmt.Sprintf("get: %v", err)
	})
	sel := []client.ListOption{client.InNamespace(c.ns), client.MatchingLabels{resources.LabelCluster: c.name}}
	c.poll("without children", 3*time.Minute, func() (bool, string) {
		var left []string
		for _, l := range []struct {
			kind string
			list client.ObjectList
		}{
			{"StatefulSet", &appsv1.StatefulSetList{}},
			{"PodDisruptionBudget", &policyv1.PodDisruptionBudgetList{}},
			{"Service", &corev1.ServiceList{}},
			{"ConfigMap", &corev1.ConfigMapList{}},
			{"Secret", &corev1.SecretList{}},
			{"Pod", &corev1.PodList{}},
		} {
			if err := env.k8s.List(ctx, l.list, sel...); err != nil {
				return false, err.Error()
			}
			if n := meta.LenList(l.list); n > 0 {
				left = append(left, fmt.Sprintf("%d %s", n, l.kind))
			}
		}
		return len(left) == 0, "left: " + strings.Join(left, ", ")
	})
	switch policy {
	case cachev1beta1.DeleteClaimDelete:
		c.poll("without claims", 2*time.Minute, func() (bool, string) {
			n := len(c.claims())
			return n == 0, fmt.Sprintf("%d claims left", n)
		})
	case cachev1beta1.DeleteClaimRetain:
		for _, pvc := range c.claims() {
			if pvc.DeletionTimestamp != nil {
				c.t.Fatalf("claim %s is being deleted under deleteClaimPolicy Retain", pvc.Name)
			}
		}
		if n := len(c.claims()); n != claimsBefore {
			c.t.Fatalf("%d claims left under deleteClaimPolicy Retain, want all %d", n, claimsBefore)
		}
	}
}
