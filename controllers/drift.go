package controllers

import (
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/redis-operator/redis-operator/controllers/resources"
)

// drifted reports whether live differs from desired in a field desired
// sets: whether a server-side apply of desired would change live. It
// compares the JSON forms (unset fields are absent from desired's, so API
// defaults and other managers' fields in live never count): every map key
// of desired must be in live with the same value, every list of desired
// must be in live with at least as many elements, compared element by
// element (the API server keeps list order), and numbers and quantities
// by value; the type of an embedded object is not kept by the API server
// and not compared. metadata.labels and metadata.annotations of desired are
// compared the same way, so the AppliedHashAnnotation is covered; status,
// apiVersion and kind are not. It returns the first differing path, for
// the log.
func drifted(desired, live client.Object) (string, bool, error) {
	d, err := runtime.DefaultUnstructuredConverter.ToUnstructured(desired)
	if err != nil {
		return "", false, fmt.Errorf("converting %s: %w", desired.GetName(), err)
	}
	l, err := runtime.DefaultUnstructuredConverter.ToUnstructured(live)
	if err != nil {
		return "", false, fmt.Errorf("converting %s: %w", live.GetName(), err)
	}
	for _, k := range []string{"apiVersion", "kind", "status"} {
		delete(d, k)
	}
	path, differs := differsFrom(d, l, "")
	return path, differs, nil
}

// differsFrom reports whether want (a value of desired's JSON) is not
// contained in have (live's), with the path of the first difference.
func differsFrom(want, have any, path string) (string, bool) {
	switch w := want.(type) {
	case nil:
		return "", false
	case map[string]any:
		h, ok := have.(map[string]any)
		if !ok {
			return path, len(w) > 0
		}
		for k, wv := range w {
			hv, present := h[k]
			if !present && (k == "apiVersion" || k == "kind") {
				// The type of an embedded object (a claim template) that the
				// API server does not keep.
				continue
			}
			if p, diff := differsFrom(wv, hv, path+"."+k); diff {
				return p, true
			}
		}
		return "", false
	case []any:
		h, ok := have.([]any)
		if !ok || len(h) < len(w) {
			return path, len(w) > 0
		}
		for i, wv := range w {
			if p, diff := differsFrom(wv, h[i], fmt.Sprintf("%s[%d]", path, i)); diff {
				return p, true
			}
		}
		return "", false
	case string:
		h, ok := have.(string)
		if !ok {
			return path, w != ""
		}
		if h == w || w == "" {
			return "", false
		}
		// A quantity the API server canonicalised ("1024Mi" is "1Gi").
		wq, werr := resource.ParseQuantity(w)
		hq, herr := resource.ParseQuantity(h)
		return path, werr != nil || herr != nil || wq.Cmp(hq) != 0
	case int64:
		return path, !sameNumber(float64(w), have)
	case float64:
		return path, !sameNumber(w, have)
	case bool:
		h, ok := have.(bool)
		return path, !ok || h != w
	default:
		return path, fmt.Sprint(want) != fmt.Sprint(have)
	}
}

func sameNumber(w float64, have any) bool {
	switch h := have.(type) {
	case int64:
		return float64(h) == w
	case float64:
		return h == w
	}
	return false
}

// agreement remembers, per cluster and child, the live resourceVersion and
// the desired AppliedHashAnnotation that drifted last found in agreement:
// drifted is a function of the two objects alone, the hash stands for
// desired (SetAppliedHash: the builder's output, hashed after every
// adjustment) and the resourceVersion for live (the cache holds one content
// per version), so the same pair agrees again without the two conversions
// to JSON form. Safe for concurrent use; the zero value is empty.
type agreement struct {
	mu   sync.Mutex
	seen map[client.ObjectKey]map[string]string // cluster → child → "resourceVersion/hash"
}

func agreementKey(desired client.Object) (string, string, bool) {
	h := desired.GetAnnotations()[resources.AppliedHashAnnotation]
	child := fmt.Sprintf("%T/%s/%s", desired, desired.GetNamespace(), desired.GetName())
	return child, h, h != ""
}

// agrees reports whether drifted already found desired and live, at this
// version, in agreement.
func (a *agreement) agrees(cluster client.ObjectKey, desired, live client.Object) bool {
	child, h, ok := agreementKey(desired)
	if !ok || live.GetResourceVersion() == "" {
		return false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.seen[cluster][child] == live.GetResourceVersion()+"/"+h
}

// remember records that drifted found desired and live in agreement.
func (a *agreement) remember(cluster client.ObjectKey, desired, live client.Object) {
	child, h, ok := agreementKey(desired)
	if !ok || live.GetResourceVersion() == "" {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.seen == nil {
		a.seen = map[client.ObjectKey]map[string]string{}
	}
	if a.seen[cluster] == nil {
		a.seen[cluster] = map[string]string{}
	}
	a.seen[cluster][child] = live.GetResourceVersion() + "/" + h
}

// forget drops what is remembered for cluster (deleted).
func (a *agreement) forget(cluster client.ObjectKey) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.seen, cluster)
}
