// Command localplane-images builds the images of the local plane's real
// nodes into the registry storage of the per-user images cache (package
// images; `make images` runs it through hack/images.sh):
//
//	localplane-images --bin-dir DIR --pause FILE --operator FILE --operator-image REF
//	    --argocd FILE --kustomize FILE --argocd-image REF [--jobs N] [NAME...]
//	localplane-images --bin-dir DIR --extra-operator REF=FILE [--extra-operator REF=FILE ...]
//
// --bin-dir holds bin/registry, --pause is the static pause binary
// (cmd/pause), --operator the operator's static binary and --operator-image
// the reference its image is pushed as (the one the kustomize overlays'
// Deployment names), --argocd and --kustomize bin/argocd and bin/kustomize
// and --argocd-image the reference Argo CD's install manifests name (the
// catalog has the argocd image only with it); NAMEs
// (pause, redis-7.0, redis-8.0, valkey-8.1, redis-operator, argocd,
// redis-exporter) limit the build to those images. An image whose stamp has
// not changed is not rebuilt. It needs root (debootstrap and chroot) and
// the Debian archive that the machine's apt sources name.
//
// With --extra-operator, it builds only those operator images, each a static
// operator binary FILE pushed as REF (images.ExtraOperatorImage: stamped as
// redis-operator-<tag>, so the catalog's operator image is left alone); the
// e2e upgrade scenario pushes the release it upgrades from this way, while
// the plane's registry serves the same storage.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/redis-operator/redis-operator/test/localplane/internal/images"
)

// refFiles collects repeated REF=FILE flags.
type refFiles [][2]string

func (r *refFiles) String() string { return fmt.Sprint(*r) }

func (r *refFiles) Set(v string) error {
	ref, file, ok := strings.Cut(v, "=")
	if !ok || ref == "" || file == "" {
		return errors.New("want REF=FILE")
	}
	*r = append(*r, [2]string{ref, file})
	return nil
}

func main() {
	binDir := flag.String("bin-dir", "bin", "directory holding the registry binary")
	pause := flag.String("pause", "bin/pause", "the static pause binary (cmd/pause)")
	operator := flag.String("operator", "", "the operator's static binary (cmd/redis-operator, CGO_ENABLED=0)")
	operatorImage := flag.String("operator-image", "", "the operator image's reference, as the overlays' Deployment names it")
	argocd := flag.String("argocd", "bin/argocd", "Argo CD's binary (make tools: hack/tools/argocd)")
	kustomize := flag.String("kustomize", "bin/kustomize", "kustomize, for Argo CD's image (make tools)")
	argocdImage := flag.String("argocd-image", "", "Argo CD's image reference, as its install manifests name it (without it, no Argo CD image)")
	var extra refFiles
	flag.Var(&extra, "extra-operator", "REF=FILE: build only operator images, each the static operator binary FILE pushed as REF (repeatable)")
	jobs := flag.Int("jobs", 2, "images made at once")
	flag.Parse()
	src := images.Sources{Pause: *pause, Operator: *operator, OperatorImage: *operatorImage,
		ArgoCD: *argocd, Kustomize: *kustomize, ArgoCDImage: *argocdImage}
	if err := run(*binDir, src, extra, *jobs, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "localplane-images:", err)
		os.Exit(1)
	}
}

func run(binDir string, src images.Sources, extra refFiles, jobs int, only []string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	dir, err := images.Dir()
	if err != nil {
		return err
	}
	selected, err := pick(src, extra, only)
	if err != nil {
		return err
	}
	return images.Build(ctx, images.Options{
		BinDir: binDir,
		Dir:    dir,
		Images: selected,
		Jobs:   jobs,
		Logf:   func(format string, args ...any) { fmt.Printf(format+"\n", args...) },
	})
}

// pick returns the images to build: the extra operator images alone when
// there are any, else the catalog's, limited to only when it names some.
func pick(src images.Sources, extra refFiles, only []string) ([]images.Image, error) {
	if len(extra) > 0 {
		if len(only) > 0 {
			return nil, errors.New("--extra-operator builds only those images: no NAME arguments")
		}
		var out []images.Image
		for _, e := range extra {
			img, err := images.ExtraOperatorImage(e[0], e[1])
			if err != nil {
				return nil, err
			}
			if _, err := os.Stat(e[1]); err != nil {
				return nil, err
			}
			out = append(out, img)
		}
		return out, nil
	}
	catalog, err := images.Catalog(src)
	if err != nil {
		return nil, err
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
			return nil, fmt.Errorf("no image named %s (known: %s)", n, strings.Join(known, ", "))
		}
	}
	return selected, nil
}
