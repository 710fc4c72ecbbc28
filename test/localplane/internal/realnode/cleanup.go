package realnode

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// Machine-wide directories that containerd's CRI plugin and the kubelet
// write to whatever their configuration says.
const (
	// cniCacheDir holds libcni's cached results, named
	// <network>-<sandbox>-<interface> (the node's network and containerd's
	// loopback one).
	cniCacheDir = "/var/lib/cni/results"
	// containerLogLinks holds the kubelet's symbolic links to container
	// logs.
	containerLogLinks = "/var/log/containers"
)

// cleanup removes what the node's processes leave once killed: the
// sockets of its shims, every mount below its directory (container root
// filesystems, pod network namespaces, volumes, the kubelet's own bind
// mount of its root directory), its boot-scoped state (run/), the entries
// of its pod sandboxes in the machine's CNI cache and their host ports'
// iptables rules, its container log links, and its cgroups.
// Its processes must be gone.
func cleanup(stateDir, name string) error {
	dir := NodeDir(stateDir, name)
	var errs []error
	addresses, _ := filepath.Glob(filepath.Join(runDir(dir), "containerd", "io.containerd.runtime.v2.task", "*", "*", "address"))
	for _, a := range addresses {
		if b, err := os.ReadFile(a); err == nil {
			if sock, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "unix://"); ok {
				if err := os.Remove(sock); err != nil && !errors.Is(err, fs.ErrNotExist) {
					errs = append(errs, err)
				}
			}
		}
	}
	errs = append(errs, unmountUnder(dir))
	if err := os.RemoveAll(runDir(dir)); err != nil {
		errs = append(errs, err)
	}
	entries, _ := os.ReadDir(filepath.Join(dir, "containerd", "io.containerd.grpc.v1.cri", "sandboxes"))
	var sandboxes []string
	for _, sb := range entries {
		sandboxes = append(sandboxes, sb.Name())
		cached, _ := filepath.Glob(filepath.Join(cniCacheDir, "*-"+sb.Name()+"-*"))
		for _, c := range cached {
			errs = append(errs, os.Remove(c))
		}
	}
	errs = append(errs, removeHostPorts(sandboxes))
	links, _ := os.ReadDir(containerLogLinks)
	for _, l := range links {
		path := filepath.Join(containerLogLinks, l.Name())
		if target, err := os.Readlink(path); err == nil && strings.HasPrefix(target, podLogsDir(dir)+"/") {
			errs = append(errs, os.Remove(path))
		}
	}
	errs = append(errs, removeCgroups(cgroupRoot(stateDir, name)))
	return errors.Join(errs...)
}

// removeHostPorts deletes the portmap plugin's rules for the given pod
// sandboxes (killed, so never deleted through CNI): each sandbox's jump in
// the nat table's CNI-HOSTPORT-DNAT chain (its comment names the sandbox)
// and the chain it jumps to, at once through iptables-restore (which
// parses the quoted comment as iptables -S prints it).
func removeHostPorts(sandboxes []string) error {
	out, err := exec.Command("iptables", "-w", "-t", "nat", "-S", "CNI-HOSTPORT-DNAT").Output()
	if err != nil {
		return nil // no such chain: no host port was ever mapped here
	}
	var rules strings.Builder
	for _, line := range strings.Split(string(out), "\n") {
		rule, ok := strings.CutPrefix(line, "-A CNI-HOSTPORT-DNAT ")
		if !ok || !slices.ContainsFunc(sandboxes, func(id string) bool { return strings.Contains(rule, `id: \"`+id+`\"`) }) {
			continue
		}
		fmt.Fprintf(&rules, "-D CNI-HOSTPORT-DNAT %s\n", rule)
		if _, chain, ok := strings.Cut(rule, " -j "); ok && strings.HasPrefix(chain, "CNI-DN-") {
			fmt.Fprintf(&rules, "-F %s\n-X %[1]s\n", chain)
		}
	}
	if rules.Len() == 0 {
		return nil
	}
	restore := exec.Command("iptables-restore", "-w", "--noflush")
	restore.Stdin = strings.NewReader("*nat\n" + rules.String() + "COMMIT\n")
	if out, err := restore.CombinedOutput(); err != nil {
		return fmt.Errorf("realnode: removing host port rules: %v: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// unmountUnder detaches every mount at or below dir, the most recent
// first (mounts stack), until none is left.
func unmountUnder(dir string) error {
	for range 10 {
		mounts, err := mountsUnder(dir)
		if err != nil || len(mounts) == 0 {
			return err
		}
		for _, m := range slices.Backward(mounts) {
			if err := syscall.Unmount(m, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
				return fmt.Errorf("realnode: unmounting %s: %w", m, err)
			}
		}
	}
	mounts, err := mountsUnder(dir)
	if err == nil && len(mounts) > 0 {
		err = fmt.Errorf("realnode: still mounted: %v", mounts)
	}
	return err
}

// mountsUnder lists the mount points at or below dir, in mount order.
func mountsUnder(dir string) ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		if m := unescapeMount(fields[4]); m == dir || strings.HasPrefix(m, dir+"/") {
			out = append(out, m)
		}
	}
	return out, sc.Err()
}
