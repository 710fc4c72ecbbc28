// Package images builds, with no registry outside this machine and no
// container engine, the images the local plane's real nodes run, and serves
// them from a real OCI registry (CNCF Distribution, bin/registry) on
// 127.0.0.1, to which containerd's mirrors send docker.io, registry.k8s.io,
// ghcr.io and quay.io. Manifests keep the names users write (redis:7.0.15,
// valkey/valkey:8.1, registry.k8s.io/pause:3.10), and pulls, pull policies
// and tags are real.
//
// The operator's image carries this checkout's static binary on the layout
// of the Dockerfile's distroless base, under the name its kustomize
// overlays' Deployment gives it, so an overlay applies unchanged.
//
// Redis and Valkey images are Debian rootfs trees (debootstrap
// --variant=minbase of the suite that ships the server, from the archive the
// machine's apt sources name) with the server's packages, laid out as the
// official images are: user and group 999 for the server, /data its working
// directory, a docker-entrypoint.sh that prepends the server to option
// arguments and drops root.
//
// The other images the e2e suite's pods run are made the same way, named as
// their users' manifests name them: Argo CD's (quay.io/argoproj/argocd, the
// tag its install manifests name) is a Debian bookworm rootfs with git,
// GnuPG, the OpenSSH client and tini, carrying bin/argocd and bin/kustomize
// on the layout of Argo CD's Dockerfile; redis_exporter's
// (oliver006/redis_exporter, tagged v<version> with the upstream version of
// Debian's prometheus-redis-exporter) is a bookworm minbase rootfs with that
// package and /redis_exporter linked to its binary. ExtraOperatorImage makes
// operator images outside the catalog (an earlier release, for the upgrade
// scenario), each with a stamp of its own.
//
// Images are kept in the registry's storage in the per-user cache (Dir) and
// rebuilt only when their definition changes (a stamp per image); see
// Build. A read-only registry serving that storage (the plane's) serves
// what Build pushes while it runs.
package images

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/go-containerregistry/pkg/name"
)

// Image is one image that Build makes.
type Image struct {
	// Name is the image's short name in the catalog and on the command line
	// ("redis-7.0").
	Name string
	// Repository is the path under the registry host, as Docker Hub
	// normalizes it ("library/redis", "valkey/valkey", "pause").
	Repository string
	// Debian, when set, makes the rootfs with debootstrap.
	Debian *Debian
	// Files are extra regular files written into the rootfs (or, without
	// Debian, the whole rootfs), by path inside the image.
	Files []File
	// Symlinks are symbolic links made in the rootfs, path -> target.
	Symlinks map[string]string
	// Dirs are directories made in the rootfs with their own mode and
	// owner.
	Dirs []Directory `json:",omitempty"`
	// Tags are the image's tags. With Debian, VersionFrom's package version
	// adds its upstream version ("8.0.2") and its major.minor ("8.0").
	Tags []string
	// Entrypoint, Cmd, User, WorkingDir, Env and Ports are the image config.
	Entrypoint []string
	Cmd        []string
	User       string
	WorkingDir string
	Env        []string
	Ports      []string
}

// Debian says how debootstrap makes an image's rootfs.
type Debian struct {
	// Suite is the Debian release ("bookworm", "trixie").
	Suite string
	// Packages are installed on top of minbase.
	Packages []string
	// VersionFrom names the package whose upstream version tags the image.
	VersionFrom string
	// ServerUser is the account the server's package creates ("redis",
	// "valkey"): it is given uid and gid 999, as the official images have,
	// and /data is made for it. Empty for images that are not servers.
	ServerUser string
	// TagPrefix goes before VersionFrom's version in the image's tags
	// ("v": v1.45.0, as the upstream project tags its images).
	TagPrefix string `json:",omitempty"`
	// FullVersionOnly tags the image with the full version alone, without
	// major.minor, for upstreams that publish no such tag.
	FullVersionOnly bool `json:",omitempty"`
	// Accounts are made after the packages are installed (the image's
	// own user, which no package creates).
	Accounts []Account `json:",omitempty"`
}

// Account is a system user and its group of the same name and id, with a
// home directory that is not created (Dirs makes it with its owner).
type Account struct {
	Name string
	ID   int
	Home string
}

