// Package rendered holds the operator's install as `kustomize build
// kustomize/overlays/NAME` prints it, one file per overlay (NAME.yaml beside
// this file), written by `make manifests` (hack/rendermanifests) and
// embedded at build time, and the `redis-operator manifests` subcommand that
// prints them:
//
//	redis-operator manifests --overlay prod | kubectl apply --server-side -f -
//
// It imports no kustomize code. Rendering with kustomize's library in the
// binary (package kustomize, sigs.k8s.io/kustomize/api/krusty) doubled the
// operator binary, 60 MB to 125 MB, and with it the pages of the binary the
// running manager has mapped; a test of package kustomize
// (TestRenderEqualsDisk) fails when a file here differs from krusty's
// render of the tree on disk.
package rendered

import (
	"embed"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
)

// files holds NAME.yaml for each overlay NAME.
//
//go:embed *.yaml
var files embed.FS

const suffix = ".yaml"

// Overlays returns the names of the rendered overlays ("dev", "prod",
// "staging"), sorted.
func Overlays() []string {
	entries, err := files.ReadDir(".")
	if err != nil {
		// The files are embedded at build time; a read error is a build
		// defect, not an input error.
		panic(fmt.Sprintf("rendered: reading the embedded overlays: %v", err))
	}
	var names []string
	for _, e := range entries {
		if name, ok := strings.CutSuffix(e.Name(), suffix); ok {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// Manifests returns the multi-document YAML of the named overlay. An
// unknown name is an error that lists the known ones.
func Manifests(overlay string) ([]byte, error) {
	known := Overlays()
	if !slices.Contains(known, overlay) {
		return nil, fmt.Errorf("unknown overlay %q (known: %s)", overlay, strings.Join(known, ", "))
	}
	return files.ReadFile(overlay + suffix)
}

// RunManifests is the `redis-operator manifests` subcommand: it parses args
// (the arguments after "manifests") and writes the overlay named by
// --overlay to stdout. It returns the process exit code: 0 on success, 1
// for an unknown overlay or a failed write, 2 for bad arguments (a missing
// or unknown flag, extra arguments). Messages go to stderr.
func RunManifests(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("redis-operator manifests", flag.ContinueOnError)
	fs.SetOutput(stderr)
	known := strings.Join(Overlays(), ", ")
	overlay := fs.String("overlay", "", "The overlay to print, one of: "+known)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: redis-operator manifests --overlay NAME\n\n"+
			"Prints the operator's install (CRDs, RBAC, the manager, its Services and the\n"+
			"overlay's components) as kustomize rendered it when this binary was built.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "redis-operator manifests: unexpected arguments: %s\n", strings.Join(fs.Args(), " "))
		return 2
	}
	if *overlay == "" {
		fmt.Fprintf(stderr, "redis-operator manifests: --overlay is required (one of: %s)\n", known)
		return 2
	}
	out, err := Manifests(*overlay)
	if err != nil {
		fmt.Fprintf(stderr, "redis-operator manifests: %v\n", err)
		return 1
	}
	if _, err := stdout.Write(out); err != nil {
		fmt.Fprintf(stderr, "redis-operator manifests: writing the manifests: %v\n", err)
		return 1
	}
	return 0
}
