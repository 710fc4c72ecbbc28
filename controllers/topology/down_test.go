package topology

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// Down endpoints (Endpoint.Down): pods that do not run. The engine acts on what it reaches;
// only the steps that need a Down node wait, and nothing is done that could lose a key
// because it is missing.

// markDown returns d with the named endpoints Down for why, without an address (a pod not
// scheduled has no IP), and stops their simulated nodes.
func (s *sim) markDown(d Desired, why string, names ...string) Desired {
	mark := func(shards []ShardSpec) []ShardSpec {
		out := slices.Clone(shards)
		for i := range out {
			out[i].Nodes = slices.Clone(out[i].Nodes)
			for j, ep := range out[i].Nodes {
				if slices.Contains(names, ep.Name) {
					out[i].Nodes[j] = Endpoint{Name: ep.Name, Down: why}
					s.live[ep.Name].up = false
				}
			}
		}
		return out
	}
	d.Shards, d.Leaving = mark(d.Shards), mark(d.Leaving)
	return d
}

// settle runs the plan and asserts it ends held up only by the named Down nodes.
func (s *sim) settle(d Desired, waitingFor ...string) {
	s.t.Helper()
	if err := s.run(d); !errors.Is(err, ErrNotReady) {
		s.t.Fatalf("error %v, want ErrNotReady", err)
	}
	p, steps, err := plan(s.view(d), d)
	res := buildResult(p, steps, err)
	if !res.Settled || res.Converged || strings.Join(res.WaitingFor, ",") != strings.Join(waitingFor, ",") {
		s.t.Fatalf("settled %v, converged %v, waiting for %q (want %q): %v", res.Settled, res.Converged, res.WaitingFor, waitingFor, err)
	}
	for _, name := range waitingFor {
		if !strings.Contains(err.Error(), "waiting for "+name+" (") {
			s.t.Fatalf("error %q does not name %s", err, name)
		}
	}
}

// masterSlots is the number of slots the running master of shard sh owns (-1: none).
func (s *sim) masterSlots(sh ShardSpec) int {
	for _, ep := range sh.Nodes {
		if n := s.live[ep.Name]; n.up && n.master == "" {
			return n.slots.Len()
		}
	}
	return -1
}

func TestSimScaleOutWithADownReplica(t *testing.T) {
	s := newSim(t)
	all := s.shards("s", 0, 4, 2)
	s.mustConverge(Desired{Shards: all[:3], ReplicasPerShard: 1})
	// s1-1's pod is rescheduled and stays Pending; then the cluster scales out to 4 shards.
	d := s.markDown(Desired{Shards: all, ReplicasPerShard: 1}, "Pending", "s1-1")
	s.steps = map[StepKind]int{}
	s.settle(d, "s1-1")
	for _, sh := range all {
		if c := s.masterSlots(sh); c != NumSlots/4 {
			t.Fatalf("shard %s owns %d slots, want %d", sh.Name, c, NumSlots/4)
		}
	}
	if s.live["s3-1"].master != s.live["s3-0"].id {
		t.Fatal("the new shard's replica does not follow its master")
	}
	if s.steps[StepForget] != 0 {
		t.Fatalf("forgot the Down replica's ID, which comes back with it: steps %v", s.steps)
	}
	// The pod runs again with its nodes.conf: the cluster converges.
	s.live["s1-1"].up = true
	s.mustConverge(Desired{Shards: all, ReplicasPerShard: 1})
}

func TestSimScaleOutWithANewShardDown(t *testing.T) {
	for _, down := range []string{"s3-0", "s3-1"} {
		t.Run(down, func(t *testing.T) {
			s := newSim(t)
			all := s.shards("s", 0, 4, 2)
			s.mustConverge(Desired{Shards: all[:3], ReplicasPerShard: 1})
			d := s.markDown(Desired{Shards: all, ReplicasPerShard: 1}, "Pending", down)
			s.moved = 0
			s.settle(d, down)
			// The new shard receives nothing while a pod of it is down: no key moves onto a
			// master without its replica (or that does not run).
			if s.moved != 0 || s.masterSlots(all[3]) > 0 {
				t.Fatalf("moved %d slots; the new shard owns %d", s.moved, s.masterSlots(all[3]))
			}
			s.live[down].up = true
			s.mustConverge(Desired{Shards: all, ReplicasPerShard: 1})
		})
	}
}