// File is a file of an image.
type File struct {
	Path string // absolute path in the image
	Mode int64  // permission bits
	// Source is a file on this machine to copy; Data is the content when
	// Source is empty.
	Source string
	Data   string
}

// Directory is a directory of an image.
type Directory struct {
	Path string // absolute path in the image
	Mode int64  // permission bits, 0o1000 the sticky bit
	UID  int
	GID  int
}

// serverUID is the uid and gid of the server's user in the official redis and
// valkey images (and the operator's runAsUser for Redis pods).
const serverUID = 999

// entrypoint is the Redis and Valkey images' docker-entrypoint.sh, behaving
// as the official images' does: arguments that start with "-" or end in
// ".conf" get the server prepended, and the server started as root drops to
// its own user (999) after taking ownership of the working directory.
const entrypoint = `#!/bin/sh
set -e
server=redis-server
command -v valkey-server >/dev/null 2>&1 && server=valkey-server
if [ "${1#-}" != "$1" ] || [ "${1%.conf}" != "$1" ]; then
	set -- "$server" "$@"
fi
case "$1" in
redis-server|valkey-server)
	if [ "$(id -u)" = 0 ]; then
		find . \! -user 999 -exec chown 999:999 '{}' +
		exec setpriv --reuid=999 --regid=999 --init-groups "$0" "$@"
	fi
	umask 0077
	;;
esac
exec "$@"
`

func serverImage(name, repo, suite, cmd, user string, packages ...string) Image {
	return Image{
		Name:       name,
		Repository: repo,
		Debian:     &Debian{Suite: suite, Packages: packages, VersionFrom: packages[0], ServerUser: user},
		Files:      []File{{Path: "/usr/local/bin/docker-entrypoint.sh", Mode: 0o755, Data: entrypoint}},
		Entrypoint: []string{"docker-entrypoint.sh"},
		Cmd:        []string{cmd},
		WorkingDir: "/data",
		Env:        []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
		Ports:      []string{"6379/tcp"},
	}
}

// Sources are the files of this machine and checkout that images carry.
type Sources struct {
	// Pause is the static pause binary (cmd/pause).
	Pause string
	// Operator is the operator's static binary (cmd/redis-operator built
	// with CGO_ENABLED=0), and OperatorImage the reference it is pushed as:
	// the image its kustomize overlays' Deployment names
	// ("ghcr.io/redis-operator/redis-operator:v0.1.0").
	Operator      string
	OperatorImage string
	// ArgoCD is bin/argocd (hack/tools/argocd: Argo CD's components in one
	// static binary, chosen by the name it runs under), Kustomize
	// bin/kustomize (what the repo-server runs), and ArgoCDImage the
	// reference Argo CD's install manifests name
	// ("quay.io/argoproj/argocd:v3.2.6"). Without ArgoCDImage the catalog
	// has no Argo CD image (a build of other images needs no bin/argocd).
	ArgoCD      string
	Kustomize   string
	ArgoCDImage string
}

// Catalog is every image `make images` builds.
func Catalog(src Sources) ([]Image, error) {
	operator, err := operatorImage(src.OperatorImage, src.Operator)
	if err != nil {
		return nil, err
	}
	catalog := []Image{
		{
			Name:       "pause",
			Repository: "pause",
			Tags:       []string{"3.10"},
			Files:      []File{{Path: "/pause", Mode: 0o755, Source: src.Pause}},
			Entrypoint: []string{"/pause"},
			User:       "65535:65535",
		},
		// Redis 7.0 is bookworm's; 8.0 and Valkey 8.1 are trixie's (the
		// next Debian release, same archive).
		serverImage("redis-7.0", "library/redis", "bookworm", "redis-server", "redis", "redis-server", "redis-tools"),
		serverImage("redis-8.0", "library/redis", "trixie", "redis-server", "redis", "redis-server", "redis-tools"),
		valkey,
		operator,
		redisExporter,
	}
	if src.ArgoCDImage == "" {
		return catalog, nil
	}
	argocd, err := argocdImage(src.ArgoCDImage, src.ArgoCD, src.Kustomize)
	if err != nil {
		return nil, err
	}
	return append(catalog, argocd), nil
}

// nonrootUID is the uid and gid of the nonroot user of
// gcr.io/distroless/static:nonroot, the operator image's user.
const nonrootUID = 65532

// caBundle is the machine's CA bundle, which the operator image carries
// where distroless has its own.
const caBundle = "/etc/ssl/certs/ca-certificates.crt"

