package topology

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// placedOn sets where each endpoint of d runs: node[name], and the zone of that node.
func placedOn(d Desired, node map[string]string, zone map[string]string) Desired {
	for i := range d.Shards {
		d.Shards[i].Nodes = slices.Clone(d.Shards[i].Nodes)
		for j := range d.Shards[i].Nodes {
			ep := &d.Shards[i].Nodes[j]
			ep.Node, ep.Zone = node[ep.Name], zone[node[ep.Name]]
		}
	}
	return d
}

func pfailIn(name, other string) viewOpt {
	return func(v *ClusterView) {
		for _, n := range v.Nodes {
			if n.Endpoint.Name != name {
				continue
			}
			for i := range n.Known {
				if n.Known[i].ID == fixtureIDs[other] {
					n.Known[i].Flags.PFail = true
				}
			}
		}
	}
}

func linkDown(name string) viewOpt {
	return func(v *ClusterView) {
		for _, n := range v.Nodes {
			if n.Endpoint.Name == name {
				n.Replication.MasterLinkUp = false
			}
		}
	}
}

// TestPlanSpreadsMasters: on the healthy 3×1 capture (masters s0-0, s1-0, s2-0; s2-1
// follows s2-0 and so on), where the pods run decides whether one planned failover moves a
// master, and which.
func TestPlanSpreadsMasters(t *testing.T) {
	nodes := func(kv ...string) map[string]string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	balanced := nodes("s0-0", "n1", "s1-0", "n2", "s2-0", "n3", "s0-1", "n2", "s1-1", "n3", "s2-1", "n1")
	piled := nodes("s0-0", "n1", "s1-0", "n1", "s2-0", "n3", "s0-1", "n2", "s1-1", "n2", "s2-1", "n1")
	moveS0 := "Failover s0-1 " + fixtureIDs["s0-0"] + ": moving master of s0 from node n1 to node n2: node n1 holds 2 masters, its share is 1"
	unknown := nodes("s0-0", "n1", "s1-0", "n1", "s2-0", "n3", "s0-1", "n2", "s1-1", "n2")
	cases := []struct {
		name  string
		node  map[string]string
		zone  map[string]string
		tweak func(*Desired)
		opts  []viewOpt
		want  []string
	}{
		{name: "one master per node stays", node: balanced},
		{name: "no placement known: nothing moves"},
		{name: "one pod's node unknown: nothing moves", node: unknown},
		{name: "two masters on n1: the first shard's moves to its replica on n2", node: piled, want: []string{moveS0}},
		{
			name: "all masters on n1: one move per pass, the first shard first",
			node: nodes("s0-0", "n1", "s1-0", "n1", "s2-0", "n1", "s0-1", "n2", "s1-1", "n3", "s2-1", "n2"),
			want: []string{"Failover s0-1 " + fixtureIDs["s0-0"] + ": moving master of s0 from node n1 to node n2: node n1 holds 3 masters, its share is 1"},
		},
		{
			// Moving s0 or s1 to n2 gives n2 two masters: the maximum stays 2 on one node.
			name: "a move that does not lower the maximum is not made",
			node: nodes("s0-0", "n1", "s1-0", "n1", "s2-0", "n2", "s0-1", "n2", "s1-1", "n2", "s2-1", "n3"),
		},
		{
			name: "a pod not Ready holds the move", node: piled,
			tweak: func(d *Desired) { d.Shards[2].Nodes[1].NotReady = true },
		},
		{
			name: "a pod that cannot serve clients yet (NoSlots) holds the move", node: piled,
			tweak: func(d *Desired) { d.Shards[0].Nodes[1].NoSlots = "it does not serve TLS certificate 2B yet" },
		},
		{name: "a node flagged PFAIL holds the move", node: piled, opts: []viewOpt{pfailIn("s2-0", "s2-1")}},
		{name: "HoldSpread holds the move", node: piled, tweak: func(d *Desired) { d.HoldSpread = true }},
		{
			name: "the replica syncing holds the move (and the planner waits)", node: piled, opts: []viewOpt{linkDown("s0-1")},
			want: []string{"Wait: replica s0-1 is syncing with s0-0"},
		},
		{
			// Nodes are balanced (one master each on n1, n2, n3 of four), zone za holds two.
			name: "zones count first",
			node: nodes("s0-0", "n1", "s1-0", "n2", "s2-0", "n3", "s0-1", "n3", "s1-1", "n4", "s2-1", "n4"),
			zone: map[string]string{"n1": "za", "n2": "za", "n3": "zb", "n4": "zc"},
			want: []string{"Failover s1-1 " + fixtureIDs["s1-0"] + ": moving master of s1 from zone za to zone zc: zone za holds 2 masters, its share is 1"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := placedOn(fixtureDesired(nil), tc.node, tc.zone)
			if tc.tweak != nil {
				tc.tweak(&d)
			}
			steps, err := Plan(fixtureView(t, "healthy-3x1.cluster-nodes.txt", d, tc.opts...), d)
			if err != nil {
				t.Fatalf("Plan: %v", err)
			}
			if got := stepStrings(steps); !slices.Equal(got, tc.want) {
				t.Errorf("steps:\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

// TestSimSpreadsMasters: masters piled up by failovers are spread by planned failovers in
// the simulation, one per plan, each lowering the pile-up, until no node holds more than
// ceil(masters/nodes); then nothing moves. Shards of three pods on three distinct nodes
// (the default anti-affinity), random masters, 20 seeds.
func TestSimSpreadsMasters(t *testing.T) {
	const shards, nodes = 6, 3
	for seed := range uint64(20) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 1))
			s := newSim(t)
			d := Desired{Shards: s.shards(fmt.Sprintf("sp%d-", seed), 0, shards, 3), ReplicasPerShard: 2}
			s.mustConverge(d)
			node := map[string]string{}
			for _, sh := range d.Shards {
				for i, j := range rng.Perm(nodes) {
					node[sh.Nodes[i].Name] = fmt.Sprintf("n%d", j)
				}
				// Pile up: a random pod of the shard is its master.
				if r := s.live[sh.Nodes[rng.IntN(3)].Name]; r.master != "" {
					s.promote(r)
				}
			}
			s.gossip()
			d = placedOn(d, node, nil)
			perNode := func() map[string]int {
				m := map[string]int{}
				for _, sh := range d.Shards {
					for _, ep := range sh.Nodes {
						if n := s.live[ep.Name]; n.master == "" {
							m[ep.Node]++
						}
					}
				}
				return m
			}
			before := slices.Max(mapValues(perNode()))
			failovers := s.steps[StepFailover]
			s.mustConverge(d)
			after := perNode()
			if m := slices.Max(mapValues(after)); m > (shards+nodes-1)/nodes {
				t.Errorf("masters per node %v after spreading (max %d before), want at most %d", after, before, (shards+nodes-1)/nodes)
			}
			moves := s.steps[StepFailover] - failovers
			t.Logf("max %d → %v in %d moves", before, after, moves)
			if steps, err := Plan(s.view(d), d); len(steps) > 0 || err != nil {
				t.Errorf("spread cluster plans %v, %v; want nothing", stepStrings(steps), err)
			}
			if before <= 2 && moves > 0 {
				t.Errorf("%d moves although no node held more than its share", moves)
			}
		})
	}
}

func mapValues(m map[string]int) []int {
	out := []int{0}
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// TestSimBootstrapSpreadsMasters: a new cluster's masters start spread over zones, then
// nodes, without a planned failover. The first case is the placement a CI run's scheduler
// chose for a 3×1 cluster on four nodes in three zones (za holds n1 and n4): taking each
// shard's first pod as master would have put two of three masters in za, and losing za would
// have left the cluster without a quorum of masters until the spread failover ran. The
// numbered cases are random placements of each shard's pods in distinct zones, each of which
// allows one master per zone and node (the test fails if the bootstrap finds a worse choice).
// "greedy" bootstraps more new shards than chooseMasters tries every combination of. Every
// case holds the spread failovers (HoldSpread), as the controller does until a new cluster has
// been Ready for a minute: the bootstrap's choice alone must spread the masters.
func TestSimBootstrapSpreadsMasters(t *testing.T) {
	zones := map[string]string{"n1": "za", "n2": "zb", "n3": "zc", "n4": "za"}
	run := func(t *testing.T, s *sim, d Desired, node map[string]string) {
		d = placedOn(d, node, zones)
		d.HoldSpread = true
		s.mustConverge(d)
		perZone, perNode := map[string]int{}, map[string]int{}
		for _, sh := range d.Shards {
			for _, ep := range sh.Nodes {
				if s.live[ep.Name].master == "" {
					perZone[ep.Zone]++
					perNode[ep.Node]++
				}
			}
		}
		if m := slices.Max(mapValues(perZone)); m > 1 {
			t.Errorf("masters per zone %v, want at most 1", perZone)
		}
		if m := slices.Max(mapValues(perNode)); m > 1 {
			t.Errorf("masters per node %v, want at most 1", perNode)
		}
		if n := s.steps[StepFailover]; n != 0 {
			t.Errorf("%d planned failovers after the bootstrap, want 0 (steps %v)", n, s.steps)
		}
	}
	t.Run("ci-placement", func(t *testing.T) {
		s := newSim(t)
		d := Desired{Shards: s.shards("cz", 0, 3, 2), ReplicasPerShard: 1}
		run(t, s, d, map[string]string{"cz0-0": "n1", "cz0-1": "n2", "cz1-0": "n3", "cz1-1": "n2", "cz2-0": "n4", "cz2-1": "n2"})
		if s.live["cz2-1"].master != "" {
			t.Errorf("shard cz2's master is not cz2-1, the only pod outside zone za and nodes holding a master")
		}
	})
	for seed := range uint64(20) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 2))
			s := newSim(t)
			d := Desired{Shards: s.shards(fmt.Sprintf("bz%d-", seed), 0, 3, 2), ReplicasPerShard: 1}
			node := map[string]string{}
			for _, sh := range d.Shards {
				// Distinct zones per shard, as the default zone anti-affinity asks.
				for {
					p := rng.Perm(4)
					if zones[fmt.Sprintf("n%d", p[0]+1)] != zones[fmt.Sprintf("n%d", p[1]+1)] {
						node[sh.Nodes[0].Name], node[sh.Nodes[1].Name] = fmt.Sprintf("n%d", p[0]+1), fmt.Sprintf("n%d", p[1]+1)
						break
					}
				}
			}
			run(t, s, d, node)
		})
	}
	t.Run("greedy", func(t *testing.T) {
		s := newSim(t)
		d := Desired{Shards: s.shards("gz", 0, 13, 2), ReplicasPerShard: 1}
		node := map[string]string{}
		for i, sh := range d.Shards {
			// Every shard's first pod in za: endpoint order alone would put all 13 masters
			// there. Even shards can use zb instead, odd ones zc.
			node[sh.Nodes[0].Name], node[sh.Nodes[1].Name] = []string{"n1", "n4"}[i%2], []string{"n2", "n3"}[i%2]
		}
		d = placedOn(d, node, zones)
		d.HoldSpread = true
		s.mustConverge(d)
		perZone := map[string]int{}
		for _, sh := range d.Shards {
			for _, ep := range sh.Nodes {
				if s.live[ep.Name].master == "" {
					perZone[ep.Zone]++
				}
			}
		}
		if m := slices.Max(mapValues(perZone)); m > 5 { // ceil(13 masters / 3 zones)
			t.Errorf("masters per zone %v, want at most 5", perZone)
		}
		if n := s.steps[StepFailover]; n != 0 {
			t.Errorf("%d planned failovers after the bootstrap, want 0", n)
		}
	})
}
