package topology

import (
	"errors"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The captured 3×1 cluster: shard-N = master + replica, as in testdata/README.md.
var fixtureIDs = map[string]string{
	"s0-0": "674621af07b2b4da279dafcee969efb87cb26e0f", // 127.0.0.2, master 0-5460
	"s0-1": "57f0178f9883b5f5abd05871128ca7d1c1445675", // 127.0.0.6
	"s1-0": "7506852052dcaab8c273a68ffbb71cc06c61e9f9", // 127.0.0.3, master 5461-10922
	"s1-1": "928eb96a408a4fa38cf7684cfb4dd1b807ceb851", // 127.0.0.7
	"s2-0": "6c4100c6760f71366dcfecccb1863248a3132dc5", // 127.0.0.4, master 10923-16383
	"s2-1": "5ee39e606c26e07ae80576974dea71b5ae9a3bc7", // 127.0.0.5
}

func fixtureDesired(addrs map[string]string) Desired {
	ep := func(name, def string) Endpoint {
		if a, ok := addrs[name]; ok {
			return Endpoint{Name: name, Addr: a}
		}
		return Endpoint{Name: name, Addr: def}
	}
	return Desired{
		Shards: []ShardSpec{
			{Name: "s0", Nodes: []Endpoint{ep("s0-0", "127.0.0.2:6379"), ep("s0-1", "127.0.0.6:6379")}},
			{Name: "s1", Nodes: []Endpoint{ep("s1-0", "127.0.0.3:6379"), ep("s1-1", "127.0.0.7:6379")}},
			{Name: "s2", Nodes: []Endpoint{ep("s2-0", "127.0.0.4:6379"), ep("s2-1", "127.0.0.5:6379")}},
		},
		ReplicasPerShard: 1,
	}
}

// nodeFromTable builds the view of endpoint ep from a CLUSTER NODES capture taken on some
// node: the myself flag moves to ep's own entry, so one capture yields every node's view of
// a cluster whose tables agree.
func nodeFromTable(t *testing.T, text string, ep Endpoint, id string) *NodeView {
	t.Helper()
	recs, err := ParseClusterNodes(text)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for i := range recs {
		recs[i].Flags.Myself = recs[i].ID == id
		if recs[i].ID == id {
			found = true
			recs[i].Connected = true
			recs[i].Flags.PFail, recs[i].Flags.Fail = false, false
		}
	}
	if !found {
		t.Fatalf("%s not in table", id)
	}
	n := &NodeView{Endpoint: ep, ID: id, Known: recs, NodeTimeout: 3 * time.Second}
	n.Info = ClusterInfo{State: "ok"}
	if self := n.Self(); self.Flags.Replica {
		n.Replication = ReplicationInfo{Role: "slave", MasterLinkUp: true}
	} else {
		n.Replication = ReplicationInfo{Role: "master"}
	}
	return n
}

type viewOpt func(*ClusterView)

func fixtureView(t *testing.T, file string, d Desired, opts ...viewOpt) *ClusterView {
	t.Helper()
	text := fixture(t, file)
	v := &ClusterView{ObservedAt: time.UnixMilli(1795975300000)}
	for _, ep := range d.endpoints() {
		v.Nodes = append(v.Nodes, nodeFromTable(t, text, ep, fixtureIDs[ep.Name]))
	}
	for _, o := range opts {
		o(v)
	}
	return v
}

func down(names ...string) viewOpt {
	return func(v *ClusterView) {
		for _, n := range v.Nodes {
			for _, name := range names {
				if n.Endpoint.Name == name {
					*n = NodeView{Endpoint: n.Endpoint, Err: errors.New("connection refused")}
				}
			}
		}
	}
}

// freshNode makes name an empty master with a new ID that knows only itself, as a pod
// whose volume was lost.
func freshNode(name, id string) viewOpt {
	return func(v *ClusterView) {
		for _, n := range v.Nodes {
			if n.Endpoint.Name != name {
				continue
			}
			host, port, _ := net.SplitHostPort(n.Endpoint.Addr)
			p, _ := strconv.Atoi(port)
			self := NodeRecord{ID: id, IP: host, Port: p, BusPort: p + 10000, Flags: NodeFlags{Myself: true, Master: true}, Connected: true}
			*n = NodeView{Endpoint: n.Endpoint, ID: id, Known: []NodeRecord{self}, Info: ClusterInfo{State: "fail", KnownNodes: 1},
				Replication: ReplicationInfo{Role: "master"}}
		}
	}
}

// unknownTo removes the entry of node other from node name's table.
func unknownTo(name, other string) viewOpt {
	return func(v *ClusterView) {
		for _, n := range v.Nodes {
			if n.Endpoint.Name != name {
				continue
			}
			var kept []NodeRecord
			for _, r := range n.Known {
				if r.ID != fixtureIDs[other] {
					kept = append(kept, r)
				}
			}
			n.Known = kept
		}
	}
}

// seenAsMaster makes name's table record other as an empty master: name has not yet had a
// packet from other since other became a replica.
func seenAsMaster(name, other string) viewOpt {
	return func(v *ClusterView) {
		for _, n := range v.Nodes {
			if n.Endpoint.Name != name {
				continue
			}
			for i := range n.Known {
				if r := &n.Known[i]; r.ID == fixtureIDs[other] {
					r.Flags.Replica, r.Flags.Master, r.MasterID = false, true, ""
				}
			}
		}
	}
}

// table replaces one node's view with another capture (for views that disagree).
func table(t *testing.T, name, file string) viewOpt {
	return func(v *ClusterView) {
		for i, n := range v.Nodes {
			if n.Endpoint.Name == name {
				v.Nodes[i] = nodeFromTable(t, fixture(t, file), n.Endpoint, fixtureIDs[name])
			}
		}
	}
}

func stateFail(names ...string) viewOpt {
	return func(v *ClusterView) {
		for _, n := range v.Nodes {
			for _, name := range names {
				if n.Endpoint.Name == name && n.Reachable() {
					n.Info.State = "fail"
				}
			}
		}
	}
}

// replicatingFrom makes replica name's replication connect to addr (INFO replication
// master_host:master_port) with its link down.
func replicatingFrom(name, addr string) viewOpt {
	return func(v *ClusterView) {
		for _, n := range v.Nodes {
			if n.Endpoint.Name == name {
				n.Replication.MasterLinkUp = false
				n.Replication.MasterAddr = addr
			}
		}
	}
}

func stepStrings(steps []Step) []string {
	out := make([]string, len(steps))
	for i, s := range steps {
		out[i] = s.String()
	}
	return out
}

func TestPlanFixtures(t *testing.T) {
	healthy := fixtureDesired(nil)
	newIPs := fixtureDesired(map[string]string{ // full-restart-new-ips: where each node came back
		"s0-0": "127.0.0.20:6379", "s1-0": "127.0.0.21:6379", "s2-1": "127.0.0.23:6379",
		"s1-1": "127.0.0.24:6379", "s0-1": "127.0.0.25:6379", "s2-0": "127.0.0.22:6379",
	})
	cases := []struct {
		name    string
		file    string
		desired Desired
		opts    []viewOpt
		want    []string
		wantErr error
	}{
		{name: "healthy cluster is converged", file: "healthy-3x1.cluster-nodes.txt", desired: healthy},
		{
			name: "handshake to a dead address is left to time out", file: "handshake.cluster-nodes.txt", desired: healthy,
			// In this capture 127.0.0.5 follows 127.0.0.4 as in the healthy one.
		},
		{
			name: "open slot on both sides is finished", file: "healthy-3x1.cluster-nodes.txt", desired: healthy,
			opts: []viewOpt{table(t, "s0-0", "open-slot.importing-side.cluster-nodes.txt"), table(t, "s1-0", "open-slot.migrating-side.cluster-nodes.txt")},
			want: []string{"Migrate 5461 s1-0 -> s0-0"},
		},
		{
			name: "importing side only: the source still owns the slot, so the move is finished", file: "healthy-3x1.cluster-nodes.txt", desired: healthy,
			opts: []viewOpt{table(t, "s0-0", "open-slot.importing-side.cluster-nodes.txt")},
			want: []string{"Migrate 5461 s1-0 -> s0-0"},
		},
		{
			name: "master down before fail?: wait for Redis", file: "master-down.pfail.cluster-nodes.txt", desired: healthy,
			opts: []viewOpt{down("s2-0")},
			want: []string{"Wait: shard s2: waiting for Redis to promote a replica of master 6c4100c6760f71366dcfecccb1863248a3132dc5 (5461 slots), unreachable from the engine: 2 of 3 slot-owning masters are alive (quorum 2), so Redis's own election decides"},
		},
		{
			name: "promoted replica: the dead master is awaited at its address, not forgotten; the pod is reported", file: "master-down.failed-and-promoted.cluster-nodes.txt", desired: healthy,
			opts: []viewOpt{down("s2-0")},
			// s2-0 comes back with its nodes.conf and rejoins as a replica by itself.
			wantErr: ErrNotReady,
		},
		{
			// Its address is reachable again, so the dead ID is no longer awaited: the fresh node
			// is met first, the dead ID forgotten in a later pass (TestFailureHealing).
			// A new node that is not its shard's master (s2-1 was promoted and owns the
			// slots): the anchor alone meets it, the others learn of it by gossip.
			name: "promoted replica, the pod back empty with a new ID: it is met", file: "master-down.failed-and-promoted.cluster-nodes.txt", desired: healthy,
			opts: []viewOpt{freshNode("s2-0", "00000000000000000000000000000000000000a4")},
			want: []string{"Meet s0-0 -> s2-0"},
		},
		{
			name: "old master back as replica of the promoted one: converged", file: "old-master-back-as-replica.cluster-nodes.txt", desired: healthy,
		},
		{
			name: "full restart on new IPs: the anchor meets everyone at the new address", file: "full-restart-new-ips.cluster-nodes.txt", desired: newIPs,
			opts: []viewOpt{stateFail("s0-0", "s0-1", "s1-0", "s1-1", "s2-0", "s2-1")},
			want: []string{"Meet s0-0 -> s0-1", "Meet s0-0 -> s1-0", "Meet s0-0 -> s1-1", "Meet s0-0 -> s2-0", "Meet s0-0 -> s2-1"},
		},
		{
			name: "after the meet, masters still flagged fail: wait (never reset)", file: "full-restart-after-meet.cluster-nodes.txt", desired: newIPs,
			opts: []viewOpt{stateFail("s0-0", "s0-1", "s1-0", "s1-1", "s2-0", "s2-1")},
			want: []string{"Wait: s0-0 reports cluster_state:fail"},
		},
		{name: "14 s later Redis cleared FAIL: converged", file: "full-restart-after-meet-plus-14s.cluster-nodes.txt", desired: newIPs},
		{
			// Redis 7.0.15 moved s0-0's address in s0-1's table by gossip, but not s0-1's
			// replication (INFO replication master_host), so the link stays down for good.
			name: "a replica still replicating from its master's old address is re-attached", file: "full-restart-after-meet-plus-14s.cluster-nodes.txt", desired: newIPs,
			opts: []viewOpt{replicatingFrom("s0-1", "127.0.0.2:6379")},
			want: []string{"Replicate s0-1 674621af07b2b4da279dafcee969efb87cb26e0f"},
		},
		{
			// s0-1 knows only the old addresses: it is met with the others, not re-attached.
			name: "... but only once its table has the master's new address", file: "full-restart-after-meet-plus-14s.cluster-nodes.txt", desired: newIPs,
			opts: []viewOpt{table(t, "s0-1", "full-restart-new-ips.cluster-nodes.txt"), replicatingFrom("s0-1", "127.0.0.2:6379")},
			want: []string{"Meet s0-1 -> s1-0", "Meet s0-1 -> s1-1", "Meet s0-1 -> s2-0", "Meet s0-1 -> s2-1"},
		},
		{
			name: "a replica in a full sync from its master's address is left alone", file: "full-restart-after-meet-plus-14s.cluster-nodes.txt", desired: newIPs,
			opts: []viewOpt{replicatingFrom("s0-1", "127.0.0.20:6379")},
			want: []string{"Wait: replica s0-1 is syncing with s0-0"},
		},
		{
			name: "a member another node does not know yet (gossip pending, or banned by a FORGET): wait", file: "healthy-3x1.cluster-nodes.txt", desired: healthy,
			opts: []viewOpt{unknownTo("s1-1", "s2-1")},
			want: []string{"Wait: s1-1 does not know s2-1 at 127.0.0.5:6379 yet"},
		},
		{
			name: "a master that still sees a replica as a master (it would refuse its election): wait", file: "healthy-3x1.cluster-nodes.txt", desired: healthy,
			opts: []viewOpt{seenAsMaster("s1-0", "s2-1")},
			want: []string{"Wait: s1-0 does not see s2-1 as a replica yet"},
		},
		{
			name: "replica unreachable: nothing to do but report it", file: "healthy-3x1.cluster-nodes.txt", desired: healthy,
			opts: []viewOpt{down("s1-1")}, wantErr: ErrNotReady,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := tc.desired
			if tc.file == "master-down.failed-and-promoted.cluster-nodes.txt" || tc.file == "old-master-back-as-replica.cluster-nodes.txt" {
				// s2-1 (127.0.0.5) is now the master of shard s2.
				d = fixtureDesired(nil)
			}
			v := fixtureView(t, tc.file, d, tc.opts...)
			steps, err := Plan(v, d)
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Fatalf("error %v, want %v", err, tc.wantErr)
			}
			got := stepStrings(steps)
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Fatalf("steps:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
			// Pure and deterministic: the same input plans the same steps.
			again, _ := Plan(v, d)
			if strings.Join(stepStrings(again), "\n") != strings.Join(got, "\n") {
				t.Fatal("Plan is not deterministic")
			}
		})
	}
}

