package topology

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A small model of Redis Cluster for planner tests: nodes with IDs, roles, slot ownership,
// config epochs and a table of known peers (with the address each believes). Steps from
// Plan are applied to it; "Redis" then gossips (peers of peers become known, addresses of
// failing peers are corrected), promotes a replica of a dead master when time passes (Wait),
// and demotes masters that lost all their slots. Invariants are checked after every batch.

type simNode struct {
	ep     Endpoint
	id     string
	up     bool
	master string // ID followed; "" for a master
	slots  SlotSet
	epoch  uint64
	known  map[string]string // peer ID -> address this node believes
	banned map[string]bool   // forgotten IDs gossip must not re-add
	imp    map[int]string
	mig    map[int]string
	keys   int64
}

type sim struct {
	t     testing.TB
	live  map[string]*simNode // endpoint name -> current incarnation
	all   map[string]*simNode // every incarnation by ID
	seq   int
	now   time.Time
	moved int // slots moved by Migrate steps
	steps map[StepKind]int
	// bootstrapped: every slot has had an owner; from then on a slot never lacks one,
	// except after an accepted data loss.
	bootstrapped bool
	lossAccepted bool
}

func newSim(t testing.TB) *sim {
	return &sim{t: t, live: map[string]*simNode{}, all: map[string]*simNode{}, now: time.UnixMilli(1_800_000_000_000), steps: map[StepKind]int{}}
}

func (s *sim) fresh(ep Endpoint) *simNode {
	s.seq++
	n := &simNode{ep: ep, id: fmt.Sprintf("%040x", s.seq), up: true, known: map[string]string{}, banned: map[string]bool{}}
	s.live[ep.Name] = n
	s.all[n.id] = n
	return n
}

var simAddr = 0

// shard creates the endpoints of one shard as fresh running nodes.
func (s *sim) shard(name string, nodes int) ShardSpec {
	spec := ShardSpec{Name: name}
	for i := range nodes {
		simAddr++
		ep := Endpoint{Name: fmt.Sprintf("%s-%d", name, i), Addr: fmt.Sprintf("10.%d.%d.%d:6379", simAddr/65536, simAddr/256%256, simAddr%256)}
		s.fresh(ep)
		spec.Nodes = append(spec.Nodes, ep)
	}
	return spec
}

func (s *sim) shards(prefix string, from, to, nodes int) []ShardSpec {
	var out []ShardSpec
	for i := from; i < to; i++ {
		out = append(out, s.shard(fmt.Sprintf("%s%d", prefix, i), nodes))
	}
	return out
}

func (s *sim) owner(slot int) *simNode {
	for _, n := range s.all {
		if n.master == "" && n.slots.Has(slot) {
			return n
		}
	}
	return nil
}

func (s *sim) maxEpoch() uint64 {
	var m uint64
	for _, n := range s.all {
		m = max(m, n.epoch)
	}
	return m
}

func splitAddr(addr string) (string, int) {
	h, p, _ := net.SplitHostPort(addr)
	n, _ := strconv.Atoi(p)
	return h, n
}

func (s *sim) record(viewer, n *simNode, addr string) NodeRecord {
	ip, port := splitAddr(addr)
	r := NodeRecord{ID: n.id, IP: ip, Port: port, BusPort: port + 10000, ConfigEpoch: n.epoch}
	r.Connected = n.up && addr == n.ep.Addr
	if n == viewer {
		r.Flags.Myself = true
		r.Connected = true
		r.Importing, r.Migrating = copyMap(n.imp), copyMap(n.mig)
	} else if !r.Connected {
		r.Flags.Fail = true
	}
	if n.master == "" {
		r.Flags.Master = true
		r.Slots = n.slots.Ranges()
	} else {
		r.Flags.Replica = true
		r.MasterID = n.master
	}
	return r
}

