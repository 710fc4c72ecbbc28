package images

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// ServerImages are the images whose trees InstallServers can put on the
// host, by catalog name, with their repository: the servers that this
// machine's apt does not have (Debian trixie's).
var ServerImages = map[string]string{
	"redis-8.0":  "library/redis",
	"valkey-8.1": "valkey/valkey",
}

// ServersDir is the per-user cache of server trees, beside the images
// cache (Dir): ${REDIS_OPERATOR_CACHE:-${XDG_CACHE_HOME:-~/.cache}/redis-operator}/servers.
func ServersDir() (string, error) {
	d, err := Dir()
	if err != nil {
		return "", err
	}
	return filepath.Join(filepath.Dir(d), "servers"), nil
}

// ServersOptions configure InstallServers.
type ServersOptions struct {
	// BinDir holds bin/registry.
	BinDir string
	// ImagesDir is the images cache (Dir), ServersDir the servers cache
	// (ServersDir).
	ImagesDir, ServersDir string
	// Names are catalog names of ServerImages.
	Names []string
	// Logf prints progress lines.
	Logf func(format string, args ...any)
}

// InstallServers puts each named server image, as `make images` built it,
// on the host as a runnable tree: ServersDir/NAME/rootfs is the image's
// filesystem, and ServersDir/NAME/redis-server, redis-cli (and for Valkey
// valkey-server, valkey-cli) are wrappers that exec the server with the
// tree's own loader and libraries, so that its pid is the server's. A tree
// is rebuilt only when the image's stamp differs from the one it was made
// from (ServersDir/NAME/stamp); the image is read from the registry storage
// through a read-only registry. An image not built yet is an error that
// says to run `make images`.
func InstallServers(ctx context.Context, o ServersOptions) error {
	var reg *Registry
	defer func() {
		if reg != nil {
			reg.Stop()
		}
	}()
	for _, n := range o.Names {
		repo, ok := ServerImages[n]
		if !ok {
			return fmt.Errorf("images: no server image %s", n)
		}
		line, err := os.ReadFile(filepath.Join(o.ImagesDir, "stamps", n))
		if err != nil {
			return fmt.Errorf("images: %s is not built (run `make images`): %w", n, err)
		}
		fields := strings.Fields(string(line))
		if len(fields) < 2 {
			return fmt.Errorf("images: the stamp of %s has no tag: %q", n, line)
		}
		dir := filepath.Join(o.ServersDir, n)
		if got, err := os.ReadFile(filepath.Join(dir, "stamp")); err == nil && string(got) == string(line) {
			o.Logf("servers: %s is up to date (%s:%s, %s)", n, repo, fields[1], dir)
			continue
		}
		if reg == nil {
			if err := os.MkdirAll(o.ServersDir, 0o755); err != nil {
				return err
			}
			reg, err = StartRegistry(ctx, o.BinDir, filepath.Join(o.ImagesDir, "registry"), filepath.Join(o.ServersDir, "registry.log"), false)
			if err != nil {
				return err
			}
		}
		o.Logf("servers: extracting %s (%s:%s) into %s", n, repo, fields[1], dir)
		if err := installServer(ctx, reg.Addr+"/"+repo+":"+fields[1], dir, line); err != nil {
			return fmt.Errorf("%s: %w", n, err)
		}
		for _, w := range []string{"redis-server", "valkey-server"} {
			if out, err := exec.CommandContext(ctx, filepath.Join(dir, w), "--version").Output(); err == nil {
				o.Logf("servers: %s: %s", filepath.Join(dir, w), strings.TrimSpace(string(out)))
			}
		}
	}
	return nil
}

// installServer extracts the image ref into a new tree beside dir, writes
// its wrappers and stamp, then puts it in dir's place.
func installServer(ctx context.Context, ref, dir string, stampLine []byte) error {
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		return err
	}
	img, err := remote.Image(r, remote.WithContext(ctx))
	if err != nil {
		return fmt.Errorf("pulling %s: %w", ref, err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "."+filepath.Base(dir)+".")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	fs := mutate.Extract(img)
	defer fs.Close()
	if err := extractTar(fs, filepath.Join(tmp, "rootfs")); err != nil {
		return err
	}
	if err := writeWrappers(tmp, dir); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(tmp, "stamp"), stampLine, 0o644); err != nil {
		return err
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	return os.Rename(tmp, dir)
}

