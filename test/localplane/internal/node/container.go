package node

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis-operator/redis-operator/test/localplane/internal/proctree"
)

// launcherScript is the first program (bash) of every container. It runs as root
// in the container's fresh mount and UTS namespaces (the process was
// created with CLONE_NEWNS|CLONE_NEWUTS, and Go makes "/" recursively
// private in a new mount namespace, so nothing propagates to the host). It
// sets the hostname, bind-mounts the volumes at their container paths
// (creating empty mount points where missing), changes to the working
// directory, reports success on fd 3, and execs the container's command,
// through setpriv when the pod asks for another user.
//
// A directory of the host that the container's user may not traverse but
// that holds a mount target (Debian's /etc/redis, say, with mode 0750) is
// first covered with an empty tmpfs, as the directory would be a fresh one
// in a real image; that hides only what the user could not reach anyway.
//
// Every mount source is opened before the first mount and bound through
// /proc/self/fd: a mount, of /tmp say, may hide the path of a later source
// (the plane's state directory may be under /tmp), but not an open one.
//
// Arguments: hostname workdir {kind src dst ro}... -- argv...
// where kind is d (directory bind), f (file bind) or t (shadow tmpfs,
// src "-").
const launcherScript = `set -e
user_path=$PATH
PATH=/usr/sbin:/usr/bin:/sbin:/bin
printf %s "$1" > /proc/sys/kernel/hostname
wd=$2
shift 2
# Open every source before mounting anything.
declare -a kinds srcs dsts ros
n=0
while [ "$1" != "--" ]; do
	kinds[n]=$1 dsts[n]=$3 ros[n]=$4
	if [ "$1" != t ]; then
		exec {fd}<"$2"
		srcs[n]=$fd
	fi
	shift 4
	n=$((n + 1))
done
shift
for ((i = 0; i < n; i++)); do
	dst=${dsts[i]}
	case ${kinds[i]} in
	t)
		mount -t tmpfs -o mode=0755 localplane-shadow "$dst"
		continue
		;;
	d) mkdir -p "$dst" ;;
	f)
		mkdir -p "$(dirname "$dst")"
		[ -e "$dst" ] || : > "$dst"
		;;
	esac
	fd=${srcs[i]}
	mount --no-canonicalize --bind "/proc/self/fd/$fd" "$dst"
	exec {fd}<&-
	if [ "${ros[i]}" = ro ]; then mount -o remount,bind,ro "$dst"; fi
done
mkdir -p "$wd"
cd "$wd"
printf ok >&3
exec 3>&-
PATH=$user_path
exec "$@"
`

// setprivPath is util-linux's setpriv, named by absolute path because it
// runs under the container's PATH.
var setprivPath = func() string {
	if p, err := exec.LookPath("setpriv"); err == nil {
		return p
	}
	return "/usr/bin/setpriv"
}()

// identity is the user a container runs as.
type identity struct {
	uid, gid *int64
	groups   []int64
}

// wrap prefixes argv with setpriv when the identity asks for a user, group
// or supplementary groups; root with no groups runs argv as it is.
func (id identity) wrap(argv []string) []string {
	if id.uid == nil && id.gid == nil && len(id.groups) == 0 {
		return argv
	}
	uid, gid := int64(0), int64(0)
	if id.uid != nil {
		uid = *id.uid
	}
	if id.gid != nil {
		gid = *id.gid
	}
	out := []string{setprivPath, "--reuid=" + strconv.FormatInt(uid, 10), "--regid=" + strconv.FormatInt(gid, 10)}
	if len(id.groups) == 0 {
		out = append(out, "--clear-groups")
	} else {
		gs := make([]string, len(id.groups))
		for i, g := range id.groups {
			gs[i] = strconv.FormatInt(g, 10)
		}
		out = append(out, "--groups="+strings.Join(gs, ","))
	}
	out = append(out, "--pdeathsig=keep", "--")
	return append(out, argv...)
}

// launchSpec is what starting one container process needs.
type launchSpec struct {
	runDir   string // where the pid record goes
	name     string // pid record name
	hostname string
	workDir  string
	mounts   []mountSpec
	id       identity
	argv     []string
	env      []string
	log      *os.File // opened read-write
	netns    string   // network namespace file to enter; empty for the host's
}

