package controllers

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
)

// TestSpecBelongsToGit: a RedisCluster applied as a user applies it (YAML,
// server-side apply by "kubectl") keeps metadata.generation 1 through the
// operator's first passes, and after a scale and a password rotation made by
// the user only the user's changes bump it; the operator's managedFields
// entries never hold a spec field (issue 16 point 7: a finalizer Update of
// the whole object wrote spec.pod: {} as redis-operator and made generation
// 2 right after kubectl apply).
func TestSpecBelongsToGit(t *testing.T) {
	ns := newNamespace(t)
	src := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "pw", Namespace: ns}, Data: map[string][]byte{"password": []byte("first")}}
	if err := k8s.Create(testCtx, src); err != nil {
		t.Fatal(err)
	}
	apply := func(shards int) {
		t.Helper()
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(fmt.Appendf(nil, `
apiVersion: cache.redis.io/v1beta1
kind: RedisCluster
metadata: {name: git, namespace: %s}
spec:
  shards: %d
  auth: {secretRef: {name: pw, key: password}}
`, ns, shards), &u.Object); err != nil {
			t.Fatal(err)
		}
		if err := k8s.Patch(testCtx, u, client.Apply, client.FieldOwner("kubectl"), client.ForceOwnership); err != nil {
			t.Fatal(err)
		}
	}
	rc := &cachev1beta1.RedisCluster{ObjectMeta: metav1.ObjectMeta{Name: "git", Namespace: ns}}

	// check waits for the operator to have written status for the current
	// generation, then asserts the generation and the operator's fields.
	check := func(when string, generation int64) {
		t.Helper()
		got := waitSettled(t, rc)
		eventually(t, "finalizer", func() error {
			got = getCluster(t, rc)
			if len(got.Finalizers) == 0 {
				return errors.New("no finalizer yet")
			}
			return nil
		})
		if got.Generation != generation {
			t.Errorf("%s: metadata.generation %d, want %d", when, got.Generation, generation)
		}
		for _, m := range got.ManagedFields {
			if m.Manager == "kubectl" || m.FieldsV1 == nil {
				continue
			}
			if strings.Contains(string(m.FieldsV1.Raw), `"f:spec"`) {
				t.Errorf("%s: manager %q (%s, subresource %q) owns spec fields: %s", when, m.Manager, m.Operation, m.Subresource, m.FieldsV1.Raw)
			}
		}
	}

	apply(3)
	check("after create", 1)

	// Reconcile until quiet: the passes that follow the first write nothing
	// to the spec either.
	reconcileUntilQuiet(t, rc)
	check("after the passes settle", 1)

	apply(4)
	check("after a scale", 2)

	// A rotation is a change of the source Secret, not of the spec.
	if err := k8s.Patch(testCtx, src, client.RawPatch(types.MergePatchType, []byte(`{"data":{"password":"c2Vjb25k"}}`))); err != nil {
		t.Fatal(err)
	}
	eventually(t, "rotation pending", func() error {
		owned := &corev1.Secret{}
		if err := k8s.Get(testCtx, client.ObjectKey{Namespace: ns, Name: ownedSecretName(getCluster(t, rc))}, owned); err != nil {
			return err
		}
		if string(owned.Data["password-next"]) != "second" {
			return errors.New("no pending password")
		}
		return nil
	})
	check("after a rotation", 2)
}
