package health

import (
	"cmp"
	"fmt"
	"slices"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
)

// maxMessage is the bound of status.health.message in the CRD schema.
const maxMessage = 1024

// ForRedisCluster is the controller's verdict for status.health: the rules of
// the package documentation applied to rc, made worse by the worst child.
//
// Call it after this pass's conditions, phase and observedGeneration are set
// on rc; rc.Status.Health itself is not read, so a previous verdict never
// sticks. children are the cluster's owned objects in unstructured form with
// apiVersion and kind set (StatefulSets, PVCs, Services; other kinds have no
// built-in check and are ignored). Each child's health is Argo CD's
// built-in one (childHealth, as gitops-engine's health.GetResourceHealth
// without overrides); a child replaces the verdict when it is worse in
// gitops-engine's order (isWorse: Healthy, Suspended, Progressing,
// Missing, Degraded).
// Unknown children (a PVC without a phase yet, a child that fails to
// convert) say nothing about the cluster and are skipped. Among equally bad children the first by kind, namespace and name
// wins, so the result does not depend on list order and the controller can
// compare it with the stored value to write only on change.
//
// The message is one sentence of at most 1024 bytes (the schema's bound),
// cut at a UTF-8 boundary.
func ForRedisCluster(rc *cachev1beta1.RedisCluster, children []*unstructured.Unstructured) cachev1beta1.HealthStatus {
	code, message := assessTyped(rc)
	worst := cachev1beta1.HealthStatus{Status: code, Message: message}

	for _, c := range sortedChildren(children) {
		h, ok := childHealth(c)
		if !ok || h.Status == cachev1beta1.HealthUnknown {
			continue
		}
		if isWorse(worst.Status, h.Status) {
			worst = cachev1beta1.HealthStatus{Status: h.Status, Message: childMessage(c, h)}
		}
	}
	worst.Message = truncate(worst.Message, maxMessage)
	return worst
}

// assessTyped applies the rules to the typed object through its unstructured
// form, so the controller and Argo CD read the same fields.
func assessTyped(rc *cachev1beta1.RedisCluster) (cachev1beta1.HealthCode, string) {
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(rc)
	if err != nil {
		// A typed RedisCluster always converts; report rather than panic.
		return cachev1beta1.HealthUnknown, fmt.Sprintf("Cannot read the RedisCluster: %v.", err)
	}
	return assess(obj)
}

// sortedChildren returns the non-nil children ordered by kind, namespace and name.
func sortedChildren(children []*unstructured.Unstructured) []*unstructured.Unstructured {
	out := make([]*unstructured.Unstructured, 0, len(children))
	for _, c := range children {
		if c != nil {
			out = append(out, c)
		}
	}
	slices.SortStableFunc(out, func(a, b *unstructured.Unstructured) int {
		return cmp.Or(
			cmp.Compare(a.GetKind(), b.GetKind()),
			cmp.Compare(a.GetNamespace(), b.GetNamespace()),
			cmp.Compare(a.GetName(), b.GetName()),
		)
	})
	return out
}

// childMessage names the child and says what its health check said,
// e.g. "StatefulSet redis-shard-0: Waiting for 1 pods to be ready...".
func childMessage(c *unstructured.Unstructured, h cachev1beta1.HealthStatus) string {
	if h.Message == "" {
		return fmt.Sprintf("%s %s is %s.", c.GetKind(), c.GetName(), h.Status)
	}
	return fmt.Sprintf("%s %s: %s", c.GetKind(), c.GetName(), h.Message)
}

// truncate cuts s to at most n bytes without splitting a UTF-8 sequence.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
