package images

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// aptSources are the files whose first Debian archive URI is the mirror that
// debootstrap uses: the one the machine's own apt uses.
var aptSources = []string{"/etc/apt/sources.list.d/debian.sources", "/etc/apt/sources.list"}

// debianMirror returns the first archive URI of the machine's apt sources
// (deb822 "URIs:" or one-line "deb URI suite ..."), skipping security
// archives, or an error naming the files read.
func debianMirror() (string, error) {
	for _, path := range aptSources {
		data, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			var uri string
			switch {
			case len(fields) >= 2 && fields[0] == "URIs:":
				uri = fields[1]
			case len(fields) >= 3 && fields[0] == "deb" && !strings.HasPrefix(fields[1], "["):
				uri = fields[1]
			}
			if uri != "" && !strings.Contains(uri, "security") {
				return uri, nil
			}
		}
	}
	return "", fmt.Errorf("images: no Debian archive in %s", strings.Join(aptSources, " or "))
}

// makeRootfs runs debootstrap --variant=minbase of d.Suite with d.Packages
// into dir (which must not exist), then trims what an image does not need
// (apt's lists and caches, documentation, logs), gives d.ServerUser (if any)
// uid and gid serverUID with its files, and creates /data for it, and makes
// d.Accounts. It returns the upstream version of d.VersionFrom ("7.0.15"),
// or "" without one. The debootstrap log is written to log.
func makeRootfs(ctx context.Context, d *Debian, dir, log string) (string, error) {
	mirror, err := debianMirror()
	if err != nil {
		return "", err
	}
	logFile, err := os.Create(log)
	if err != nil {
		return "", err
	}
	defer logFile.Close()
	run := func(name string, args ...string) error {
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Stdout, cmd.Stderr = logFile, logFile
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive", "LC_ALL=C")
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("%s %s: %w (log: %s)", name, strings.Join(args, " "), err, log)
		}
		return nil
	}
	if err := run("debootstrap", "--variant=minbase", "--include="+strings.Join(d.Packages, ","), d.Suite, dir, mirror); err != nil {
		return "", err
	}
	if user := d.ServerUser; user != "" {
		uid := fmt.Sprint(serverUID)
		// Renumber the server's account; its files follow (usermod moves
		// only the home directory's).
		script := fmt.Sprintf(`set -e
old_uid=$(id -u %[1]s); old_gid=$(id -g %[1]s)
groupmod -g %[2]s %[1]s
usermod -u %[2]s -g %[2]s %[1]s
find / -xdev \( -uid "$old_uid" -o -gid "$old_gid" \) -exec chown -h %[2]s:%[2]s '{}' +
mkdir -p /data && chown %[2]s:%[2]s /data && chmod 0755 /data`, user, uid)
		if err := run("chroot", dir, "sh", "-c", script); err != nil {
			return "", err
		}
	}
	for _, a := range d.Accounts {
		if err := run("chroot", dir, "groupadd", "--system", "--gid", fmt.Sprint(a.ID), a.Name); err != nil {
			return "", err
		}
		if err := run("chroot", dir, "useradd", "--system", "--uid", fmt.Sprint(a.ID), "--gid", a.Name,
			"--home-dir", a.Home, "--no-create-home", a.Name); err != nil {
			return "", err
		}
	}
	var version []byte
	if d.VersionFrom != "" {
		if version, err = exec.CommandContext(ctx, "chroot", dir, "dpkg-query", "-W", "-f=${Version}", d.VersionFrom).Output(); err != nil {
			return "", fmt.Errorf("images: version of %s in %s: %w", d.VersionFrom, dir, err)
		}
	}
	for _, trim := range []string{"var/cache/apt", "var/lib/apt/lists", "usr/share/doc", "usr/share/man", "usr/share/info", "var/log", "debootstrap"} {
		p := filepath.Join(dir, trim)
		if err := os.RemoveAll(p); err != nil {
			return "", err
		}
	}
	for _, keep := range []string{"var/cache/apt/archives/partial", "var/lib/apt/lists/partial", "var/log"} {
		if err := os.MkdirAll(filepath.Join(dir, keep), 0o755); err != nil {
			return "", err
		}
	}
	if d.VersionFrom == "" {
		return "", nil
	}
	return upstreamVersion(string(version))
}

// upstreamVersion is the upstream part of a Debian version: "5:7.0.15-1~deb12u6"
// is 7.0.15.
func upstreamVersion(debian string) (string, error) {
	v := debian
	if i := strings.Index(v, ":"); i >= 0 {
		v = v[i+1:]
	}
	if i := strings.LastIndex(v, "-"); i >= 0 {
		v = v[:i]
	}
	if i := strings.IndexAny(v, "+~"); i >= 0 {
		v = v[:i]
	}
	if strings.Count(v, ".") < 1 {
		return "", errors.New("images: no upstream version in " + debian)
	}
	return v, nil
}

// versionTags are the tags an image gets for d.VersionFrom's upstream
// version: the version itself and its major.minor ("7.0.15" and "7.0"), each
// after d.TagPrefix; the version alone with d.FullVersionOnly.
func versionTags(d *Debian, version string) []string {
	parts := strings.Split(version, ".")
	if len(parts) < 3 || d.FullVersionOnly {
		return []string{d.TagPrefix + version}
	}
	return []string{d.TagPrefix + version, d.TagPrefix + parts[0] + "." + parts[1]}
}
