package controllers

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/resources"
)

// boundClaim makes the data claim of a pod in class, bound (the API
// server resizes only bound claims; there is no PV controller here).
func boundClaim(t *testing.T, ns, rc string, shard int, class string) *corev1.PersistentVolumeClaim {
	t.Helper()
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: resources.PVCName(rc, shard, 0), Namespace: ns, Labels: resources.ShardLabels(rc, shard)},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: &class,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	if err := k8s.Create(testCtx, pvc); err != nil {
		t.Fatal(err)
	}
	pvc.Status.Phase = corev1.ClaimBound
	pvc.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}
	if err := k8s.Status().Update(testCtx, pvc); err != nil {
		t.Fatal(err)
	}
	return pvc
}

// TestVolumeExpansion: growing spec.storage.size patches the claims whose
// StorageClass allows expansion (the real API server's admission checks
// the class too), leaves the StatefulSets' claim templates as they were,
// and for a class that does not allow it emits one Warning naming the
// class and leaves the claim alone.
func TestVolumeExpansion(t *testing.T) {
	ns := newNamespace(t)
	grow, fixed := ns+"-grow", ns+"-fixed"
	for name, allow := range map[string]bool{grow: true, fixed: false} {
		sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: "example.com/csi", AllowVolumeExpansion: ptr.To(allow)}
		if err := k8s.Create(testCtx, sc); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k8s.Delete(testCtx, sc) })
	}
	rc := newCluster(t, ns, "vol", func(rc *cachev1beta1.RedisCluster) {
		rc.Spec.ReplicasPerShard = 0
		rc.Spec.Storage.StorageClassName = &grow
	})
	waitSettled(t, rc)
	boundClaim(t, ns, "vol", 0, grow)
	boundClaim(t, ns, "vol", 1, fixed)

	live := getCluster(t, rc)
	live.Spec.Storage.Size = ptr.To(resource.MustParse("2Gi"))
	if err := k8s.Update(testCtx, live); err != nil {
		t.Fatal(err)
	}
	request := func(shard int) (resource.Quantity, map[string]string) {
		pvc := &corev1.PersistentVolumeClaim{}
		if err := k8s.Get(testCtx, client.ObjectKey{Namespace: ns, Name: resources.PVCName("vol", shard, 0)}, pvc); err != nil {
			t.Fatal(err)
		}
		return pvc.Spec.Resources.Requests[corev1.ResourceStorage], pvc.Annotations
	}
	eventually(t, "the expandable claim grown and the other marked", func() error {
		q0, _ := request(0)
		q1, ann1 := request(1)
		if q0.String() != "2Gi" || q1.String() != "1Gi" || ann1[expansionRefusedAnnotation] != "2Gi" {
			return fmt.Errorf("claims %s and %s (annotations %v)", q0.String(), q1.String(), ann1)
		}
		return nil
	})
	var events corev1.EventList
	eventually(t, "a warning naming the class", func() error {
		if err := k8s.List(testCtx, &events, client.InNamespace(ns)); err != nil {
			return err
		}
		var refused []string
		for _, e := range events.Items {
			if e.Reason == "VolumeExpansionNotAllowed" {
				refused = append(refused, e.Message)
			}
		}
		if len(refused) != 1 || !strings.Contains(refused[0], "StorageClass "+fixed+" does not allow volume expansion") ||
			!strings.Contains(refused[0], resources.PVCName("vol", 1, 0)) {
			return fmt.Errorf("VolumeExpansionNotAllowed events %q", refused)
		}
		return nil
	})
	// The StatefulSets keep their 1Gi templates (immutable).
	sts := statefulSet(t, ns, "vol", 0)
	if q := sts.Spec.VolumeClaimTemplates[0].Spec.Resources.Requests[corev1.ResourceStorage]; q.String() != "1Gi" {
		t.Errorf("claim template %s", q.String())
	}
	// Quiet afterwards: the refusal is not repeated on every pass.
	reconcileUntilQuiet(t, rc)
}