// operatorImage is the operator's image as the Dockerfile's runtime stage
// makes it: the static binary at /redis-operator on
// gcr.io/distroless/static:nonroot's layout (root, nobody and nonroot in
// /etc/passwd and /etc/group, the CA bundle, /tmp with the sticky bit,
// nonroot's home), run as 65532:65532. Its stamp follows the binary's
// content, so a source change rebuilds it: one copy and one layer, no
// debootstrap. ref names its registry path and tag.
func operatorImage(ref, binary string) (Image, error) {
	return operatorImageNamed("redis-operator", ref, binary)
}

// ExtraOperatorImage is an operator image outside the catalog: binary (a
// static build of the operator, an earlier release's say) on the same
// layout, pushed as ref. Its catalog name, and so its stamp, is
// redis-operator-<tag>: building it leaves the catalog's operator image
// alone.
func ExtraOperatorImage(ref, binary string) (Image, error) {
	tag, err := name.NewTag(ref)
	if err != nil {
		return Image{}, fmt.Errorf("images: the operator image %q: %w", ref, err)
	}
	return operatorImageNamed("redis-operator-"+tag.TagStr(), ref, binary)
}

func operatorImageNamed(imageName, ref, binary string) (Image, error) {
	tag, err := name.NewTag(ref)
	if err != nil {
		return Image{}, fmt.Errorf("images: the operator image %q: %w", ref, err)
	}
	if binary == "" {
		return Image{}, errors.New("images: no operator binary given")
	}
	return Image{
		Name:       imageName,
		Repository: tag.RepositoryStr(),
		Tags:       []string{tag.TagStr()},
		Files: []File{
			{Path: "/redis-operator", Mode: 0o755, Source: binary},
			{Path: caBundle, Mode: 0o644, Source: caBundle},
			{Path: "/etc/passwd", Mode: 0o644, Data: "root:x:0:0:root:/root:/sbin/nologin\n" +
				"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n" +
				"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"},
			{Path: "/etc/group", Mode: 0o644, Data: "root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n"},
		},
		Dirs: []Directory{
			{Path: "/tmp", Mode: 0o1777},
			{Path: "/root", Mode: 0o700},
			{Path: "/home/nonroot", Mode: 0o700, UID: nonrootUID, GID: nonrootUID},
		},
		Entrypoint: []string{"/redis-operator"},
		User:       fmt.Sprintf("%d:%d", nonrootUID, nonrootUID),
		WorkingDir: "/home/nonroot",
		Env:        []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "SSL_CERT_FILE=" + caBundle},
	}, nil
}

// valkey is the Valkey 8.1 image. Valkey's own `make install`, which the
// official image runs, also installs its programs under their Redis names
// (redis-server, redis-cli, ...); Debian trixie has no package for those
// links, so the image makes them.
var valkey = func() Image {
	img := serverImage("valkey-8.1", "valkey/valkey", "trixie", "valkey-server", "valkey", "valkey-server", "valkey-tools")
	img.Symlinks = map[string]string{}
	for _, p := range []string{"server", "cli", "benchmark", "check-aof", "check-rdb"} {
		img.Symlinks["/usr/bin/redis-"+p] = "valkey-" + p
	}
	return img
}()

// argocdUID is the uid and gid of the argocd user of Argo CD's image.
const argocdUID = 999

// argocdComponents are the names bin/argocd runs under (hack/tools/argocd
// dispatches on its argv[0]), links to /usr/local/bin/argocd as in Argo CD's
// image.
var argocdComponents = []string{"argocd-application-controller", "argocd-repo-server", "argocd-applicationset-controller"}

