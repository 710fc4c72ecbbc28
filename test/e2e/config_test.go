//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/resources"
)

// TestConfig (label config): a live config key is applied on every node
// without a restart; a label and an annotation on the RedisCluster update
// no StatefulSet (R14); deleting a cluster with deleteClaimPolicy Retain
// keeps its claims.
func TestConfig(t *testing.T) {
	tier(t, tierCI)
	sideBySide(t) // see doc.go
	c := newCluster(t, "config", func(rc *cachev1beta1.RedisCluster) {
		rc.Spec.Storage.DeleteClaimPolicy = cachev1beta1.DeleteClaimRetain
		rc.Spec.Config = map[string]string{"maxmemory-policy": "noeviction"}
	})
	c.waitReady(5 * time.Minute)

	t.Run("live-config", func(t *testing.T) {
		scenario(t, "config/live-config")
		c := c.with(t)
		c.checkConfigEverywhere("maxmemory-policy", "noeviction")
		before := c.snapshot()
		c.update(func(rc *cachev1beta1.RedisCluster) { rc.Spec.Config["maxmemory-policy"] = "allkeys-lru" })
		c.poll("applying maxmemory-policy everywhere", 2*time.Minute, func() (bool, string) {
			return c.configOn("maxmemory-policy", "allkeys-lru", "")
		})
		rc := c.waitReady(2 * time.Minute)
		c.checkConverged(rc)
		after := c.snapshot()
		before.sameRuns(t, after)
		before.sameStatefulSets(t, after)
		// Pods started later read the same value from the ConfigMap.
		cm := &corev1.ConfigMap{}
		if err := env.k8s.Get(context.Background(), client.ObjectKey{Namespace: c.ns, Name: resources.ConfigMapName(c.name)}, cm); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(cm.Data[resources.ConfigKey], "\nmaxmemory-policy allkeys-lru\n") {
			t.Errorf("redis.conf in the ConfigMap lacks maxmemory-policy allkeys-lru:\n%s", cm.Data[resources.ConfigKey])
		}
	})

	// R14: another operator updated its StatefulSets forever after an
	// annotation was added.
	t.Run("label-and-annotation", func(t *testing.T) {
		scenario(t, "config/label-and-annotation")
		c := c.with(t)
		before := c.snapshot()
		c.update(func(rc *cachev1beta1.RedisCluster) {
			if rc.Labels == nil {
				rc.Labels = map[string]string{}
			}
			if rc.Annotations == nil {
				rc.Annotations = map[string]string{}
			}
			rc.Labels["team"] = "e2e"
			rc.Annotations["example.com/owner"] = "e2e-suite"
		})
		changed := c.get().ResourceVersion
		// Watch for a while: the change wakes the controller at once; its
		// passes must settle without touching the children.
		var versions []string
		deadline := time.Now().Add(20 * time.Second)
		for time.Now().Before(deadline) {
			if rv := c.get().ResourceVersion; len(versions) == 0 || versions[len(versions)-1] != rv {
				versions = append(versions, rv)
			}
			checkOperator(t)
			time.Sleep(250 * time.Millisecond)
		}
		after := c.snapshot()
		before.sameStatefulSets(t, after)
		before.sameRuns(t, after)
		if n := before.childUpdates(after); n > 1 {
			t.Errorf("%d updates of other children after a label and an annotation, want at most 1", n)
		}
		// At most one write of its own (a status update) after the change.
		extra := 0
		for _, rv := range versions {
			if rv != changed {
				extra++
			}
		}
		if extra > 1 {
			t.Errorf("the RedisCluster kept changing after the label and annotation (resourceVersions %v after %s)", versions, changed)
		}
		if !isReady(c.get()) {
			t.Errorf("not Ready after a label and an annotation: %s", statusSummary(c.get()))
		}
	})

	t.Run("delete-retain", func(t *testing.T) {
		scenario(t, "config/delete-retain")
		c := c.with(t)
		c.deleteAndCheck(cachev1beta1.DeleteClaimRetain)
	})
}

// snapshot records what must not change when nothing should restart or
// be rewritten: every pod's UID, container restarts and Redis run_id, and
// the resourceVersion of every child.
type snapshot struct {
	pods     map[string]string // pod -> uid/restarts/run_id
	sts      map[string]string // StatefulSet -> generation/resourceVersion
	children map[string]string // kind/name -> resourceVersion
}

func (c *cluster) snapshot() snapshot {
	c.t.Helper()
	s := snapshot{pods: map[string]string{}, sts: map[string]string{}, children: map[string]string{}}
	pw := c.password()
	for _, p := range c.pods() {
		restarts := int32(0)
		for _, cs := range p.Status.ContainerStatuses {
			restarts += cs.RestartCount
		}
		ctx, cancel := redisCtx()
		info, err := c.nodeClient(p.Status.PodIP, pw).Info(ctx, "server").Result()
		cancel()
		if err != nil {
			c.t.Fatalf("INFO server on %s: %v", p.Name, err)
		}
		s.pods[p.Name] = fmt.Sprintf("uid %s restarts %d run_id %s", p.UID, restarts, infoMap(info)["run_id"])
	}
	for name, st := range c.statefulSets() {
		s.sts[name] = fmt.Sprintf("generation %d resourceVersion %s", st.Generation, st.ResourceVersion)
	}
	sel := []client.ListOption{client.InNamespace(c.ns), client.MatchingLabels{resources.LabelCluster: c.name}}
	for _, l := range []struct {
		kind string
		list client.ObjectList
	}{
		{"PodDisruptionBudget", &policyv1.PodDisruptionBudgetList{}},
		{"Service", &corev1.ServiceList{}},
		{"ConfigMap", &corev1.ConfigMapList{}},
		{"Secret", &corev1.SecretList{}},
	} {
		if err := env.k8s.List(context.Background(), l.list, sel...); err != nil {
			c.t.Fatal(err)
		}
		switch list := l.list.(type) {
		case *policyv1.PodDisruptionBudgetList:
			for _, o := range list.Items {
				s.children[l.kind+"/"+o.Name] = o.ResourceVersion
			}
		case *corev1.ServiceList:
			for _, o := range list.Items {
				s.children[l.kind+"/"+o.Name] = o.ResourceVersion
			}
		case *corev1.ConfigMapList:
			for _, o := range list.Items {
				s.children[l.kind+"/"+o.Name] = o.ResourceVersion
			}
		case *corev1.SecretList:
			for _, o := range list.Items {
				s.children[l.kind+"/"+o.Name] = o.ResourceVersion
			}
		}
	}
	return s
}

// sameRuns fails t when a pod was replaced or restarted, or a Redis
// process is not the one from before.
func (s snapshot) sameRuns(t *testing.T, after snapshot) {
	t.Helper()
	for pod, was := range s.pods {
		if now := after.pods[pod]; now != was {
			t.Errorf("pod %s restarted: was %s, now %s", pod, was, now)
		}
	}
}

// sameStatefulSets fails t when a StatefulSet changed.
func (s snapshot) sameStatefulSets(t *testing.T, after snapshot) {
	t.Helper()
	for name, was := range s.sts {
		if now := after.sts[name]; now != was {
			t.Errorf("StatefulSet %s was updated: was %s, now %s", name, was, now)
		}
	}
}

// childUpdates counts children (other than StatefulSets) whose
// resourceVersion changed.
func (s snapshot) childUpdates(after snapshot) int {
	n := 0
	for k, was := range s.children {
		if after.children[k] != was {
			n++
		}
	}
	return n
}
