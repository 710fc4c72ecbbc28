package controllers

import (
	"errors"
	"fmt"
	"net"
	"reflect"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/resources"
)

// TestCacheHoldsOnlyOwned: the manager's cache holds the cluster's own
// Secret and ConfigMap but neither an unrelated Secret or ConfigMap nor
// the Secret spec.auth.secretRef names; that Secret is still read (the
// password reaches the owned Secret) and a change of it still wakes the
// controller (a rotation starts, with the suite's resync at an hour).
func TestCacheHoldsOnlyOwned(t *testing.T) {
	ns := newNamespace(t)
	unrelatedSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "unrelated", Namespace: ns}, Data: map[string][]byte{"k": []byte("v")}}
	unrelatedConfig := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "unrelated", Namespace: ns}, Data: map[string]string{"k": "v"}}
	source := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "source", Namespace: ns}, Data: map[string][]byte{"password": []byte("first password")}}
	for _, o := range []client.Object{unrelatedSecret, unrelatedConfig, source} {
		if err := k8s.Create(testCtx, o); err != nil {
			t.Fatal(err)
		}
	}
	rc := newCluster(t, ns, "cached", func(rc *cachev1beta1.RedisCluster) {
		rc.Spec.Auth = &cachev1beta1.AuthSpec{SecretRef: &cachev1beta1.SecretKeySelector{Name: "source"}}
	})
	owned := &corev1.Secret{}
	// Created after the unrelated objects: once the cache has them, it has
	// seen every earlier Secret and ConfigMap event of the namespace.
	eventually(t, "the owned Secret and ConfigMap in the cache, CredentialsReady=True", func() error {
		if err := managerCache.Get(testCtx, client.ObjectKey{Namespace: ns, Name: resources.SecretName(rc.Name)}, owned); err != nil {
			return err
		}
		if string(owned.Data[resources.PasswordKey]) != "first password" {
			return errors.New("the owned Secret has no password yet")
		}
		if err := managerCache.Get(testCtx, client.ObjectKey{Namespace: ns, Name: resources.ConfigMapName(rc.Name)}, &corev1.ConfigMap{}); err != nil {
			return err
		}
		if c := meta.FindStatusCondition(getCluster(t, rc).Status.Conditions, cachev1beta1.RedisClusterCredentialsReadyCondition); c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("credentials %+v", c)
		}
		return nil
	})
	for _, o := range []client.Object{&corev1.Secret{}, &corev1.ConfigMap{}} {
		if err := managerCache.Get(testCtx, client.ObjectKey{Namespace: ns, Name: "unrelated"}, o); !apierrors.IsNotFound(err) {
			t.Errorf("unrelated %T in the cache: %v", o, err)
		}
	}
	if err := managerCache.Get(testCtx, client.ObjectKeyFromObject(source), &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Errorf("the referenced Secret in the cache: %v", err)
	}

	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := k8s.Get(testCtx, client.ObjectKeyFromObject(source), source); err != nil {
			return err
		}
		source.Data["password"] = []byte("second password")
		return k8s.Update(testCtx, source)
	}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a rotation to the changed source", func() error {
		if err := k8s.Get(testCtx, client.ObjectKeyFromObject(owned), owned); err != nil {
			return err
		}
		if got := string(owned.Data["password-next"]); got != "second password" {
			return fmt.Errorf("pending password %q", got)
		}
		return nil
	})
}

// TestKeepSecretName: the referenced-Secret cache keeps a Secret's
// identity and nothing of its labels or annotations.
func TestKeepSecretName(t *testing.T) {
	in := secretMetadata()
	in.Namespace, in.Name, in.UID, in.ResourceVersion = "ns", "s", "uid-1", "42"
	in.Labels = map[string]string{"a": "b"}
	in.Annotations = map[string]string{corev1.LastAppliedConfigAnnotation: `{"data":{"password":"c2VjcmV0"}}`}
	in.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
	out, err := keepSecretName(in)
	if err != nil {
		t.Fatal(err)
	}
	m := out.(*metav1.PartialObjectMetadata)
	if m.Namespace != "ns" || m.Name != "s" || m.UID != "uid-1" || m.ResourceVersion != "42" || m.Kind != "Secret" {
		t.Errorf("identity lost: %+v", m)
	}
	if m.Labels != nil || m.Annotations != nil || m.ManagedFields != nil {
		t.Errorf("kept %+v", m.ObjectMeta)
	}
	if got, _ := keepSecretName("not metadata"); got != "not metadata" {
		t.Errorf("other input changed: %v", got)
	}
}

