//go:build e2e

package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/redis-operator/redis-operator/test/chaos/nfqdelay"
)

// Chaos in the manner of chaos-mesh's NetworkChaos (partition, loss) and
// PodChaos (container kill, freeze), plus a node lost as a machine that
// lost power. Every fault is bounded: it is undone after its duration, and
// at the latest when the test ends (t.Cleanup), failed or not. Faults act
// on the plane's pod network (each pod's network namespace is its
// sandbox's; traffic between pods, bridged or routed, crosses the host's
// FORWARD chain; test/localplane README) and on the processes of a pod's
// containers, found in its cgroup (podhost_test.go). Delay (netem's, which this kernel's tc
// lacks: "Specified qdisc kind is unknown") is made with NFQUEUE and a
// user-space delayer instead (test/chaos/nfqdelay).

// fault is one injected fault; stop undoes it once, however often called.
type fault struct {
	t    testing.TB
	what string
	once sync.Once
	undo func() error
	done chan struct{}
}

// inject registers undo to run after d (0: only at the end of the test)
// and at the test's cleanup, whichever is first, and returns the fault.
func inject(t testing.TB, what string, d time.Duration, undo func() error) *fault {
	t.Helper()
	f := &fault{t: t, what: what, undo: undo, done: make(chan struct{})}
	t.Logf("chaos: %s (for %s)", what, d)
	if d > 0 {
		timer := time.AfterFunc(d, f.stop)
		t.Cleanup(func() { timer.Stop() })
	}
	t.Cleanup(f.stop)
	return f
}

// stop undoes the fault now (if not undone yet).
func (f *fault) stop() {
	f.once.Do(func() {
		if err := f.undo(); err != nil {
			// Errorf, not Fatalf: stop may run on a timer's goroutine.
			f.t.Errorf("chaos: undoing %s: %v", f.what, err)
		} else {
			f.t.Logf("chaos: undone %s", f.what)
		}
		close(f.done)
	})
}

// wait blocks until the fault is undone (its duration is over).
func (f *fault) wait() { <-f.done }

// chaosDirection says which packets a partition drops, as NetworkChaos's
// direction: from the sources to the targets, the reverse, or both.
type chaosDirection int

const (
	directionTo chaosDirection = iota
	directionFrom
	directionBoth
)

// partition drops, in the host's FORWARD chain, the packets between every
// pod IP of from and every pod IP of to in direction dir, for d. One-way
// (directionTo) drops only what from sends to to: to's replies and its own
// connections to from still pass, but a TCP link opened either way stalls.
func partition(t testing.TB, from, to []string, dir chaosDirection, d time.Duration) *fault {
	t.Helper()
	var rules [][]string
	for _, a := range from {
		for _, b := range to {
			if dir == directionTo || dir == directionBoth {
				rules = append(rules, []string{"FORWARD", "-s", a, "-d", b, "-j", "DROP"})
			}
			if dir == directionFrom || dir == directionBoth {
				rules = append(rules, []string{"FORWARD", "-s", b, "-d", a, "-j", "DROP"})
			}
		}
	}
	for _, r := range rules {
		iptables(t, "", append([]string{"-I"}, r...)...)
	}
	return inject(t, fmt.Sprintf("partition %v -> %v (direction %d)", from, to, dir), d, func() error {
		return deleteRules("", rules)
	})
}

// packetLoss drops percent (1–100) of the packets the pod at ip sends on
// its eth0 (iptables statistic match in the pod's network namespace), to
// pods and to the host alike, for d: NetworkChaos's loss on the pod's
// egress. At 100 nothing the pod sends arrives, so its peers, the
// operator and the node's probes all lose it.
func packetLoss(t testing.TB, ip string, percent int, d time.Duration) *fault {
	t.Helper()
	ns := podNetns(t, ip)
	rule := []string{"OUTPUT", "-o", "eth0", "-j", "DROP"}
	if percent < 100 {
		rule = []string{"OUTPUT", "-o", "eth0", "-m", "statistic", "--mode", "random",
			"--probability", strconv.FormatFloat(float64(percent)/100, 'f', 2, 64), "-j", "DROP"}
	}
	iptables(t, ns, append([]string{"-I"}, rule...)...)
	return inject(t, fmt.Sprintf("%d%% loss from %s", percent, ip), d, func() error {
		err := deleteRules(ns, [][]string{rule})
		if err != nil && !netnsExists(ns) {
			return nil // the pod and its namespace are gone, and the rule with them
		}
		return err
	})
}

// delayQueues numbers the netfilter queues of delayPod (one per fault; a
// queue is per network namespace, so the numbers only need to differ
// within one pod).
var delayQueues atomic.Uint32

