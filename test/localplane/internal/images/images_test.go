package images

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

func TestUpstreamVersion(t *testing.T) {
	for debian, want := range map[string]string{
		"5:7.0.15-1~deb12u7": "7.0.15",
		"5:8.0.2-3+deb13u3":  "8.0.2",
		"8.1.1+dfsg1-3":      "8.1.1",
	} {
		got, err := upstreamVersion(debian)
		if err != nil || got != want {
			t.Errorf("upstreamVersion(%q) = %q, %v; want %q", debian, got, err, want)
		}
	}
	if _, err := upstreamVersion("1-2"); err == nil {
		t.Error("upstreamVersion(1-2): no error")
	}
	if got := versionTags(&Debian{}, "7.0.15"); !slices.Equal(got, []string{"7.0.15", "7.0"}) {
		t.Errorf("versionTags(7.0.15) = %v", got)
	}
	if got := versionTags(&Debian{TagPrefix: "v", FullVersionOnly: true}, "1.45.0"); !slices.Equal(got, []string{"v1.45.0"}) {
		t.Errorf("versionTags(1.45.0), prefix v, full version only = %v", got)
	}
}

// layerEntries lists a layer's entries as "name type linkname".
func layerEntries(t *testing.T, data []byte) []string {
	t.Helper()
	var out []string
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if !h.ModTime.Equal(epoch) {
			t.Errorf("%s: mtime %v, want %v", h.Name, h.ModTime, epoch)
		}
		out = append(out, h.Name+" "+string(h.Typeflag)+" "+h.Linkname)
	}
}

func TestWriteLayerIsReproducible(t *testing.T) {
	root := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(root, "usr/bin"), 0o755))
	must(os.MkdirAll(filepath.Join(root, "dev"), 0o755))
	must(os.WriteFile(filepath.Join(root, "usr/bin/valkey-server"), []byte("binary"), 0o755))
	must(os.Link(filepath.Join(root, "usr/bin/valkey-server"), filepath.Join(root, "usr/bin/valkey-check-rdb")))
	must(os.Symlink("valkey-server", filepath.Join(root, "usr/bin/redis-server")))
	must(os.WriteFile(filepath.Join(root, "dev/null-ish"), nil, 0o644))
	must(syscall.Mkfifo(filepath.Join(root, "usr/fifo"), 0o644))

	var a, b bytes.Buffer
	must(writeLayer(&a, root))
	must(os.Chtimes(filepath.Join(root, "usr/bin/valkey-server"), epoch.AddDate(1, 0, 0), epoch.AddDate(1, 0, 0)))
	must(writeLayer(&b, root))
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Error("the same tree with other times made another layer")
	}
	got := strings.Join(layerEntries(t, a.Bytes()), "\n")
	want := strings.Join([]string{
		"dev/ 5 ", // the directory, not its content
		"usr/ 5 ",
		"usr/bin/ 5 ",
		"usr/bin/redis-server 2 valkey-server",
		"usr/bin/valkey-check-rdb 0 ",
		"usr/bin/valkey-server 1 usr/bin/valkey-check-rdb",
	}, "\n")
	if got != want {
		t.Errorf("entries:\n%s\nwant:\n%s", got, want)
	}
}

