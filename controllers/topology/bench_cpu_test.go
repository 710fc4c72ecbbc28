package topology

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis-operator/redis-operator/test/redistest"
)

// serverCPU is each node's main-thread CPU time (INFO cpu: used_cpu_sys_main_thread plus
// used_cpu_user_main_thread, in seconds; both servers report them, Valkey too), in the
// order of nodes.
func serverCPU(b *testing.B, nodes []*redistest.Node) []float64 {
	b.Helper()
	out := make([]float64, len(nodes))
	for i, n := range nodes {
		info, ok := n.Do("INFO", "cpu").(string)
		if !ok {
			b.Fatalf("INFO cpu on %s: no text", n.Addr())
		}
		for _, line := range strings.Split(info, "\r\n") {
			k, v, found := strings.Cut(line, ":")
			if found && (k == "used_cpu_sys_main_thread" || k == "used_cpu_user_main_thread") {
				f, err := strconv.ParseFloat(v, 64)
				if err != nil {
					b.Fatalf("INFO cpu on %s: %s: %v", n.Addr(), line, err)
				}
				out[i] += f
			}
		}
	}
	return out
}

// cpuShare is what the servers' main threads did between before and after, over wall:
// the busiest thread's share of a core (1.0: that server alone bounds the move, whatever
// the client does), which node it was, and all threads together in cores.
func cpuShare(before, after []float64, wall time.Duration) (busiest float64, node int, total float64) {
	for i := range after {
		d := (after[i] - before[i]) / wall.Seconds()
		total += d
		if d > busiest {
			busiest, node = d, i
		}
	}
	return busiest, node, total
}
