package topology

import (
	"context"
	"maps"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/redis-operator/redis-operator/test/redistest"
)

// TestOnCommandCountsWhatNodesReceive: over an idle Reconcile of a formed 2×1 cluster with a
// password (fresh connections, so each begins with go-redis's HELLO 2 AUTH), OnCommand reports exactly the
// commands the nodes' INFO commandstats counted, name for name.
func TestOnCommandCountsWhatNodesReceive(t *testing.T) {
	var mu sync.Mutex
	counted := map[string]int{}
	c := newTestCluster(t, redistest.Options{Password: "s3cret"}, Options{OnCommand: func(name string) {
		mu.Lock()
		counted[name]++
		mu.Unlock()
	}})
	_, d := c.form(2, 1)
	var clients []*redis.Client
	for _, sh := range c.shards {
		for _, n := range c.nodes[sh] {
			cl := n.Client()
			t.Cleanup(func() { _ = cl.Close() })
			clients = append(clients, cl)
		}
	}
	snapshot := func() map[string]int {
		total := map[string]int{}
		for _, cl := range clients {
			info, err := cl.Info(context.Background(), "commandstats").Result()
			if err != nil {
				t.Fatalf("INFO commandstats: %v", err)
			}
			for line := range strings.SplitSeq(info, "\r\n") {
				name, rest, ok := strings.Cut(strings.TrimPrefix(line, "cmdstat_"), ":calls=")
				if !ok || !strings.HasPrefix(line, "cmdstat_") {
					continue
				}
				calls, _ := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
				total[name] += calls
			}
		}
		return total
	}
	before := snapshot()
	mu.Lock()
	clear(counted)
	mu.Unlock()
	c.reconcile(d, nil)
	after := snapshot()
	received := map[string]int{}
	for name, n := range after {
		if n -= before[name]; name == "info" {
			n -= len(clients) // the first snapshot's own INFO, counted once it ran
		}
		if n != 0 {
			received[name] = n
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if !maps.Equal(counted, received) {
		t.Errorf("OnCommand counted %v; the nodes received %v", counted, received)
	}
	if counted["hello"] == 0 || counted["cluster|nodes"] == 0 {
		t.Errorf("OnCommand counted %v: want the connections' HELLO and CLUSTER NODES among them", counted)
	}
}

// TestCommandName: the names OnCommand reports are INFO commandstats' (command page INFO:
// "cmdstat_XXX" per command, container commands per subcommand).
func TestCommandName(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		cmd  redis.Cmder
		want string
	}{
		{redis.NewStringCmd(ctx, "CLUSTER", "NODES"), "cluster|nodes"},
		{redis.NewIntCmd(ctx, "MEMORY", "USAGE", "key", "SAMPLES", "0"), "memory|usage"},
		{redis.NewStringCmd(ctx, "INFO", "replication"), "info"},
		{redis.NewStatusCmd(ctx, "migrate", "10.0.0.1", "6379", "", "0", "5000", "KEYS", "a"), "migrate"},
		{redis.NewSliceCmd(ctx, "config", "get", "maxmemory"), "config|get"},
	} {
		if got := commandName(tc.cmd); got != tc.want {
			t.Errorf("commandName(%v) = %q, want %q", tc.cmd.Args(), got, tc.want)
		}
	}
}
