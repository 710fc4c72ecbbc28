package controllers

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/resources"
)

func newCluster(t *testing.T, ns, name string, mutate ...func(*cachev1beta1.RedisCluster)) *cachev1beta1.RedisCluster {
	t.Helper()
	rc := &cachev1beta1.RedisCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       cachev1beta1.RedisClusterSpec{Shards: 3, ReplicasPerShard: 1},
	}
	for _, m := range mutate {
		m(rc)
	}
	if err := k8s.Create(testCtx, rc); err != nil {
		t.Fatal(err)
	}
	return rc
}

func getCluster(t *testing.T, rc *cachev1beta1.RedisCluster) *cachev1beta1.RedisCluster {
	t.Helper()
	got := &cachev1beta1.RedisCluster{}
	if err := k8s.Get(testCtx, client.ObjectKeyFromObject(rc), got); err != nil {
		t.Fatal(err)
	}
	return got
}

// waitSettled waits until the controller has written a status for the
// current generation.
func waitSettled(t *testing.T, rc *cachev1beta1.RedisCluster) *cachev1beta1.RedisCluster {
	t.Helper()
	var got *cachev1beta1.RedisCluster
	eventually(t, "status of the current generation", func() error {
		got = getCluster(t, rc)
		c := meta.FindStatusCondition(got.Status.Conditions, cachev1beta1.RedisClusterReadyCondition)
		if c == nil || c.ObservedGeneration != got.Generation {
			return fmt.Errorf("ready condition %+v for generation %d", c, got.Generation)
		}
		return nil
	})
	return got
}

// reconcileUntilQuiet calls Reconcile directly until a pass writes nothing
// (the cache catches up with the controller's own writes), and fails if
// that takes more than a few passes.
func reconcileUntilQuiet(t *testing.T, rc *cachev1beta1.RedisCluster) {
	t.Helper()
	for i := 0; i < 20; i++ {
		mark := writes.mark()
		if _, err := reconciler.Reconcile(testCtx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(rc)}); err != nil {
			t.Fatal(err)
		}
		if len(writes.in(rc.Namespace, mark)) == 0 {
			return
		}
		sleepBriefly()
	}
	t.Fatal("reconcile never stopped writing")
}

