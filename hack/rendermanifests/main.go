// Command rendermanifests writes kustomize/rendered/NAME.yaml, krusty's
// render of kustomize/overlays/NAME, for every overlay of the tree, and
// removes the file of an overlay that is gone. The operator binary embeds
// those files (package kustomize/rendered) instead of kustomize's library.
//
// Usage: rendermanifests [DIR] — DIR defaults to kustomize/rendered
// (`make manifests` runs it from the repository's root).
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/redis-operator/redis-operator/kustomize"
)

func main() {
	dir := filepath.Join("kustomize", "rendered")
	if len(os.Args) > 2 {
		fmt.Fprintln(os.Stderr, "usage: rendermanifests [DIR]")
		os.Exit(2)
	}
	if len(os.Args) == 2 {
		dir = os.Args[1]
	}
	if err := render(dir); err != nil {
		fmt.Fprintf(os.Stderr, "rendermanifests: %v\n", err)
		os.Exit(1)
	}
}

func render(dir string) error {
	overlays := kustomize.Overlays()
	for _, o := range overlays {
		out, err := kustomize.Render(o)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, o+".yaml"), out, 0o644); err != nil {
			return err
		}
	}
	old, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return err
	}
	for _, f := range old {
		if !slices.Contains(overlays, strings.TrimSuffix(filepath.Base(f), ".yaml")) {
			if err := os.Remove(f); err != nil {
				return err
			}
		}
	}
	return nil
}
