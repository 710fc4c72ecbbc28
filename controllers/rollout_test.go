package controllers

import (
	"testing"
)

// shard builds a shard whose pods carry the given hashes by ordinal; ready
// lists the ready ordinals (all when nil).
func shard(name, desiredHash string, hashes []string, ready []int) *shardPods {
	s := &shardPods{Name: name, Desired: true, Expected: len(hashes), DesiredHash: desiredHash, TemplateCurrent: true}
	for i, h := range hashes {
		r := ready == nil
		for _, o := range ready {
			r = r || o == i
		}
		s.Pods = append(s.Pods, podInfo{Name: name + "-" + string(rune('0'+i)), Ordinal: i, Hash: h, Ready: r})
	}
	return s
}

func TestPlanRollout(t *testing.T) {
	allInSync := map[string]bool{"a-0": true, "a-1": true, "a-2": true, "b-0": true, "b-1": true}
	for _, tc := range []struct {
		name      string
		shards    []*shardPods
		masters   map[string]string
		inSync    map[string]bool
		converged bool
		want      rolloutAction
	}{
		{
			name:      "nothing stale",
			shards:    []*shardPods{shard("a", "new", []string{"new", "new"}, nil)},
			masters:   map[string]string{"a": "a-0"},
			converged: true,
			want:      rolloutAction{Kind: rolloutNone},
		},
		{
			name:      "replicas first, highest ordinal first",
			shards:    []*shardPods{shard("a", "new", []string{"old", "old", "old"}, nil)},
			masters:   map[string]string{"a": "a-0"},
			inSync:    allInSync,
			converged: true,
			want:      rolloutAction{Kind: rolloutDelete, Shard: "a", Pod: "a-2"},
		},
		{
			name:      "master on a higher ordinal: the replicas still go first",
			shards:    []*shardPods{shard("a", "new", []string{"old", "old"}, nil)},
			masters:   map[string]string{"a": "a-1"},
			inSync:    allInSync,
			converged: true,
			want:      rolloutAction{Kind: rolloutDelete, Shard: "a", Pod: "a-0"},
		},
		{
			name:      "only the master is stale: planned failover to an up-to-date replica",
			shards:    []*shardPods{shard("a", "new", []string{"old", "new", "new"}, nil)},
			masters:   map[string]string{"a": "a-0"},
			inSync:    allInSync,
			converged: true,
			want:      rolloutAction{Kind: rolloutFailover, Shard: "a", Pod: "a-1"},
		},
		{
			name:      "after the failover the old master is a replica and goes",
			shards:    []*shardPods{shard("a", "new", []string{"old", "new"}, nil)},
			masters:   map[string]string{"a": "a-1"},
			inSync:    allInSync,
			converged: true,
			want:      rolloutAction{Kind: rolloutDelete, Shard: "a", Pod: "a-0"},
		},
		{
			name:      "no replica in sync: wait",
			shards:    []*shardPods{shard("a", "new", []string{"old", "new"}, nil)},
			masters:   map[string]string{"a": "a-0"},
			inSync:    map[string]bool{},
			converged: true,
			want:      rolloutAction{Kind: rolloutWait, Shard: "a"},
		},
		{
			name:      "not converged (a replica re-syncing): wait",
			shards:    []*shardPods{shard("a", "new", []string{"old", "new"}, nil)},
			masters:   map[string]string{"a": "a-0"},
			inSync:    allInSync,
			converged: false,
			want:      rolloutAction{Kind: rolloutWait, Shard: "a"},
		},
		{
			name:      "one shard at a time, in order",
			shards:    []*shardPods{shard("a", "new", []string{"new", "new"}, nil), shard("b", "new", []string{"old", "old"}, nil)},
			masters:   map[string]string{"a": "a-0", "b": "b-0"},
			inSync:    allInSync,
			converged: true,
			want:      rolloutAction{Kind: rolloutDelete, Shard: "b", Pod: "b-1"},
		},
		{
			name:      "a stale pod that is not ready is replaced even before convergence",
			shards:    []*shardPods{shard("a", "new", []string{"new", "old"}, []int{0})},
			masters:   map[string]string{"a": "a-0"},
			converged: false,
			want:      rolloutAction{Kind: rolloutDelete, Shard: "a", Pod: "a-1"},
		},
		{
			name:      "a stale master that is not ready is never deleted blindly",
			shards:    []*shardPods{shard("a", "new", []string{"old", "new"}, []int{1})},
			masters:   map[string]string{"a": "a-0"},
			converged: false,
			want:      rolloutAction{Kind: rolloutWait, Shard: "a"},
		},
		{
			name:      "a shard without replicas restarts its master in place",
			shards:    []*shardPods{shard("a", "new", []string{"old"}, nil)},
			masters:   map[string]string{"a": "a-0"},
			converged: true,
			want:      rolloutAction{Kind: rolloutDelete, Shard: "a", Pod: "a-0"},
		},
		{
			name: "the StatefulSet does not carry the new template yet: wait",
			shards: func() []*shardPods {
				s := shard("a", "new", []string{"old", "old"}, nil)
				s.TemplateCurrent = false
				return []*shardPods{s}
			}(),
			masters:   map[string]string{"a": "a-0"},
			inSync:    allInSync,
			converged: true,
			want:      rolloutAction{Kind: rolloutWait, Shard: "a"},
		},
		{
			name: "a pod is terminating: wait",
			shards: func() []*shardPods {
				s := shard("a", "new", []string{"old", "old", "new"}, nil)
				s.Pods[2].Terminating = true
				return []*shardPods{s}
			}(),
			masters:   map[string]string{"a": "a-0"},
			inSync:    allInSync,
			converged: true,
			want:      rolloutAction{Kind: rolloutWait, Shard: "a"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := planRollout(rolloutInput{Shards: tc.shards, Masters: tc.masters, InSync: tc.inSync, Converged: tc.converged})
			if got.Kind != tc.want.Kind || got.Shard != tc.want.Shard || got.Pod != tc.want.Pod {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
			if got.Kind != rolloutNone && got.Reason == "" {
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
	var shards []*shardPods
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
		a := planRollout(rolloutInput{Shards: shards, Masters: masters, InSync: inSync(), Converged: true})
		switch a.Kind {
		case rolloutNone:
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
		case rolloutWait:
			t.Fatalf("step %d waits on a converged cluster: %s", step, a.Reason)
		case rolloutFailover:
			failovers++
			masters[a.Shard] = a.Pod
		case rolloutDelete:
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