func TestChildrenAndConditions(t *testing.T) {
	ns := newNamespace(t)
	rc := newCluster(t, ns, "cache", func(rc *cachev1beta1.RedisCluster) {
		rc.Spec.Exporter.Enabled = true
		rc.Spec.Config = map[string]string{"maxmemory-policy": "allkeys-lru"}
	})
	got := waitSettled(t, rc)
	owner := func(t *testing.T, o client.Object) {
		t.Helper()
		refs := o.GetOwnerReferences()
		if len(refs) != 1 || refs[0].UID != got.UID || refs[0].Kind != "RedisCluster" || refs[0].Controller == nil || !*refs[0].Controller {
			t.Errorf("%s: owner references %+v", o.GetName(), refs)
		}
	}

	cm := &corev1.ConfigMap{}
	eventually(t, "ConfigMap", func() error { return k8s.Get(testCtx, client.ObjectKey{Namespace: ns, Name: "cache-config"}, cm) })
	owner(t, cm)
	if !strings.Contains(cm.Data["redis.conf"], "cluster-enabled yes") || !strings.Contains(cm.Data["redis.conf"], "maxmemory-policy allkeys-lru") {
		t.Errorf("redis.conf:\n%s", cm.Data["redis.conf"])
	}
	for _, name := range []string{"cache", "cache-headless"} {
		svc := &corev1.Service{}
		if err := k8s.Get(testCtx, client.ObjectKey{Namespace: ns, Name: name}, svc); err != nil {
			t.Fatal(err)
		}
		owner(t, svc)
	}
	sec := &corev1.Secret{}
	if err := k8s.Get(testCtx, client.ObjectKey{Namespace: ns, Name: "cache-auth"}, sec); err != nil {
		t.Fatal(err)
	}
	owner(t, sec)
	// Without spec.auth the operator generates the password: 256 bits,
	// URL-safe base64.
	if pw := sec.Data["password"]; len(pw) != 43 || strings.Trim(string(pw), "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") != "" {
		t.Errorf("generated password %d bytes long, want 43 of URL-safe base64", len(pw))
	}
	for i := 0; i < 3; i++ {
		sts := &appsv1.StatefulSet{}
		if err := k8s.Get(testCtx, client.ObjectKey{Namespace: ns, Name: fmt.Sprintf("cache-shard-%d", i)}, sts); err != nil {
			t.Fatal(err)
		}
		owner(t, sts)
		if *sts.Spec.Replicas != 2 || sts.Spec.UpdateStrategy.Type != appsv1.OnDeleteStatefulSetStrategyType ||
			sts.Spec.ServiceName != "cache-headless" || len(sts.Spec.Template.Spec.Containers) != 2 ||
			sts.Spec.Template.Annotations[resources.TemplateHashAnnotation] == "" {
			t.Errorf("StatefulSet %s: %+v", sts.Name, sts.Spec)
		}
		if sts.Spec.Template.Labels[resources.LabelShard] != fmt.Sprint(i) || sts.Labels[resources.LabelManagedBy] != "redis-operator" {
			t.Errorf("StatefulSet %s labels %v / template %v", sts.Name, sts.Labels, sts.Spec.Template.Labels)
		}
		pdb := &policyv1.PodDisruptionBudget{}
		if err := k8s.Get(testCtx, client.ObjectKey{Namespace: ns, Name: fmt.Sprintf("cache-shard-%d", i)}, pdb); err != nil {
			t.Fatal(err)
		}
		owner(t, pdb)
		if pdb.Spec.MaxUnavailable.IntValue() != 1 {
			t.Errorf("PDB %s maxUnavailable %v", pdb.Name, pdb.Spec.MaxUnavailable)
		}
	}

	// No pod runs in envtest: every owned condition is there, and they say so.
	want := map[string]struct {
		status metav1.ConditionStatus
		reason string
	}{
		cachev1beta1.RedisClusterReadyCondition:            {metav1.ConditionFalse, cachev1beta1.RedisClusterPendingReason},
		cachev1beta1.RedisClusterProgressingCondition:      {metav1.ConditionTrue, cachev1beta1.RedisClusterPendingReason},
		cachev1beta1.RedisClusterDegradedCondition:         {metav1.ConditionFalse, cachev1beta1.RedisClusterPendingReason},
		cachev1beta1.RedisClusterSlotsAssignedCondition:    {metav1.ConditionUnknown, cachev1beta1.RedisClusterUnknownReason},
		cachev1beta1.RedisClusterCredentialsReadyCondition: {metav1.ConditionTrue, cachev1beta1.RedisClusterGeneratedPasswordReason},
		cachev1beta1.RedisClusterPausedCondition:           {metav1.ConditionFalse, cachev1beta1.RedisClusterNotPausedReason},
	}
	if len(got.Status.Conditions) != len(want) {
		t.Errorf("conditions %+v", got.Status.Conditions)
	}
	for typ, w := range want {
		c := meta.FindStatusCondition(got.Status.Conditions, typ)
		if c == nil || c.Status != w.status || c.Reason != w.reason || c.Message == "" || c.ObservedGeneration != got.Generation {
			t.Errorf("condition %s = %+v, want %s/%s", typ, c, w.status, w.reason)
		}
	}
	if c := meta.FindStatusCondition(got.Status.Conditions, cachev1beta1.RedisClusterReadyCondition); !strings.Contains(c.Message, "0 of 6 pods ready") {
		t.Errorf("ready message %q", c.Message)
	}
	if got.Status.Phase != cachev1beta1.PhasePending || got.Status.ObservedGeneration != got.Generation {
		t.Errorf("phase %s observedGeneration %d", got.Status.Phase, got.Status.ObservedGeneration)
	}
	if got.Status.Health == nil || got.Status.Health.Status != cachev1beta1.HealthProgressing {
		t.Errorf("health %+v", got.Status.Health)
	}
	sel, err := labels.Parse(got.Status.Selector)
	if err != nil || !sel.Matches(labels.Set(resources.ShardLabels("cache", 2))) || sel.Matches(labels.Set(resources.ShardLabels("other", 2))) {
		t.Errorf("selector %q: %v", got.Status.Selector, err)
	}
	if !slices.Contains(got.Finalizers, cachev1beta1.Finalizer) {
		t.Errorf("finalizers %v", got.Finalizers)
	}
}

