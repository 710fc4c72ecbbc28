package health

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
)

// readyCluster is the "ready" fixture as the controller holds it: typed, with
// no TypeMeta (controller-runtime's typed client leaves it empty).
func readyCluster(t *testing.T) *cachev1beta1.RedisCluster {
	t.Helper()
	return typedFixture(t, "testdata/ready.yaml")
}

func typedFixture(t *testing.T, path string) *cachev1beta1.RedisCluster {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("argocd", path))
	if err != nil {
		t.Fatal(err)
	}
	rc := &cachev1beta1.RedisCluster{}
	if err := yaml.UnmarshalStrict(data, rc); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	rc.TypeMeta = metav1.TypeMeta{}
	return rc
}

func toUnstructured(t *testing.T, obj runtime.Object, apiVersion, kind string) *unstructured.Unstructured {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	return u
}

// shardSet is a shard's StatefulSet as the controller builds it (OnDelete
// updates), with ready of its replicas ready.
func shardSet(t *testing.T, name string, replicas, ready int32) *unstructured.Unstructured {
	t.Helper()
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "redis", Generation: 1},
		Spec: appsv1.StatefulSetSpec{
			Replicas:       ptr.To(replicas),
			UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType},
		},
		Status: appsv1.StatefulSetStatus{ObservedGeneration: 1, Replicas: replicas, ReadyReplicas: ready},
	}
	return toUnstructured(t, sts, "apps/v1", "StatefulSet")
}

func claim(t *testing.T, name string, phase corev1.PersistentVolumeClaimPhase) *unstructured.Unstructured {
	t.Helper()
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "redis"},
		Status:     corev1.PersistentVolumeClaimStatus{Phase: phase},
	}
	return toUnstructured(t, pvc, "v1", "PersistentVolumeClaim")
}

func service(t *testing.T, name string) *unstructured.Unstructured {
	t.Helper()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "redis"},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: corev1.ClusterIPNone},
	}
	return toUnstructured(t, svc, "v1", "Service")
}

// TestForRedisClusterMatchesFixtures: with no children, the controller's
// verdict on the typed object equals the expected verdict of every v1beta1
// fixture, so status.health, the Go override and the Lua check agree.
func TestForRedisClusterMatchesFixtures(t *testing.T) {
	for _, ft := range loadFixtureTests(t) {
		data, err := os.ReadFile(filepath.Join("argocd", ft.InputPath))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(data), "apiVersion: cache.redis.io/v1beta1") {
			continue
		}
		t.Run(ft.InputPath, func(t *testing.T) {
			got := ForRedisCluster(typedFixture(t, ft.InputPath), nil)
			if want := fixtureVerdict(t, ft.InputPath); got != want {
				t.Errorf("ForRedisCluster = %+v, want %+v", got, want)
			}
		})
	}
}

// fixtureVerdict is the expected verdict health_test.yaml gives a fixture.
func fixtureVerdict(t *testing.T, inputPath string) cachev1beta1.HealthStatus {
	t.Helper()
	for _, ft := range loadFixtureTests(t) {
		if ft.InputPath == inputPath {
			return cachev1beta1.HealthStatus{Status: cachev1beta1.HealthCode(ft.HealthStatus.Status), Message: ft.HealthStatus.Message}
		}
	}
	t.Fatalf("%s is not in health_test.yaml", inputPath)
	return cachev1beta1.HealthStatus{}
}

