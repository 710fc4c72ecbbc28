package node

import (
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
)

// Image describes how a container image is run with local binaries: the
// image's own entrypoint, default command and working directory (from the
// image's config), and which local binary stands in for each executable in
// it.
type Image struct {
	// Name is the image family, used in messages ("redis", "valkey", ...).
	Name string
	// Binaries maps an executable's base name in the image to a local path.
	Binaries map[string]string
	// Entrypoint and Cmd are the image's ENTRYPOINT and CMD.
	Entrypoint []string
	Cmd        []string
	// WorkingDir is the image's WORKDIR.
	WorkingDir string
	// User is the image's numeric USER (nil: root), the uid a container
	// runs as when its security context names none.
	User *int64
	// Env is the image's ENV, under the container's own env.
	Env map[string]string
	// Install says how to get the binaries ("apt-get install redis-server").
	Install string
	// copied are the Binaries that are this checkout's builds rather than
	// the machine's packages: the node runs copies of them (copyBinaries).
	copied bool
	// serverPrefix is the server binary that the image's
	// docker-entrypoint.sh puts in front of arguments starting with "-" or
	// ending in ".conf" (redis and valkey images do this).
	serverPrefix string
	// binDir is the image's directory of executables that the node mounts
	// (linkBinaries), "" for none; hostBinDir is its host side once linked.
	binDir, hostBinDir string
	// init is an init process the image's entrypoint starts first (tini
	// --), dropped from argv.
	init []string
}

// ImageError is returned for images the local plane cannot run; the pod's
// container then waits with reason ErrImagePull and this message.
type ImageError struct{ msg string }

func (e *ImageError) Error() string { return e.msg }

const redisServer, redisCLI = "/usr/bin/redis-server", "/usr/bin/redis-cli"

// operatorUser is the USER of the operator's image (the Dockerfile's
// distroless nonroot user).
const operatorUser int64 = 65532

// LookupImage maps an image reference to its local stand-in: repositories
// ending in "redis-operator" run binDir/redis-operator (this checkout's
// operator, built by `go build ./cmd/redis-operator`) as the Dockerfile's
// image does (entrypoint /redis-operator, user 65532), or
// binDir/redis-operator-TAG when the image's tag is TAG and that file
// exists (another build, such as the release an upgrade starts from);
// repositories
// ending in "redis" or "valkey" run the local redis-server (Debian
// redis-server; valkey images get Redis 7.0, not Valkey), repositories
// ending in "redis_exporter" or "redis-exporter" run Debian's
// prometheus-redis-exporter (the same oliver006 exporter); repositories
// ending in "argoproj/argocd" run bin/argocd and bin/kustomize
// (argocdImage).
func LookupImage(ref, binDir string) (*Image, error) {
	repo := repository(ref)
	switch {
	case strings.HasSuffix(repo, "argoproj/argocd"):
		return argocdImage(binDir), nil
	case strings.HasSuffix(repo, "redis-operator"):
		user := operatorUser
		bin := filepath.Join(binDir, "redis-operator")
		if tag := tag(ref); tag != "" {
			if st, err := os.Stat(bin + "-" + tag); err == nil && st.Mode().IsRegular() {
				bin += "-" + tag
			}
		}
		return &Image{
			Name:       "redis-operator",
			Binaries:   map[string]string{"redis-operator": bin},
			Entrypoint: []string{"/redis-operator"},
			WorkingDir: "/",
			User:       &user,
			copied:     true,
			Install:    "go build -o bin/redis-operator ./cmd/redis-operator",
		}, nil
	case strings.HasSuffix(repo, "redis_exporter"), strings.HasSuffix(repo, "redis-exporter"):
		const exporter = "/usr/bin/prometheus-redis-exporter"
		return &Image{
			Name:       "redis_exporter",
			Binaries:   map[string]string{"redis_exporter": exporter},
			Entrypoint: []string{"/redis_exporter"},
			WorkingDir: "/",
			Install:    "apt-get install prometheus-redis-exporter",
		}, nil
	case strings.HasSuffix(repo, "redis"):
		return &Image{
			Name: "redis",
			Binaries: map[string]string{
				"redis-server": redisServer, "redis-cli": redisCLI,
				"redis-sentinel": "/usr/bin/redis-sentinel", "redis-benchmark": "/usr/bin/redis-benchmark",
				"redis-check-aof": "/usr/bin/redis-check-aof", "redis-check-rdb": "/usr/bin/redis-check-rdb",
			},
			Entrypoint:   []string{"docker-entrypoint.sh"},
			Cmd:          []string{"redis-server"},
			WorkingDir:   "/data",
			Install:      "apt-get install redis-server",
			serverPrefix: "redis-server",
		}, nil
	case strings.HasSuffix(repo, "valkey"):
		return &Image{
			Name: "valkey",
			Binaries: map[string]string{
				"valkey-server": redisServer, "valkey-cli": redisCLI,
				"redis-server": redisServer, "redis-cli": redisCLI,
			},
			Entrypoint:   []string{"docker-entrypoint.sh"},
			Cmd:          []string{"valkey-server"},
			WorkingDir:   "/data",
			Install:      "apt-get install redis-server",
			serverPrefix: "valkey-server",
		}, nil
	}
	return nil, &ImageError{msg: fmt.Sprintf(
		"image %q has no local stand-in on the local plane (known: repositories ending in redis-operator, redis, valkey, redis_exporter, argoproj/argocd)", ref)}
}