func TestNoOpReconcileMakesNoWrites(t *testing.T) {
	ns := newNamespace(t)
	rc := newCluster(t, ns, "quiet")
	waitSettled(t, rc)
	reconcileUntilQuiet(t, rc)
	// The manager's own passes share the counted client, and a pod that
	// stays Pending (no kubelet here) turns overdue after a while, which
	// one of them writes: three windows of three passes each, of which one
	// must be quiet.
	var failure string
	for window := 0; window < 3; window++ {
		failure = ""
		for i := 0; i < 3 && failure == ""; i++ {
			mark := writes.mark()
			before := getCluster(t, rc)
			if _, err := reconciler.Reconcile(testCtx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(rc)}); err != nil {
				t.Fatal(err)
			}
			if w := writes.in(ns, mark); len(w) > 0 {
				failure = fmt.Sprintf("pass %d of a settled cluster wrote: %v\nstatus change:\n%s", i, w, cmp.Diff(before.Status, getCluster(t, rc).Status))
			}
		}
		if failure == "" {
			return
		}
		t.Log(failure)
	}
	t.Fatal(failure)
}

// TestMetadataOnlyChangeUpdatesNoChild: labels and annotations on the
// RedisCluster change no child and no status (the field report: an
// annotation caused an endless StatefulSet update loop).
func TestMetadataOnlyChangeUpdatesNoChild(t *testing.T) {
	ns := newNamespace(t)
	rc := newCluster(t, ns, "meta")
	waitSettled(t, rc)
	reconcileUntilQuiet(t, rc)
	before := statefulSetVersions(t, ns)

	mark := writes.mark()
	updateSpec(t, rc, func(got *cachev1beta1.RedisCluster) {
		got.Labels = map[string]string{"team": "payments"}
		got.Annotations = map[string]string{"argocd.argoproj.io/tracking-id": "app:cache.redis.io/RedisCluster:" + ns + "/meta"}
	})
	// Wait until the controller's cache has the change, then reconcile.
	eventually(t, "cache sees the annotation", func() error {
		cached := &cachev1beta1.RedisCluster{}
		if err := reconciler.Client.Get(testCtx, client.ObjectKeyFromObject(rc), cached); err != nil {
			return err
		}
		if cached.Labels["team"] != "payments" {
			return errors.New("not yet")
		}
		return nil
	})
	for i := 0; i < 3; i++ {
		if _, err := reconciler.Reconcile(testCtx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(rc)}); err != nil {
			t.Fatal(err)
		}
	}
	if w := writes.in(ns, mark); len(w) > 0 {
		t.Errorf("a metadata-only change made the controller write: %v", w)
	}
	if after := statefulSetVersions(t, ns); !maps.Equal(before, after) {
		t.Errorf("StatefulSets changed: %v -> %v", before, after)
	}
}