func TestForRedisClusterFoldsInChildren(t *testing.T) {
	healthyChildren := func(t *testing.T) []*unstructured.Unstructured {
		return []*unstructured.Unstructured{
			shardSet(t, "demo-shard-0", 2, 2), shardSet(t, "demo-shard-1", 2, 2), shardSet(t, "demo-shard-2", 2, 2),
			claim(t, "data-demo-shard-0-0", corev1.ClaimBound), claim(t, "data-demo-shard-0-1", corev1.ClaimBound),
			service(t, "demo-headless"), service(t, "demo"),
		}
	}
	ready := fixtureVerdict(t, "testdata/ready.yaml")

	tests := []struct {
		name     string
		cluster  func(t *testing.T) *cachev1beta1.RedisCluster
		children func(t *testing.T) []*unstructured.Unstructured
		want     cachev1beta1.HealthStatus
	}{{
		name:     "healthy children keep the cluster's verdict",
		cluster:  readyCluster,
		children: healthyChildren,
		want:     ready,
	}, {
		name:    "a StatefulSet waiting for a pod makes it Progressing",
		cluster: readyCluster,
		children: func(t *testing.T) []*unstructured.Unstructured {
			return append(healthyChildren(t), shardSet(t, "demo-shard-1", 2, 1))
		},
		want: cachev1beta1.HealthStatus{Status: cachev1beta1.HealthProgressing, Message: "StatefulSet demo-shard-1: Waiting for 1 pods to be ready..."},
	}, {
		name:    "a lost PVC makes it Degraded, beating a Progressing StatefulSet",
		cluster: readyCluster,
		children: func(t *testing.T) []*unstructured.Unstructured {
			return append(healthyChildren(t), shardSet(t, "demo-shard-2", 2, 0), claim(t, "data-demo-shard-2-0", corev1.ClaimLost))
		},
		want: cachev1beta1.HealthStatus{Status: cachev1beta1.HealthDegraded, Message: "PersistentVolumeClaim data-demo-shard-2-0 is Degraded."},
	}, {
		name:    "a PVC without a phase yet says nothing",
		cluster: readyCluster,
		children: func(t *testing.T) []*unstructured.Unstructured {
			return append(healthyChildren(t), claim(t, "data-demo-shard-0-2", ""))
		},
		want: ready,
	}, {
		name:    "a child being deleted is Progressing",
		cluster: readyCluster,
		children: func(t *testing.T) []*unstructured.Unstructured {
			gone := service(t, "demo-old")
			gone.SetDeletionTimestamp(&metav1.Time{Time: time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)})
			return append(healthyChildren(t), gone)
		},
		want: cachev1beta1.HealthStatus{Status: cachev1beta1.HealthProgressing, Message: "Service demo-old: Pending deletion"},
	}, {
		name:    "a degraded cluster stays Degraded whatever its children say",
		cluster: func(t *testing.T) *cachev1beta1.RedisCluster { return typedFixture(t, "testdata/degraded.yaml") },
		children: func(t *testing.T) []*unstructured.Unstructured {
			return append(healthyChildren(t), shardSet(t, "demo-shard-2", 2, 0))
		},
		want: fixtureVerdict(t, "testdata/degraded.yaml"),
	}, {
		name:    "a paused cluster with a pod coming back is Progressing",
		cluster: func(t *testing.T) *cachev1beta1.RedisCluster { return typedFixture(t, "testdata/paused.yaml") },
		children: func(t *testing.T) []*unstructured.Unstructured {
			return append(healthyChildren(t), shardSet(t, "demo-shard-0", 2, 1))
		},
		want: cachev1beta1.HealthStatus{Status: cachev1beta1.HealthProgressing, Message: "StatefulSet demo-shard-0: Waiting for 1 pods to be ready..."},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			children := tc.children(t)
			got := ForRedisCluster(tc.cluster(t), children)
			if got != tc.want {
				t.Fatalf("ForRedisCluster = %+v, want %+v", got, tc.want)
			}
			// The verdict does not depend on the order of the children.
			for i, j := 0, len(children)-1; i < j; i, j = i+1, j-1 {
				children[i], children[j] = children[j], children[i]
			}
			if again := ForRedisCluster(tc.cluster(t), children); again != got {
				t.Errorf("with the children reversed: %+v, want %+v", again, got)
			}
		})
	}
}

// TestForRedisClusterIgnoresPreviousVerdict: status.health is output only; a
// stale Degraded verdict from an earlier pass does not stick.
func TestForRedisClusterIgnoresPreviousVerdict(t *testing.T) {
	rc := readyCluster(t)
	rc.Status.Health = &cachev1beta1.HealthStatus{Status: cachev1beta1.HealthDegraded, Message: "old"}
	if got := ForRedisCluster(rc, nil); got.Status != cachev1beta1.HealthHealthy {
		t.Errorf("ForRedisCluster = %+v, want Healthy", got)
	}
}

// TestForRedisClusterBoundsTheMessage: the message fits the schema's 1024
// bytes and stays valid UTF-8 when a condition message is longer.
func TestForRedisClusterBoundsTheMessage(t *testing.T) {
	rc := typedFixture(t, "testdata/shard-lost.yaml")
	for i := range rc.Status.Conditions {
		if rc.Status.Conditions[i].Type == cachev1beta1.RedisClusterDegradedCondition {
			rc.Status.Conditions[i].Message = strings.Repeat("é", 600) // 1200 bytes
		}
	}
	got := ForRedisCluster(rc, nil)
	if len(got.Message) > 1024 || !utf8.ValidString(got.Message) {
		t.Fatalf("message of %d bytes, valid UTF-8 %v", len(got.Message), utf8.ValidString(got.Message))
	}
	if want := "ShardLost: " + strings.Repeat("é", (1024-len("ShardLost: "))/2); got.Message != want {
		t.Errorf("message = %q, want the first 1024 bytes cut at a character boundary", got.Message)
	}
}

func TestOverrideLeavesOtherKindsToGitopsEngine(t *testing.T) {
	if h, err := (Override{}).GetResourceHealth(shardSet(t, "demo-shard-0", 2, 2)); h != nil || err != nil {
		t.Errorf("Override on a StatefulSet = %v, %v; want nil, nil", h, err)
	}
	other := &unstructured.Unstructured{}
	other.SetAPIVersion("example.com/v1")
	other.SetKind(Kind)
	if h, err := (Override{}).GetResourceHealth(other); h != nil || err != nil {
		t.Errorf("Override on a RedisCluster of another group = %v, %v; want nil, nil", h, err)
	}
}