func TestSimScaleInWithALeavingPodDown(t *testing.T) {
	t.Run("replica of the leaving shard", func(t *testing.T) {
		s := newSim(t)
		all := s.shards("s", 0, 4, 2)
		s.mustConverge(Desired{Shards: all, ReplicasPerShard: 1})
		// Its drained master is reachable and every slot owner is: the Down replica holds
		// nothing the cluster does not serve elsewhere, so the shard is forgotten.
		d := s.markDown(Desired{Shards: all[:3], Leaving: all[3:], ReplicasPerShard: 1}, "Pending", "s3-1")
		s.mustConverge(d)
	})
	t.Run("master of the leaving shard, its replica up", func(t *testing.T) {
		s := newSim(t)
		all := s.shards("s", 0, 4, 2)
		s.mustConverge(Desired{Shards: all, ReplicasPerShard: 1})
		// Redis promotes the replica (Wait), which is then drained.
		d := s.markDown(Desired{Shards: all[:3], Leaving: all[3:], ReplicasPerShard: 1}, "Pending", "s3-0")
		s.mustConverge(d)
	})
	t.Run("master of the leaving shard, no replica", func(t *testing.T) {
		s := newSim(t)
		all := s.shards("s", 0, 4, 1)
		s.mustConverge(Desired{Shards: all, ReplicasPerShard: 0})
		slots := s.live["s3-0"].slots.Len()
		d := s.markDown(Desired{Shards: all[:3], Leaving: all[3:], ReplicasPerShard: 0, AllowDataLoss: true}, "Pending", "s3-0")
		s.steps = map[StepKind]int{}
		// Its slots cannot move and are not lost: everything waits for it, nothing is
		// forgotten or re-assigned, even with AllowDataLoss.
		if err := s.run(d); !errors.Is(err, ErrNotReady) || errors.Is(err, ErrShardLost) {
			t.Fatalf("error %v, want ErrNotReady only", err)
		}
		if s.live["s3-0"].slots.Len() != slots || s.steps[StepForget]+s.steps[StepAddSlots]+s.steps[StepMigrate] != 0 {
			t.Fatalf("steps %v with the only copy of %d slots down", s.steps, slots)
		}
		if got := assess(s.view(d), d).removable(); len(got) != 0 {
			t.Fatalf("removable %v while its master holds slots", got)
		}
	})
}

func TestSimShardWithEveryPodDownIsNotLost(t *testing.T) {
	s := newSim(t)
	all := s.shards("s", 0, 4, 2)
	s.mustConverge(Desired{Shards: all[:3], ReplicasPerShard: 1})
	slots := s.live["s1-0"].slots.Len()
	// Both pods of s1 are Pending: its slots are uncovered, but its data is on their
	// volumes. Nothing is declared lost or re-assigned, even with AllowDataLoss, and no slot
	// moves while one owner cannot be reached.
	d := s.markDown(Desired{Shards: all, ReplicasPerShard: 1, AllowDataLoss: true, Formed: true}, "Pending", "s1-0", "s1-1")
	s.steps = map[StepKind]int{}
	err := s.run(d)
	if !errors.Is(err, ErrNotReady) || errors.Is(err, ErrShardLost) {
		t.Fatalf("error %v, want ErrNotReady only", err)
	}
	if s.live["s1-0"].slots.Len() != slots || s.steps[StepForget]+s.steps[StepAddSlots]+s.steps[StepMigrate] != 0 {
		t.Fatalf("steps %v", s.steps)
	}
	p, steps, perr := plan(s.view(d), d)
	if res := buildResult(p, steps, perr); res.DataLoss != nil || res.Settled {
		t.Fatalf("data loss %v, settled %v", res.DataLoss, res.Settled)
	}
	s.live["s1-0"].up, s.live["s1-1"].up = true, true
	s.mustConverge(Desired{Shards: all, ReplicasPerShard: 1})
}