func statefulSetVersions(t *testing.T, ns string) map[string]string {
	t.Helper()
	var list appsv1.StatefulSetList
	if err := k8s.List(testCtx, &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, s := range list.Items {
		out[s.Name] = s.ResourceVersion
	}
	return out
}

// TestSpecChanges: an image change rolls the template (new hash on every
// StatefulSet); a live config key changes the ConfigMap only; a
// restart-only key changes the template hash.
func TestSpecChanges(t *testing.T) {
	ns := newNamespace(t)
	rc := newCluster(t, ns, "change")
	waitSettled(t, rc)
	hashes := func() map[string]string {
		var list appsv1.StatefulSetList
		if err := k8s.List(testCtx, &list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, s := range list.Items {
			out[s.Name] = s.Spec.Template.Annotations[resources.TemplateHashAnnotation]
		}
		return out
	}
	config := func() string {
		cm := &corev1.ConfigMap{}
		if err := k8s.Get(testCtx, client.ObjectKey{Namespace: ns, Name: "change-config"}, cm); err != nil {
			t.Fatal(err)
		}
		return cm.Data["redis.conf"]
	}
	update := func(mutate func(*cachev1beta1.RedisCluster)) {
		t.Helper()
		updateSpec(t, rc, mutate)
		waitSettled(t, rc)
	}
	h0 := hashes()

	update(func(rc *cachev1beta1.RedisCluster) {
		rc.Spec.Config = map[string]string{"maxmemory-policy": "allkeys-lfu"}
	})
	eventually(t, "ConfigMap has the live key", func() error {
		if !strings.Contains(config(), "maxmemory-policy allkeys-lfu") {
			return errors.New("not yet")
		}
		return nil
	})
	if h := hashes(); !maps.Equal(h, h0) {
		t.Errorf("a live config key changed the template hash: %v -> %v", h0, h)
	}

	update(func(rc *cachev1beta1.RedisCluster) { rc.Spec.Image = "redis:7.2.4" })
	eventually(t, "every StatefulSet rolls to the new image", func() error {
		var list appsv1.StatefulSetList
		if err := k8s.List(testCtx, &list, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, s := range list.Items {
			if s.Spec.Template.Spec.Containers[0].Image != "redis:7.2.4" || s.Spec.Template.Annotations[resources.TemplateHashAnnotation] == h0[s.Name] {
				return fmt.Errorf("%s not updated", s.Name)
			}
		}
		return nil
	})
	h1 := hashes()
	update(func(rc *cachev1beta1.RedisCluster) { rc.Spec.Config["databases"] = "1" })
	eventually(t, "a restart-only key changes the template hash", func() error {
		for name, h := range hashes() {
			if h == h1[name] {
				return fmt.Errorf("%s keeps hash %s", name, h)
			}
		}
		return nil
	})
}

// TestScaleSubresource: the scale subresource drives spec.shards, so
// `kubectl scale rc/x --replicas=5` adds shard StatefulSets.
func TestScaleSubresource(t *testing.T) {
	ns := newNamespace(t)
	rc := newCluster(t, ns, "scale")
	waitSettled(t, rc)
	// The controller writes status meanwhile: retry on conflict, as kubectl does.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		scale := &autoscalingv1.Scale{}
		if err := k8s.SubResource("scale").Get(testCtx, rc, scale); err != nil {
			return err
		}
		if scale.Spec.Replicas != 3 || scale.Status.Selector == "" {
			t.Errorf("scale %+v", scale)
		}
		scale.Spec.Replicas = 5
		return k8s.SubResource("scale").Update(testCtx, rc, client.WithSubResourceBody(scale))
	})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "five shard StatefulSets", func() error {
		if n := len(statefulSetVersions(t, ns)); n != 5 {
			return fmt.Errorf("%d StatefulSets", n)
		}
		return nil
	})
}

func TestPaused(t *testing.T) {
	ns := newNamespace(t)
	rc := newCluster(t, ns, "paused", func(rc *cachev1beta1.RedisCluster) { rc.Spec.Paused = true })
	got := waitSettled(t, rc)
	if c := meta.FindStatusCondition(got.Status.Conditions, cachev1beta1.RedisClusterPausedCondition); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("paused condition %+v", c)
	}
	if got.Status.Health == nil || got.Status.Health.Status != cachev1beta1.HealthSuspended {
		t.Errorf("health %+v", got.Status.Health)
	}
	// Paused: no StatefulSet (it would start pods and change the topology),
	// but the rest of the children and the status are kept current.
	if n := len(statefulSetVersions(t, ns)); n != 0 {
		t.Errorf("%d StatefulSets while paused", n)
	}
	if err := k8s.Get(testCtx, client.ObjectKey{Namespace: ns, Name: "paused-config"}, &corev1.ConfigMap{}); err != nil {
		t.Errorf("ConfigMap while paused: %v", err)
	}
	updateSpec(t, rc, func(got *cachev1beta1.RedisCluster) { got.Spec.Paused = false })
	eventually(t, "StatefulSets after unpausing", func() error {
		if n := len(statefulSetVersions(t, ns)); n != 3 {
			return fmt.Errorf("%d StatefulSets", n)
		}
		return nil
	})
	got = waitSettled(t, got)
	if c := meta.FindStatusCondition(got.Status.Conditions, cachev1beta1.RedisClusterPausedCondition); c == nil || c.Status != metav1.ConditionFalse {
		t.Errorf("paused condition after unpausing %+v", c)
	}
}

