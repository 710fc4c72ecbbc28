package topology

import (
	"testing"
	"time"
)

// TestMaxNodeTimeout: the engine's failure-detection waits use the largest
// cluster-node-timeout a reachable node reports, Redis's 15 s default when
// none does.
func TestMaxNodeTimeout(t *testing.T) {
	at := func(d time.Duration) *NodeView { return &NodeView{NodeTimeout: d} }
	unreachable := &NodeView{Err: errNotObserved, NodeTimeout: 30 * time.Second}
	for _, tc := range []struct {
		name  string
		nodes []*NodeView
		want  time.Duration
	}{
		{name: "no nodes", want: 15 * time.Second},
		{name: "CONFIG GET refused everywhere", nodes: []*NodeView{at(0), at(0)}, want: 15 * time.Second},
		{name: "the largest", nodes: []*NodeView{at(3 * time.Second), at(5 * time.Second), at(0)}, want: 5 * time.Second},
		{name: "unreachable nodes do not count", nodes: []*NodeView{unreachable, at(2 * time.Second)}, want: 2 * time.Second},
		{name: "nil views do not count", nodes: []*NodeView{nil}, want: 15 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := maxNodeTimeout(tc.nodes...); got != tc.want {
				t.Errorf("maxNodeTimeout = %s, want %s", got, tc.want)
			}
		})
	}
}