// argocdImage is Argo CD's image (ref, "quay.io/argoproj/argocd:v3.2.6") as
// its Dockerfile lays it out, on Debian bookworm instead of Ubuntu: git,
// GnuPG, the OpenSSH client and tini from Debian's packages (git-lfs,
// helm and Argo CD's gpg and git wrapper scripts are not carried: the e2e
// suite turns GnuPG off); bin/argocd at /usr/local/bin/argocd with the
// components' names linked to it, bin/kustomize beside it; user argocd
// (999, home /home/argocd, group root may write it), /app/config's mount
// points, /etc/ssh/ssh_known_hosts a link to the ConfigMap's copy; run by
// tini as 999 in /home/argocd. Argo CD's manifests give each container's
// program as args (/usr/local/bin/argocd-repo-server) or command
// (argocd admin redis-initial-password, /bin/cp -n /usr/local/bin/argocd
// ...), so the image runs them as shipped.
func argocdImage(ref, argocd, kustomize string) (Image, error) {
	tag, err := name.NewTag(ref)
	if err != nil {
		return Image{}, fmt.Errorf("images: the Argo CD image %q: %w", ref, err)
	}
	if argocd == "" || kustomize == "" {
		return Image{}, errors.New("images: Argo CD's image needs bin/argocd and bin/kustomize (make tools)")
	}
	links := map[string]string{"/etc/ssh/ssh_known_hosts": "/app/config/ssh/ssh_known_hosts"}
	for _, c := range argocdComponents {
		links["/usr/local/bin/"+c] = "/usr/local/bin/argocd"
	}
	return Image{
		Name:       "argocd",
		Repository: tag.RepositoryStr(),
		Tags:       []string{tag.TagStr()},
		Debian: &Debian{
			Suite:    "bookworm",
			Packages: []string{"git", "gnupg", "openssh-client", "tini", "ca-certificates", "tzdata"},
			Accounts: []Account{{Name: "argocd", ID: argocdUID, Home: "/home/argocd"}},
		},
		Files: []File{
			{Path: "/usr/local/bin/argocd", Mode: 0o755, Source: argocd},
			{Path: "/usr/local/bin/kustomize", Mode: 0o755, Source: kustomize},
			{Path: "/app/config/ssh/ssh_known_hosts", Mode: 0o644},
		},
		Symlinks: links,
		Dirs: []Directory{
			{Path: "/home/argocd", Mode: 0o775, UID: argocdUID, GID: 0},
			{Path: "/app/config/tls", Mode: 0o755},
			{Path: "/app/config/gpg/source", Mode: 0o755},
			{Path: "/app/config/gpg/keys", Mode: 0o700, UID: argocdUID, GID: 0},
		},
		Entrypoint: []string{"/usr/bin/tini", "--"},
		User:       fmt.Sprint(argocdUID),
		WorkingDir: "/home/argocd",
		Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
			"ARGOCD_USER_ID=999", "USER=argocd", "HOME=/home/argocd"},
	}, nil
}

// exporterUID is the uid and gid the official redis_exporter image runs as.
const exporterUID = 59000

// redisExporter is redis_exporter's image, oliver006/redis_exporter, tagged
// as oliver006 tags it (v<version>, no major.minor tag) with the upstream
// version of Debian bookworm's prometheus-redis-exporter (1.45.0, older
// than the operator's default v1.67.0: bookworm has no newer). The
// official image is the static binary at /redis_exporter on scratch, run
// as 59000:59000; Debian's binary is dynamically linked, so this one is a
// minbase rootfs with the package and /redis_exporter a link to its
// binary.
var redisExporter = Image{
	Name:       "redis-exporter",
	Repository: "oliver006/redis_exporter",
	Debian: &Debian{
		Suite:           "bookworm",
		Packages:        []string{"prometheus-redis-exporter"},
		VersionFrom:     "prometheus-redis-exporter",
		TagPrefix:       "v",
		FullVersionOnly: true,
	},
	Symlinks:   map[string]string{"/redis_exporter": "/usr/bin/prometheus-redis-exporter"},
	Entrypoint: []string{"/redis_exporter"},
	User:       fmt.Sprintf("%d:%d", exporterUID, exporterUID),
	Env:        []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
	Ports:      []string{"9121/tcp"},
}

// builderVersion changes whenever the way images are made changes, so that
// every image is rebuilt.
const builderVersion = "1"

// stamp identifies what an image is made of: its definition, the content of
// its source files (digests, given by path) and the builder's version.
func stamp(img Image, sourceDigests map[string]string) string {
	h := sha256.New()
	def, err := json.Marshal(img)
	if err != nil {
		panic(fmt.Sprintf("images: marshalling %s: %v", img.Name, err)) // plain data: cannot fail
	}
	fmt.Fprintf(h, "builder %s\n%s\n", builderVersion, def)
	for _, f := range img.Files {
		if f.Source != "" {
			fmt.Fprintf(h, "%s %s\n", f.Path, sourceDigests[f.Source])
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}
