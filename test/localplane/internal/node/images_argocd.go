package node

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// argocdUser is the USER of Argo CD's image (ARGOCD_USER_ID in its Dockerfile).
const argocdUser int64 = 999

// argocdExecutables are the names Argo CD's image gives its one binary in
// /usr/local/bin (symlinks in its Dockerfile), as far as the components
// built into bin/argocd go (hack/tools/argocd: application controller,
// repo-server, ApplicationSet controller, and the `argocd admin
// redis-initial-password` command of the Redis init container);
// argocd-cmp-server is the copy the repo-server's copyutil init container
// makes for plugin sidecars.
var argocdExecutables = []string{
	"argocd", "argocd-application-controller", "argocd-repo-server",
	"argocd-applicationset-controller", "argocd-cmp-server",
}

// argocdImage is quay.io/argoproj/argocd (any tag) on the local plane:
// binDir/argocd under each name of argocdExecutables and binDir/kustomize
// (both built by `make tools`), in /usr/local/bin of the container as in
// the image, which dispatches on the name it is started under; entrypoint
// tini (dropped: the node reaps and signals the process tree itself),
// working directory /home/argocd, user 999, HOME and USER as the image's
// ENV sets them. git, gpg and ssh come from the machine (Debian's), as the
// image ships them in /usr/bin.
func argocdImage(binDir string) *Image {
	user := argocdUser
	bins := map[string]string{"kustomize": filepath.Join(binDir, "kustomize")}
	for _, name := range argocdExecutables {
		bins[name] = filepath.Join(binDir, "argocd")
	}
	return &Image{
		Name:       "argocd",
		Binaries:   bins,
		Entrypoint: []string{"/usr/bin/tini", "--"},
		WorkingDir: "/home/argocd",
		User:       &user,
		Env:        map[string]string{"HOME": "/home/argocd", "USER": "argocd"},
		Install:    "make tools (bin/argocd and bin/kustomize)",
		copied:     true,
		binDir:     "/usr/local/bin",
		init:       []string{"/usr/bin/tini", "--"},
	}
}

// linkBinaries gives an image with a binDir its directory of executables:
// ImagesDir/<image name>.d/<executable>, each a hard link to the synced copy
// of its binary (one inode for every name of a multi-call binary, which
// then sees the name it was started under as os.Args[0]), relinked when
// the copy was replaced. Binaries then name the links, and Mount returns
// the directory's bind mount at binDir.
func (im *Image) linkBinaries(imagesDir string) error {
	if im.binDir == "" {
		return nil
	}
	dir := filepath.Join(imagesDir, im.Name+".d")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, src := range im.Binaries {
		dst := filepath.Join(dir, name)
		si, err := os.Stat(src)
		if err != nil {
			return fmt.Errorf("image %s: %s: %w (build it: %s)", im.Name, name, err, im.Install)
		}
		if di, err := os.Stat(dst); err != nil || !os.SameFile(si, di) {
			tmp := filepath.Join(dir, ".link-"+name)
			_ = os.Remove(tmp)
			if err := os.Link(src, tmp); err != nil {
				return fmt.Errorf("image %s: linking %s: %w", im.Name, name, err)
			}
			if err := os.Rename(tmp, dst); err != nil {
				return err
			}
		}
		im.Binaries[name] = dst
	}
	im.hostBinDir = dir
	return nil
}

// mounts returns the bind mount of the image's directory of executables
// (linkBinaries) at its binDir, read-only, or nothing.
func (im *Image) mounts() []mountSpec {
	if im.hostBinDir == "" {
		return nil
	}
	return []mountSpec{{src: im.hostBinDir, dst: im.binDir, dir: true, readOnly: true}}
}

// containerPath is where argv0, resolved to the host path bin, is found in
// the container: under binDir for an image whose executables are mounted
// there (the host path may be hidden by a volume mounted over /tmp, say),
// bin itself otherwise.
func (im *Image) containerPath(bin string) string {
	if im.hostBinDir != "" && filepath.Dir(bin) == im.hostBinDir {
		return path.Join(im.binDir, filepath.Base(bin))
	}
	return bin
}

// dropInit removes the image's init (tini and its "--") from the front of
// argv.
func (im *Image) dropInit(argv []string) []string {
	if n := len(im.init); n > 0 && len(argv) > n && slices.Equal(argv[:n], im.init) {
		return argv[n:]
	}
	return argv
}

// applyImageEnv sets the image's ENV variables that c's own env does not
// set, over the node's defaults (HOME=/root), as a container runtime starts
// from the image's environment.
func (e *env) applyImageEnv(im *Image, c *corev1.Container) {
	for name, value := range im.Env {
		if slices.ContainsFunc(c.Env, func(v corev1.EnvVar) bool { return v.Name == name }) {
			continue
		}
		e.set(name, value)
	}
}