// TestServicesAndExternalAccess: the client Service takes spec.service's
// type and annotations on update and keeps another controller's
// annotation; externalAccess makes one Service per pod and the announce
// ConfigMap with each Service's cluster IP, and disabling it removes them.
func TestServicesAndExternalAccess(t *testing.T) {
	ns := newNamespace(t)
	rc := newCluster(t, ns, "ext", func(rc *cachev1beta1.RedisCluster) { rc.Spec.ReplicasPerShard = 1 })
	waitSettled(t, rc)

	client0 := &corev1.Service{}
	if err := k8s.Get(testCtx, client.ObjectKey{Namespace: ns, Name: "ext"}, client0); err != nil {
		t.Fatal(err)
	}
	base := client0.DeepCopy()
	client0.Annotations["other.example.com/owner"] = "someone-else"
	if err := k8s.Patch(testCtx, client0, client.MergeFrom(base), client.FieldOwner("other-controller")); err != nil {
		t.Fatal(err)
	}

	live := getCluster(t, rc)
	live.Spec.Service = &cachev1beta1.ClientServiceSpec{Type: corev1.ServiceTypeNodePort, Annotations: map[string]string{"example.com/lb": "internal"}}
	live.Spec.ExternalAccess = &cachev1beta1.ExternalAccessSpec{Enabled: true, Type: corev1.ServiceTypeClusterIP}
	if err := k8s.Update(testCtx, live); err != nil {
		t.Fatal(err)
	}
	pods := []string{"ext-shard-0-0", "ext-shard-0-1", "ext-shard-1-0", "ext-shard-1-1", "ext-shard-2-0", "ext-shard-2-1"}
	eventually(t, "client Service updated and per-pod Services announced", func() error {
		svc := &corev1.Service{}
		if err := k8s.Get(testCtx, client.ObjectKey{Namespace: ns, Name: "ext"}, svc); err != nil {
			return err
		}
		if svc.Spec.Type != corev1.ServiceTypeNodePort || svc.Spec.Ports[0].NodePort == 0 ||
			svc.Annotations["example.com/lb"] != "internal" || svc.Annotations["other.example.com/owner"] != "someone-else" {
			return fmt.Errorf("client Service type %s, ports %+v, annotations %v", svc.Spec.Type, svc.Spec.Ports, svc.Annotations)
		}
		cm := &corev1.ConfigMap{}
		if err := k8s.Get(testCtx, client.ObjectKey{Namespace: ns, Name: "ext-announce"}, cm); err != nil {
			return err
		}
		for _, pod := range pods {
			ext := &corev1.Service{}
			if err := k8s.Get(testCtx, client.ObjectKey{Namespace: ns, Name: pod + "-external"}, ext); err != nil {
				return err
			}
			if ext.Spec.ClusterIP == "" || cm.Data[pod] != ext.Spec.ClusterIP || ext.Spec.Selector["statefulset.kubernetes.io/pod-name"] != pod {
				return fmt.Errorf("%s: cluster IP %q, announced %q, selector %v", pod, ext.Spec.ClusterIP, cm.Data[pod], ext.Spec.Selector)
			}
		}
		return nil
	})
	reconcileUntilQuiet(t, rc)

	live = getCluster(t, rc)
	live.Spec.ExternalAccess.Enabled = false
	if err := k8s.Update(testCtx, live); err != nil {
		t.Fatal(err)
	}
	eventually(t, "per-pod Services and announce ConfigMap deleted", func() error {
		var list corev1.ServiceList
		if err := k8s.List(testCtx, &list, client.InNamespace(ns)); err != nil {
			return err
		}
		var names []string
		for _, s := range list.Items {
			if s.DeletionTimestamp == nil {
				names = append(names, s.Name)
			}
		}
		slices.Sort(names)
		if !slices.Equal(names, []string{"ext", "ext-headless"}) {
			return fmt.Errorf("Services %v", names)
		}
		if err := k8s.Get(testCtx, client.ObjectKey{Namespace: ns, Name: "ext-announce"}, &corev1.ConfigMap{}); err == nil {
			return fmt.Errorf("announce ConfigMap still there")
		}
		return nil
	})
}

func statefulSet(t *testing.T, ns, rc string, shard int) *appsv1.StatefulSet {
	t.Helper()
	sts := &appsv1.StatefulSet{}
	if err := k8s.Get(testCtx, client.ObjectKey{Namespace: ns, Name: resources.StatefulSetName(rc, shard)}, sts); err != nil {
		t.Fatal(err)
	}
	return sts
}
