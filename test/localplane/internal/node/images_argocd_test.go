package node

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestArgoCDImage(t *testing.T) {
	bin, images := t.TempDir(), t.TempDir()
	for _, name := range []string{"argocd", "kustomize"} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(name), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	lookup := func() *Image {
		t.Helper()
		im, err := LookupImage("quay.io/argoproj/argocd:v3.2.6", bin)
		if err != nil {
			t.Fatal(err)
		}
		if err := im.linkBinaries(images); err != nil {
			t.Fatal(err)
		}
		return im
	}
	im := lookup()
	if im.User == nil || *im.User != argocdUser {
		t.Errorf("user %v, want %d", im.User, argocdUser)
	}
	dir := filepath.Join(images, "argocd.d")
	if got, want := im.mounts(), []mountSpec{{src: dir, dst: "/usr/local/bin", dir: true, readOnly: true}}; !slices.Equal(got, want) {
		t.Errorf("mounts %+v, want %+v", got, want)
	}
	same := func(a, b string) bool {
		ai, err1 := os.Stat(a)
		bi, err2 := os.Stat(b)
		return err1 == nil && err2 == nil && os.SameFile(ai, bi)
	}
	for _, name := range argocdExecutables {
		if !same(filepath.Join(dir, name), filepath.Join(bin, "argocd")) {
			t.Errorf("%s is not a link to bin/argocd", name)
		}
	}
	if !same(filepath.Join(dir, "kustomize"), filepath.Join(bin, "kustomize")) {
		t.Errorf("kustomize is not a link to bin/kustomize")
	}

	cases := []struct {
		command, args, want []string
	}{
		// The core install's containers: args after the entrypoint tini --.
		{args: []string{"/usr/local/bin/argocd-repo-server"}, want: []string{"/usr/local/bin/argocd-repo-server"}},
		{command: []string{"argocd", "admin", "redis-initial-password"},
			want: []string{"/usr/local/bin/argocd", "admin", "redis-initial-password"}},
	}
	for _, c := range cases {
		got, err := im.Argv(c.command, c.args)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("Argv(%q, %q) = %q, %v; want %q", c.command, c.args, got, err, c.want)
		}
	}
	// The copyutil init container's /bin/cp comes from the machine.
	if got, err := im.Argv([]string{"/bin/cp", "-n", "/usr/local/bin/argocd", "/var/run/argocd/argocd-cmp-server"}, nil); err != nil || filepath.Base(got[0]) != "cp" {
		t.Errorf("Argv(cp ...) = %q, %v", got, err)
	}

	// A rebuilt binary (a new inode) is linked again at the next start.
	fresh := filepath.Join(bin, "argocd.new")
	if err := os.WriteFile(fresh, []byte("rebuilt"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(fresh, filepath.Join(bin, "argocd")); err != nil {
		t.Fatal(err)
	}
	lookup()
	if b, err := os.ReadFile(filepath.Join(dir, "argocd-application-controller")); err != nil || string(b) != "rebuilt" {
		t.Errorf("after a rebuild argocd-application-controller holds %q, %v; want the rebuilt binary", b, err)
	}

	// The image's HOME replaces the node's default unless the container sets it.
	e := &env{}
	e.set("HOME", "/root")
	e.applyImageEnv(im, &corev1.Container{})
	if e.values["HOME"] != "/home/argocd" || e.values["USER"] != "argocd" {
		t.Errorf("env %v, want HOME=/home/argocd USER=argocd", e.values)
	}
	e.set("HOME", "/root")
	e.applyImageEnv(im, &corev1.Container{Env: []corev1.EnvVar{{Name: "HOME", Value: "/root"}}})
	if e.values["HOME"] != "/root" {
		t.Errorf("HOME %q, want the container's /root", e.values["HOME"])
	}
}
