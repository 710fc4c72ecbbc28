package topology

import (
	"testing"
	"time"
)

// TestMask: secrets never reach an error message, whether passed as such
// (password operations) or as values of secret-looking config keys
// (ApplyConfig); other values and an empty secret leave the message alone.
func TestMask(t *testing.T) {
	for _, tc := range []struct {
		name    string
		msg     string
		secrets []string
		want    string
	}{
		{name: "no secrets", msg: "ERR syntax error", want: "ERR syntax error"},
		{name: "every occurrence", msg: "ERR Error in ACL SETUSER modifier '>pw1': pw1 again", secrets: []string{"pw1"},
			want: "ERR Error in ACL SETUSER modifier '>***': *** again"},
		{name: "several secrets", msg: "old pw-a new pw-b", secrets: []string{"pw-a", "pw-b"}, want: "old *** new ***"},
		{name: "an empty secret masks nothing", msg: "ERR x", secrets: []string{""}, want: "ERR x"},
		{
			name:    "config: secret-looking keys only, any case",
			msg:     "ERR CONFIG SET failed for masterauth s3cret, MasterUser bob, hz 20",
			secrets: configSecrets(map[string]string{"masterauth": "s3cret", "MasterUser": "bob", "hz": "20", "requirePASS": ""}),
			want:    "ERR CONFIG SET failed for masterauth ***, MasterUser ***, hz 20",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := mask(tc.msg, tc.secrets); got != tc.want {
				t.Errorf("mask = %q, want %q", got, tc.want)
			}
		})
	}
}

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