// copyBinaries replaces each of a copied image's Binaries with the path
// sync returns for it (Node.syncImageBinary); other images are left as
// they are.
func (im *Image) copyBinaries(sync func(src string) (string, error)) error {
	if !im.copied {
		return nil
	}
	for name, src := range im.Binaries {
		dst, err := sync(src)
		if err != nil {
			return fmt.Errorf("image %s: %s: %w (build it: %s)", im.Name, name, err, im.Install)
		}
		im.Binaries[name] = dst
	}
	return nil
}

// tag returns an image reference's tag, "" when it has none:
// "ghcr.io/o/redis-operator:v0.2.0@sha256:..." -> "v0.2.0".
func tag(ref string) string {
	if i := strings.IndexByte(ref, '@'); i >= 0 {
		ref = ref[:i]
	}
	if i := strings.LastIndexByte(ref, ':'); i > strings.LastIndexByte(ref, '/') {
		return ref[i+1:]
	}
	return ""
}

// repository strips the tag and digest from an image reference:
// "docker.io/library/redis:7.0@sha256:..." -> "docker.io/library/redis".
func repository(ref string) string {
	if i := strings.IndexByte(ref, '@'); i >= 0 {
		ref = ref[:i]
	}
	if i := strings.LastIndexByte(ref, ':'); i > strings.LastIndexByte(ref, '/') {
		ref = ref[:i]
	}
	return strings.ToLower(ref)
}

// Argv computes the process argv for a container as a container runtime
// does (command replaces ENTRYPOINT, args replace CMD; see "Define a Command
// and Arguments for a Container" in the Kubernetes docs), with the image's
// docker-entrypoint.sh behaviour applied, and argv[0] resolved to a local
// binary.
func (im *Image) Argv(command, args []string) ([]string, error) {
	var argv []string
	switch {
	case len(command) > 0:
		argv = append(append(argv, command...), args...)
	case len(args) > 0:
		argv = append(append(argv, im.Entrypoint...), args...)
	default:
		argv = append(append(argv, im.Entrypoint...), im.Cmd...)
	}
	if len(argv) > 0 && path.Base(argv[0]) == "docker-entrypoint.sh" && im.serverPrefix != "" {
		argv = argv[1:]
		if len(argv) == 0 || strings.HasPrefix(argv[0], "-") || strings.HasSuffix(argv[0], ".conf") {
			argv = append([]string{im.serverPrefix}, argv...)
		}
	}
	argv = im.dropInit(argv)
	if len(argv) == 0 {
		return nil, fmt.Errorf("image %s has no entrypoint and the container sets no command", im.Name)
	}
	bin, err := im.Resolve(argv[0])
	if err != nil {
		return nil, err
	}
	argv[0] = im.containerPath(bin)
	return argv, nil
}

// Resolve maps an executable named in the image to a local path: the
// image's own binaries through Binaries, anything else (sh, cat, ...) from
// the local PATH, since the images in question ship a shell and coreutils.
func (im *Image) Resolve(name string) (string, error) {
	if bin, ok := im.Binaries[path.Base(name)]; ok {
		if _, err := os.Stat(bin); err != nil {
			return "", fmt.Errorf("%s (standing in for %s in image %s) is not installed: %s", bin, name, im.Name, im.Install)
		}
		return bin, nil
	}
	if strings.HasPrefix(name, "/") {
		if _, err := os.Stat(name); err == nil {
			return name, nil
		}
	}
	bin, err := exec.LookPath(path.Base(name))
	if err != nil {
		return "", fmt.Errorf("executable %q of image %s has no local stand-in: %w", name, im.Name, err)
	}
	return bin, nil
}