func copyMap(m map[int]string) map[int]string {
	if len(m) == 0 {
		return nil
	}
	out := map[int]string{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

func (s *sim) view(d Desired) *ClusterView {
	v := &ClusterView{ObservedAt: s.now}
	for _, ep := range d.endpoints() {
		n := s.live[ep.Name]
		if n == nil || !n.up || n.ep.Addr != ep.Addr {
			v.Nodes = append(v.Nodes, &NodeView{Endpoint: ep, Err: errors.New("connection refused")})
			continue
		}
		nv := &NodeView{Endpoint: ep, ID: n.id, Keys: n.keys, NodeTimeout: 2 * time.Second}
		nv.Known = append(nv.Known, s.record(n, n, n.ep.Addr))
		ids := make([]string, 0, len(n.known))
		for id := range n.known {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		covered := n.slots
		for _, id := range ids {
			peer := s.all[id]
			rec := s.record(n, peer, n.known[id])
			nv.Known = append(nv.Known, rec)
			if rec.Connected {
				for _, r := range rec.Slots {
					covered.AddRange(r)
				}
			}
		}
		nv.Info.State = "fail"
		if covered.Len() == NumSlots {
			nv.Info.State = "ok"
		}
		if n.master == "" {
			nv.Replication.Role = "master"
		} else {
			m := s.all[n.master]
			nv.Replication = ReplicationInfo{Role: "slave", MasterLinkUp: m.up && n.known[m.id] == m.ep.Addr}
		}
		v.Nodes = append(v.Nodes, nv)
	}
	return v
}

func (s *sim) node(name string) *simNode {
	n := s.live[name]
	if n == nil || !n.up {
		s.t.Fatalf("step targets %s, which is not running", name)
	}
	return n
}

// apply runs one plan's steps on the model, checking each against Redis's preconditions.
func (s *sim) apply(steps []Step, d Desired) {
	t := s.t
	migrated := map[int]bool{}
	for _, st := range steps {
		s.steps[st.Kind]++
		switch st.Kind {
		case StepAddSlots:
			n := s.node(st.Node)
			for _, sl := range expand(st.Slots) {
				if o := s.owner(sl); o != nil {
					t.Fatalf("%s: slot %d already owned by %s", st, sl, o.ep.Name)
				}
				n.slots.Add(sl)
			}
		case StepSetEpoch:
			n := s.node(st.Node)
			if len(n.known) > 0 || n.epoch != 0 {
				t.Fatalf("%s: node is not fresh", st)
			}
			n.epoch = st.Epoch
		case StepMeet:
			a, b := s.node(st.Node), s.node(st.Target)
			a.known[b.id], b.known[a.id] = b.ep.Addr, a.ep.Addr
			delete(a.banned, b.id)
			delete(b.banned, a.id)
		case StepReplicate:
			n := s.node(st.Node)
			m := s.all[st.NodeID]
			if _, ok := n.known[st.NodeID]; !ok || m == nil || m.master != "" {
				t.Fatalf("%s: master unknown or not a master", st)
			}
			if n.master == "" && (n.slots.Len() > 0 || n.keys > 0) {
				t.Fatalf("%s: node has slots or keys", st)
			}
			n.master = st.NodeID
		case StepMigrate:
			src, dst := s.node(st.Node), s.node(st.Target)
			if src.master != "" || dst.master != "" {
				t.Fatalf("%s: both ends must be masters", st)
			}
			r := d.ReplicasPerShard
			for _, ep := range shardOfEndpoint(d, dst.ep.Name).Nodes {
				if n := s.live[ep.Name]; r > 0 && n != dst && n.up && n.master != dst.id {
					t.Fatalf("%s: destination's replica %s is not attached yet", st, ep.Name)
				}
			}
			for _, sl := range expand(st.Slots) {
				if migrated[sl] {
					t.Fatalf("%s: slot %d migrated twice in one plan", st, sl)
				}
				migrated[sl] = true
				if !src.slots.Has(sl) && !(dst.slots.Has(sl) && src.mig[sl] == dst.id) {
					t.Fatalf("%s: slot %d not owned by the source", st, sl)
				}
				src.slots.Remove(sl)
				dst.slots.Add(sl)
				delete(src.mig, sl)
				delete(dst.imp, sl)
				s.moved++
			}
			dst.epoch = s.maxEpoch() + 1
			if src.slots.Len() == 0 { // Redis 7.0: a master left without slots follows the receiver
				src.master = dst.id
				for _, o := range s.all {
					if o.master == src.id {
						o.master = dst.id
					}
				}
			}
		case StepStabilize:
			n := s.node(st.Node)
			if n.master != "" {
				t.Fatalf("%s: SETSLOT on a replica", st)
			}
			for _, sl := range expand(st.Slots) {
				delete(n.imp, sl)
				delete(n.mig, sl)
			}
		case StepForget:
			for _, name := range st.On {
				n := s.node(name)
				if o := s.all[st.NodeID]; o != nil && o.master == "" && o.slots.Len() > 0 {
					if st.Option != ForgetDataLoss || !d.AllowDataLoss {
						t.Fatalf("%s: forgetting a master that owns %d slots", st, o.slots.Len())
					}
				}
				if n.master == st.NodeID {
					t.Fatalf("%s: %s cannot forget its own master", st, name)
				}
				delete(n.known, st.NodeID)
				n.banned[st.NodeID] = true
			}
			if o := s.all[st.NodeID]; o != nil && o.slots.Len() > 0 && s.nobodyKnows(o.id) {
				o.slots = SlotSet{} // its slots are unassigned everywhere now
				s.lossAccepted = true
			}
		case StepFailover:
			s.promote(s.node(st.Node))
		case StepTellOwner:
			// The model's nodes see every owner's slots once they know it: a step here means
			// the planner told a node about an owner it does not know, or slots not the owner's.
			n, o := s.node(st.Node), s.all[st.NodeID]
			if o == nil || n.known[o.id] == "" {
				t.Fatalf("%s: %s does not know %s", st, st.Node, st.NodeID)
			}
			for _, sl := range expand(st.Slots) {
				if !o.slots.Has(sl) {
					t.Fatalf("%s: slot %d is not %s's", st, sl, st.NodeID)
				}
			}
		case StepWait:
			s.tick()
		default:
			t.Fatalf("unknown step %s", st)
		}
	}
	s.gossip()
	s.check(d)
}

func (s *sim) nobodyKnows(id string) bool {
	for _, n := range s.live {
		if _, ok := n.known[id]; ok && n.up {
			return false
		}
	}
	return true
}

func shardOfEndpoint(d Desired, name string) ShardSpec {
	for _, sh := range append(append([]ShardSpec{}, d.Shards...), d.Leaving...) {
		for _, ep := range sh.Nodes {
			if ep.Name == name {
				return sh
			}
		}
	}
	return ShardSpec{}
}

// promote makes a replica the master of its master's slots with a new epoch; the other
// replicas follow it (spec: "Replica election and promotion").
func (s *sim) promote(r *simNode) {
	old := s.all[r.master]
	if old == nil {
		s.t.Fatalf("promote %s: no master", r.ep.Name)
	}
	r.slots, old.slots = old.slots, SlotSet{}
	r.master = ""
	r.epoch = s.maxEpoch() + 1
	for _, o := range s.all {
		if o.master == old.id {
			o.master = r.id
		}
	}
	old.master = r.id // when it comes back it is a replica of the promoted node
}

// tick lets time pass: Redis promotes a replica of every dead master that owns slots.
func (s *sim) tick() {
	s.now = s.now.Add(time.Second)
	names := make([]string, 0, len(s.live))
	for name := range s.live {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, id := range sortedIDs(s.all) {
		m := s.all[id]
		if m.up || m.master != "" || m.slots.Len() == 0 {
			continue
		}
		for _, name := range names {
			if r := s.live[name]; r.up && r.master == m.id {
				s.promote(r)
				break
			}
		}
	}
}

func sortedIDs(m map[string]*simNode) []string {
	ids := make([]string, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// gossip spreads peers through connected links until nothing changes: a node learns the
// peers of the peers it reaches, and corrects the address of a peer it cannot reach when a
// reachable peer knows a working one.
func (s *sim) gossip() {
	for changed := true; changed; {
		changed = false
		for _, aid := range sortedIDs(s.all) {
			a := s.all[aid]
			if !a.up {
				continue
			}
			for _, bid := range sortedIDs(s.all) {
				b := s.all[bid]
				addr, ok := a.known[bid]
				if !ok || !b.up || addr != b.ep.Addr {
					continue
				}
				if _, ok := b.known[aid]; !ok && !b.banned[aid] {
					b.known[aid] = a.ep.Addr
					changed = true
				}
				for cid, caddr := range b.known {
					c := s.all[cid]
					if cid == aid || a.banned[cid] {
						continue
					}
					cur, known := a.known[cid]
					working := c.up && caddr == c.ep.Addr
					if !known || (cur != c.ep.Addr && working) {
						if cur != caddr {
							a.known[cid] = caddr
							changed = true
						}
					}
				}
			}
		}
	}
	// A master that came back owning slots now served by a newer epoch loses them and
	// follows the new owner (spec: "How nodes rejoin the cluster").
	for _, id := range sortedIDs(s.all) {
		n := s.all[id]
		if !n.up || n.master != "" || n.slots.Len() == 0 {
			continue
		}
		for _, oid := range sortedIDs(s.all) {
			o := s.all[oid]
			if o == n || !o.up || o.master != "" || o.epoch <= n.epoch || n.known[oid] != o.ep.Addr {
				continue
			}
			overlap := false
			for _, sl := range n.slots.Slots() {
				if o.slots.Has(sl) {
					overlap = true
				}
			}
			if overlap {
				n.slots = SlotSet{}
				n.master = o.id
			}
		}
	}
}

func (s *sim) check(d Desired) {
	t := s.t
	var owned SlotSet
	for _, n := range s.all {
		if n.master != "" || !n.up {
			continue
		}
		for _, sl := range n.slots.Slots() {
			if owned.Has(sl) {
				t.Fatalf("slot %d owned by two running masters", sl)
			}
			owned.Add(sl)
		}
	}
	var any SlotSet
	for _, n := range s.all {
		if n.master == "" {
			for _, r := range n.slots.Ranges() {
				any.AddRange(r)
			}
		}
	}
	if any.Len() == NumSlots {
		s.bootstrapped = true
	} else if s.bootstrapped && !s.lossAccepted {
		t.Fatalf("only %d slots have an owner", any.Len())
	}
	a := assess(s.view(d), d)
	for _, name := range a.removable() {
		for _, ep := range shardOfEndpoint(d, name).Nodes {
			if n := s.live[ep.Name]; n != nil && n.slots.Len() > 0 {
				t.Fatalf("leaving shard %s reported removable while %s owns %d slots", name, ep.Name, n.slots.Len())
			}
		}
	}
}

// run plans and applies until Plan returns no actionable steps, and returns Plan's error.
func (s *sim) run(d Desired) error {
	var last []string
	for range 200 {
		steps, err := Plan(s.view(d), d)
		last = append(last, fmt.Sprint(stepStrings(steps), err))
		onlyWait := true
		for _, st := range steps {
			onlyWait = onlyWait && st.Kind == StepWait
		}
		if len(steps) == 0 || onlyWait && err != nil {
			return err
		}
		s.apply(steps, d)
	}
	s.t.Fatalf("no convergence after 200 plans; last plans:\n%s", strings.Join(last[len(last)-3:], "\n"))
	return nil
}

func (s *sim) mustConverge(d Desired) {
	s.t.Helper()
	if err := s.run(d); err != nil {
		s.t.Fatalf("not converged: %v", err)
	}
	s.checkShape(d)
}

// checkShape asserts the converged shape: even split, one master per shard with its
// replicas, Leaving shards forgotten.
func (s *sim) checkShape(d Desired) {
	t := s.t
	t.Helper()
	lo, hi := NumSlots/len(d.Shards), (NumSlots+len(d.Shards)-1)/len(d.Shards)
	total := 0
	for _, sh := range d.Shards {
		var masters []*simNode
		for _, ep := range sh.Nodes {
			if n := s.live[ep.Name]; n.master == "" {
				masters = append(masters, n)
			}
		}
		if len(masters) != 1 {
			t.Fatalf("shard %s has %d masters", sh.Name, len(masters))
		}
		m := masters[0]
		if c := m.slots.Len(); c < lo || c > hi {
			t.Fatalf("shard %s owns %d slots, want %d..%d", sh.Name, c, lo, hi)
		}
		total += m.slots.Len()
		for _, ep := range sh.Nodes {
			if n := s.live[ep.Name]; n != m && n.master != m.id {
				t.Fatalf("%s does not follow its shard's master", ep.Name)
			}
		}
	}
	if total != NumSlots {
		t.Fatalf("%d slots owned by desired masters", total)
	}
	a := assess(s.view(d), d)
	if got := strings.Join(a.removable(), ","); got != strings.Join(a.leavingNames(), ",") {
		t.Fatalf("removable %q, want %q", got, strings.Join(a.leavingNames(), ","))
	}
	for _, sh := range d.Leaving {
		for _, ep := range sh.Nodes {
			id := s.live[ep.Name].id
			for _, rem := range d.Shards {
				for _, rep := range rem.Nodes {
					if _, ok := s.live[rep.Name].known[id]; ok {
						t.Fatalf("%s still knows leaving node %s", rep.Name, ep.Name)
					}
				}
			}
		}
	}
}

func TestSimBootstrap(t *testing.T) {
	for _, n := range []int{1, 2, 3, 5, 8} {
		for _, r := range []int{0, 1, 2} {
			t.Run(fmt.Sprintf("%dx%d", n, r), func(t *testing.T) {
				s := newSim(t)
				d := Desired{Shards: s.shards("s", 0, n, 1+r), ReplicasPerShard: r}
				s.mustConverge(d)
				for i, sh := range d.Shards {
					if s.live[sh.Nodes[0].Name].master != "" {
						t.Fatalf("shard %d master is not its first node", i)
					}
				}
				if s.steps[StepAddSlots] != n || s.steps[StepReplicate] != n*r || s.steps[StepMigrate] != 0 || s.steps[StepForget] != 0 {
					t.Fatalf("steps %v", s.steps)
				}
				if total := n * (1 + r); total > 1 && s.steps[StepMeet] != total-1 {
					t.Fatalf("%d meets for %d nodes", s.steps[StepMeet], total)
				}
			})
		}
	}
}

// minimalMoves is the fewest slots that must move from counts to an even split.
func minimalMoves(counts []int, shards int) int {
	sorted := append([]int(nil), counts...)
	sort.Sort(sort.Reverse(sort.IntSlice(sorted)))
	base, rem := NumSlots/shards, NumSlots%shards
	moves := 0
	for i, c := range sorted {
		target := 0
		if i < shards {
			target = base
			if i < rem {
				target++
			}
		}
		if c > target {
			moves += c - target
		}
	}
	return moves
}

func TestSimScaleOutAndIn(t *testing.T) {
	cases := []struct{ from, to, r int }{{3, 4, 1}, {3, 8, 0}, {1, 3, 1}, {5, 6, 2}, {8, 5, 1}, {4, 3, 0}, {6, 1, 0}, {3, 16, 0}}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%d-to-%d-r%d", tc.from, tc.to, tc.r), func(t *testing.T) {
			s := newSim(t)
			all := s.shards("s", 0, max(tc.from, tc.to), 1+tc.r)
			d := Desired{Shards: all[:tc.from], ReplicasPerShard: tc.r}
			s.mustConverge(d)
			var counts []int
			for _, sh := range all[:tc.from] {
				counts = append(counts, s.live[sh.Nodes[0].Name].slots.Len())
			}
			s.moved = 0
			if tc.to > tc.from {
				d = Desired{Shards: all[:tc.to], ReplicasPerShard: tc.r}
			} else {
				d = Desired{Shards: all[:tc.to], Leaving: all[tc.to:tc.from], ReplicasPerShard: tc.r}
			}
			s.mustConverge(d)
			if want := minimalMoves(counts, tc.to); s.moved != want {
				t.Fatalf("moved %d slots, the minimum is %d", s.moved, want)
			}
		})
	}
}

func TestSimScaleOutInChain(t *testing.T) {
	// 3 → 8 → 5, as in the field failure R7.
	s := newSim(t)
	all := s.shards("s", 0, 8, 2)
	s.mustConverge(Desired{Shards: all[:3], ReplicasPerShard: 1})
	s.mustConverge(Desired{Shards: all[:8], ReplicasPerShard: 1})
	s.mustConverge(Desired{Shards: all[:5], Leaving: all[5:], ReplicasPerShard: 1})
}

func TestSimFailureHealing(t *testing.T) {
	s := newSim(t)
	d := Desired{Shards: s.shards("s", 0, 3, 2), ReplicasPerShard: 1}
	s.mustConverge(d)
	dead := s.live["s1-0"]
	dead.up = false
	// Redis promotes s1-1 (Wait); the dead ID stays known, awaited at its address, and the
	// pod is reported.
	if err := s.run(d); !errors.Is(err, ErrNotReady) {
		t.Fatalf("error %v, want ErrNotReady", err)
	}
	if s.live["s1-1"].master != "" || s.live["s1-1"].slots.Len() == 0 {
		t.Fatal("replica not promoted")
	}
	if s.steps[StepForget] > 0 {
		t.Fatal("the dead master was forgotten while its pod may come back with its ID")
	}
	// The pod comes back empty with a new ID: it joins as a replica of the new master, and
	// the dead ID, no longer awaited, is forgotten everywhere.
	fresh := s.fresh(dead.ep)
	s.mustConverge(d)
	if fresh.master != s.live["s1-1"].id || fresh.slots.Len() != 0 {
		t.Fatal("fresh node is not a replica of the promoted master")
	}
	for _, n := range s.live {
		if _, ok := n.known[dead.id]; ok && n.up {
			t.Fatalf("%s still knows the dead master", n.ep.Name)
		}
	}
}

func TestSimRestartOnNewAddresses(t *testing.T) {
	s := newSim(t)
	d := Desired{Shards: s.shards("s", 0, 3, 2), ReplicasPerShard: 1}
	s.mustConverge(d)
	before := map[string]string{}
	for name, n := range s.live {
		before[name] = n.id
	}
	// Every node restarts with its nodes.conf on a new IP: peers know only old addresses.
	for si := range d.Shards {
		for ni := range d.Shards[si].Nodes {
			ep := &d.Shards[si].Nodes[ni]
			ep.Addr = strings.Replace(ep.Addr, "10.", "11.", 1)
			s.live[ep.Name].ep = *ep
		}
	}
	s.steps = map[StepKind]int{}
	s.mustConverge(d)
	for name, n := range s.live {
		if n.id != before[name] {
			t.Fatalf("%s got a new ID", name)
		}
	}
	if s.steps[StepMeet] == 0 || s.steps[StepForget] != 0 || s.steps[StepAddSlots] != 0 || s.steps[StepMigrate] != 0 {
		t.Fatalf("steps %v", s.steps)
	}
}

func TestSimLostShard(t *testing.T) {
	for _, r := range []int{0, 1} {
		t.Run(fmt.Sprintf("r%d", r), func(t *testing.T) {
			s := newSim(t)
			d := Desired{Shards: s.shards("s", 0, 3, 1+r), ReplicasPerShard: r}
			s.mustConverge(d)
			oldMaster := s.live["s2-0"]
			slots := oldMaster.slots.Len()
			for _, ep := range d.Shards[2].Nodes { // every pod of the shard comes back empty
				s.live[ep.Name].up = false
				s.fresh(ep)
			}
			err := s.run(d)
			if !errors.Is(err, ErrShardLost) {
				t.Fatalf("error %v, want ErrShardLost", err)
			}
			if oldMaster.slots.Len() != slots || s.steps[StepAddSlots] != 3 {
				t.Fatal("destructive steps without AllowDataLoss")
			}
			_, p := Plan(s.view(d), d)
			if !errors.Is(p, ErrShardLost) {
				t.Fatal(p)
			}
			pl, _, _ := plan(s.view(d), d)
			if pl.lost == nil || pl.lost.SlotCount != slots || pl.lost.Shards[0] != "s2" {
				t.Fatalf("lost = %+v", pl.lost)
			}
			d.AllowDataLoss = true
			s.mustConverge(d)
			if got := s.live["s2-0"].slots.Len(); got != slots {
				t.Fatalf("fresh master owns %d slots, want %d", got, slots)
			}
		})
	}
}

func TestSimOpenSlotRepair(t *testing.T) {
	type open func(s *sim, src, dst *simNode)
	// failover promotes the replica of shard's master, which turns into a replica and, as
	// Redis 7.0 does (clusterSetMaster), drops its own open slots.
	failover := func(s *sim, shard string) {
		old := s.live[shard+"-0"]
		s.promote(s.live[shard+"-1"])
		old.imp, old.mig = nil, nil
	}
	cases := map[string]open{
		"both sides open": func(s *sim, src, dst *simNode) {
			dst.imp = map[int]string{100: src.id}
			src.mig = map[int]string{100: dst.id}
		},
		"importing only (crash before MIGRATING)": func(s *sim, src, dst *simNode) {
			dst.imp = map[int]string{100: src.id, 101: src.id}
		},
		"migrating towards a node that no longer exists": func(s *sim, src, dst *simNode) {
			src.mig = map[int]string{100: strings.Repeat("f", 40)}
		},
		"migrating towards a node that is now a replica": func(s *sim, src, dst *simNode) {
			dst.imp = map[int]string{100: src.id}
			src.mig = map[int]string{100: dst.id, 101: dst.id}
			failover(s, "s1")
		},
		"importing from a node that is now a replica": func(s *sim, src, dst *simNode) {
			dst.imp = map[int]string{100: src.id}
			src.mig = map[int]string{100: dst.id}
			failover(s, "s0")
		},
		"migrating towards a node that now replicates the source": func(s *sim, src, dst *simNode) {
			src.mig = map[int]string{100: s.live["s0-1"].id}
		},
	}
	for name, mk := range cases {
		t.Run(name, func(t *testing.T) {
			s := newSim(t)
			d := Desired{Shards: s.shards("s", 0, 3, 2), ReplicasPerShard: 1}
			s.mustConverge(d)
			src, dst := s.live["s0-0"], s.live["s1-0"]
			mk(s, src, dst)
			s.steps = map[StepKind]int{}
			s.mustConverge(d)
			for _, n := range s.live {
				if len(n.imp)+len(n.mig) > 0 {
					t.Fatalf("%s still has open slots", n.ep.Name)
				}
			}
		})
	}
}

// TestSimRandomWalk drives random sequences of shard counts, replica counts, node crashes
// and address changes through the planner; every step is checked against the model's
// invariants, and every sequence must converge.
func TestSimRandomWalk(t *testing.T) {
	for seed := range uint64(25) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			s := newSim(t)
			r := rng.IntN(3)
			pool := s.shards("s", 0, 10, 1+r)
			cur := 1 + rng.IntN(6)
			s.mustConverge(Desired{Shards: pool[:cur], ReplicasPerShard: r})
			for range 4 {
				next := 1 + rng.IntN(10)
				d := Desired{Shards: pool[:next], ReplicasPerShard: r}
				if next < cur {
					d.Leaving = pool[next:cur]
				}
				if r > 0 && rng.IntN(2) == 0 { // a master dies; Redis fails over
					victim := s.live[pool[rng.IntN(min(cur, next))].Nodes[0].Name]
					if victim.master == "" {
						victim.up = false
						if err := s.run(Desired{Shards: pool[:cur], ReplicasPerShard: r}); err != nil && !errors.Is(err, ErrNotReady) {
							t.Fatal(err)
						}
						s.fresh(victim.ep)
					}
				}
				for _, sh := range d.Shards { // pods of re-added shards are created again
					for _, ep := range sh.Nodes {
						if !s.live[ep.Name].up {
							s.fresh(ep)
						}
					}
				}
				s.mustConverge(d)
				// Leaving nodes are gone for good.
				for _, sh := range d.Leaving {
					for _, ep := range sh.Nodes {
						s.live[ep.Name].up = false
						s.fresh(ep).up = false
					}
				}
				cur = next
			}
		})
	}
}
