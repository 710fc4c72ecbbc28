package statusview

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/resources"
	"github.com/redis-operator/redis-operator/controllers/topology"
)

// Sample is what one pod's redis-server answered: the raw replies of
// CLUSTER NODES, CLUSTER INFO and INFO (sections replication, keyspace,
// server and memory), or Err when it could not be asked.
type Sample struct {
	ClusterNodes string
	ClusterInfo  string
	Info         string
	Err          error
}

// Input is everything Build needs.
type Input struct {
	Cluster *cachev1beta1.RedisCluster
	// Pods are the cluster's pods (label cache.redis.io/cluster).
	Pods []corev1.Pod
	// Events are the RedisCluster's events, in any order.
	Events []corev1.Event
	// Samples holds each reachable pod's answers, by pod name; a pod
	// missing here was not asked (not running).
	Samples map[string]Sample
	// MaxEvents bounds Report.Events (the newest are kept); 0 keeps all.
	MaxEvents int
}

// node is one pod's parsed sample.
type node struct {
	pod     *corev1.Pod
	self    *topology.NodeRecord // its own CLUSTER NODES entry
	info    *topology.ClusterInfo
	repl    topology.ReplicationInfo
	keys    int64
	used    int64
	maxmem  int64
	err     error
	hasRepl bool
}

// Build assembles the report. Replies that do not parse become the
// node's Error; Build itself never fails.
func Build(in Input) Report {
	rc := in.Cluster
	r := Report{
		Namespace:          rc.Namespace,
		Name:               rc.Name,
		Generation:         rc.Generation,
		ObservedGeneration: rc.Status.ObservedGeneration,
		Phase:              string(rc.Status.Phase),
		Paused:             rc.Spec.Paused,
		Image:              rc.Spec.Image,
		Shards:             rc.Spec.Shards,
		ReplicasPerShard:   rc.Spec.ReplicasPerShard,
		LeavingShards:      rc.Status.LeavingShards,
		ShardList:          []Shard{},
		Conditions:         []Condition{},
		Events:             []Event{},
	}
	if h := rc.Status.Health; h != nil {
		r.Health, r.HealthMessage = string(h.Status), h.Message
	}
	if c := rc.Status.Credentials; c != nil {
		r.Credentials = c.Source
	}
	if m := rc.Status.Migration; m != nil {
		r.Migration = &Migration{SlotsMoved: m.SlotsMoved, SlotsTotal: m.SlotsTotal, KeysMoved: m.KeysMoved}
	}
	for _, c := range rc.Status.Conditions {
		r.Conditions = append(r.Conditions, Condition{Type: c.Type, Status: string(c.Status), Reason: c.Reason,
			Message: c.Message, LastTransitionTime: c.LastTransitionTime.Time.UTC()})
	}
	r.Events = events(in.Events, in.MaxEvents)

	nodes := map[string]*node{} // by pod name
	byShard := map[string][]*node{}
	podByID := map[string]string{}
	for i := range in.Pods {
		p := &in.Pods[i]
		n := &node{pod: p}
		if s, ok := in.Samples[p.Name]; ok {
			parseSample(n, s)
		}
		nodes[p.Name] = n
		r.Pods++
		if podReady(p) {
			r.PodsReady++
		}
		if n.self != nil {
			podByID[n.self.ID] = p.Name
		}
		byShard[shardName(rc.Name, p)] = append(byShard[shardName(rc.Name, p)], n)
	}
	for _, name := range shardNames(rc, byShard) {
		r.ShardList = append(r.ShardList, buildShard(rc, name, byShard[name], podByID))
	}

	var served [topology.NumSlots]bool
	for _, sh := range r.ShardList {
		n := nodes[sh.Master]
		if n == nil || n.self == nil {
			continue
		}
		for _, sr := range n.self.Slots {
			for s := sr.Start; s <= sr.End; s++ {
				served[s] = true
			}
		}
		r.Keys += sh.Keys
		if r.Cluster == nil && n.info != nil {
			r.Cluster = &ClusterInfo{Source: sh.Master, State: n.info.State, SlotsAssigned: n.info.SlotsAssigned,
				SlotsOK: n.info.SlotsOK, SlotsPFail: n.info.SlotsPFail, SlotsFail: n.info.SlotsFail,
				KnownNodes: n.info.KnownNodes, Size: n.info.Size, CurrentEpoch: n.info.CurrentEpoch}
		}
	}
	for _, b := range served {
		if b {
			r.SlotsServed++
		}
	}
	return r
}

// parseSample fills n from s; the first reply that does not parse is n.err.
func parseSample(n *node, s Sample) {
	if s.Err != nil {
		n.err = s.Err
		return
	}
	recs, err := topology.ParseClusterNodes(s.ClusterNodes)
	if err != nil {
		n.err = err
		return
	}
	for i := range recs {
		if recs[i].Flags.Myself {
			n.self = &recs[i]
		}
	}
	if n.self == nil {
		n.err = errors.New("CLUSTER NODES has no myself entry")
		return
	}
	info, err := topology.ParseClusterInfo(s.ClusterInfo)
	if err != nil {
		n.err = err
		return
	}
	n.info = &info
	if n.repl, n.keys, _, err = topology.ParseNodeInfo(s.Info); err != nil {
		n.err = err
		return
	}
	n.hasRepl = true
	n.used, n.maxmem, err = memoryInfo(s.Info)
	if err != nil {
		n.err = err
	}
}

