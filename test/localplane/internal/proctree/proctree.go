// Package proctree starts long-running child processes in their own process
// groups, records them in a run directory, and stops whole process trees.
//
// Every child gets its own process group (so a terminal's Ctrl-C reaches only
// the supervisor, which then stops children in order) and a parent-death
// signal (so a supervisor killed with SIGKILL does not leave children
// behind). Each started child is recorded as "<runDir>/<name>.pid" holding
// its pid and kernel start time; Sweep kills recorded groups that are still
// alive, which makes a restart after a crash safe.
package proctree

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Process is a started child and its process group.
type Process struct {
	Cmd     *exec.Cmd
	name    string
	runDir  string
	done    chan struct{}
	waitErr error
}

// Start starts cmd as the leader of a new process group with SIGKILL as its
// parent-death signal and records it under runDir as name. cmd.SysProcAttr
// may carry other attributes (for example Unshareflags); Setpgid and
// Pdeathsig are set here.
func Start(runDir, name string, cmd *exec.Cmd) (*Process, error) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	if err := os.MkdirAll(runDir, 0o755); err != nil {
		return nil, fmt.Errorf("creating run directory: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &Process{Cmd: cmd, name: name, runDir: runDir, done: make(chan struct{})}
	if err := record(p.pidFile(), cmd.Process.Pid); err != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
		return nil, err
	}
	go func() {
		p.waitErr = cmd.Wait()
		_ = os.Remove(p.pidFile())
		close(p.done)
	}()
	return p, nil
}

// Pid is the child's pid, which is also its process group id.
func (p *Process) Pid() int { return p.Cmd.Process.Pid }

// Done is closed once the child has exited and been reaped.
func (p *Process) Done() <-chan struct{} { return p.done }

// Err is the child's exit error (nil for exit status 0); valid after Done.
func (p *Process) Err() error { return p.waitErr }

// Signal sends sig to the child's whole process group.
func (p *Process) Signal(sig syscall.Signal) {
	_ = syscall.Kill(-p.Pid(), sig)
}

// Stop sends SIGTERM to the process group, waits up to grace for the leader
// to exit, then sends SIGKILL to the group. It always kills the group at the
// end, so helpers the leader forked (for example a BGSAVE child) go too.
func (p *Process) Stop(grace time.Duration) {
	p.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
	}
	p.Signal(syscall.SIGKILL)
	<-p.done
}

func (p *Process) pidFile() string { return filepath.Join(p.runDir, p.name+".pid") }

func record(path string, pid int) error {
	start, err := startTime(pid)
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, fmt.Appendf(nil, "%d %d\n", pid, start), 0o644); err != nil {
		return fmt.Errorf("recording pid: %w", err)
	}
	return nil
}

// startTime reads field 22 of /proc/<pid>/stat (start time in clock ticks
// since boot, see proc(5)), which tells a live process from a recycled pid.
func startTime(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("parsing /proc/%d/stat", pid)
	}
	fields := strings.Fields(s[i+1:])
	if len(fields) < 20 {
		return 0, fmt.Errorf("parsing /proc/%d/stat: %d fields", pid, len(fields))
	}
	return strconv.ParseUint(fields[19], 10, 64)
}

// Sweep kills, with SIGKILL, the process group of every process recorded
// under runDir (recursively) that is still alive with the recorded start
// time, and removes the records. It returns the names of the groups killed.
func Sweep(runDir string) ([]string, error) {
	var killed []string
	err := filepath.WalkDir(runDir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.IsDir() || !strings.HasSuffix(path, ".pid") {
			return nil
		}
		b, err := os.ReadFile(path)
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		var pid int
		var start uint64
		if _, err := fmt.Sscanf(string(b), "%d %d", &pid, &start); err == nil && pid > 1 {
			if now, err := startTime(pid); err == nil && now == start {
				_ = syscall.Kill(-pid, syscall.SIGKILL)
				_ = syscall.Kill(pid, syscall.SIGKILL)
				killed = append(killed, strings.TrimSuffix(filepath.Base(path), ".pid"))
			}
		}
		// A supervisor still running in this process removes the record
		// itself once the killed group exits; that race is no error.
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return nil
	})
	return killed, err
}
