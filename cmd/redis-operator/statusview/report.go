// Package statusview builds and renders the report of `redis-operator
// status` (and `kubectl rediscluster status`) from what the command
// gathered: the RedisCluster, its pods and events from the API, and what
// each Redis node answered. It is pure: no client, no clock (the caller
// passes the time ages are counted from), so its output is golden-tested.
//
// The JSON form (`-o json`) is the Report struct below; its field names
// are stable: fields may be added, none renamed or removed without a
// version note in docs/monitoring.md.
package statusview

import "time"

// Report is the whole status of one RedisCluster.
type Report struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Generation and ObservedGeneration are metadata.generation and
	// status.observedGeneration: equal when the operator has seen the
	// latest spec.
	Generation         int64 `json:"generation"`
	ObservedGeneration int64 `json:"observedGeneration"`
	// Phase is status.phase (Ready, Bootstrapping, Scaling, ...).
	Phase string `json:"phase"`
	// Health and HealthMessage are status.health (Argo CD's verdict).
	Health        string `json:"health,omitempty"`
	HealthMessage string `json:"healthMessage,omitempty"`
	// Paused is spec.paused.
	Paused bool `json:"paused"`
	// Image is spec.image.
	Image string `json:"image"`
	// Shards and ReplicasPerShard are what the spec asks for.
	Shards           int32 `json:"shards"`
	ReplicasPerShard int32 `json:"replicasPerShard"`
	// PodsReady and Pods count the cluster's pods and those Ready.
	PodsReady int `json:"podsReady"`
	Pods      int `json:"pods"`
	// Credentials is status.credentials.source (for example "Secret demo-password").
	Credentials string `json:"credentials,omitempty"`
	// Cluster is what CLUSTER INFO of one reachable master says; nil when
	// no node answered.
	Cluster *ClusterInfo `json:"cluster,omitempty"`
	// SlotsServed counts the slots some reachable master lists as its own
	// in its CLUSTER NODES entry (16384 when every slot has an owner).
	SlotsServed int `json:"slotsServed"`
	// Keys is the sum of the masters' key counts (INFO keyspace).
	Keys int64 `json:"keys"`
	// Migration is status.migration: the slot move under way, if any.
	Migration *Migration `json:"migration,omitempty"`
	// LeavingShards is status.leavingShards: shards being drained.
	LeavingShards []string `json:"leavingShards,omitempty"`
	// ShardList holds one entry per shard, by shard index.
	ShardList []Shard `json:"shardList"`
	// Conditions are status.conditions, in the operator's order.
	Conditions []Condition `json:"conditions"`
	// Events are the RedisCluster's last events, newest first (the
	// topology actions: slot moves, failovers, joins, rotations).
	Events []Event `json:"events"`
}

// ClusterInfo is the part of CLUSTER INFO a person reads first.
type ClusterInfo struct {
	// Source is the pod whose CLUSTER INFO this is.
	Source        string `json:"source"`
	State         string `json:"state"` // "ok" or "fail"
	SlotsAssigned int    `json:"slotsAssigned"`
	SlotsOK       int    `json:"slotsOK"`
	SlotsPFail    int    `json:"slotsPFail"`
	SlotsFail     int    `json:"slotsFail"`
	KnownNodes    int    `json:"knownNodes"`
	Size          int    `json:"size"` // masters serving at least one slot
	CurrentEpoch  uint64 `json:"currentEpoch"`
}

// Migration mirrors status.migration.
type Migration struct {
	SlotsMoved int32 `json:"slotsMoved"`
	SlotsTotal int32 `json:"slotsTotal"`
	KeysMoved  int64 `json:"keysMoved"`
}

// Shard is one StatefulSet of the cluster: its master's slots and its nodes.
type Shard struct {
	Name string `json:"name"`
	// Master is the pod that is master now (from Redis; from status.shards
	// when no node of the shard answered), "" when none.
	Master string `json:"master,omitempty"`
	// Slots are the master's slot ranges ("0-5460"), SlotCount their size.
	Slots     []string `json:"slots"`
	SlotCount int      `json:"slotCount"`
	// Keys is the master's key count.
	Keys int64 `json:"keys"`
	// OpenSlots are slots being migrated from or imported into this
	// shard's master (CLUSTER SETSLOT MIGRATING/IMPORTING in place).
	OpenSlots []OpenSlot `json:"openSlots,omitempty"`
	// Leaving is true while the shard is in status.leavingShards.
	Leaving bool `json:"leaving,omitempty"`
	// Nodes are the shard's pods: the master first, then by pod name.
	Nodes []Node `json:"nodes"`
}

// OpenSlot is one slot in the middle of a move.
type OpenSlot struct {
	Slot int `json:"slot"`
	// State is "migrating" (keys leave to Peer) or "importing" (keys come from Peer).
	State string `json:"state"`
	// Peer is the other side's pod name, or its node ID when no pod has it.
	Peer string `json:"peer"`
}

// Node is one pod and what its redis-server answered.
type Node struct {
	Pod string `json:"pod"`
	// Role is "master" or "replica" (INFO replication), "" when unreachable.
	Role string `json:"role,omitempty"`
	// NodeID is the Redis Cluster node ID (40 hex characters).
	NodeID string `json:"nodeID,omitempty"`
	// IP is the pod IP; K8sNode the Kubernetes node it runs on.
	IP      string `json:"ip,omitempty"`
	K8sNode string `json:"k8sNode,omitempty"`
	// PodPhase and Ready are the pod's phase and Ready condition.
	PodPhase string `json:"podPhase"`
	Ready    bool   `json:"ready"`
	// Flags are the node's own CLUSTER NODES flags without "myself"
	// ("master", "slave", "master,fail?", "slave,nofailover").
	Flags string `json:"flags,omitempty"`
	// Keys is INFO keyspace's total; UsedMemory and MaxMemory INFO
	// memory's used_memory and maxmemory in bytes (MaxMemory 0: no limit).
	Keys       int64 `json:"keys"`
	UsedMemory int64 `json:"usedMemory"`
	MaxMemory  int64 `json:"maxMemory"`
	// Offset is master_repl_offset (master) or slave_repl_offset (replica).
	Offset int64 `json:"offset"`
	// LagBytes is, for a replica, how far its offset trails its master's;
	// nil for a master or when the master did not answer.
	LagBytes *int64 `json:"lagBytes,omitempty"`
	// MasterLinkUp is master_link_status:up (replicas only).
	MasterLinkUp bool `json:"masterLinkUp,omitempty"`
	// Error says why the node could not be read; the other fields are then
	// only what the API knows.
	Error string `json:"error,omitempty"`
}

// Condition mirrors one status condition.
type Condition struct {
	Type               string    `json:"type"`
	Status             string    `json:"status"`
	Reason             string    `json:"reason"`
	Message            string    `json:"message"`
	LastTransitionTime time.Time `json:"lastTransitionTime"`
}

// Event is one Kubernetes event about the RedisCluster.
type Event struct {
	// Time is the event's last occurrence.
	Time    time.Time `json:"time"`
	Type    string    `json:"type"` // Normal or Warning
	Reason  string    `json:"reason"`
	Message string    `json:"message"`
	Count   int32     `json:"count"`
}
