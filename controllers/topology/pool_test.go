package topology

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redis-operator/redis-operator/test/redistest"
)

// commandCalls reads INFO commandstats of cl: calls by command name ("cluster|nodes").
func commandCalls(t *testing.T, cl *redis.Client) map[string]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	text, err := cl.Info(ctx, "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for k, v := range parseKV(text) {
		name, ok := strings.CutPrefix(k, "cmdstat_")
		field, _, _ := strings.Cut(v, ",")
		calls, ok2 := strings.CutPrefix(field, "calls=")
		if !ok || !ok2 {
			continue
		}
		n, err := strconv.Atoi(calls)
		if err != nil {
			t.Fatalf("%s: %v", k, v)
		}
		out[name] = n
	}
	return out
}

// pooledCluster forms a cluster of shards×perShard real nodes and returns it with an engine
// that pools its clients.
func pooledCluster(t *testing.T, shards, perShard int) (*testCluster, Desired, *Engine) {
	t.Helper()
	c := newTestCluster(t, redistest.Options{Password: "pool-pw"}, Options{})
	_, d := c.form(shards, perShard)
	pool := NewPool(64)
	t.Cleanup(pool.Close)
	opts := c.engine.opts
	opts.Pool, opts.PoolOwner = pool, "ns/pooled"
	return c, d, New(opts)
}

func observeWith(t *testing.T, e *Engine, d Desired) *ClusterView {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	v, err := e.Observe(ctx, d.endpoints())
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// A settled cluster observed through a Pool costs each node two commands per observation
// (CLUSTER NODES and one INFO), counted by the nodes themselves, and the view says what a
// full observation by an engine without a pool says.
func TestObserveSettledNodeCostsTwoCommands(t *testing.T) {
	c, d, pooled := pooledCluster(t, 3, 2)
	for range 2 { // the first two observations read CLUSTER INFO and the config
		observeWith(t, pooled, d)
	}
	clients := map[string]*redis.Client{}
	before := map[string]map[string]int{}
	for _, ep := range d.endpoints() {
		clients[ep.Name] = c.node(ep.Name).Client()
		before[ep.Name] = commandCalls(t, clients[ep.Name])
	}
	const observations = 3
	var v *ClusterView
	for range observations {
		v = observeWith(t, pooled, d)
	}
	for _, ep := range d.endpoints() {
		after := commandCalls(t, clients[ep.Name])
		after["info"]-- // the INFO commandstats of before
		got := map[string]int{}
		total := 0
		for cmd, n := range after {
			if cmd == "replconf" || cmd == "psync" {
				continue // the replica's own replication commands, counted by the master too (make test of 2026-12-07)
			}
			if delta := n - before[ep.Name][cmd]; delta != 0 {
				got[cmd] = delta
				total += delta
			}
		}
		if total > 2*observations || got["cluster|nodes"] != observations || got["info"] != observations {
			t.Errorf("%s: %d observations sent %v, want cluster|nodes and info once each per observation", ep.Name, observations, got)
		}
	}

	full := c.observe(d) // an engine without a pool reads everything
	for i, n := range v.Nodes {
		f := full.Nodes[i]
		if !n.Reachable() || n.ID != f.ID || n.Info.State != f.Info.State || n.Info.KnownNodes != f.Info.KnownNodes ||
			n.Info.SlotsAssigned != f.Info.SlotsAssigned || n.Replication.Role != f.Replication.Role ||
			n.Replication.MasterLinkUp != f.Replication.MasterLinkUp || n.Keys != f.Keys || n.NodeTimeout != f.NodeTimeout ||
			nodesShape(formatKnown(n.Known)) != nodesShape(formatKnown(f.Known)) {
			t.Errorf("%s: pooled view %+v, full view %+v", n.Endpoint.Name, n, f)
		}
	}
	if n := v.Nodes[0]; n.NodeTimeout != testNodeTimeout || n.Keys != 0 {
		t.Errorf("%s: node timeout %s, %d keys", n.Endpoint.Name, n.NodeTimeout, n.Keys)
	}
}

// formatKnown renders records as the CLUSTER NODES fields nodesShape keeps.
func formatKnown(recs []NodeRecord) string {
	var b strings.Builder
	for _, r := range recs {
		fmt.Fprintf(&b, "%s %s %s %s 0 0 %d %v %s\n", r.ID, r.Addr(), r.Flags, r.MasterID, r.ConfigEpoch, r.Connected, FormatRanges(r.Slots))
	}
	return b.String()
}

// A remembered cluster_state:ok never hides a failure: once a master dies, the other nodes'
// pooled observations report cluster_state:fail (its slots have no replica to take them
// over) as soon as Redis does, and config the engine sets is read again.
func TestObservePooledSeesFailureAndConfig(t *testing.T) {
	t.Parallel()
	c, d, pooled := pooledCluster(t, 3, 1)
	for range 3 {
		observeWith(t, pooled, d)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := pooled.ApplyConfig(ctx, d.endpoints(), map[string]string{"cluster-node-timeout": "4000"}); err != nil {
		t.Fatal(err)
	}
	for _, n := range observeWith(t, pooled, d).Nodes {
		if n.NodeTimeout != 4*time.Second {
			t.Fatalf("%s: node timeout %s after CONFIG SET 4000", n.Endpoint.Name, n.NodeTimeout)
		}
	}
	for range 2 {
		observeWith(t, pooled, d)
	}
	dead := d.Shards[0].Nodes[0]
	c.node(dead.Name).Kill()
	deadline := time.Now().Add(time.Minute)
	for {
		v := observeWith(t, pooled, d)
		failed := 0
		for _, n := range v.Nodes {
			switch {
			case n.Endpoint.Name == dead.Name:
				if n.Reachable() {
					t.Fatalf("%s answers after SIGKILL", dead.Name)
				}
			case !n.Info.OK():
				failed++
			}
		}
		if failed == len(v.Nodes)-1 {
			break
		}
		if time.Now().After(deadline) {
			full := c.observe(d)
			var states []string
			for i, n := range v.Nodes {
				states = append(states, fmt.Sprintf("%s pooled %q full %q", n.Endpoint.Name, n.Info.State, full.Nodes[i].Info.State))
			}
			t.Fatalf("a minute after %s died: %s", dead.Name, strings.Join(states, "; "))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// The pool holds at most its size, replaces a client whose password or owner changed, and
// closes an owner's clients on Forget or when their address leaves the owner's endpoints.
func TestPoolBounds(t *testing.T) {
	p := NewPool(2)
	defer p.Close()
	opts := Options{Password: "a"}
	a := p.client(opts, "x", "127.0.0.1:1")
	p.client(opts, "x", "127.0.0.1:2")
	if p.client(opts, "x", "127.0.0.1:1") != a {
		t.Fatal("same owner, address and password: a new client")
	}
	p.client(opts, "y", "127.0.0.1:3") // evicts 127.0.0.1:2, the least recently used
	if p.Len() != 2 || p.memo("x", "127.0.0.1:1").runID != "" {
		t.Fatalf("%d clients", p.Len())
	}
	p.remember("x", "127.0.0.1:1", nodeMemo{runID: "r"})
	if p.client(Options{Password: "b"}, "x", "127.0.0.1:1") == a || p.memo("x", "127.0.0.1:1").runID != "" {
		t.Fatal("a new password kept the old client or its memo")
	}
	p.retain("x", map[string]bool{})
	if p.Len() != 1 {
		t.Fatalf("%d clients after retaining none of x's", p.Len())
	}
	p.Forget("y")
	if p.Len() != 0 {
		t.Fatalf("%d clients after Forget", p.Len())
	}
}