// delayPod holds every packet the pod at ip sends on its eth0 for delay
// (an NFQUEUE rule in the pod's network namespace, served by an
// nfqdelay.Delayer), for d: NetworkChaos's delay on the pod's egress. Its
// peers, the operator and the node's probes all see its answers late; the
// order of packets is kept. Undone: the rule is deleted, then the delayer
// stopped (--queue-bypass lets packets pass while neither holds).
func delayPod(t testing.TB, ip string, delay, d time.Duration) *fault {
	t.Helper()
	ns := podNetns(t, ip)
	queue := uint16(1000 + delayQueues.Add(1))
	delayer, err := nfqdelay.Start(ns, queue, delay)
	if err != nil {
		t.Fatalf("delaying %s: %v", ip, err)
	}
	rule := []string{"OUTPUT", "-o", "eth0", "-j", "NFQUEUE", "--queue-num", strconv.Itoa(int(queue)), "--queue-bypass"}
	iptables(t, ns, append([]string{"-I"}, rule...)...)
	return inject(t, fmt.Sprintf("%s delay from %s", delay, ip), d, func() error {
		err := deleteRules(ns, [][]string{rule})
		if err != nil && !netnsExists(ns) {
			err = nil // the pod and its namespace are gone, and the rule with them
		}
		return errors.Join(err, delayer.Stop())
	})
}

// freezePod sends SIGSTOP to every process of the pod at ip (all its
// containers: the processes in its network namespace) and SIGCONT after
// d: PodChaos's container freeze.
func freezePod(t testing.TB, ip string, d time.Duration) *fault {
	t.Helper()
	pids := podPIDs(t, ip)
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGSTOP)
	}
	return inject(t, fmt.Sprintf("freeze pod %s (pids %v)", ip, pids), d, func() error {
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGCONT) // a process that died meanwhile is fine
		}
		return nil
	})
}

// killPod sends SIGKILL to every process of the pod at ip; the node
// restarts its containers by their restart policy (PodChaos
// container-kill). Nothing is left to undo.
func killPod(t testing.TB, ip string) {
	t.Helper()
	pids := podPIDs(t, ip)
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	t.Logf("chaos: killed pod %s (pids %v)", ip, pids)
}

// loseNode makes the plane's node fail (test/localplane: `localplane node
// lose`): its pods' processes get SIGKILL and its lease stops, so the
// controller manager marks it NotReady after its grace period. The node is
// restored (booted, its pods started again) after d.
func loseNode(t testing.TB, node string, d time.Duration) *fault {
	t.Helper()
	if lost := operatorLostPods(t, node); len(lost) > 0 {
		// The operator goes down with its node, as in the field; its container
		// restarts when the node is back (operatorLost).
		if env.operatorLost == nil {
			env.operatorLost = map[types.UID]int32{}
		}
		maps.Copy(env.operatorLost, lost)
		t.Logf("the operator's pod runs on %s and is lost with it", node)
	}
	planeNode(t, "lose", node)
	return inject(t, "lose node "+node, d, func() error {
		out, err := exec.Command(filepath.Join(env.binDir, "localplane"), "node", "restore",
			"--state-dir", env.stateDir, node).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		return nil
	})
}

func planeNode(t testing.TB, action, node string) {
	t.Helper()
	out, err := exec.Command(filepath.Join(env.binDir, "localplane"), "node", action,
		"--state-dir", env.stateDir, node).CombinedOutput()
	if err != nil {
		t.Fatalf("localplane node %s %s: %v\n%s", action, node, err, out)
	}
}

// podNetns is the path of the network namespace of the pod at ip: its
// sandbox's (the pause process, which holds it while the pod's containers
// come and go), /proc/<pid>/ns/net.
func podNetns(t testing.TB, ip string) string {
	t.Helper()
	pod, procs := podProcessesAt(t, ip)
	for _, p := range procs {
		if p.sandbox {
			return filepath.Join("/proc", strconv.Itoa(p.pid), "ns", "net")
		}
	}
	t.Fatalf("pod %s/%s (%s) has no sandbox process", pod.Namespace, pod.Name, ip)
	return ""
}

// netnsExists reports whether the network namespace at path (podNetns)
// is still there: its sandbox process still runs.
func netnsExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// podPIDs lists the processes of the containers of the pod at ip (their
// execs included), not its sandbox: a killed sandbox would make the
// kubelet replace the pod's network namespace and IP, which no container
// kill or freeze does.
func podPIDs(t testing.TB, ip string) []int {
	t.Helper()
	pod, procs := podProcessesAt(t, ip)
	var pids []int
	for _, p := range procs {
		if !p.sandbox {
			pids = append(pids, p.pid)
		}
	}
	if len(pids) == 0 {
		t.Fatalf("no container process runs in pod %s/%s (%s)", pod.Namespace, pod.Name, ip)
	}
	return pids
}

// iptables runs iptables (in the network namespace at path ns, or the
// host's when ns is empty) and fails t on error.
func iptables(t testing.TB, ns string, args ...string) {
	t.Helper()
	if out, err := iptablesCmd(ns, args...).CombinedOutput(); err != nil {
		t.Fatalf("iptables %s (netns %q): %v\n%s", strings.Join(args, " "), ns, err, out)
	}
}

func iptablesCmd(ns string, args ...string) *exec.Cmd {
	args = append([]string{"-w"}, args...)
	if ns == "" {
		return exec.Command("iptables", args...)
	}
	return exec.Command("nsenter", append([]string{"--net=" + ns, "iptables"}, args...)...)
}

// deleteRules deletes every rule (chain first) in ns, returning the
// failures joined.
func deleteRules(ns string, rules [][]string) error {
	var errs []string
	for _, r := range rules {
		var stderr bytes.Buffer
		cmd := iptablesCmd(ns, append([]string{"-D"}, r...)...)
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			errs = append(errs, fmt.Sprintf("iptables -D %s: %v %s", strings.Join(r, " "), err, strings.TrimSpace(stderr.String())))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}