func TestSimForgetsDeadNodesWhileAPodIsDown(t *testing.T) {
	s := newSim(t)
	shards := s.shards("s", 0, 3, 2)
	s.mustConverge(Desired{Shards: shards, ReplicasPerShard: 1})
	d := s.markDown(Desired{Shards: shards, ReplicasPerShard: 1}, "Pending", "s0-1")
	// s2-1 comes back empty with a new ID: its old ID is dead, and forgotten although
	// another pod is down.
	dead := s.live["s2-1"]
	dead.up = false
	s.fresh(dead.ep)
	s.steps = map[StepKind]int{}
	s.settle(d, "s0-1")
	if s.steps[StepForget] == 0 || !s.nobodyKnows(dead.id) {
		t.Fatalf("the dead ID is still known: steps %v", s.steps)
	}
	if s.live["s2-1"].master != s.live["s2-0"].id {
		t.Fatal("the fresh node is not a replica of its shard's master")
	}
	if _, ok := s.live["s0-0"].known[s.live["s0-1"].id]; !ok {
		t.Fatal("the Down replica's ID was forgotten")
	}
}

func TestValidateDownEndpoints(t *testing.T) {
	d := fixtureDesired(nil)
	d.Shards[1].Nodes[1] = Endpoint{Name: "s1-1", Down: "Pending"}
	if err := d.Validate(); err != nil {
		t.Fatalf("a Down endpoint without an address: %v", err)
	}
	if eps := d.endpoints(); len(eps) != 5 || slices.ContainsFunc(eps, func(ep Endpoint) bool { return ep.Name == "s1-1" }) {
		t.Fatalf("endpoints to observe %v", eps)
	}
	d.Shards[1].Nodes[1].Down = ""
	if err := d.Validate(); !errors.Is(err, ErrInvalidDesired) {
		t.Fatalf("an endpoint without an address that is not Down: %v", err)
	}
}

// TestSimKeepsAFailedOverMasterWhosePodIsRecreated: s1-0's master fails over to s1-1 and its
// pod is re-created (Pending, no address yet). Redis 7.0 keeps the failed master in every
// table as a master without slots until it returns (the e2e scenario failover/master-crash):
// its ID is the one the pod brings back from its volume, so it is not forgotten.
func TestSimKeepsAFailedOverMasterWhosePodIsRecreated(t *testing.T) {
	s := newSim(t)
	shards := s.shards("s", 0, 3, 2)
	s.mustConverge(Desired{Shards: shards, ReplicasPerShard: 1})
	old := s.live["s1-0"]
	d := s.markDown(Desired{Shards: shards, ReplicasPerShard: 1}, "Pending", "s1-0")
	s.tick()
	if s.live["s1-1"].master != "" {
		t.Fatal("s1-1 was not promoted")
	}
	old.master = ""
	_, steps, _ := plan(s.view(d), d)
	for _, st := range steps {
		if st.Kind == StepForget && st.NodeID == old.id {
			t.Fatalf("the failed-over master %s of a re-created pod is forgotten: %+v", old.id, st)
		}
	}
}

// scaleOutHoldingS3 converges shards s0–s2 of five (one replica each), then runs a
// scale-out to all five in which hold has changed shard s3's nodes, and checks that the
// pass holds s3 back (ErrNotReady naming it and reason, no slot) while s4 receives its
// fifth. It returns the five shards and the desired state of the scale-out.
func scaleOutHoldingS3(t *testing.T, s *sim, reason string, hold func([]Endpoint)) ([]ShardSpec, Desired) {
	t.Helper()
	all := s.shards("s", 0, 5, 2)
	s.mustConverge(Desired{Shards: all[:3], ReplicasPerShard: 1})
	d := Desired{Shards: slices.Clone(all), ReplicasPerShard: 1}
	d.Shards[3].Nodes = slices.Clone(d.Shards[3].Nodes)
	hold(d.Shards[3].Nodes)
	err := s.run(d)
	if !errors.Is(err, ErrNotReady) || !strings.Contains(err.Error(), "shard s3 receives") || !strings.Contains(err.Error(), reason) {
		t.Fatalf("error %v, want ErrNotReady naming shard s3 and %q", err, reason)
	}
	if c := s.masterSlots(all[3]); c > 0 {
		t.Fatalf("shard s3 owns %d slots while it is held back", c)
	}
	if c := s.masterSlots(all[4]); c < NumSlots/5 || c > NumSlots/5+1 {
		t.Fatalf("shard s4 owns %d slots, want its fifth (%d)", c, NumSlots/5)
	}
	return all, d
}