// extractTar writes a flattened image filesystem (mutate.Extract) into
// root, owned by the caller: directories (always writable by their owner,
// so the tree can be removed), regular files with their permission bits,
// symbolic and hard links. Device nodes and other special files are left
// out, and so is any name that would leave root.
func extractTar(r io.Reader, root string) error {
	if err := os.MkdirAll(root, 0o755); err != nil {
		return err
	}
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return err
	}
	tr := tar.NewReader(r)
	// inside is where the entry n goes; an error when a ".." or a link
	// already in the tree would take it out of root.
	inside := func(n string) (string, error) {
		if slices.Contains(strings.Split(n, "/"), "..") {
			return "", fmt.Errorf("images: tar entry %q leaves the tree", n)
		}
		p := filepath.Join(root, filepath.FromSlash(path.Clean("/"+n)))
		if p == root {
			return p, nil
		}
		parent := filepath.Dir(p)
		for {
			if _, err := os.Lstat(parent); err == nil {
				break
			}
			parent = filepath.Dir(parent)
		}
		real, err := filepath.EvalSymlinks(parent)
		if err != nil {
			return "", err
		}
		if real != realRoot && !strings.HasPrefix(real, realRoot+string(filepath.Separator)) {
			return "", fmt.Errorf("images: tar entry %q leaves the tree through a link", n)
		}
		return p, nil
	}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("images: reading the image's files: %w", err)
		}
		p, err := inside(h.Name)
		if err != nil {
			return err
		}
		if p != root {
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
		}
		perm := os.FileMode(h.Mode) & os.ModePerm
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				return err
			}
			if err := os.Chmod(p, perm|0o700); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := writeExtracted(p, tr, perm); err != nil {
				return err
			}
		case tar.TypeSymlink:
			_ = os.Remove(p)
			if err := os.Symlink(h.Linkname, p); err != nil {
				return err
			}
		case tar.TypeLink:
			target, err := inside(h.Linkname)
			if err != nil {
				return err
			}
			_ = os.Remove(p)
			if err := os.Link(target, p); err != nil {
				return err
			}
		}
	}
}

func writeExtracted(p string, r io.Reader, perm os.FileMode) error {
	_ = os.Remove(p)
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, perm|0o200)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Chmod(p, perm|0o200)
}

// loader and libDir are the dynamic loader and the library directory of an
// amd64 Debian tree, relative to its root.
const (
	loader = "usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"
	libDir = "usr/lib/x86_64-linux-gnu"
)

// wrapped are the programs that get a wrapper when the tree has them.
var wrapped = []string{"redis-server", "redis-cli", "valkey-server", "valkey-cli"}

// writeWrappers writes into tmp a shell wrapper for each program of wrapped
// that tmp/rootfs/usr/bin has. Each names the tree by its final place, dir,
// and execs the program through the tree's loader by its own name, links
// not resolved: the loader passes that path on as argv[0], from which one
// binary decides to be the server or a checker (Debian's redis-server is a
// link to redis-check-rdb, Valkey's to valkey-check-rdb).
func writeWrappers(tmp, dir string) error {
	rootfs := filepath.Join(tmp, "rootfs")
	if _, err := os.Stat(filepath.Join(rootfs, loader)); err != nil {
		return fmt.Errorf("images: the tree has no loader: %w", err)
	}
	n := 0
	for _, prog := range wrapped {
		bin := "usr/bin/" + prog
		if _, err := os.Stat(filepath.Join(rootfs, bin)); err != nil {
			continue
		}
		script := fmt.Sprintf(`#!/bin/sh
# %s of the tree beside this file, run by the tree's own loader and libraries
# (written by localplane-servers; make bench-servers).
d=%s
exec "$d/%s" --library-path "$d/%s" "$d/%s" "$@"
`, prog, shellQuote(filepath.Join(dir, "rootfs")), loader, libDir, bin)
		if err := os.WriteFile(filepath.Join(tmp, prog), []byte(script), 0o755); err != nil {
			return err
		}
		n++
	}
	if n == 0 {
		return errors.New("images: the tree has none of " + strings.Join(wrapped, ", "))
	}
	return nil
}

// shellQuote quotes s for sh.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
