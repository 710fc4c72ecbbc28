package realnode

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cgroupRoot is node name's cgroup, relative to each hierarchy's root, and
// the kubelet's --cgroup-root: /localplane/<id>/<name>, id being a hash of
// the state directory, so that nodes of the same name in two planes never
// share one.
func cgroupRoot(stateDir, name string) string {
	sum := sha256.Sum256([]byte(stateDir))
	return "/localplane/" + hex.EncodeToString(sum[:4]) + "/" + name
}

// hierarchies lists the mount points of the machine's cgroup hierarchies
// (each v1 controller's, named ones, and the unified one of a hybrid
// set-up), and the one of the v1 pids controller, where the node's
// processes are found (every process of the node is in the node's cgroup
// there: the kubelet and containerd are put there, shims inherit
// containerd's, and runc puts containers in the kubelet's pod cgroups
// below it in every hierarchy). A machine with cgroup v2 only is not
// supported.
func hierarchies() (all []string, track string, err error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		sep := slices.Index(fields, "-")
		if sep < 0 || sep+3 >= len(fields) || len(fields) < 5 {
			continue
		}
		fsType, superOpts := fields[sep+1], fields[sep+3]
		if fsType != "cgroup" && fsType != "cgroup2" {
			continue
		}
		mount := unescapeMount(fields[4])
		all = append(all, mount)
		if fsType == "cgroup" && slices.Contains(strings.Split(superOpts, ","), "pids") {
			track = mount
		}
	}
	if err := sc.Err(); err != nil {
		return nil, "", err
	}
	if track == "" {
		return nil, "", errors.New("realnode: no cgroup v1 hierarchy with the pids controller (real nodes need cgroup v1)")
	}
	return all, track, nil
}

// cgroups is a node's cgroup tree.
type cgroups struct {
	root  string // relative, as cgroupRoot
	track string // the pids hierarchy's mount point
}

// procs is the cgroup.procs file of the node's child cgroup sub in the
// pids hierarchy.
func (c cgroups) procs(sub string) string {
	return filepath.Join(c.track, c.root, sub, "cgroup.procs")
}

// makeCgroups creates root in every hierarchy (the kubelet checks that its
// cgroup root exists), with the cpuset controller's CPUs and memory nodes
// copied down from the parent at each new level (a v1 cpuset starts
// empty), and the child cgroups containerd and kubelet in the pids
// hierarchy.
func makeCgroups(root string) (cgroups, error) {
	all, track, err := hierarchies()
	if err != nil {
		return cgroups{}, err
	}
	for _, h := range all {
		dir := h
		for _, part := range strings.Split(strings.Trim(root, "/"), "/") {
			parent := dir
			dir = filepath.Join(dir, part)
			if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
				return cgroups{}, fmt.Errorf("realnode: cgroup: %w", err)
			}
			for _, file := range []string{"cpuset.cpus", "cpuset.mems"} {
				if err := copyIfEmpty(filepath.Join(parent, file), filepath.Join(dir, file)); err != nil {
					return cgroups{}, fmt.Errorf("realnode: cgroup: %w", err)
				}
			}
		}
	}
	for _, sub := range []string{"containerd", "kubelet"} {
		if err := os.Mkdir(filepath.Join(track, root, sub), 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return cgroups{}, fmt.Errorf("realnode: cgroup: %w", err)
		}
	}
	return cgroups{root: root, track: track}, nil
}

// copyIfEmpty writes from's content to to when to exists and is empty;
// files that do not exist (not the cpuset hierarchy) are skipped.
func copyIfEmpty(from, to string) error {
	cur, err := os.ReadFile(to)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil || strings.TrimSpace(string(cur)) != "" {
		return err
	}
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, 0o644)
}

// pidsUnder lists the processes in cgroup dir (a path in the pids
// hierarchy) and all its descendants.
func pidsUnder(dir string) []int {
	var pids []int
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
		return nil
	})
	return pids
}

// killTree sends SIGKILL to every process in the node's cgroup tree root
// until none is left (a process may fork while the others are killed).
func killTree(root string) error {
	_, track, err := hierarchies()
	if err != nil {
		return err
	}
	dir := filepath.Join(track, root)
	deadline := time.Now().Add(30 * time.Second)
	for {
		pids := pidsUnder(dir)
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("realnode: processes %v still in %s after SIGKILL", pids, dir)
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// terminate sends SIGTERM to every process in cgroup sub (relative, as
// cgroupRoot) and its descendants, and waits up to grace for them all to
// exit.
func terminate(sub string, grace time.Duration) {
	_, track, err := hierarchies()
	if err != nil {
		return
	}
	dir := filepath.Join(track, sub)
	for _, pid := range pidsUnder(dir) {
		_ = syscall.Kill(pid, syscall.SIGTERM)
	}
	deadline := time.Now().Add(grace)
	for len(pidsUnder(dir)) > 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
}

// removeCgroups removes root and every cgroup below it in every hierarchy
// (deepest first), then its parents up to /localplane when they are empty.
// Its processes must be gone.
func removeCgroups(root string) error {
	all, _, err := hierarchies()
	if err != nil {
		return err
	}
	var errs []error
	for _, h := range all {
		var dirs []string
		_ = filepath.WalkDir(filepath.Join(h, root), func(path string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			if err := syscall.Rmdir(dirs[i]); err != nil && !errors.Is(err, syscall.ENOENT) {
				errs = append(errs, fmt.Errorf("realnode: removing cgroup %s: %w", dirs[i], err))
			}
		}
		for parent := filepath.Dir(root); parent != "/"; parent = filepath.Dir(parent) {
			if syscall.Rmdir(filepath.Join(h, parent)) != nil {
				break // not empty: another node's or plane's
			}
		}
	}
	return errors.Join(errs...)
}

// unescapeMount undoes the octal escapes (\040 for a space, ...) of a path
// in /proc/self/mountinfo.
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