// A new shard whose nodes cannot serve clients yet (Endpoint.NoSlots: the TLS certificate
// they present does not name their addresses) is met and gets its replica, but receives
// no slot until they can; another new shard gets its share meanwhile.
func TestSimScaleOutHoldsSlotsOffANoSlotsShard(t *testing.T) {
	s := newSim(t)
	const why = "it serves TLS certificate 1A, not 2B"
	all, _ := scaleOutHoldingS3(t, s, why, func(nodes []Endpoint) {
		for i := range nodes {
			nodes[i].NoSlots = why
		}
	})
	if s.live["s3-1"].master != s.live["s3-0"].id {
		t.Fatal("the held shard's replica does not follow its master")
	}
	// The nodes serve a certificate naming them: the shard receives its share.
	s.mustConverge(Desired{Shards: all, ReplicasPerShard: 1})
}

// TestPlanWaitsForARemovedReplicaToBeForgotten: after a replica scale-down (3 pods a shard to
// 2) the removed nodes stay in every table until Redis flags them failed; until the planner
// has forgotten them the cluster is not converged (CLUSTER SLOTS may still send clients to
// them), and no FORGET is sent before the flag; once flagged they are forgotten and the
// cluster converges.
func TestPlanWaitsForARemovedReplicaToBeForgotten(t *testing.T) {
	s := newSim(t)
	shards := s.shards("s", 0, 3, 3)
	s.mustConverge(Desired{Shards: shards, ReplicasPerShard: 2})
	d := Desired{Shards: slices.Clone(shards), ReplicasPerShard: 1}
	var gone []*simNode
	for i := range d.Shards {
		d.Shards[i].Nodes = d.Shards[i].Nodes[:2]
		n := s.live[shards[i].Nodes[2].Name]
		if n.master == "" {
			t.Fatalf("%s is a master", n.ep.Name)
		}
		n.up = false
		gone = append(gone, n)
	}
	v := s.view(d)
	for _, n := range v.Nodes {
		for i := range n.Known {
			n.Known[i].Flags.Fail = false // not flagged yet: disconnected only
		}
	}
	p, steps, perr := plan(v, d)
	res := buildResult(p, steps, perr)
	if res.Converged || res.Settled || !strings.Contains(res.Message+fmt.Sprint(perr), "which no pod carries") {
		t.Fatalf("converged %v, settled %v, message %q, error %v", res.Converged, res.Settled, res.Message, perr)
	}
	for _, st := range steps {
		if st.Kind == StepForget {
			t.Fatalf("FORGET before Redis flagged the node failed: %+v", st)
		}
	}
	s.mustConverge(d)
	for _, n := range gone {
		if !s.nobodyKnows(n.id) {
			t.Fatalf("%s (%s) is still known", n.ep.Name, n.id)
		}
	}
}

// A new shard whose master must announce a hostname (spec.externalAccess) receives no slot
// while a node does not know it under that hostname (that node would redirect clients to
// "?"), another new shard gets its share meanwhile, and once every table shows it the shard
// receives its slots.
func TestSimScaleOutWaitsUntilEveryNodeKnowsTheHostname(t *testing.T) {
	s := newSim(t)
	_, d := scaleOutHoldingS3(t, s, "address 10.96.0.30", func(nodes []Endpoint) {
		nodes[0].Hostname = "10.96.0.30"
	})
	// Every table shows the hostname: the shard receives its share.
	v := s.view(d)
	for _, n := range v.Nodes {
		for i := range n.Known {
			if n.Known[i].ID == s.live["s3-0"].id {
				n.Known[i].Hostname = "10.96.0.30"
			}
		}
	}
	_, steps, _ := plan(v, d)
	if !slices.ContainsFunc(steps, func(st Step) bool { return st.Kind == StepMigrate && st.Target == "s3-0" }) {
		t.Fatalf("no slot moves to s3-0 once every node knows its address: %v", stepStrings(steps))
	}
}
