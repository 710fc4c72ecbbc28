//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Where a pod of the plane's real nodes (test/localplane, "Real nodes": the
// kubelet with containerd) is on this machine: its container logs and its
// processes, found as the kubelet lays them out, for the chaos of
// chaos_test.go and the operator's log and process.

// podLogGlob matches every container log file of the pods of namespace ns:
// the kubelet writes them under its pod logs directory (the node's
// pod-logs/) as <ns>_<pod>_<uid>/<container>/<restart>.log, each line in
// the CRI log format (criLine).
func (s *suite) podLogGlob(ns string) string {
	return filepath.Join(s.stateDir, "nodes", "*", "pod-logs", ns+"_*", "*", "*.log")
}

// podLogDirs lists the pod log directories of namespace ns
// (<ns>_<pod>_<uid>, the pod's UID after the last "_").
func podLogDirs(ns string) []string {
	dirs, _ := filepath.Glob(filepath.Join(env.stateDir, "nodes", "*", "pod-logs", ns+"_*"))
	return dirs
}

// criLines turns container log lines in the CRI format ("<RFC 3339 time>
// <stdout|stderr> <F|P> <text>", P marking a line the runtime split) back
// into the lines the container wrote. Lines not in that format are kept as
// they are.
func criLines(b []byte) []byte {
	var out bytes.Buffer
	for line := range bytes.SplitAfterSeq(b, []byte("\n")) {
		f := bytes.SplitN(line, []byte(" "), 4)
		if len(f) == 4 && (string(f[1]) == "stdout" || string(f[1]) == "stderr") && (string(f[2]) == "F" || string(f[2]) == "P") {
			text := f[3]
			if string(f[2]) == "P" {
				text = bytes.TrimSuffix(text, []byte("\n"))
			}
			out.Write(text)
			continue
		}
		out.Write(line)
	}
	return out.Bytes()
}

// planeGateway is the plane's gateway (netns/gateway of its state
// directory): an address of 10.244.0.0/24 on this machine that pods
// reach, where the suite's host services listen (the object store, the
// test Vault, the Git daemon).
func planeGateway(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(env.stateDir, "netns", "gateway"))
	if err != nil {
		t.Fatalf("the plane's gateway: %v", err)
	}
	host := strings.TrimSpace(string(b))
	if net.ParseIP(host) == nil {
		t.Fatalf("the plane's gateway file holds %q, not an IP address", host)
	}
	return host
}

// podByIP is the running pod whose IP is ip, from the API server.
func podByIP(t testing.TB, ip string) *corev1.Pod {
	t.Helper()
	pods := &corev1.PodList{}
	if err := env.k8s.List(context.Background(), pods, client.MatchingFields{"status.podIP": ip}); err != nil {
		t.Fatalf("finding the pod of %s: %v", ip, err)
	}
	for i := range pods.Items {
		if p := &pods.Items[i]; p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
			return p
		}
	}
	t.Fatalf("no running pod has IP %s", ip)
	return nil
}

// podProcess is one process of a pod.
type podProcess struct {
	pid     int
	sandbox bool // the pod's sandbox (pause), which holds its network namespace
}

// podProcesses lists the processes of the pod with UID uid: the kubelet
// (cgroupfs driver) makes the pod's cgroup pod<uid> under its QoS class's
// (kubepods/, kubepods/burstable/, kubepods/besteffort/) below the node's
// cgroup root, and runc puts each container there in its own child,
// sandbox included; execs join their container's. Read in the pids
// hierarchy, where the plane finds its nodes' processes too.
func podProcesses(uid string) ([]podProcess, error) {
	root := "/sys/fs/cgroup/pids/localplane/*/*/kubepods"
	var dirs []string
	for _, pattern := range []string{root + "/pod" + uid, root + "/*/pod" + uid} {
		m, err := filepath.Glob(pattern)
		if err != nil {
			return nil, err
		}
		dirs = append(dirs, m...)
	}
	if len(dirs) == 0 {
		return nil, fmt.Errorf("no cgroup pod%s under %s", uid, root)
	}
	var procs []podProcess
	for _, dir := range dirs {
		err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
			if err != nil || d.Name() != "cgroup.procs" {
				return nil // a container's cgroup removed meanwhile
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return nil
			}
			for _, f := range strings.Fields(string(b)) {
				pid, err := strconv.Atoi(f)
				if err != nil {
					continue
				}
				comm, _ := os.ReadFile(filepath.Join("/proc", f, "comm"))
				procs = append(procs, podProcess{pid: pid, sandbox: strings.TrimSpace(string(comm)) == "pause"})
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return procs, nil
}

// podProcessesAt is the running pod at ip and its processes
// (podProcesses); it fails t when either cannot be found.
func podProcessesAt(t testing.TB, ip string) (*corev1.Pod, []podProcess) {
	t.Helper()
	pod := podByIP(t, ip)
	procs, err := podProcesses(string(pod.UID))
	if err != nil {
		t.Fatalf("the processes of pod %s/%s (%s): %v", pod.Namespace, pod.Name, ip, err)
	}
	return pod, procs
}

// operatorPID finds the process of the operator container of pod (the
// image's entrypoint, /redis-operator) in namespace installNS.
func operatorPID(pod string) (int, error) {
	p := &corev1.Pod{}
	if err := env.k8s.Get(context.Background(), client.ObjectKey{Namespace: installNS, Name: pod}, p); err != nil {
		return 0, err
	}
	procs, err := podProcesses(string(p.UID))
	if err != nil {
		return 0, err
	}
	for _, pr := range procs {
		cmd, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pr.pid), "cmdline"))
		if err == nil && bytes.HasPrefix(cmd, []byte("/redis-operator\x00")) {
			return pr.pid, nil
		}
	}
	return 0, fmt.Errorf("no operator process in pod %s (its processes: %v)", pod, procs)
}
