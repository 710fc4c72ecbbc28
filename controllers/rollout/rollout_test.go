package rollout

import (
	"slices"
	"testing"
)

// shard builds a shard whose pods carry the given hashes by ordinal; ready
// lists the ready ordinals (all when nil).
func shard(name, desiredHash string, hashes []string, ready []int) Shard {
	s := Shard{Name: name, DesiredHash: desiredHash, TemplateCurrent: true}
	for i, h := range hashes {
		r := ready == nil
		for _, o := range ready {
			r = r || o == i
		}
		s.Pods = append(s.Pods, Pod{Name: name + "-" + string(rune('0'+i)), Hash: h, Ready: r})
	}
	return s
}

func withExpected(s Shard, n int) Shard {
	s.Expected = n
	return s
}

func TestPlanRollout(t *testing.T) {
	allInSync := map[string]bool{"a-0": true, "a-1": true, "a-2": true, "b-0": true, "b-1": true}
	for _, tc := range []struct {
		name      string
		shards    []Shard
		masters   map[string]string
		inSync    map[string]bool
		converged bool
		settled   bool
		want      Action
	}{
		{
			name:      "nothing stale",
			shards:    []Shard{shard("a", "new", []string{"new", "new"}, nil)},
			masters:   map[string]string{"a": "a-0"},
			converged: true,
			want:      Action{Kind: None},
		},
		{
			name:      "replicas first, highest ordinal first",
			shards:    []Shard{shard("a", "new", []string{"old", "old", "old"}, nil)},
			masters:   map[string]string{"a": "a-0"},
			inSync:    allInSync,
			converged: true,
			want:      Action{Kind: DeletePod, Shard: "a", Pod: "a-2"},
		},
		{
			name:      "master on a higher ordinal: the replicas still go first",
			shards:    []Shard{shard("a", "new", []string{"old", "old"}, nil)},
			masters:   map[string]string{"a": "a-1"},
			inSync:    allInSync,
			converged: true,
			want:      Action{Kind: DeletePod, Shard: "a", Pod: "a-0"},
		},
		{
			name:      "only the master is stale: planned failover to an up-to-date replica",
			shards:    []Shard{shard("a", "new", []string{"old", "new", "new"}, nil)},
			masters:   map[string]string{"a": "a-0"},
			inSync:    allInSync,
			converged: true,
			want:      Action{Kind: Failover, Shard: "a", Pod: "a-1"},
		},
		{
			name:      "after the failover the old master is a replica and goes",
			shards:    []Shard{shard("a", "new", []string{"old", "new"}, nil)},
			masters:   map[string]string{"a": "a-1"},
			inSync:    allInSync,
			converged: true,
			want:      Action{Kind: DeletePod, Shard: "a", Pod: "a-0"},
		},
		{
			name:      "no replica in sync: wait",
			shards:    []Shard{shard("a", "new", []string{"old", "new"}, nil)},
			masters:   map[string]string{"a": "a-0"},
			inSync:    map[string]bool{},
			converged: true,
			want:      Action{Kind: Wait, Shard: "a"},
		},
		{
			name:      "not converged (a replica re-syncing): wait",
			shards:    []Shard{shard("a", "new", []string{"old", "new"}, nil)},
			masters:   map[string]string{"a": "a-0"},
			inSync:    allInSync,
			converged: false,
			want:      Action{Kind: Wait, Shard: "a"},
		},
		{
			name:      "one shard at a time, in order",
			shards:    []Shard{shard("a", "new", []string{"new", "new"}, nil), shard("b", "new", []string{"old", "old"}, nil)},
			masters:   map[string]string{"a": "a-0", "b": "b-0"},
			inSync:    allInSync,
			converged: true,
			want:      Action{Kind: DeletePod, Shard: "b", Pod: "b-1"},
		},
		{
			name:      "a stale pod that is not ready is replaced even before convergence",
			shards:    []Shard{shard("a", "new", []string{"new", "old"}, []int{0})},
			masters:   map[string]string{"a": "a-0"},
			converged: false,
			want:      Action{Kind: DeletePod, Shard: "a", Pod: "a-1"},
		},
		{
			name: "a stale pod that is not ready goes first, in any shard",
			shards: []Shard{shard("a", "new", []string{"old", "old"}, nil),
				shard("b", "new", []string{"old", "old"}, []int{0})},
			masters:   map[string]string{"a": "a-0", "b": "b-0"},
			inSync:    allInSync,
			converged: false,
			want:      Action{Kind: DeletePod, Shard: "b", Pod: "b-1"},
		},
		{
			name: "settled (a pod of shard a does not run): shard a waits, shard b rolls",
			shards: []Shard{shard("a", "new", []string{"old", "new"}, []int{0}),
				shard("b", "new", []string{"old", "old"}, nil)},
			masters:   map[string]string{"a": "a-0", "b": "b-0"},
			inSync:    allInSync,
			converged: false, settled: true,
			want: Action{Kind: DeletePod, Shard: "b", Pod: "b-1"},
		},
		{
			// The e2e upgrade scenario: shard a's replica was deleted for the
			// roll and not yet created again; its master must not restart in
			// place as if the shard had no replica.
			name:      "settled, a replica deleted and not yet back: the master waits",
			shards:    []Shard{withExpected(shard("a", "new", []string{"old"}, nil), 2)},
			masters:   map[string]string{"a": "a-0"},
			inSync:    allInSync,
			converged: false, settled: true,
			want: Action{Kind: Wait, Shard: "a"},
		},
		{
			name:      "settled, only the shard with the pod that does not run is stale: wait",
			shards:    []Shard{shard("a", "new", []string{"old", "new"}, []int{0}), shard("b", "new", []string{"new", "new"}, nil)},
			masters:   map[string]string{"a": "a-0", "b": "b-0"},
			inSync:    allInSync,
			converged: false, settled: true,
			want: Action{Kind: Wait, Shard: "a"},
		},
		{
			name:      "a stale master that is not ready is never deleted blindly",
			shards:    []Shard{shard("a", "new", []string{"old", "new"}, []int{1})},
			masters:   map[string]string{"a": "a-0"},
			converged: false,
			want:      Action{Kind: Wait, Shard: "a"},
		},
		{
			name:      "a shard without replicas restarts its master in place",
			shards:    []Shard{shard("a", "new", []string{"old"}, nil)},
			masters:   map[string]string{"a": "a-0"},
			converged: true,
			want:      Action{Kind: DeletePod, Shard: "a", Pod: "a-0"},
		},
		{
			name: "the StatefulSet does not carry the new template yet: wait",
			shards: func() []Shard {
				s := shard("a", "new", []string{"old", "old"}, nil)
				s.TemplateCurrent = false
				return []Shard{s}
			}(),
			masters:   map[string]string{"a": "a-0"},
			inSync:    allInSync,
			converged: true,
			want:      Action{Kind: Wait, Shard: "a"},
		},
		{
			name: "a pod is terminating: wait",
			shards: func() []Shard {
				s := shard("a", "new", []string{"old", "old", "new"}, nil)
				s.Pods[2].Terminating = true
				return []Shard{s}
			}(),
			masters:   map[string]string{"a": "a-0"},
			inSync:    allInSync,
			converged: true,
			want:      Action{Kind: Wait, Shard: "a"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Plan(Input{Shards: tc.shards, Masters: tc.masters, InSync: tc.inSync, Converged: tc.converged, Settled: tc.settled})
			if got.Kind != tc.want.Kind || got.Shard != tc.want.Shard || got.Pod != tc.want.Pod {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
			if got.Kind != None && got.Reason == "" {
				t.Error("no reason")
			}
		})
	}
}

// TestRolloutSimulation plays a whole rolling update of a 3-shard cluster
// with 2 replicas per shard: each step is applied to a model (a deleted
// pod comes back up to date, a failover moves the master), and the
// invariants hold at every step: at most one pod of a shard is down, a
// master is never deleted while it is master and has a replica, and every
// pod ends up to date.
func TestRolloutSimulation(t *testing.T) {
	var shards []Shard
	masters := map[string]string{}
	for _, name := range []string{"a", "b", "c"} {
		s := shard(name, "new", []string{"old", "old", "old"}, nil)
		shards = append(shards, s)
		masters[name] = name + "-1" // masters need not sit on ordinal 0
	}
	inSync := func() map[string]bool {
		m := map[string]bool{}
		for _, s := range shards {
			for _, p := range s.Pods {
				if p.Name != masters[s.Name] && p.Ready {
					m[p.Name] = true
				}
			}
		}
		return m
	}
	failovers, deletes := 0, 0
	for step := 0; step < 100; step++ {
		a := Plan(Input{Shards: shards, Masters: masters, InSync: inSync(), Converged: true})
		switch a.Kind {
		case None:
			for _, s := range shards {
				for _, p := range s.Pods {
					if p.Hash != "new" {
						t.Fatalf("done with %s still old", p.Name)
					}
				}
			}
			if failovers != 3 || deletes != 9 {
				t.Errorf("%d failovers and %d deletions, want 3 and 9", failovers, deletes)
			}
			return
		case Wait:
			t.Fatalf("step %d waits on a converged cluster: %s", step, a.Reason)
		case Failover:
			failovers++
			masters[a.Shard] = a.Pod
		case DeletePod:
			deletes++
			if a.Pod == masters[a.Shard] {
				t.Fatalf("step %d deletes master %s of a shard with replicas", step, a.Pod)
			}
			// The StatefulSet recreates the pod from the new template; in
			// the model it is back and in sync before the next pass.
			for _, s := range shards {
				for i := range s.Pods {
					if s.Pods[i].Name == a.Pod {
						s.Pods[i].Hash = "new"
					}
				}
			}
		}
	}
	t.Fatal("rolling update did not finish in 100 steps")
}

// TestStale: the pods a rolling update still has to replace, in shard and
// ordinal order; a terminating pod is on its way out and is not counted.
func TestStale(t *testing.T) {
	terminating := func(s Shard, ord int) Shard {
		s.Pods = slices.Clone(s.Pods)
		s.Pods[ord].Terminating = true
		return s
	}
	for _, tc := range []struct {
		name   string
		shards []Shard
		want   []string
	}{
		{name: "no shards", shards: nil, want: nil},
		{name: "all current", shards: []Shard{shard("a", "new", []string{"new", "new"}, nil)}, want: nil},
		{
			name:   "old pods of every shard, in order",
			shards: []Shard{shard("a", "new", []string{"old", "new", "old"}, nil), shard("b", "new", []string{"new", "old"}, nil)},
			want:   []string{"a-0", "a-2", "b-1"},
		},
		{
			name:   "a terminating old pod is not stale",
			shards: []Shard{terminating(shard("a", "new", []string{"old", "old"}, nil), 1)},
			want:   []string{"a-0"},
		},
		{
			name:   "readiness does not matter",
			shards: []Shard{shard("a", "new", []string{"old", "old"}, []int{0})},
			want:   []string{"a-0", "a-1"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Stale(tc.shards); !slices.Equal(got, tc.want) {
				t.Errorf("Stale = %v, want %v", got, tc.want)
			}
		})
	}
}
