package topology

import (
	"strings"
	"time"
)

// ClusterView is one observation of every endpoint: what each reachable node reports about
// itself and about the others (spec: "Cluster topology" — every node keeps its own table of
// the cluster, so views may disagree while gossip converges).
type ClusterView struct {
	ObservedAt time.Time
	Nodes      []*NodeView // one per observed endpoint, in the order given to Observe
}

// NodeView is what one endpoint reported. Unreachable nodes are kept with Err set.
type NodeView struct {
	Endpoint Endpoint
	// Err is non-nil when the node could not be reached or its replies did not parse; the
	// fields below are then zero.
	Err error
	// ID is the node's own ID (the "myself" entry of CLUSTER NODES).
	ID string
	// Known holds every CLUSTER NODES entry, the node's own included.
	Known       []NodeRecord
	Info        ClusterInfo
	Replication ReplicationInfo
	Keys        int64         // keys in the node's databases (INFO keyspace; what DBSIZE counts)
	NodeTimeout time.Duration // cluster-node-timeout; 0 if CONFIG GET was refused
}

// defaultNodeTimeout is Redis's default cluster-node-timeout (15000 ms; redis.conf), assumed
// when no node reports one.
const defaultNodeTimeout = 15 * time.Second

// maxNodeTimeout is the largest cluster-node-timeout that the reachable nodes among ns
// report, defaultNodeTimeout when none does. The engine's waits that are tied to failure
// detection (failover, takeover, MIGRATE's timeout) derive from it.
func maxNodeTimeout(ns ...*NodeView) time.Duration {
	var d time.Duration
	for _, n := range ns {
		if n.Reachable() {
			d = max(d, n.NodeTimeout)
		}
	}
	if d == 0 {
		return defaultNodeTimeout
	}
	return d
}

// Reachable reports whether the node answered and its replies parsed.
func (n *NodeView) Reachable() bool { return n != nil && n.Err == nil }

// Loading reports whether the node could not be observed because it is loading a dataset
// (the LOADING error: a replica loading its master's RDB after a full sync, or a node
// reading its own at start-up). It is alive and answers once the load ends.
func (n *NodeView) Loading() bool {
	return n != nil && n.Err != nil && strings.Contains(n.Err.Error(), "LOADING")
}

// Self is the node's own entry.
func (n *NodeView) Self() *NodeRecord {
	if !n.Reachable() {
		return nil
	}
	for i := range n.Known {
		if n.Known[i].Flags.Myself {
			return &n.Known[i]
		}
	}
	return nil
}

// Lookup returns the node's entry for id, or nil.
func (n *NodeView) Lookup(id string) *NodeRecord {
	if !n.Reachable() {
		return nil
	}
	for i := range n.Known {
		if n.Known[i].ID == id {
			return &n.Known[i]
		}
	}
	return nil
}

// IsMaster reports whether the node says it is a master.
func (n *NodeView) IsMaster() bool {
	s := n.Self()
	return s != nil && s.Flags.Master
}

// MasterID is the ID the node replicates, or "" for a master.
func (n *NodeView) MasterID() string {
	if s := n.Self(); s != nil && s.Flags.Replica {
		return s.MasterID
	}
	return ""
}

// OwnSlots is the set of slots the node claims for itself.
func (n *NodeView) OwnSlots() *SlotSet {
	set := &SlotSet{}
	if s := n.Self(); s != nil {
		for _, r := range s.Slots {
			set.AddRange(r)
		}
	}
	return set
}

// Node returns the view of the endpoint with this name, or nil.
func (v *ClusterView) Node(name string) *NodeView {
	if v == nil {
		return nil
	}
	for _, n := range v.Nodes {
		if n.Endpoint.Name == name {
			return n
		}
	}
	return nil
}

// NodeByID returns the reachable node whose own ID is id, or nil.
func (v *ClusterView) NodeByID(id string) *NodeView {
	if v == nil || id == "" {
		return nil
	}
	for _, n := range v.Nodes {
		if n.Reachable() && n.ID == id {
			return n
		}
	}
	return nil
}