func TestPlanInvalidDesired(t *testing.T) {
	v := &ClusterView{}
	ep := func(n, a string) Endpoint { return Endpoint{Name: n, Addr: a} }
	cases := map[string]Desired{
		"no shards":      {},
		"negative":       {Shards: []ShardSpec{{Name: "a", Nodes: []Endpoint{ep("a", "1.2.3.4:1")}}}, ReplicasPerShard: -1},
		"dup shard":      {Shards: []ShardSpec{{Name: "a"}, {Name: "a"}}},
		"dup node":       {Shards: []ShardSpec{{Name: "a", Nodes: []Endpoint{ep("x", "1.2.3.4:1"), ep("x", "1.2.3.4:2")}}}},
		"dup addr":       {Shards: []ShardSpec{{Name: "a", Nodes: []Endpoint{ep("x", "1.2.3.4:1")}}, {Name: "b", Nodes: []Endpoint{ep("y", "1.2.3.4:1")}}}},
		"hostname":       {Shards: []ShardSpec{{Name: "a", Nodes: []Endpoint{ep("x", "pod.svc:6379")}}}},
		"no port":        {Shards: []ShardSpec{{Name: "a", Nodes: []Endpoint{ep("x", "1.2.3.4")}}}},
		"leaving dup":    {Shards: []ShardSpec{{Name: "a"}}, Leaving: []ShardSpec{{Name: "a"}}},
		"unnamed shard":  {Shards: []ShardSpec{{Nodes: []Endpoint{ep("x", "1.2.3.4:1")}}}},
		"unnamed node":   {Shards: []ShardSpec{{Name: "a", Nodes: []Endpoint{ep("", "1.2.3.4:1")}}}},
		"too many shard": {Shards: make([]ShardSpec, NumSlots+1)},
	}
	for name, d := range cases {
		if _, err := Plan(v, d); !errors.Is(err, ErrInvalidDesired) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestPlanRefusesToMergeANewerCluster(t *testing.T) {
	d := fixtureDesired(nil)
	v := fixtureView(t, "healthy-3x1.cluster-nodes.txt", d)
	// s2-0 comes back knowing only itself, claiming 0-100 with a newer epoch than s0-0's.
	n := v.Node("s2-0")
	n.Known = []NodeRecord{{ID: n.ID, IP: "127.0.0.4", Port: 6379, BusPort: 16379, Connected: true,
		Flags: NodeFlags{Myself: true, Master: true}, ConfigEpoch: 50, Slots: []SlotRange{{0, 100}}}}
	for _, o := range v.Nodes {
		if o != n {
			var keep []NodeRecord
			for _, r := range o.Known {
				if r.ID != n.ID {
					keep = append(keep, r)
				}
			}
			o.Known = keep
		}
	}
	steps, err := Plan(v, d)
	if !errors.Is(err, ErrConflict) {
		t.Fatalf("error %v, want ErrConflict", err)
	}
	for _, s := range steps {
		if s.Kind == StepMeet && s.Target == "s2-0" || s.Kind == StepMigrate || s.Kind == StepAddSlots {
			t.Fatalf("unsafe step planned: %s", s)
		}
	}
}

func TestPlanRefusesANodeOfAnotherLiveCluster(t *testing.T) {
	d := fixtureDesired(nil)
	v := fixtureView(t, "healthy-3x1.cluster-nodes.txt", d)
	// s2-1 comes back (forgotten by the others) linked to a live node nobody here knows.
	n := v.Node("s2-1")
	foreign := NodeRecord{ID: strings.Repeat("e", 40), IP: "127.0.0.99", Port: 6379, BusPort: 16379, Connected: true,
		Flags: NodeFlags{Master: true}, Slots: []SlotRange{{0, 16383}}, ConfigEpoch: 1}
	n.Known = append(n.Known, foreign)
	for _, o := range v.Nodes {
		if o != n {
			var keep []NodeRecord
			for _, r := range o.Known {
				if r.ID != n.ID {
					keep = append(keep, r)
				}
			}
			o.Known = keep
		}
	}
	steps, err := Plan(v, d)
	if !errors.Is(err, ErrConflict) {
		t.Fatalf("error %v, want ErrConflict", err)
	}
	for _, s := range steps {
		if s.Kind == StepMeet && s.Target == "s2-1" {
			t.Fatalf("meets the foreign node's member: %v", stepStrings(steps))
		}
	}
	// The same node whose old peer is dead is met normally.
	n.Known[len(n.Known)-1].Connected = false
	n.Known[len(n.Known)-1].Flags.Fail = true
	steps, _ = Plan(v, d)
	if len(steps) == 0 || steps[0].String() != "Meet s0-0 -> s2-1" {
		t.Fatalf("steps %v", stepStrings(steps))
	}
}

// A new shard's master that knows the masters (handshake done) but not yet which slots they
// own (it learns that from each owner's next ping) is told, one TellOwner per owner with
// exactly that owner's slots, instead of resharding waiting for its cluster_state:ok; an
// owner still in handshake with it is left out; once its table covers the slots, the plan
// only waits for Redis to report ok.
func TestPlanTellsANewMasterTheSlotOwners(t *testing.T) {
	d := fixtureDesired(nil)
	d.Shards = append(d.Shards, ShardSpec{Name: "s3", Nodes: []Endpoint{{Name: "s3-0", Addr: "127.0.0.8:6379"}}})
	const newID = "00000000000000000000000000000000000000b8"
	build := func(learned bool, handshakeWith string, replicaIn ...string) *ClusterView {
		old := fixtureDesired(nil)
		v := fixtureView(t, "healthy-3x1.cluster-nodes.txt", old)
		self := NodeRecord{ID: newID, IP: "127.0.0.8", Port: 6379, BusPort: 16379, Flags: NodeFlags{Myself: true, Master: true}, Connected: true}
		fresh := &NodeView{Endpoint: d.Shards[3].Nodes[0], ID: newID, Known: []NodeRecord{self},
			Info: ClusterInfo{State: "fail"}, Replication: ReplicationInfo{Role: "master"}, NodeTimeout: 3 * time.Second}
		peer := self
		peer.Flags.Myself = false
		for _, n := range v.Nodes {
			n.Known = append(n.Known, peer)
			r := *n.Self()
			r.Flags.Myself = false
			if !learned {
				r.Slots = nil
			}
			if r.ID == fixtureIDs[handshakeWith] {
				r.Flags.Handshake = true
			}
			if len(replicaIn) > 0 && r.ID == fixtureIDs[replicaIn[0]] {
				r.Flags.Master, r.Flags.Replica = false, true // a stale view: SETSLOT NODE would be refused
			}
			fresh.Known = append(fresh.Known, r)
		}
		v.Nodes = append(v.Nodes, fresh)
		return v
	}

	v := build(false, "")
	steps, err := Plan(v, d)
	if err != nil {
		t.Fatal(err)
	}
	told := SlotSet{}
	for _, s := range steps {
		owner := v.Node(nameOfID(t, s.NodeID))
		if s.Kind != StepTellOwner || s.Node != "s3-0" || owner == nil || FormatRanges(s.Slots) != FormatRanges(owner.OwnSlots().Ranges()) {
			t.Fatalf("step %s; want TellOwner on s3-0 with the owner's own slots", s)
		}
		for _, r := range s.Slots {
			told.AddRange(r)
		}
	}
	if len(steps) != 3 || told.Len() != NumSlots {
		t.Fatalf("steps %v: %d slots told, want 3 owners and all %d", stepStrings(steps), told.Len(), NumSlots)
	}

	steps, _ = Plan(build(false, "s1-0"), d)
	for _, s := range steps {
		if s.NodeID == fixtureIDs["s1-0"] {
			t.Fatalf("told about %s while in handshake with it: %s", "s1-0", s)
		}
	}
	if len(steps) != 2 {
		t.Fatalf("steps %v, want the two owners it knows", stepStrings(steps))
	}
	steps, _ = Plan(build(false, "", "s2-0"), d)
	if len(steps) != 2 || slices.ContainsFunc(steps, func(s Step) bool { return s.NodeID == fixtureIDs["s2-0"] }) {
		t.Fatalf("steps %v, want none about s2-0, which s3-0 sees as a replica", stepStrings(steps))
	}

	steps, _ = Plan(build(true, ""), d)
	if got := stepStrings(steps); len(got) != 1 || got[0] != "Wait: s3-0 reports cluster_state:fail" {
		t.Fatalf("with the slots learned: %v, want only a wait for cluster_state:ok", got)
	}
}

func nameOfID(t *testing.T, id string) string {
	t.Helper()
	for name, fid := range fixtureIDs {
		if fid == id {
			return name
		}
	}
	t.Fatalf("no fixture node has ID %s", id)
	return ""
}