func TestInvalidSpec(t *testing.T) {
	ns := newNamespace(t)
	rc := newCluster(t, ns, "bad", func(rc *cachev1beta1.RedisCluster) { rc.Spec.Config = map[string]string{"port": "7000"} })
	var got *cachev1beta1.RedisCluster
	eventually(t, "InvalidSpec", func() error {
		got = getCluster(t, rc)
		c := meta.FindStatusCondition(got.Status.Conditions, cachev1beta1.RedisClusterReadyCondition)
		if c == nil || c.Reason != cachev1beta1.RedisClusterInvalidSpecReason {
			return fmt.Errorf("ready %+v", c)
		}
		return nil
	})
	if got.Status.Phase != cachev1beta1.PhaseFailed || got.Status.ObservedGeneration == got.Generation {
		t.Errorf("phase %s observedGeneration %d (generation %d)", got.Status.Phase, got.Status.ObservedGeneration, got.Generation)
	}
	if c := meta.FindStatusCondition(got.Status.Conditions, cachev1beta1.RedisClusterDegradedCondition); c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, `"port"`) {
		t.Errorf("degraded %+v", c)
	}
	if got.Status.Health == nil || got.Status.Health.Status != cachev1beta1.HealthDegraded {
		t.Errorf("health %+v", got.Status.Health)
	}
	if n := len(statefulSetVersions(t, ns)); n != 0 {
		t.Errorf("%d StatefulSets for an invalid spec", n)
	}
}

func TestAuthFromSecret(t *testing.T) {
	ns := newNamespace(t)
	const password = `p@ss "word"`
	rc := newCluster(t, ns, "auth", func(rc *cachev1beta1.RedisCluster) {
		rc.Spec.Auth = &cachev1beta1.AuthSpec{SecretRef: &cachev1beta1.SecretKeySelector{Name: "redis-password", Key: "pw"}}
	})
	// The source Secret does not exist yet: no pods can start.
	var got *cachev1beta1.RedisCluster
	eventually(t, "CredentialsReady=False", func() error {
		got = getCluster(t, rc)
		c := meta.FindStatusCondition(got.Status.Conditions, cachev1beta1.RedisClusterCredentialsReadyCondition)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != cachev1beta1.RedisClusterSecretNotFoundReason {
			return fmt.Errorf("credentials %+v", c)
		}
		return nil
	})
	if c := meta.FindStatusCondition(got.Status.Conditions, cachev1beta1.RedisClusterReadyCondition); c.Reason != cachev1beta1.RedisClusterSecretNotFoundReason {
		t.Errorf("ready %+v", c)
	}
	if n := len(statefulSetVersions(t, ns)); n != 0 {
		t.Errorf("%d StatefulSets without a password", n)
	}

	src := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "redis-password", Namespace: ns}, Data: map[string][]byte{"pw": []byte(password)}}
	if err := k8s.Create(testCtx, src); err != nil {
		t.Fatal(err)
	}
	owned := &corev1.Secret{}
	eventually(t, "owned Secret with the password", func() error {
		if err := k8s.Get(testCtx, client.ObjectKey{Namespace: ns, Name: "auth-auth"}, owned); err != nil {
			return err
		}
		if string(owned.Data["password"]) != password {
			return errors.New("no password yet")
		}
		return nil
	})
	if !strings.Contains(string(owned.Data["auth.conf"]), `requirepass "p@ss \x22word\x22"`) {
		t.Errorf("auth.conf %q", owned.Data["auth.conf"])
	}
	eventually(t, "StatefulSets and CredentialsReady=True", func() error {
		got = getCluster(t, rc)
		c := meta.FindStatusCondition(got.Status.Conditions, cachev1beta1.RedisClusterCredentialsReadyCondition)
		if c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("credentials %+v", c)
		}
		if n := len(statefulSetVersions(t, ns)); n != 3 {
			return fmt.Errorf("%d StatefulSets", n)
		}
		return nil
	})
	if got.Status.Credentials == nil || got.Status.Credentials.Source != "Secret" || got.Status.Credentials.Version == "" ||
		strings.Contains(got.Status.Credentials.Version, password) {
		t.Errorf("status.credentials %+v", got.Status.Credentials)
	}

	// A changed password starts a rotation: it is kept pending in the owned
	// Secret (never in status) until every node has it; without running pods
	// the live password stays.
	src.Data["pw"] = []byte("new password")
	if err := k8s.Update(testCtx, src); err != nil {
		t.Fatal(err)
	}
	eventually(t, "rotation pending", func() error {
		if err := k8s.Get(testCtx, client.ObjectKey{Namespace: ns, Name: "auth-auth"}, owned); err != nil {
			return err
		}
		if string(owned.Data["password-next"]) != "new password" {
			return errors.New("no pending password")
		}
		got = getCluster(t, rc)
		if got.Status.Credentials == nil || got.Status.Credentials.RotationStep != "AddingPassword" {
			return fmt.Errorf("status.credentials %+v", got.Status.Credentials)
		}
		return nil
	})
	if string(owned.Data["password"]) != password {
		t.Error("the live password was replaced before every node had the new one")
	}
	if c := meta.FindStatusCondition(got.Status.Conditions, cachev1beta1.RedisClusterCredentialsReadyCondition); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("credentials %+v", c)
	}
}

