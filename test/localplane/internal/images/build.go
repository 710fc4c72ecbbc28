package images

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Options configure Build.
type Options struct {
	// BinDir holds bin/registry.
	BinDir string
	// Dir is the images cache (see Dir).
	Dir string
	// Images are the images to build when up to date is not enough.
	Images []Image
	// Jobs is how many images are made at once (2 when zero).
	Jobs int
	// Logf prints progress lines; Build calls it from one goroutine per
	// image, so it must be safe for concurrent use.
	Logf func(format string, args ...any)
}

// Build makes every image of o.Images whose stamp differs from the one it was
// last built with (or whose tags the registry lacks) and pushes it, with all
// its tags, into the registry storage in o.Dir, o.Jobs at a time, printing
// a line per image. It returns the first error after the other builds end.
func Build(ctx context.Context, o Options) error {
	if o.Jobs <= 0 {
		o.Jobs = 2
	}
	for _, d := range []string{"registry", "stamps", "work"} {
		if err := os.MkdirAll(filepath.Join(o.Dir, d), 0o755); err != nil {
			return err
		}
	}
	reg, err := StartRegistry(ctx, o.BinDir, filepath.Join(o.Dir, "registry"), filepath.Join(o.Dir, "work", "registry.log"), true)
	if err != nil {
		return err
	}
	defer reg.Stop()

	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
		sem  = make(chan struct{}, o.Jobs)
	)
	for _, img := range o.Images {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			if err := buildOne(ctx, o, reg.Addr, img); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("%s: %w", img.Name, err))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// buildOne builds and pushes img unless its stamp and tags are in place.
func buildOne(ctx context.Context, o Options, addr string, img Image) error {
	digests := map[string]string{}
	for _, f := range img.Files {
		if f.Source == "" {
			continue
		}
		d, err := fileDigest(f.Source)
		if err != nil {
			return err
		}
		digests[f.Source] = d
	}
	want := stamp(img, digests)
	stampPath := filepath.Join(o.Dir, "stamps", img.Name)
	if got, err := os.ReadFile(stampPath); err == nil {
		line := strings.Fields(string(got))
		if len(line) >= 2 && line[0] == want && tagged(addr, img.Repository, line[1:]) {
			o.Logf("images: %s is up to date (%s:%s)", img.Name, img.Repository, strings.Join(line[1:], ","))
			return nil
		}
	}
	o.Logf("images: building %s", img.Name)
	work, err := os.MkdirTemp(filepath.Join(o.Dir, "work"), img.Name+".")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	rootfs := filepath.Join(work, "rootfs")
	tags := slices.Clone(img.Tags)
	if img.Debian != nil {
		version, err := makeRootfs(ctx, img.Debian, rootfs, filepath.Join(o.Dir, "work", img.Name+".log"))
		if err != nil {
			return err
		}
		if version != "" {
			tags = append(tags, versionTags(img.Debian, version)...)
		}
	} else if err := os.MkdirAll(rootfs, 0o755); err != nil {
		return err
	}
	if err := writeFiles(rootfs, img.Files); err != nil {
		return err
	}
	if err := makeSymlinks(rootfs, img.Symlinks); err != nil {
		return err
	}
	if err := makeDirs(rootfs, img.Dirs); err != nil {
		return err
	}
	layerPath := filepath.Join(work, "layer.tar")
	if err := writeLayerFile(layerPath, rootfs); err != nil {
		return err
	}
	image, err := assemble(img, layerPath)
	if err != nil {
		return err
	}
	for _, tag := range tags {
		ref, err := name.ParseReference(addr+"/"+img.Repository+":"+tag, name.Insecure)
		if err != nil {
			return err
		}
		if err := remote.Write(ref, image, remote.WithContext(ctx)); err != nil {
			return fmt.Errorf("pushing %s: %w", ref, err)
		}
	}
	digest, err := image.Digest()
	if err != nil {
		return err
	}
	o.Logf("images: built %s: %s:%s %s", img.Name, img.Repository, strings.Join(tags, ","), digest)
	return os.WriteFile(stampPath, []byte(want+" "+strings.Join(tags, " ")+"\n"), 0o644)
}

// assemble is the OCI image of one layer (the uncompressed tar at layerPath,
// gzipped) with img's config, for linux/amd64.
func assemble(img Image, layerPath string) (v1.Image, error) {
	layer, err := tarball.LayerFromFile(layerPath, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	base := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	base = mutate.ConfigMediaType(base, types.OCIConfigJSON)
	withLayer, err := mutate.Append(base, mutate.Addendum{Layer: layer, MediaType: types.OCILayer})
	if err != nil {
		return nil, err
	}
	cfg, err := withLayer.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.Architecture, cfg.OS = "amd64", "linux"
	cfg.Created = v1.Time{Time: epoch}
	cfg.Config.Entrypoint = img.Entrypoint
	cfg.Config.Cmd = img.Cmd
	cfg.Config.User = img.User
	cfg.Config.WorkingDir = img.WorkingDir
	cfg.Config.Env = img.Env
	if len(img.Ports) > 0 {
		cfg.Config.ExposedPorts = map[string]struct{}{}
		for _, p := range img.Ports {
			cfg.Config.ExposedPorts[p] = struct{}{}
		}
	}
	return mutate.ConfigFile(withLayer, cfg)
}

// tagged reports whether the registry at addr has every tag of repository.
func tagged(addr, repository string, tags []string) bool {
	for _, tag := range tags {
		ref, err := name.ParseReference(addr+"/"+repository+":"+tag, name.Insecure)
		if err != nil {
			return false
		}
		if _, err := remote.Head(ref); err != nil {
			return false
		}
	}
	return len(tags) > 0
}

// writeFiles writes files into rootfs, owned by root.
func writeFiles(rootfs string, files []File) error {
	for _, f := range files {
		data := []byte(f.Data)
		if f.Source != "" {
			var err error
			if data, err = os.ReadFile(f.Source); err != nil {
				return err
			}
		}
		p := filepath.Join(rootfs, f.Path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, data, os.FileMode(f.Mode)); err != nil {
			return err
		}
		if err := os.Chmod(p, os.FileMode(f.Mode)); err != nil {
			return err
		}
	}
	return nil
}

// makeSymlinks makes each link path -> target in rootfs; the target must
// exist there (relative targets are resolved from the link's directory).
func makeSymlinks(rootfs string, links map[string]string) error {
	for path, target := range links {
		p := filepath.Join(rootfs, path)
		resolved := target
		if !filepath.IsAbs(target) {
			resolved = filepath.Join(filepath.Dir(path), target)
		}
		if _, err := os.Stat(filepath.Join(rootfs, resolved)); err != nil {
			return fmt.Errorf("link %s: target %s: %w", path, target, err)
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.Symlink(target, p); err != nil {
			return err
		}
	}
	return nil
}

// makeDirs makes each directory of dirs in rootfs (parents 0755, root's)
// with its mode and owner.
func makeDirs(rootfs string, dirs []Directory) error {
	for _, d := range dirs {
		p := filepath.Join(rootfs, d.Path)
		if err := os.MkdirAll(p, 0o755); err != nil {
			return err
		}
		mode := os.FileMode(d.Mode & 0o777)
		if d.Mode&0o1000 != 0 {
			mode |= os.ModeSticky
		}
		if err := os.Chmod(p, mode); err != nil {
			return err
		}
		if err := os.Chown(p, d.UID, d.GID); err != nil {
			return err
		}
	}
	return nil
}

func writeLayerFile(path, rootfs string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := writeLayer(f, rootfs); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// fileDigest is the hex sha256 of a file's content.
func fileDigest(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
