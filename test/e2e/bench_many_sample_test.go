//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
)

// This file holds what BenchmarkManyClusters samples: the operator's
// Prometheus metrics, its /proc entries, and INFO commandstats of every
// Redis node.

// promSample is one line of the Prometheus text exposition format
// (https://prometheus.io/docs/instrumenting/exposition_formats/): a series
// name, its labels and its value.
type promSample struct {
	name   string
	labels map[string]string
	value  float64
}

// scrape reads url (the operator's /metrics) and returns its samples.
// Comment lines are skipped; a line that does not parse is an error.
func scrape(url string) ([]promSample, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("GET %s: %s: %s", url, resp.Status, b)
	}
	var out []promSample
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		s, err := parsePromLine(line)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", url, err)
		}
		out = append(out, s)
	}
	return out, sc.Err()
}

// parsePromLine parses `name{k="v",...} value [timestamp]`. Label values
// are taken up to the next unescaped quote (the operator's labels hold no
// escapes; \" and \\ are honoured anyway).
func parsePromLine(line string) (promSample, error) {
	s := promSample{labels: map[string]string{}}
	rest := line
	if i := strings.IndexAny(rest, "{ "); i < 0 {
		return s, fmt.Errorf("no value in %q", line)
	} else {
		s.name, rest = rest[:i], rest[i:]
	}
	if strings.HasPrefix(rest, "{") {
		rest = rest[1:]
		for !strings.HasPrefix(rest, "}") {
			eq := strings.Index(rest, `="`)
			if eq < 0 {
				return s, fmt.Errorf("bad labels in %q", line)
			}
			key := strings.TrimLeft(rest[:eq], ",")
			rest = rest[eq+2:]
			var val strings.Builder
			for len(rest) > 0 && rest[0] != '"' {
				if rest[0] == '\\' && len(rest) > 1 {
					rest = rest[1:]
				}
				val.WriteByte(rest[0])
				rest = rest[1:]
			}
			if rest == "" {
				return s, fmt.Errorf("unterminated label in %q", line)
			}
			s.labels[key] = val.String()
			rest = strings.TrimPrefix(rest[1:], ",")
		}
		rest = rest[1:]
	}
	f := strings.Fields(rest)
	if len(f) == 0 {
		return s, fmt.Errorf("no value in %q", line)
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return s, fmt.Errorf("value of %q: %w", line, err)
	}
	s.value = v
	return s, nil
}

// metricSum is the sum of the values of series name whose labels match
// every key of want.
func metricSum(samples []promSample, name string, want map[string]string) float64 {
	var sum float64
	for _, s := range samples {
		if s.name == name && labelsMatch(s.labels, want) {
			sum += s.value
		}
	}
	return sum
}

func labelsMatch(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

// histogramQuantile estimates quantile q (0..1) of the observations a
// Prometheus histogram (series name_bucket, cumulative counts per upper
// bound le) gained between before and after, interpolating linearly within
// the bucket the rank falls in, as PromQL's histogram_quantile does. It
// returns NaN without observations and the largest finite bound when the
// rank falls in the +Inf bucket.
func histogramQuantile(before, after []promSample, name string, want map[string]string, q float64) float64 {
	cum := func(samples []promSample) map[float64]float64 {
		m := map[float64]float64{}
		for _, s := range samples {
			if s.name != name+"_bucket" || !labelsMatch(s.labels, want) {
				continue
			}
			le, err := strconv.ParseFloat(s.labels["le"], 64)
			if err == nil {
				m[le] += s.value
			}
		}
		return m
	}
	b, a := cum(before), cum(after)
	var bounds []float64
	for le := range a {
		bounds = append(bounds, le)
	}
	sort.Float64s(bounds)
	if len(bounds) == 0 {
		return math.NaN()
	}
	total := a[bounds[len(bounds)-1]] - b[bounds[len(bounds)-1]]
	if total <= 0 {
		return math.NaN()
	}
	rank := q * total
	lower, prevCount := 0.0, 0.0
	for _, le := range bounds {
		count := a[le] - b[le]
		if count >= rank {
			if math.IsInf(le, 1) {
				return lower
			}
			if count == prevCount {
				return le
			}
			return lower + (le-lower)*(rank-prevCount)/(count-prevCount)
		}
		lower, prevCount = le, count
	}
	return lower
}

// procSample is what /proc says about one process (proc(5)).
type procSample struct {
	at       time.Time
	rssBytes int64
	anonRSS  int64 // RssAnon: the heap and stacks, without the mapped binary (RssFile)
	cpuTicks int64 // utime + stime, in USER_HZ (100 per second on Linux)
}

// userHZ is the unit of utime and stime in /proc/<pid>/stat: USER_HZ,
// which the kernel ABI fixes at 100 on Linux (proc(5), times(2)).
const userHZ = 100

// readProc reads VmRSS and RssAnon from /proc/<pid>/status and utime and stime
// (fields 14 and 15) from /proc/<pid>/stat.
func readProc(pid int) (procSample, error) {
	ps := procSample{at: time.Now()}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return ps, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(v) // "12345 kB"
			kb, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil {
				return ps, fmt.Errorf("VmRSS %q: %w", v, err)
			}
			ps.rssBytes = kb << 10
		}
		if v, ok := strings.CutPrefix(line, "RssAnon:"); ok {
			kb, err := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
			if err != nil {
				return ps, fmt.Errorf("RssAnon %q: %w", v, err)
			}
			ps.anonRSS = kb << 10
		}
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ps, err
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	rest := string(stat)
	if i := strings.LastIndexByte(rest, ')'); i >= 0 {
		rest = rest[i+1:]
	}
	f := strings.Fields(rest) // f[0] is field 3 (state)
	if len(f) < 13 {
		return ps, fmt.Errorf("short /proc/%d/stat", pid)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return ps, fmt.Errorf("utime/stime in /proc/%d/stat: %v %v", pid, err1, err2)
	}
	ps.cpuTicks = utime + stime
	return ps, nil
}

// memAvailable is MemAvailable of /proc/meminfo in bytes, -1 if unknown.
func memAvailable() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "MemAvailable:"); ok {
			if kb, err := strconv.ParseInt(strings.Fields(v)[0], 10, 64); err == nil {
				return kb << 10
			}
		}
	}
	return -1
}

// loadAvg is the 1-minute load average of /proc/loadavg, "" if unknown.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	return strings.Fields(string(b))[0]
}

// commandCalls is calls per command, named as INFO commandstats names them
// without the cmdstat_ prefix (such as "cluster|nodes").
type commandCalls map[string]float64