// TestOwnedNameTaken: a child name held by an object the cluster does not
// control is never taken over.
func TestOwnedNameTaken(t *testing.T) {
	ns := newNamespace(t)
	foreign := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "taken-config", Namespace: ns}, Data: map[string]string{"k": "v"}}
	if err := k8s.Create(testCtx, foreign); err != nil {
		t.Fatal(err)
	}
	rc := newCluster(t, ns, "taken")
	eventually(t, "ReconcileError naming the ConfigMap", func() error {
		got := getCluster(t, rc)
		c := meta.FindStatusCondition(got.Status.Conditions, cachev1beta1.RedisClusterDegradedCondition)
		if c == nil || c.Reason != cachev1beta1.RedisClusterReconcileErrorReason || !strings.Contains(c.Message, "ConfigMap taken-config exists and is not controlled") {
			return fmt.Errorf("degraded %+v", c)
		}
		return nil
	})
	if err := k8s.Get(testCtx, client.ObjectKeyFromObject(foreign), foreign); err != nil {
		t.Fatal(err)
	}
	if foreign.Data["k"] != "v" || len(foreign.OwnerReferences) != 0 {
		t.Errorf("foreign ConfigMap changed: %+v", foreign)
	}
}

// claim makes a PVC as the StatefulSet controller would (envtest runs no
// StatefulSet controller).
func claim(t *testing.T, ns, rc string, shard, ordinal int) *corev1.PersistentVolumeClaim {
	t.Helper()
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: resources.PVCName(rc, shard, ordinal), Namespace: ns, Labels: resources.ShardLabels(rc, shard)},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	if err := k8s.Create(testCtx, pvc); err != nil {
		t.Fatal(err)
	}
	return pvc
}

