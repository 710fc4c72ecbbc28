package controllers

import (
	"errors"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
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
