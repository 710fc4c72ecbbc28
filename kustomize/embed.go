// Package kustomize holds the operator's install manifests (base, components
// and overlays beside this file) and renders them with kustomize's own
// library (sigs.k8s.io/kustomize/api/krusty), as `kustomize build
// kustomize/overlays/NAME` does on disk. `make manifests` writes each
// overlay's render into kustomize/rendered (hack/rendermanifests), which the
// operator binary embeds for `redis-operator manifests`; the binary does
// not import this package.
//
// The manifests are embedded at build time; Render copies them into an
// in-memory file system and runs krusty there with the default options
// (load restrictions to the kustomization root, no plugins).
package kustomize

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/resmap"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// manifests is the kustomize tree: base/, components/ and overlays/.
//
//go:embed base components overlays
var manifests embed.FS

// overlaysDir is the directory under which each overlay is one kustomization.
const overlaysDir = "overlays"

// Overlays returns the names of the embedded overlays (for example "dev",
// "staging", "prod"), sorted.
func Overlays() []string {
	entries, err := manifests.ReadDir(overlaysDir)
	if err != nil {
		// The overlays directory is embedded at build time; its absence is
		// a build defect, not an input error.
		panic(fmt.Sprintf("kustomize: embedded %s/ missing: %v", overlaysDir, err))
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	return names
}

// Render builds the named overlay from the embedded manifests and returns
// the multi-document YAML that `kustomize build kustomize/overlays/<overlay>`
// prints for the same tree. An unknown overlay name is an error that lists
// the known ones.
func Render(overlay string) ([]byte, error) {
	m, err := RenderResMap(overlay)
	if err != nil {
		return nil, err
	}
	out, err := m.AsYaml()
	if err != nil {
		return nil, fmt.Errorf("kustomize: encoding overlay %q: %w", overlay, err)
	}
	return out, nil
}

// RenderResMap is Render before encoding: the rendered objects in output
// order.
func RenderResMap(overlay string) (resmap.ResMap, error) {
	known := Overlays()
	if !slices.Contains(known, overlay) {
		return nil, fmt.Errorf("kustomize: unknown overlay %q (known: %s)", overlay, strings.Join(known, ", "))
	}
	mem, err := memFS()
	if err != nil {
		return nil, err
	}
	return Build(mem, path.Join("/", overlaysDir, overlay))
}

// Build runs krusty with the default options on the kustomization in dir of
// fsys. It is the one place both the embedded render and the tests' render
// from disk go through, so the two can differ only by the files they read.
func Build(fsys filesys.FileSystem, dir string) (resmap.ResMap, error) {
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize: building %s: %w", dir, err)
	}
	return m, nil
}

// memFS copies the embedded tree into a fresh in-memory file system rooted
// at "/", keeping the relative paths, so that the kustomizations' relative
// references (../../base, ../../components/...) resolve as on disk.
func memFS() (filesys.FileSystem, error) {
	mem := filesys.MakeFsInMemory()
	err := fs.WalkDir(manifests, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return mem.MkdirAll(path.Join("/", p))
		}
		data, err := manifests.ReadFile(p)
		if err != nil {
			return err
		}
		return mem.WriteFile(path.Join("/", p), data)
	})
	if err != nil {
		return nil, fmt.Errorf("kustomize: copying embedded manifests: %w", err)
	}
	return mem, nil
}