func TestDeletion(t *testing.T) {
	for _, tc := range []struct {
		name        string
		policy      cachev1beta1.DeleteClaimPolicy
		skipCleanup bool
		wantDeleted bool
	}{
		{name: "retain", policy: cachev1beta1.DeleteClaimRetain},
		{name: "delete", policy: cachev1beta1.DeleteClaimDelete, wantDeleted: true},
		{name: "skip", policy: cachev1beta1.DeleteClaimDelete, skipCleanup: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := newNamespace(t)
			rc := newCluster(t, ns, "gone", func(rc *cachev1beta1.RedisCluster) {
				rc.Spec.Storage.DeleteClaimPolicy = tc.policy
				if tc.skipCleanup {
					rc.Annotations = map[string]string{cachev1beta1.SkipCleanupAnnotation: "true"}
				}
			})
			waitSettled(t, rc)
			pvcs := []*corev1.PersistentVolumeClaim{claim(t, ns, "gone", 0, 0), claim(t, ns, "gone", 1, 1)}
			// A claim of another cluster in the namespace is never touched.
			other := claim(t, ns, "other", 0, 0)
			eventually(t, "claims in the controller's cache", func() error {
				var list corev1.PersistentVolumeClaimList
				if err := reconciler.Client.List(testCtx, &list, client.InNamespace(ns)); err != nil {
					return err
				}
				if len(list.Items) != 3 {
					return fmt.Errorf("%d claims", len(list.Items))
				}
				return nil
			})

			if err := k8s.Delete(testCtx, getCluster(t, rc)); err != nil {
				t.Fatal(err)
			}
			eventually(t, "RedisCluster gone", func() error {
				err := k8s.Get(testCtx, client.ObjectKeyFromObject(rc), &cachev1beta1.RedisCluster{})
				if apierrors.IsNotFound(err) {
					return nil
				}
				return fmt.Errorf("still there: %v", err)
			})
			for _, p := range pvcs {
				got := &corev1.PersistentVolumeClaim{}
				err := k8s.Get(testCtx, client.ObjectKeyFromObject(p), got)
				deleted := apierrors.IsNotFound(err) || (err == nil && got.DeletionTimestamp != nil)
				if err != nil && !apierrors.IsNotFound(err) {
					t.Fatal(err)
				}
				if deleted != tc.wantDeleted {
					t.Errorf("claim %s deleted=%v, want %v", p.Name, deleted, tc.wantDeleted)
				}
			}
			got := &corev1.PersistentVolumeClaim{}
			if err := k8s.Get(testCtx, client.ObjectKeyFromObject(other), got); err != nil || got.DeletionTimestamp != nil {
				t.Errorf("another cluster's claim: %v %v", err, got.DeletionTimestamp)
			}
			// Claims are deleted only once the StatefulSets that would
			// recreate them are gone. envtest runs no garbage collector,
			// so with Retain (or skip) the StatefulSets are still there.
			var sets appsv1.StatefulSetList
			if err := k8s.List(testCtx, &sets, client.InNamespace(ns)); err != nil {
				t.Fatal(err)
			}
			live := 0
			for _, sts := range sets.Items {
				if sts.DeletionTimestamp == nil {
					live++
				}
			}
			if tc.wantDeleted && live != 0 {
				t.Errorf("%d StatefulSets left after the claims were deleted, want 0", live)
			}
			if !tc.wantDeleted && live == 0 {
				t.Errorf("the StatefulSets were deleted without deleteClaimPolicy Delete")
			}
		})
	}
}

// TestExample: examples/rediscluster.yaml is valid against the CRD and
// gives 3 shards of 2 pods.
func TestExample(t *testing.T) {
	ns := newNamespace(t)
	b, err := os.ReadFile(filepath.Join("..", "examples", "rediscluster.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	rc := &cachev1beta1.RedisCluster{}
	if err := yaml.UnmarshalStrict(b, rc); err != nil {
		t.Fatal(err)
	}
	rc.Namespace = ns
	if err := k8s.Create(testCtx, rc); err != nil {
		t.Fatal(err)
	}
	waitSettled(t, rc)
	eventually(t, "three shard StatefulSets of two pods", func() error {
		var list appsv1.StatefulSetList
		if err := k8s.List(testCtx, &list, client.InNamespace(ns)); err != nil {
			return err
		}
		if len(list.Items) != 3 {
			return fmt.Errorf("%d StatefulSets", len(list.Items))
		}
		for _, s := range list.Items {
			if *s.Spec.Replicas != 2 || s.Spec.Template.Spec.Containers[0].Image != "redis:7.0" {
				return fmt.Errorf("%s: %d replicas, image %s", s.Name, *s.Spec.Replicas, s.Spec.Template.Spec.Containers[0].Image)
			}
		}
		return nil
	})
}
