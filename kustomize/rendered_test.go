package kustomize

import (
	"bytes"
	"path/filepath"
	"slices"
	"testing"

	"sigs.k8s.io/kustomize/kyaml/filesys"

	built "github.com/redis-operator/redis-operator/kustomize/rendered"
)

// TestRenderedIsCurrent: the install the binary prints (`redis-operator
// manifests`, package rendered) is, for every overlay, exactly krusty's
// render of kustomize/overlays/NAME from disk, and no overlay is missing
// or extra. When it fails, `make manifests` writes the files again.
func TestRenderedIsCurrent(t *testing.T) {
	if got, want := built.Overlays(), Overlays(); !slices.Equal(got, want) {
		t.Fatalf("rendered overlays %v, the tree's %v: run make manifests", got, want)
	}
	for _, o := range Overlays() {
		dir, err := filepath.Abs(filepath.Join(overlaysDir, o))
		if err != nil {
			t.Fatal(err)
		}
		m, err := Build(filesys.MakeFsOnDisk(), dir)
		if err != nil {
			t.Fatal(err)
		}
		want, err := m.AsYaml()
		if err != nil {
			t.Fatal(err)
		}
		got, err := built.Manifests(o)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("kustomize/rendered/%s.yaml (%d bytes) differs from the render of overlays/%s (%d bytes): run make manifests", o, len(got), o, len(want))
		}
	}
}