// memoryInfo reads used_memory and maxmemory (bytes) from INFO memory.
func memoryInfo(text string) (used, max int64, err error) {
	for _, line := range strings.Split(text, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		var p *int64
		switch k {
		case "used_memory":
			p = &used
		case "maxmemory":
			p = &max
		default:
			continue
		}
		if *p, err = strconv.ParseInt(v, 10, 64); err != nil {
			return 0, 0, fmt.Errorf("INFO memory %s:%s: %w", k, v, topology.ErrParse)
		}
	}
	return used, max, nil
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// shardName is the shard a pod belongs to: its cache.redis.io/shard label.
func shardName(rc string, p *corev1.Pod) string {
	if i, err := strconv.Atoi(p.Labels[resources.LabelShard]); err == nil {
		return resources.StatefulSetName(rc, i)
	}
	return "(no shard label)"
}

// shardNames lists the shards with pods or in status.shards, by index.
func shardNames(rc *cachev1beta1.RedisCluster, byShard map[string][]*node) []string {
	set := map[string]bool{}
	for name := range byShard {
		set[name] = true
	}
	for _, s := range rc.Status.Shards {
		set[s.Name] = true
	}
	names := make([]string, 0, len(set))
	for name := range set {
		names = append(names, name)
	}
	idx := func(name string) int {
		if i, ok := resources.ShardIndex(rc.Name, name); ok {
			return i
		}
		return 1 << 30
	}
	sort.Slice(names, func(i, j int) bool {
		if a, b := idx(names[i]), idx(names[j]); a != b {
			return a < b
		}
		return names[i] < names[j]
	})
	return names
}

func buildShard(rc *cachev1beta1.RedisCluster, name string, nodes []*node, podByID map[string]string) Shard {
	sh := Shard{Name: name, Slots: []string{}, Nodes: []Node{}}
	for _, l := range rc.Status.LeavingShards {
		sh.Leaving = sh.Leaving || l == name
	}
	// The master: the node Redis calls master that owns slots, else any
	// master, else what status.shards last recorded.
	var master *node
	for _, n := range nodes {
		if n.self == nil || !n.self.Flags.Master {
			continue
		}
		if master == nil || master.self.SlotCount() == 0 && n.self.SlotCount() > 0 {
			master = n
		}
	}
	if master != nil {
		sh.Master = master.pod.Name
		for _, sr := range master.self.Slots {
			sh.Slots = append(sh.Slots, sr.String())
		}
		sh.SlotCount = master.self.SlotCount()
		sh.Keys = master.keys
		sh.OpenSlots = openSlots(master.self, podByID)
	} else {
		for _, s := range rc.Status.Shards {
			if s.Name == name {
				sh.Master = s.MasterPod
				sh.Slots = append(sh.Slots, s.Slots...)
			}
		}
	}
	sort.Slice(nodes, func(i, j int) bool {
		if mi, mj := nodes[i].pod.Name == sh.Master, nodes[j].pod.Name == sh.Master; mi != mj {
			return mi
		}
		return nodes[i].pod.Name < nodes[j].pod.Name
	})
	masters := map[string]*node{}
	for _, n := range nodes {
		if n.self != nil && n.hasRepl && n.repl.Role == "master" {
			masters[n.self.ID] = n
		}
	}
	for _, n := range nodes {
		sh.Nodes = append(sh.Nodes, buildNode(n, masters, master))
	}
	return sh
}

func buildNode(n *node, masters map[string]*node, shardMaster *node) Node {
	out := Node{Pod: n.pod.Name, IP: n.pod.Status.PodIP, K8sNode: n.pod.Spec.NodeName,
		PodPhase: string(n.pod.Status.Phase), Ready: podReady(n.pod)}
	if n.err != nil {
		out.Error = n.err.Error()
	}
	if n.self != nil {
		// Its own entry always carries myself: the other flags are news.
		f := n.self.Flags
		f.Myself = false
		out.NodeID, out.Flags = n.self.ID, f.String()
	}
	if !n.hasRepl {
		return out
	}
	out.Keys, out.UsedMemory, out.MaxMemory, out.Offset = n.keys, n.used, n.maxmem, n.repl.Offset
	switch n.repl.Role {
	case "master":
		out.Role = "master"
	case "slave":
		out.Role = "replica"
		out.MasterLinkUp = n.repl.MasterLinkUp
		m := masters[n.self.MasterID]
		if m == nil && shardMaster != nil && shardMaster.hasRepl && shardMaster.repl.Role == "master" {
			m = shardMaster
		}
		if m != nil {
			lag := max(m.repl.Offset-n.repl.Offset, 0)
			out.LagBytes = &lag
		}
	}
	return out
}

// openSlots lists the master's migrating and importing slots by slot.
func openSlots(self *topology.NodeRecord, podByID map[string]string) []OpenSlot {
	var out []OpenSlot
	peer := func(id string) string {
		if p, ok := podByID[id]; ok {
			return p
		}
		return id
	}
	for slot, id := range self.Migrating {
		out = append(out, OpenSlot{Slot: slot, State: "migrating", Peer: peer(id)})
	}
	for slot, id := range self.Importing {
		out = append(out, OpenSlot{Slot: slot, State: "importing", Peer: peer(id)})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Slot != out[j].Slot {
			return out[i].Slot < out[j].Slot
		}
		return out[i].State < out[j].State
	})
	return out
}

// events converts and sorts the events newest first, keeping at most limit.
func events(list []corev1.Event, limit int) []Event {
	out := make([]Event, 0, len(list))
	for _, e := range list {
		t := e.LastTimestamp.Time
		if t.IsZero() {
			t = e.EventTime.Time
		}
		if t.IsZero() {
			t = e.FirstTimestamp.Time
		}
		if t.IsZero() {
			t = e.CreationTimestamp.Time
		}
		out = append(out, Event{Time: t.UTC(), Type: e.Type, Reason: e.Reason, Message: e.Message, Count: max(e.Count, 1)})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Time.After(out[j].Time) })
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out
}
