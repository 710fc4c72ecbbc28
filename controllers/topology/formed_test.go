package topology

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis-operator/redis-operator/test/redistest"
)

// wipeShard brings every pod of shard back as a fresh empty node (claims deleted) and,
// when forget is set, makes every other node forget the old incarnations as a hand-run
// CLUSTER FORGET would. The old incarnations' slots are dropped from the model: nobody
// claims them any more.
func (s *sim) wipeShard(sh ShardSpec, forget bool) {
	for _, ep := range sh.Nodes {
		old := s.live[ep.Name]
		old.up = false
		old.slots = SlotSet{}
		if forget {
			for _, n := range s.live {
				delete(n.known, old.id)
				n.banned[old.id] = true
			}
		}
		s.fresh(ep)
	}
	s.lossAccepted = true // the loss happened outside the engine
}

// A formed cluster whose every node came back empty is never re-bootstrapped silently: the
// planner reports every slot lost and assigns none, until AllowDataLoss.
func TestSimFormedClusterComesBackEmpty(t *testing.T) {
	for _, r := range []int{0, 1} {
		t.Run(fmt.Sprintf("r%d", r), func(t *testing.T) {
			s := newSim(t)
			d := Desired{Shards: s.shards("s", 0, 3, 1+r), ReplicasPerShard: r}
			s.mustConverge(d)
			addSlots := s.steps[StepAddSlots]
			for _, sh := range d.Shards {
				s.wipeShard(sh, false)
			}
			d.Formed = true
			err := s.run(d)
			if !errors.Is(err, ErrShardLost) {
				t.Fatalf("error %v, want ErrShardLost", err)
			}
			if s.steps[StepAddSlots] != addSlots {
				t.Fatalf("%d AddSlots steps after the loss", s.steps[StepAddSlots]-addSlots)
			}
			for _, sh := range d.Shards {
				for _, ep := range sh.Nodes {
					if n := s.live[ep.Name]; n.slots.Len() > 0 {
						t.Fatalf("%s got %d slots", ep.Name, n.slots.Len())
					}
				}
			}
			pl, _, perr := plan(s.view(d), d)
			if !errors.Is(perr, ErrShardLost) || pl.lost == nil || pl.lost.SlotCount != NumSlots ||
				FormatRanges(pl.lost.Slots) != "0-16383" || len(pl.lost.Shards) != 3 {
				t.Fatalf("lost = %+v (%v)", pl.lost, perr)
			}
			res := buildResult(pl, nil, perr)
			if res.Converged || res.DataLoss == nil {
				t.Fatalf("result %+v", res)
			}
			d.AllowDataLoss = true
			s.mustConverge(d)
		})
	}
}

// One shard came back empty and its old IDs were forgotten by hand: nobody claims its slots
// any more, and in a formed cluster they are reported lost, not handed to the fresh master.
func TestSimFormedShardForgottenAfterLoss(t *testing.T) {
	s := newSim(t)
	d := Desired{Shards: s.shards("s", 0, 3, 2), ReplicasPerShard: 1}
	s.mustConverge(d)
	want := s.live["s2-0"].slots.Ranges()
	addSlots := s.steps[StepAddSlots]
	s.wipeShard(d.Shards[2], true)
	d.Formed = true
	if err := s.run(d); !errors.Is(err, ErrShardLost) {
		t.Fatalf("error %v, want ErrShardLost", err)
	}
	if s.steps[StepAddSlots] != addSlots || s.live["s2-0"].slots.Len() != 0 {
		t.Fatal("slots of the lost shard assigned without AllowDataLoss")
	}
	pl, _, _ := plan(s.view(d), d)
	if pl.lost == nil || FormatRanges(pl.lost.Slots) != FormatRanges(want) || fmt.Sprint(pl.lost.Shards) != "[s2]" {
		t.Fatalf("lost = %+v, want slots %s of shard s2", pl.lost, FormatRanges(want))
	}
	// A new cluster (Formed false) is still bootstrapped as before.
	d.Formed, d.AllowDataLoss = false, false
	s.mustConverge(d)
}

// Real redis-server: every node of a formed cluster comes back empty (its volume lost); the
// engine assigns no slot and reports them all lost, until AllowDataLoss.
func TestFormedClusterComesBackEmpty(t *testing.T) {
	c := newTestCluster(t, redistest.Options{}, Options{})
	all, d := c.form(3, 1)
	redistest.Load(t, c.client(d), redistest.Dataset{Prefix: "f", Keys: 3000})
	for _, s := range all {
		n := c.nodes[s][0]
		n.Kill()
		n.Wipe()
		n.Restart()
	}
	d.Formed = true
	res, err := c.tryReconcile(d, nil, time.Minute)
	if !errors.Is(err, ErrShardLost) || res.DataLoss == nil || res.DataLoss.SlotCount != NumSlots || res.Converged {
		t.Fatalf("error %v, result %+v; want ErrShardLost for all slots", err, res)
	}
	t.Logf("reported: %s", res.Message)
	for _, n := range c.observe(d).Nodes {
		if n.OwnSlots().Len() > 0 {
			t.Fatalf("%s was given %d slots", n.Endpoint.Name, n.OwnSlots().Len())
		}
	}
	d.AllowDataLoss = true
	c.assertShape(d, c.reconcile(d, nil))
}

// Real redis-server: one shard's node comes back empty and the others forget its old ID by
// hand (CLUSTER FORGET): its slots are then unassigned everywhere, and the engine reports
// them lost for that shard instead of handing them to the fresh node.
func TestFormedShardForgottenAfterLoss(t *testing.T) {
	c := newTestCluster(t, redistest.Options{}, Options{})
	all, d := c.form(3, 1)
	ds := redistest.Dataset{Prefix: "f", Keys: 3000}
	redistest.Load(t, c.client(d), ds)
	old := c.observe(d).Node("s2-0")
	want := FormatRanges(old.OwnSlots().Ranges())
	n := c.nodes["s2"][0]
	n.Kill()
	n.Wipe()
	n.Restart()
	for _, s := range all[:2] {
		c.nodes[s][0].Do("CLUSTER", "FORGET", old.ID)
	}
	d.Formed = true
	res, err := c.tryReconcile(d, nil, time.Minute)
	if !errors.Is(err, ErrShardLost) || res.DataLoss == nil {
		t.Fatalf("error %v (%s); want ErrShardLost", err, res.Message)
	}
	if got := FormatRanges(res.DataLoss.Slots); got != want || fmt.Sprint(res.DataLoss.Shards) != "[s2]" {
		t.Fatalf("DataLoss %+v, want slots %s of shard s2", res.DataLoss, want)
	}
	if c.observe(d).Node("s2-0").OwnSlots().Len() > 0 {
		t.Fatal("the fresh node was given the lost slots")
	}
}
