package kustomize

import (
	"flag"
	"fmt"
	"io"
	"strings"
)

// RunManifests is the `redis-operator manifests` subcommand: it parses
// args (the arguments after "manifests"), renders the overlay named by
// --overlay from the embedded manifests and writes the YAML to stdout, so
// that
//
//	redis-operator manifests --overlay prod | kubectl apply --server-side -f -
//
// installs the operator with no kustomize binary. It returns the process
// exit code: 0 on success, 1 when rendering or writing fails, 2 for bad
// arguments (a missing or unknown flag, extra arguments). Messages go to
// stderr.
func RunManifests(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("redis-operator manifests", flag.ContinueOnError)
	fs.SetOutput(stderr)
	known := strings.Join(Overlays(), ", ")
	overlay := fs.String("overlay", "", "The overlay to render, one of: "+known)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: redis-operator manifests --overlay NAME\n\n"+
			"Prints the operator's install (CRDs, RBAC, the manager, its Services and the\n"+
			"overlay's components) rendered from the manifests built into this binary.\n\n")
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
	out, err := Render(*overlay)
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
