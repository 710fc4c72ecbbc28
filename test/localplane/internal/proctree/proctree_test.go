package proctree

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startWithChild starts `sh -c 'sleep 300 & echo $!; wait'` and returns the
// process and the pid of the background sleep it forked.
func startWithChild(t *testing.T, runDir string) (*Process, int) {
	t.Helper()
	cmd := exec.Command("sh", "-c", "sleep 300 & echo $!; wait")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p, err := Start(runDir, "tree", cmd)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 32)
	n, _ := out.Read(buf)
	child, err := strconv.Atoi(strings.TrimSpace(string(buf[:n])))
	if err != nil {
		t.Fatalf("reading the child's pid: %v (%q)", err, buf[:n])
	}
	return p, child
}

func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	// A killed child of an exited parent may linger briefly as a zombie.
	return err == nil && !strings.Contains(string(b), ") Z ")
}

func waitDead(t *testing.T, pid int) {
	t.Helper()
	for range 100 {
		if !alive(pid) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("pid %d still alive", pid)
}

func TestStopKillsTheGroup(t *testing.T) {
	runDir := t.TempDir()
	p, child := startWithChild(t, runDir)
	if _, err := os.Stat(filepath.Join(runDir, "tree.pid")); err != nil {
		t.Fatalf("no pid record: %v", err)
	}
	p.Stop(time.Second)
	waitDead(t, child)
	if st, ok := p.Cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !st.Signaled() || st.Signal() != syscall.SIGTERM {
		t.Errorf("the leader ended with %v, want SIGTERM", p.Err())
	}
	if _, err := os.Stat(filepath.Join(runDir, "tree.pid")); !os.IsNotExist(err) {
		t.Errorf("pid record left after exit: %v", err)
	}
}

func TestSweepKillsRecordedLeftovers(t *testing.T) {
	runDir := t.TempDir()
	p, child := startWithChild(t, runDir)
	// As if the supervisor had crashed: the record stays, the group lives.
	killed, err := Sweep(runDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(killed) != 1 || killed[0] != "tree" {
		t.Errorf("Sweep killed %v, want [tree]", killed)
	}
	<-p.Done()
	waitDead(t, child)
	if killed, _ := Sweep(runDir); len(killed) != 0 {
		t.Errorf("second Sweep killed %v, want nothing", killed)
	}
}