// TestSlimPodKeepsWhatIsRead: a Redis pod as its StatefulSet builds it,
// scheduled and running, gives the same shards (groupPods), the same IPs
// (podIPs), the same container ports (the backup sources' client port) and
// the same state when its image cannot be pulled (podState, which names the
// spec's image) once slimPod has stripped it, while its probes, volumes and environment
// are gone and its encoded size is less than half.
func TestSlimPodKeepsWhatIsRead(t *testing.T) {
	rc := &cachev1beta1.RedisCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", UID: "u1", ResourceVersion: "7"},
		Spec: cachev1beta1.RedisClusterSpec{Shards: 1, ReplicasPerShard: 1, Image: "redis:7.0",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{
				corev1.ResourceMemory: resource.MustParse("64Mi"), corev1.ResourceCPU: resource.MustParse("100m")}}},
	}
	sts := resources.StatefulSet(rc, 0, resources.Placement{})
	now := time.Now()
	full := corev1.Pod{ObjectMeta: *sts.Spec.Template.ObjectMeta.DeepCopy(), Spec: *sts.Spec.Template.Spec.DeepCopy()}
	full.Name, full.Namespace = resources.StatefulSetName(rc.Name, 0)+"-0", rc.Namespace
	full.CreationTimestamp = metav1.NewTime(now)
	full.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate}}
	full.Spec.NodeName = "node-a"
	full.Status = corev1.PodStatus{
		Phase: corev1.PodRunning, PodIP: "10.0.0.7", PodIPs: []corev1.PodIP{{IP: "10.0.0.7"}},
		Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
		ContainerStatuses: []corev1.ContainerStatus{{Name: resources.RedisContainerName, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}},
	}
	if len(full.Spec.Containers) == 0 || full.Spec.Containers[0].ReadinessProbe == nil || len(full.Spec.Volumes) == 0 {
		t.Fatal("the built pod has no probe or volume to strip")
	}

	out, err := slimPod(full.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	slim := *out.(*corev1.Pod)
	hash := func(int) string { return full.Annotations[resources.TemplateHashAnnotation] }
	stsBy := map[int]*appsv1.StatefulSet{0: sts}
	if a, b := groupPods(rc.Name, 1, 1, hash, stsBy, nil, []corev1.Pod{full}), groupPods(rc.Name, 1, 1, hash, stsBy, nil, []corev1.Pod{slim}); !reflect.DeepEqual(a, b) {
		t.Errorf("groupPods of the slim pod %+v, of the full pod %+v", b[0], a[0])
	}
	if a, _ := podIPs([]corev1.Pod{full}, now); !slices.EqualFunc(a, firstIPs(podIPs([]corev1.Pod{slim}, now)), net.IP.Equal) {
		t.Errorf("podIPs differ: %v", a)
	}
	pullingFull, pullingSlim := full.DeepCopy(), slim.DeepCopy()
	for _, p := range []*corev1.Pod{pullingFull, pullingSlim} {
		p.Status.Conditions = nil
		p.Status.ContainerStatuses[0].Image = "docker.io/library/redis:6.2"
		p.Status.ContainerStatuses[0].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff"}}
	}
	a, _ := podState(pullingFull)
	b, _ := podState(pullingSlim)
	if a != "cannot pull image redis:7.0" || b != a {
		t.Errorf("podState of the slim pod %q, of the full pod %q", b, a)
	}
	for i, c := range full.Spec.Containers {
		if s := slim.Spec.Containers[i]; s.Name != c.Name || s.Image != c.Image || !equality.Semantic.DeepEqual(s.Ports, c.Ports) ||
			!s.Resources.Limits.Memory().Equal(*c.Resources.Limits.Memory()) {
			t.Errorf("container %d: slim %s %v %v, full %s %v %v", i, s.Name, s.Ports, s.Resources.Limits, c.Name, c.Ports, c.Resources.Limits)
		}
	}
	killedFull, killedSlim := full.DeepCopy(), slim.DeepCopy()
	for _, p := range []*corev1.Pod{killedFull, killedSlim} {
		p.Status.ContainerStatuses[0].LastTerminationState.Terminated = &corev1.ContainerStateTerminated{Reason: "OOMKilled", ContainerID: "containerd://a"}
	}
	if a, b := oomKills([]corev1.Pod{*killedFull}), oomKills([]corev1.Pod{*killedSlim}); !reflect.DeepEqual(a, b) || len(a) != 1 || a[0].limit.String() != "64Mi" {
		t.Errorf("oomKills of the slim pod %+v, of the full pod %+v", b, a)
	}
	if slim.Spec.NodeName != "node-a" || slim.ManagedFields != nil || len(slim.Spec.Volumes) != 0 || slim.Spec.Containers[0].ReadinessProbe != nil {
		t.Errorf("slim pod spec %+v, managed fields %v", slim.Spec, slim.ManagedFields)
	}
	if s, f := slim.Size(), full.Size(); s*2 >= f {
		t.Errorf("slim pod %d bytes encoded, full %d", s, f)
	}
}

// firstIPs is the IPs podIPs returns, without the waiting count.
func firstIPs(ips []net.IP, _ int) []net.IP { return ips }
