package images

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
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
	if got := versionTags("7.0.15"); !slices.Equal(got, []string{"7.0.15", "7.0"}) {
		t.Errorf("versionTags(7.0.15) = %v", got)
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

// TestBuildPushesToTheRegistry builds the pause image (no debootstrap)
// through a real registry (bin/registry, `make tools`), twice: the second
// run finds it up to date; the image pulled back has its tag and config.
func TestBuildPushesToTheRegistry(t *testing.T) {
	binDir, err := filepath.Abs("../../../../bin")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	pause := filepath.Join(dir, "pause-binary")
	if err := os.WriteFile(pause, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	img := Catalog(pause)[0]
	var lines []string
	o := Options{BinDir: binDir, Dir: filepath.Join(dir, "cache"), Images: []Image{img},
		Logf: func(format string, args ...any) { lines = append(lines, format) }}
	ctx := context.Background()
	for range 2 {
		if err := Build(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Equal(lines, []string{"images: building %s", "images: built %s: %s:%s %s", "images: %s is up to date (%s:%s)"}) {
		t.Errorf("progress lines: %q", lines)
	}
	reg, err := StartRegistry(ctx, binDir, filepath.Join(o.Dir, "registry"), filepath.Join(dir, "registry.log"), false)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Stop()
	ref, err := name.ParseReference(reg.Addr+"/pause:3.10", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	pulled, err := remote.Image(ref)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := pulled.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.Config.Entrypoint, []string{"/pause"}) || cfg.Config.User != "65535:65535" || cfg.OS != "linux" {
		t.Errorf("config: entrypoint %v, user %q, os %q", cfg.Config.Entrypoint, cfg.Config.User, cfg.OS)
	}
	layers, err := pulled.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers: %d, %v", len(layers), err)
	}
}
