//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// machineSample is the machine's CPU time (/proc/stat, first line) and
// every process's utime+stime by command name (/proc/<pid>/stat), in
// USER_HZ ticks, at one moment (proc(5)).
type machineSample struct {
	at          time.Time
	busy, total int64
	byPID       map[int]procTicks
}

type procTicks struct {
	comm  string
	ticks int64
}

func readMachine() (machineSample, error) {
	m := machineSample{at: time.Now(), byPID: map[int]procTicks{}}
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return m, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal ...
	if len(f) < 9 || f[0] != "cpu" {
		return m, fmt.Errorf("/proc/stat: %q", line)
	}
	for i := 1; i <= 8; i++ {
		v, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return m, fmt.Errorf("/proc/stat field %d: %w", i, err)
		}
		m.total += v
		if i != 4 && i != 5 { // idle, iowait
			m.busy += v
		}
	}
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(d + "/stat")
		if err != nil {
			continue // exited meanwhile
		}
		s := string(stat)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open {
			continue
		}
		rest := strings.Fields(s[end+1:])
		if len(rest) < 13 {
			continue
		}
		u, err1 := strconv.ParseInt(rest[11], 10, 64)
		st, err2 := strconv.ParseInt(rest[12], 10, 64)
		if err1 == nil && err2 == nil {
			m.byPID[pid] = procTicks{comm: s[open+1 : end], ticks: u + st}
		}
	}
	return m, nil
}

// machineCPU renders where the machine's CPU went between a and b, in
// cores: busy of all cores, then per command name for the processes alive
// at b (their whole time if they started after a), largest first, and
// "short-lived" for the rest (processes that started and exited in
// between, such as readiness probes).
func machineCPU(a, b machineSample, cores int) string {
	secs := b.at.Sub(a.at).Seconds()
	if secs <= 0 || b.total <= a.total {
		return "-"
	}
	busy := float64(b.busy-a.busy) / float64(b.total-a.total) * float64(cores)
	byComm := map[string]float64{}
	var alive float64
	for pid, p := range b.byPID {
		d := p.ticks
		if q, ok := a.byPID[pid]; ok && q.comm == p.comm {
			d -= q.ticks
		}
		c := float64(d) / userHZ / secs
		byComm[p.comm] += c
		alive += c
	}
	type kv struct {
		k string
		v float64
	}
	var l []kv
	for k, v := range byComm {
		if v >= 0.01 {
			l = append(l, kv{k, v})
		}
	}
	sort.Slice(l, func(i, j int) bool { return l[i].v > l[j].v })
	parts := []string{fmt.Sprintf("busy %.2f of %d cores", busy, cores)}
	for _, e := range l {
		parts = append(parts, fmt.Sprintf("%s %.2f", e.k, e.v))
	}
	parts = append(parts, fmt.Sprintf("short-lived %.2f", max(busy-alive, 0)))
	return strings.Join(parts, ", ")
}
