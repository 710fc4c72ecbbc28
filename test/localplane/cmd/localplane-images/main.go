// Command localplane-images builds the images of the local plane's real
// nodes into the registry storage of the per-user images cache (package
// images; `make images` runs it through hack/images.sh):
//
//	localplane-images --bin-dir DIR --pause FILE --operator FILE --operator-image REF [--jobs N] [NAME...]
//
// --bin-dir holds bin/registry, --pause is the static pause binary
// (cmd/pause), --operator the operator's static binary and --operator-image
// the reference its image is pushed as (the one the kustomize overlays'
// Deployment names); NAMEs (pause, redis-7.0, redis-8.0, valkey-8.1,
// redis-operator) limit the build to those images. An image whose stamp has not changed is not
// rebuilt. It needs root (debootstrap and chroot) and the Debian archive
// that the machine's apt sources name.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/redis-operator/redis-operator/test/localplane/internal/images"
)

func main() {
	binDir := flag.String("bin-dir", "bin", "directory holding the registry binary")
	pause := flag.String("pause", "bin/pause", "the static pause binary (cmd/pause)")
	operator := flag.String("operator", "", "the operator's static binary (cmd/redis-operator, CGO_ENABLED=0)")
	operatorImage := flag.String("operator-image", "", "the operator image's reference, as the overlays' Deployment names it")
	jobs := flag.Int("jobs", 2, "images made at once")
	flag.Parse()
	src := images.Sources{Pause: *pause, Operator: *operator, OperatorImage: *operatorImage}
	if err := run(*binDir, src, *jobs, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "localplane-images:", err)
		os.Exit(1)
	}
}

func run(binDir string, src images.Sources, jobs int, only []string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	dir, err := images.Dir()
	if err != nil {
		return err
	}
	catalog, err := images.Catalog(src)
	if err != nil {
		return err
	}
	var selected []images.Image
	var known []string
	for _, img := range catalog {
		known = append(known, img.Name)
		if len(only) == 0 || slices.Contains(only, img.Name) {
			selected = append(selected, img)
		}
	}
	for _, n := range only {
		if !slices.Contains(known, n) {
			return fmt.Errorf("no image named %s (known: %s)", n, strings.Join(known, ", "))
		}
	}
	return images.Build(ctx, images.Options{
		BinDir: binDir,
		Dir:    dir,
		Images: selected,
		Jobs:   jobs,
		Logf:   func(format string, args ...any) { fmt.Printf(format+"\n", args...) },
	})
}
