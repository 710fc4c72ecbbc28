package controllers

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
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