// launch starts a container process and returns once its volumes are
// mounted and its command is being executed, or with the launcher's error
// output if setting up failed.
func launch(s launchSpec) (*proctree.Process, error) {
	args := []string{"-c", launcherScript, "localplane-launcher", s.hostname, s.workDir}
	for _, dir := range shadowDirs(s.mounts, s.id) {
		args = append(args, "t", "-", dir, "rw")
	}
	for _, m := range s.mounts {
		kind, ro := "f", "rw"
		if m.dir {
			kind = "d"
		}
		if m.readOnly {
			ro = "ro"
		}
		args = append(args, kind, m.src, m.dst, ro)
	}
	args = append(args, "--")
	args = append(args, s.id.wrap(s.argv)...)

	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	// The log file itself is the process's stdout and stderr (a pipe
	// through this process would break, with SIGPIPE, once the node
	// restarts); setup errors are read back from it.
	offset, _ := s.log.Seek(0, io.SeekEnd)
	cmd := exec.Command("/bin/bash", args...)
	if s.netns != "" {
		// nsenter joins the namespace and execs bash (no fork: the
		// recorded pid stays the container's).
		cmd = exec.Command("nsenter", append([]string{"--net=" + s.netns, "--", "/bin/bash"}, args...)...)
	}
	cmd.Env = s.env
	cmd.Stdout, cmd.Stderr = s.log, s.log
	cmd.ExtraFiles = []*os.File{w}
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS | syscall.CLONE_NEWUTS}
	p, err := proctree.Start(s.runDir, s.name, cmd)
	w.Close()
	if err != nil {
		return nil, err
	}
	ok := make([]byte, 2)
	n, _ := io.ReadFull(r, ok)
	if n == 2 && string(ok) == "ok" {
		return p, nil
	}
	<-p.Done()
	out := make([]byte, 4096)
	n, _ = s.log.ReadAt(out, offset)
	return nil, fmt.Errorf("setting up the container failed (exit code %d): %s", p.ExitCode(), strings.TrimSpace(string(out[:n])))
}

// shadowDirs lists, shallowest first, the existing host directories above
// mount targets that id cannot traverse.
func shadowDirs(mounts []mountSpec, id identity) []string {
	if id.uid == nil || *id.uid == 0 {
		return nil
	}
	seen := map[string]bool{}
	var out []string
	for _, m := range mounts {
		for dir := filepath.Dir(m.dst); dir != "/"; dir = filepath.Dir(dir) {
			if seen[dir] {
				continue
			}
			seen[dir] = true
			st, err := os.Stat(dir)
			if err != nil || !st.IsDir() || traversable(st, id) {
				continue
			}
			out = append(out, dir)
		}
	}
	sort.Slice(out, func(i, j int) bool { return strings.Count(out[i], "/") < strings.Count(out[j], "/") })
	// A shadowed directory hides any deeper one.
	var top []string
	for _, d := range out {
		covered := false
		for _, t := range top {
			if strings.HasPrefix(d, t+"/") {
				covered = true
			}
		}
		if !covered {
			top = append(top, d)
		}
	}
	return top
}

// traversable reports whether id may search directory st (permission
// bits of its owner, group or others, as the kernel checks them).
func traversable(st os.FileInfo, id identity) bool {
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return true
	}
	mode := st.Mode().Perm()
	switch {
	case int64(sys.Uid) == *id.uid:
		return mode&0o100 != 0
	case id.inGroup(int64(sys.Gid)):
		return mode&0o010 != 0
	}
	return mode&0o001 != 0
}

func (id identity) inGroup(gid int64) bool {
	if id.gid != nil && *id.gid == gid || id.gid == nil && gid == 0 {
		return true
	}
	for _, g := range id.groups {
		if g == gid {
			return true
		}
	}
	return false
}

// limitedBuffer keeps the first max bytes written to it.
type limitedBuffer struct {
	buf *bytes.Buffer
	max int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := l.max - l.buf.Len(); room > 0 {
		l.buf.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

// execSpec is a command run inside a running container: in its mount and
// UTS namespaces, and its network namespace when the pod has one (through
// nsenter), in its working directory, with its environment and identity.
type execSpec struct {
	pid     int
	netns   bool // also enter the container's network namespace
	workDir string
	id      identity
	env     []string
	argv    []string
	stdin   io.Reader
	stdout  io.Writer
	stderr  io.Writer
	tracker *execTracker
}

// execTracker remembers the process groups of commands run in a container,
// so they end with it (as they would in a real container's cgroup).
type execTracker struct {
	mu    sync.Mutex
	pgids map[int]bool
}

func newExecTracker() *execTracker { return &execTracker{pgids: map[int]bool{}} }

func (t *execTracker) add(pgid int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pgids[pgid] = true
}

func (t *execTracker) remove(pgid int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.pgids, pgid)
}

func (t *execTracker) killAll() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for pgid := range t.pgids {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
}

// errExecTimeout is returned when an exec outlives its context.
var errExecTimeout = errors.New("command timed out")

// execIn runs s and returns its exit code. When ctx ends first the whole
// process group is killed and errExecTimeout returned.
func execIn(ctx context.Context, s execSpec) (int, error) {
	args := []string{"--target", strconv.Itoa(s.pid), "--mount", "--uts"}
	if s.netns {
		args = append(args, "--net")
	}
	args = append(args, "--wdns="+s.workDir, "--")
	args = append(args, s.id.wrap(s.argv)...)
	cmd := exec.Command("nsenter", args...)
	cmd.Env = s.env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = s.stdin, s.stdout, s.stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		return -1, err
	}
	if s.tracker != nil {
		s.tracker.add(cmd.Process.Pid)
		defer s.tracker.remove(cmd.Process.Pid)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return exit.ExitCode(), nil
		}
		if err != nil {
			return -1, err
		}
		return 0, nil
	case <-ctx.Done():
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		return -1, errExecTimeout
	}
}
