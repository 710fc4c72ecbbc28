package health

import (
	"math/rand/v2"
	"testing"
	"time"

	argohealth "github.com/argoproj/gitops-engine/pkg/health"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
)

// Override adapts Assess to gitops-engine's health.HealthOverride, as Argo
// CD runs a health override, for the tests that compare with gitops-engine.
type Override struct{}

var _ argohealth.HealthOverride = Override{}

func (Override) GetResourceHealth(obj *unstructured.Unstructured) (*argohealth.HealthStatus, error) {
	h, ok := Assess(obj)
	if !ok {
		return nil, nil
	}
	return &argohealth.HealthStatus{Status: argohealth.HealthStatusCode(h.Status), Message: h.Message}, nil
}

// TestChildHealthAsGitopsEngine: childHealth gives gitops-engine's
// health.GetResourceHealth verdict and message, without overrides, for
// generated StatefulSets (both strategies, partitions, revisions,
// generations, replica counts), Services (every type, with and without a
// load balancer address) and claims (every phase), some being deleted
// (with and without Argo CD's hook finalizer); and it leaves other kinds to
// nobody, as gitops-engine has no check for them either.
func TestChildHealthAsGitopsEngine(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	seen := map[cachev1beta1.HealthCode]int{}
	const runs = 3000
	for i := range runs {
		obj := randomChild(t, rng)
		got, ok := childHealth(obj)
		want, err := argohealth.GetResourceHealth(obj, nil)
		if err != nil || want == nil || !ok {
			t.Fatalf("object %d (%s): ours %+v %v, gitops-engine %+v %v", i, obj.GetKind(), got, ok, want, err)
		}
		if string(got.Status) != string(want.Status) || got.Message != want.Message {
			t.Fatalf("object %d: ours %+v, gitops-engine %+v\n%v", i, got, *want, obj.Object)
		}
		seen[got.Status]++
	}
	for _, code := range []cachev1beta1.HealthCode{cachev1beta1.HealthHealthy, cachev1beta1.HealthProgressing,
		cachev1beta1.HealthDegraded, cachev1beta1.HealthUnknown} {
		if seen[code] < runs/100 {
			t.Errorf("only %d of %d generated children assessed %s: %v", seen[code], runs, code, seen)
		}
	}

	cm := &unstructured.Unstructured{}
	cm.SetAPIVersion("v1")
	cm.SetKind("ConfigMap")
	if h, ok := childHealth(cm); ok {
		t.Errorf("a ConfigMap has health %+v", h)
	}
	if h, err := argohealth.GetResourceHealth(cm, nil); h != nil || err != nil {
		t.Errorf("gitops-engine now checks ConfigMaps (%+v, %v): childHealth should too", h, err)
	}
	for _, order := range [][2]cachev1beta1.HealthCode{{cachev1beta1.HealthHealthy, cachev1beta1.HealthDegraded},
		{cachev1beta1.HealthProgressing, cachev1beta1.HealthMissing}, {cachev1beta1.HealthDegraded, cachev1beta1.HealthProgressing},
		{"", cachev1beta1.HealthSuspended}, {cachev1beta1.HealthHealthy, "Other"}} {
		if a, b := isWorse(order[0], order[1]), argohealth.IsWorse(argohealth.HealthStatusCode(order[0]), argohealth.HealthStatusCode(order[1])); a != b {
			t.Errorf("isWorse(%s, %s) = %v, gitops-engine %v", order[0], order[1], a, b)
		}
	}
}

// randomChild is a StatefulSet, Service or claim in a random state, in
// unstructured form with apiVersion and kind.
func randomChild(t *testing.T, rng *rand.Rand) *unstructured.Unstructured {
	t.Helper()
	pick := func(n int) int32 { return int32(rng.IntN(n)) }
	var obj runtime.Object
	switch rng.IntN(3) {
	case 0:
		sts := &appsv1.StatefulSet{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"}}
		sts.Generation = int64(1 + pick(3))
		sts.Status.ObservedGeneration = int64(pick(4))
		if rng.IntN(5) > 0 {
			sts.Spec.Replicas = ptr.To(pick(4))
		}
		sts.Status.ReadyReplicas, sts.Status.UpdatedReplicas, sts.Status.CurrentReplicas = pick(4), pick(4), pick(4)
		sts.Status.CurrentRevision = []string{"a", "b"}[rng.IntN(2)]
		sts.Status.UpdateRevision = []string{"a", "b"}[rng.IntN(2)]
		switch rng.IntN(3) {
		case 0:
			sts.Spec.UpdateStrategy.Type = appsv1.OnDeleteStatefulSetStrategyType
		case 1:
			sts.Spec.UpdateStrategy.Type = appsv1.RollingUpdateStatefulSetStrategyType
			if rng.IntN(3) > 0 {
				sts.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{}
				if rng.IntN(2) == 0 {
					sts.Spec.UpdateStrategy.RollingUpdate.Partition = ptr.To(pick(3))
				}
			}
		}
		obj = sts
	case 1:
		svc := &corev1.Service{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"}}
		svc.Spec.Type = []corev1.ServiceType{"", corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer}[rng.IntN(4)]
		if rng.IntN(2) == 0 {
			svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.1"}}
		}
		obj = svc
	default:
		pvc := &corev1.PersistentVolumeClaim{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"}}
		pvc.Status.Phase = []corev1.PersistentVolumeClaimPhase{"", corev1.ClaimPending, corev1.ClaimBound, corev1.ClaimLost}[rng.IntN(4)]
		obj = pvc
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	out := &unstructured.Unstructured{Object: u}
	out.SetName("child")
	if rng.IntN(6) == 0 {
		out.SetDeletionTimestamp(&metav1.Time{Time: time.Unix(1764633600, 0)})
		if rng.IntN(2) == 0 {
			out.SetFinalizers([]string{hookFinalizer})
		}
	}
	return out
}
