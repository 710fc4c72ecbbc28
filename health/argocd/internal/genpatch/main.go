// Command genpatch writes the argocd-cm patch carrying health.lua
// (argocd.ConfigMapPatch) to the file named by its only argument. It runs
// from `go generate ./health/argocd`.
package main

import (
	"fmt"
	"os"

	"github.com/redis-operator/redis-operator/health/argocd"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: genpatch <output.yaml>")
		os.Exit(2)
	}
	patch, err := argocd.ConfigMapPatch()
	if err == nil {
		err = os.WriteFile(os.Args[1], patch, 0o644)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "genpatch: %v\n", err)
		os.Exit(1)
	}
}
