package topology

import (
	"strings"
	"testing"
	"time"
)

// failingIn marks node target as failing (flag fail? or fail) in the tables of the given
// reachable nodes, with its last pong at pong.
func failingIn(target string, fail bool, pong time.Time, viewers ...string) viewOpt {
	return func(v *ClusterView) {
		for _, n := range v.Nodes {
			if !n.Reachable() || (len(viewers) > 0 && !contains(viewers, n.Endpoint.Name)) {
				continue
			}
			if r := n.Lookup(fixtureIDs[target]); r != nil && !r.Flags.Myself {
				r.Flags.PFail, r.Flags.Fail = !fail, fail
				r.PongRecv = pong.UnixMilli()
				r.Connected = false
			}
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// withOffset sets the replication offset a node reports.
func withOffset(name string, offset int64) viewOpt {
	return func(v *ClusterView) {
		if n := v.Node(name); n.Reachable() {
			n.Replication.Offset = offset
		}
	}
}

// follows re-points node name (a replica) to master in its own table.
func follows(name, master string) viewOpt {
	return func(v *ClusterView) {
		if n := v.Node(name); n.Reachable() {
			n.Self().MasterID = fixtureIDs[master]
		}
	}
}

func hasFailover(steps []Step) bool {
	for _, s := range steps {
		if s.Kind == StepFailover {
			return true
		}
	}
	return false
}

// A master that only the engine (and perhaps its replica) cannot reach, while a majority of
// the masters is alive, is left to Redis's election however long it lasts: forcing the
// replica would split the shard in two. The wait names the shard.
func TestPlanNoTakeoverWhileMajorityAlive(t *testing.T) {
	d := fixtureDesired(nil)
	lastPong := time.UnixMilli(1795975255000)
	late := lastPong.Add(10 * time.Minute) // far beyond any forcing threshold
	cases := map[string][]viewOpt{
		// The engine's link to s2-0 is cut; every node still sees it healthy.
		"unreachable only to the engine": {down("s2-0")},
		// The engine and s2-0's replica are cut from it: fail? in the replica's view only.
		"fail? in the replica's view": {down("s2-0"), failingIn("s2-0", false, lastPong, "s2-1")},
		// s2-0 is really down for everyone; 2 of 3 masters can still elect its replica.
		"fail? everywhere, majority alive": {down("s2-0"), failingIn("s2-0", false, lastPong)},
		"fail everywhere, majority alive":  {down("s2-0"), failingIn("s2-0", true, lastPong)},
	}
	for name, opts := range cases {
		t.Run(name, func(t *testing.T) {
			v := fixtureView(t, "healthy-3x1.cluster-nodes.txt", d, opts...)
			v.ObservedAt = late
			steps, _ := Plan(v, d)
			if hasFailover(steps) {
				t.Fatalf("forced promotion while a majority of masters is alive: %v", stepStrings(steps))
			}
			if len(steps) != 1 || steps[0].Kind != StepWait || !strings.Contains(steps[0].Reason, "shard s2") {
				t.Fatalf("want one Wait naming shard s2, got %v", stepStrings(steps))
			}
		})
	}
}

// When no majority of the slot-owning masters is alive, Redis cannot elect: the engine
// forces TAKEOVER, after the replica has seen its master failing long enough, on the
// reachable replica with the highest replication offset.
func TestPlanTakeoverWithoutMajority(t *testing.T) {
	d := fixtureDesired(nil)
	lastPong := time.UnixMilli(1795975255000)
	base := []viewOpt{down("s0-0", "s2-0"), failingIn("s0-0", false, lastPong), failingIn("s2-0", false, lastPong),
		follows("s1-1", "s2-0")} // s2-0 has two replicas: s2-1 and s1-1
	for _, tc := range []struct {
		offsets map[string]int64
		want    string
	}{
		{map[string]int64{"s2-1": 100, "s1-1": 250}, "Failover s0-1 TAKEOVER; Failover s1-1 TAKEOVER"},
		{map[string]int64{"s2-1": 300, "s1-1": 250}, "Failover s0-1 TAKEOVER; Failover s2-1 TAKEOVER"},
	} {
		opts := append([]viewOpt{}, base...)
		for n, o := range tc.offsets {
			opts = append(opts, withOffset(n, o))
		}
		v := fixtureView(t, "healthy-3x1.cluster-nodes.txt", d, opts...)
		// 6 node timeouts of 3 s: not yet at 17 s, forced at 19 s.
		v.ObservedAt = lastPong.Add(17 * time.Second)
		if steps, _ := Plan(v, d); hasFailover(steps) {
			t.Fatalf("too early: %v", stepStrings(steps))
		}
		v.ObservedAt = lastPong.Add(19 * time.Second)
		steps, _ := Plan(v, d)
		if got := strings.Join(stepStrings(steps), "; "); got != tc.want {
			t.Fatalf("got %s, want %s", got, tc.want)
		}
	}
}
