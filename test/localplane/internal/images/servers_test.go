package images

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// tarOf is a tar of the given headers, each regular file's content its
// name.
func tarOf(t *testing.T, hdrs ...tar.Header) *bytes.Buffer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range hdrs {
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(h.Name))
		}
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write([]byte(h.Name)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return &buf
}

// A Debian-like tree comes out with its files, modes and links; wrappers
// are written for the programs it has, by their own names, and exec the
// tree's loader.
func TestExtractTarAndWrappers(t *testing.T) {
	tmp := t.TempDir()
	root := filepath.Join(tmp, "rootfs")
	err := extractTar(tarOf(t,
		tar.Header{Name: "bin", Typeflag: tar.TypeSymlink, Linkname: "usr/bin"},
		tar.Header{Name: "proc/", Typeflag: tar.TypeDir, Mode: 0o555},
		tar.Header{Name: "usr/bin/", Typeflag: tar.TypeDir, Mode: 0o755},
		tar.Header{Name: "usr/bin/valkey-check-rdb", Typeflag: tar.TypeReg, Mode: 0o755},
		tar.Header{Name: "usr/bin/valkey-server", Typeflag: tar.TypeSymlink, Linkname: "valkey-check-rdb"},
		tar.Header{Name: "usr/bin/redis-server", Typeflag: tar.TypeSymlink, Linkname: "valkey-server"},
		tar.Header{Name: "usr/bin/valkey-cli", Typeflag: tar.TypeReg, Mode: 0o755},
		tar.Header{Name: "usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2", Typeflag: tar.TypeReg, Mode: 0o755},
		tar.Header{Name: "usr/lib/x86_64-linux-gnu/libc.so.6", Typeflag: tar.TypeLink, Linkname: "usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"},
		tar.Header{Name: "etc/shadow", Typeflag: tar.TypeReg, Mode: 0o640},
		tar.Header{Name: "dev/null", Typeflag: tar.TypeChar},
	), root)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(root, "bin/valkey-server")); err != nil || string(got) != "usr/bin/valkey-check-rdb" {
		t.Errorf("bin/valkey-server through the links: %q, %v", got, err)
	}
	if fi, err := os.Stat(filepath.Join(root, "etc/shadow")); err != nil || fi.Mode().Perm() != 0o640|0o200 {
		t.Errorf("etc/shadow: %v, %v", fi, err)
	}
	if fi, err := os.Stat(filepath.Join(root, "proc")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("proc, owner-writable: %v, %v", fi, err)
	}
	a, _ := os.Stat(filepath.Join(root, "usr/lib/x86_64-linux-gnu/libc.so.6"))
	b, _ := os.Stat(filepath.Join(root, "usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"))
	if a == nil || b == nil || !os.SameFile(a, b) {
		t.Error("the hard link is not one file with its target")
	}
	if _, err := os.Lstat(filepath.Join(root, "dev/null")); err == nil {
		t.Error("a device node was made")
	}

	if err := writeWrappers(tmp, "/cache/servers/valkey-8.1"); err != nil {
		t.Fatal(err)
	}
	for _, prog := range []string{"redis-server", "valkey-server", "valkey-cli"} {
		got, err := os.ReadFile(filepath.Join(tmp, prog))
		if err != nil {
			t.Fatal(err)
		}
		want := `exec "$d/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2" --library-path "$d/usr/lib/x86_64-linux-gnu" "$d/usr/bin/` + prog + `" "$@"`
		if !strings.Contains(string(got), "d='/cache/servers/valkey-8.1/rootfs'\n") || !strings.Contains(string(got), want) {
			t.Errorf("%s:\n%s\nwant the tree and %s", prog, got, want)
		}
	}
	if _, err := os.Stat(filepath.Join(tmp, "redis-cli")); err == nil {
		t.Error("a redis-cli wrapper for a tree without redis-cli")
	}
}

// Entries that would leave the tree, by ".." or through a link to outside,
// are refused.
func TestExtractTarStaysInside(t *testing.T) {
	for name, hdrs := range map[string][]tar.Header{
		"dot-dot": {{Name: "../escaped", Typeflag: tar.TypeReg, Mode: 0o644}},
		"link":    {{Name: "etc", Typeflag: tar.TypeSymlink, Linkname: "/tmp"}, {Name: "etc/escaped", Typeflag: tar.TypeReg, Mode: 0o644}},
		"hard":    {{Name: "x", Typeflag: tar.TypeLink, Linkname: "../../etc/passwd"}},
	} {
		dir := t.TempDir()
		if err := extractTar(tarOf(t, hdrs...), filepath.Join(dir, "rootfs")); err == nil {
			t.Errorf("%s: no error", name)
		}
		if _, err := os.Stat(filepath.Join(dir, "escaped")); err == nil {
			t.Errorf("%s: wrote outside the tree", name)
		}
	}
}