// TestBuildPushesToTheRegistry builds the pause and operator images (no
// debootstrap) through a real registry (bin/registry, `make tools`), twice:
// the second run finds them up to date; a new operator binary rebuilds only
// the operator's, and an extra operator image (ExtraOperatorImage) is built
// under its own stamp, leaving the catalog's alone. The images, pulled back
// from a read-only registry that serves the storage since before the first
// build (as the plane's does while the e2e suite pushes an image), have
// their tags, configs and the operator's distroless layout.
func TestBuildPushesToTheRegistry(t *testing.T) {
	binDir, err := filepath.Abs("../../../../bin")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	src := Sources{Pause: filepath.Join(dir, "pause-binary"), Operator: filepath.Join(dir, "operator-binary"),
		OperatorImage: "ghcr.io/redis-operator/redis-operator:v0.1.0",
		ArgoCD:        filepath.Join(dir, "argocd-binary"), Kustomize: filepath.Join(dir, "kustomize-binary"),
		ArgoCDImage: "quay.io/argoproj/argocd:v3.2.6"}
	for _, f := range []string{src.Pause, src.Operator, src.ArgoCD, src.Kustomize} {
		if err := os.WriteFile(f, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	catalog, err := Catalog(src)
	if err != nil {
		t.Fatal(err)
	}
	var picked []Image
	for _, img := range catalog {
		if img.Debian == nil {
			picked = append(picked, img)
		}
	}
	// Build logs from one goroutine per image.
	var (
		mu    sync.Mutex
		lines []string
	)
	o := Options{BinDir: binDir, Dir: filepath.Join(dir, "cache"), Images: picked,
		Logf: func(format string, args ...any) {
			mu.Lock()
			defer mu.Unlock()
			lines = append(lines, strings.Join(strings.Fields(fmt.Sprintf(format, args...))[1:3], " "))
		}}
	ctx := context.Background()
	reg, err := StartRegistry(ctx, binDir, filepath.Join(o.Dir, "registry"), filepath.Join(dir, "registry.log"), false)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Stop()
	build := func(want ...string) {
		t.Helper()
		lines = nil
		if err := Build(ctx, o); err != nil {
			t.Fatal(err)
		}
		slices.Sort(lines)
		if slices.Sort(want); !slices.Equal(lines, want) {
			t.Errorf("progress lines %q, want %q", lines, want)
		}
	}
	build("building pause", "building redis-operator", "built pause:", "built redis-operator:")
	build("pause is", "redis-operator is")
	if err := os.WriteFile(src.Operator, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	build("pause is", "building redis-operator", "built redis-operator:")
	previous := filepath.Join(dir, "previous-operator")
	if err := os.WriteFile(previous, []byte("#!/bin/sh\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	extra, err := ExtraOperatorImage("ghcr.io/redis-operator/redis-operator:beab2f5", previous)
	if err != nil {
		t.Fatal(err)
	}
	catalogImages := o.Images
	o.Images = []Image{extra}
	build("building redis-operator-beab2f5", "built redis-operator-beab2f5:")
	o.Images = catalogImages
	build("pause is", "redis-operator is")

	pull := func(path string) v1.Image {
		t.Helper()
		ref, err := name.ParseReference(reg.Addr+"/"+path, name.Insecure)
		if err != nil {
			t.Fatal(err)
		}
		img, err := remote.Image(ref)
		if err != nil {
			t.Fatal(err)
		}
		return img
	}
	cfg, err := pull("pause:3.10").ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.Config.Entrypoint, []string{"/pause"}) || cfg.Config.User != "65535:65535" || cfg.OS != "linux" {
		t.Errorf("pause config: entrypoint %v, user %q, os %q", cfg.Config.Entrypoint, cfg.Config.User, cfg.OS)
	}

	operator := pull("redis-operator/redis-operator:v0.1.0")
	if cfg, err = operator.ConfigFile(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.Config.Entrypoint, []string{"/redis-operator"}) || cfg.Config.User != "65532:65532" {
		t.Errorf("operator config: entrypoint %v, user %q", cfg.Config.Entrypoint, cfg.Config.User)
	}
	layers, err := operator.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("operator layers: %d, %v", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	entries := map[string]string{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(tr)
		entries[h.Name] = fmt.Sprintf("%o %d:%d %s", h.Mode, h.Uid, h.Gid, data)
	}
	for path, want := range map[string]string{
		"redis-operator": "755 0:0 #!/bin/sh\nexit 0\n",
		"tmp/":           "1777 0:0 ",
		"home/nonroot/":  "700 65532:65532 ",
		"etc/group":      "644 0:0 root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n",
	} {
		if entries[path] != want {
			t.Errorf("operator layer: %s is %q, want %q", path, entries[path], want)
		}
	}
	if digest(t, pull("redis-operator/redis-operator:beab2f5")) == digest(t, operator) {
		t.Error("the extra operator image is the catalog's")
	}
	if !strings.Contains(entries["etc/passwd"], "nonroot:x:65532:65532:") || !strings.Contains(entries["etc/ssl/certs/ca-certificates.crt"], "BEGIN CERTIFICATE") {
		t.Errorf("operator layer: /etc/passwd %q, CA bundle of %d bytes", entries["etc/passwd"], len(entries["etc/ssl/certs/ca-certificates.crt"]))
	}
}

// TestOperatorImageName takes the operator image's repository and tag from
// the reference the overlays' Deployment names, and refuses one without a
// tag to push.
func TestOperatorImageName(t *testing.T) {
	img, err := operatorImage("ghcr.io/redis-operator/redis-operator:v0.1.0", "/bin/true")
	if err != nil || img.Repository != "redis-operator/redis-operator" || !slices.Equal(img.Tags, []string{"v0.1.0"}) {
		t.Errorf("operatorImage: repository %q, tags %v, %v", img.Repository, img.Tags, err)
	}
	if _, err := operatorImage("ghcr.io/redis-operator/redis-operator@sha256:"+strings.Repeat("0", 64), "/bin/true"); err == nil {
		t.Error("operatorImage of a digest reference: no error")
	}
}

func digest(t *testing.T, img v1.Image) v1.Hash {
	t.Helper()
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestCatalogImages checks the definitions of the images that need
// debootstrap to build: Argo CD's and redis_exporter's names, tags, users
// and entrypoints as their upstream images have them.
func TestCatalogImages(t *testing.T) {
	catalog, err := Catalog(Sources{Pause: "/bin/true", Operator: "/bin/true", OperatorImage: "ghcr.io/redis-operator/redis-operator:v0.1.0",
		ArgoCD: "/bin/true", Kustomize: "/bin/true", ArgoCDImage: "quay.io/argoproj/argocd:v3.2.6"})
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]Image{}
	for _, img := range catalog {
		byName[img.Name] = img
	}
	a := byName["argocd"]
	if a.Repository != "argoproj/argocd" || !slices.Equal(a.Tags, []string{"v3.2.6"}) || a.User != "999" ||
		!slices.Equal(a.Entrypoint, []string{"/usr/bin/tini", "--"}) || a.Symlinks["/usr/local/bin/argocd-repo-server"] != "/usr/local/bin/argocd" ||
		!slices.Contains(a.Env, "HOME=/home/argocd") || !slices.Contains(a.Debian.Packages, "tini") {
		t.Errorf("argocd image: %+v", a)
	}
	e := byName["redis-exporter"]
	if e.Repository != "oliver006/redis_exporter" || e.User != "59000:59000" || !slices.Equal(e.Entrypoint, []string{"/redis_exporter"}) ||
		e.Debian.VersionFrom != "prometheus-redis-exporter" || !slices.Equal(versionTags(e.Debian, "1.45.0"), []string{"v1.45.0"}) {
		t.Errorf("redis_exporter image: %+v", e)
	}
	withoutArgoCD, err := Catalog(Sources{Pause: "/bin/true", Operator: "/bin/true", OperatorImage: "ghcr.io/redis-operator/redis-operator:v0.1.0"})
	if err != nil || len(withoutArgoCD) != len(catalog)-1 || slices.ContainsFunc(withoutArgoCD, func(img Image) bool { return img.Name == "argocd" }) {
		t.Errorf("Catalog without Argo CD's image: %d images, %v", len(withoutArgoCD), err)
	}
	if _, err := Catalog(Sources{Pause: "/bin/true", Operator: "/bin/true", OperatorImage: "ghcr.io/redis-operator/redis-operator:v0.1.0",
		ArgoCDImage: "quay.io/argoproj/argocd:v3.2.6"}); err == nil {
		t.Error("Catalog with Argo CD's image but not its binaries: no error")
	}
}
