package topology

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
)

// Endpoint is one Redis node the controller knows about (one pod).
type Endpoint struct {
	Name string // pod name, e.g. "demo-shard-0-1"; unique
	// Addr is "ip:port", the address the node announces to the cluster (Redis 7.0 CLUSTER MEET
	// takes an IP, not a host name). The cluster bus is the port the node reports, by default
	// port+10000 (spec: "The cluster bus"). Empty only for a Down endpoint whose pod has no
	// IP.
	Addr string
	// Down, when not empty, says why the node is known not to run (e.g. "Pending",
	// "CrashLoopBackOff", "missing": the pod is not scheduled, its redis container is not
	// running, or it does not exist). The engine does not contact a Down node and treats it
	// as unreachable, so nothing that needs it happens (its slots are neither moved nor
	// declared lost, its shard receives no slots, its leaving shard is not forgotten while
	// it may hold the only copy of data) while everything else proceeds.
	Down string
	// Node and Zone say where the pod runs: its Kubernetes node's name and that node's
	// topology.kubernetes.io/zone label; empty when unknown. Only the spreading of masters
	// reads them: the choice of a new shard's master among its empty pods (chooseMasters)
	// and the planned failovers of Plan's last phase (unless Desired.HoldSpread). Both
	// spread over nodes only when every endpoint's Node is known, and over zones only when
	// every endpoint's Zone is.
	Node string
	Zone string
	// NotReady: the pod runs but Kubernetes does not count it Ready. The engine contacts it
	// as usual; only the spreading of masters waits until no endpoint is NotReady.
	NotReady bool
	// NoSlots, when not empty, says why clients must not be sent to the node yet (e.g. "it
	// serves TLS certificate 1A2B, not 3C4D": the certificate it presents may not name its
	// address, so a client that follows a MOVED there fails its handshake). The engine
	// contacts it as usual (meets it, attaches replicas), but a shard whose master has
	// NoSlots receives no slots: the rebalance reports ErrNotReady naming it, and the
	// other shards get their share. Masters are not spread while an endpoint has NoSlots
	// (a planned failover would send clients to it).
	NoSlots string
	// Hostname, when not empty, is the hostname the node must announce to clients
	// (cluster-announce-hostname: a per-pod Service address, spec.externalAccess). A shard
	// whose master is not yet known under it by every reachable node receives no slots, as
	// with NoSlots: a node that does not know it redirects clients to "?".
	Hostname string
}

// ShardSpec groups the pods of one shard (one StatefulSet): one master and its replicas.
type ShardSpec struct {
	Name  string     // e.g. "demo-shard-0"; unique
	Nodes []Endpoint // all pods of the shard, in ordinal order
}

// Desired is the shape the engine drives the cluster to.
type Desired struct {
	// Shards own the 16384 slots, split evenly (counts differ by at most one), in order.
	Shards []ShardSpec
	// Leaving shards are being removed: their slots are migrated to Shards, then, once every
	// node of theirs reports DBSIZE 0, their nodes are forgotten by every other node (spec:
	// "Removing nodes from a cluster"); a Leaving shard is reported removable only after that.
	Leaving []ShardSpec
	// ReplicasPerShard is the number of replicas each shard's master must have.
	ReplicasPerShard int
	// AllowDataLoss lets the engine re-assign the slots of a lost shard (master and every
	// replica gone with their data) to a fresh master. Without it the engine reports the loss
	// and does nothing destructive.
	AllowDataLoss bool
	// Formed says the cluster was formed before (the controller's status recorded it). Slots
	// that then have no owner held data: they are reported lost (ErrShardLost with DataLoss)
	// instead of being assigned as on a new cluster, unless AllowDataLoss is set. A cluster
	// whose every node came back empty is never re-bootstrapped silently.
	Formed bool
	// Fresh says no node can hold cluster state from an earlier life: the cluster never
	// formed and every data volume was made for it (the controller compares the claims'
	// creation with the RedisCluster's). A fresh cluster's masters get their slots and config
	// epochs as soon as each is up (early.go), not once every node is: Redis turns a master's
	// cluster_state ok only min(cluster-node-timeout, 5 s) after it last saw itself in a
	// minority of the masters, which a master without slots is, except in its first 2 s.
	Fresh bool
	// HoldSpread stops the planned failovers that spread masters over zones and nodes
	// (spreadSteps), e.g. while a rolling update moves masters itself or a failover has
	// just happened. The masters of new shards are still chosen spread: that choice costs
	// no failover.
	HoldSpread bool
}

// endpoints lists the endpoints to observe: Shards then Leaving, without the Down ones.
func (d Desired) endpoints() []Endpoint {
	var eps []Endpoint
	for _, s := range append(slices.Clone(d.Shards), d.Leaving...) {
		for _, ep := range s.Nodes {
			if ep.Down == "" {
				eps = append(eps, ep)
			}
		}
	}
	return eps
}

// Validate reports a clear error (wrapping ErrInvalidDesired) for unusable input: no shards,
// empty or duplicate names, duplicate or malformed addresses, negative replica counts, more
// shards than slots. A Down endpoint may have no address.
func (d Desired) Validate() error {
	var errs []error
	if len(d.Shards) == 0 {
		errs = append(errs, errors.New("no shards"))
	}
	if len(d.Shards) > NumSlots {
		errs = append(errs, fmt.Errorf("%d shards, at most %d", len(d.Shards), NumSlots))
	}
	if d.ReplicasPerShard < 0 {
		errs = append(errs, fmt.Errorf("replicasPerShard %d is negative", d.ReplicasPerShard))
	}
	shardNames := map[string]bool{}
	names := map[string]bool{}
	addrs := map[string]string{}
	check := func(kind string, s ShardSpec) {
		if s.Name == "" {
			errs = append(errs, fmt.Errorf("%s shard without a name", kind))
		} else if shardNames[s.Name] {
			errs = append(errs, fmt.Errorf("shard %q listed twice", s.Name))
		}
		shardNames[s.Name] = true
		for _, ep := range s.Nodes {
			if ep.Name == "" {
				errs = append(errs, fmt.Errorf("shard %q: node without a name", s.Name))
				continue
			}
			if names[ep.Name] {
				errs = append(errs, fmt.Errorf("node %q listed twice", ep.Name))
			}
			names[ep.Name] = true
			if ep.Down != "" && ep.Addr == "" {
				continue
			}
			if err := validateAddr(ep.Addr); err != nil {
				errs = append(errs, fmt.Errorf("node %q: %w", ep.Name, err))
				continue
			}
			if other, dup := addrs[ep.Addr]; dup {
				errs = append(errs, fmt.Errorf("nodes %q and %q share address %s", other, ep.Name, ep.Addr))
			}
			addrs[ep.Addr] = ep.Name
		}
	}
	for _, s := range d.Shards {
		check("desired", s)
	}
	for _, s := range d.Leaving {
		check("leaving", s)
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrInvalidDesired, errors.Join(errs...))
	}
	return nil
}

func validateAddr(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("address %q: %w", addr, err)
	}
	if net.ParseIP(host) == nil {
		return fmt.Errorf("address %q: host must be an IP (CLUSTER MEET takes an IP)", addr)
	}
	if port == "" || strings.TrimLeft(port, "0123456789") != "" {
		return fmt.Errorf("address %q: bad port", addr)
	}
	return nil
}

// Sentinel errors. Reconcile, Plan, Failover and ApplyConfig wrap them; test with errors.Is.
var (
	// ErrInvalidDesired: the Desired value can never be satisfied as given (retrying won't help).
	ErrInvalidDesired = errors.New("invalid desired topology")
	// ErrNotReady: nodes the engine needs are unreachable, missing or still starting; retry later.
	ErrNotReady = errors.New("cluster not ready")
	// ErrShardLost: slots whose data is gone, and Desired.AllowDataLoss is false: a shard's
	// master and all its replicas are gone with their data, or (Desired.Formed) slots of a
	// formed cluster have no owner any more, e.g. every node came back empty.
	// Result.DataLoss says which slots and, where known, which shards. Nothing destructive
	// was done: no slot is assigned, no owner forgotten.
	ErrShardLost = errors.New("shard lost")
	// ErrAuth: a node rejected the password.
	ErrAuth = errors.New("authentication failed")
	// ErrConflict: the nodes hold a topology the engine refuses to change automatically
	// (e.g. a node from another cluster claims slots with a newer config epoch).
	ErrConflict = errors.New("topology conflict")
	// ErrNoProgress: the same steps were planned again and again without effect.
	ErrNoProgress = errors.New("no progress")
	// ErrFailover: a requested failover did not complete.
	ErrFailover = errors.New("failover failed")
	// ErrKeyConflict: moving a slot's keys (a live migration, or rolling back an open slot)
	// found a key on both nodes with different values (MIGRATE without REPLACE answered
	// BUSYKEY and the values were compared). The move stopped with the slot still open and
	// neither copy changed; the error names the slot, the key and both nodes. Retrying cannot
	// fix it: a human decides which value wins (delete the wrong copy), then the next
	// Reconcile finishes the move.
	ErrKeyConflict = errors.New("key conflict during slot migration")
)

// Progress reports what a running Reconcile is doing; Reconcile calls the progress callback
// after each step batch, after each pipelined round of a slot migration, and on each poll
// of a wait (Step "Wait: " and the reason).
type Progress struct {
	Step       string // human description of the current step
	SlotsMoved int    // slots migrated so far in this Reconcile call
	SlotsTotal int    // slots this Reconcile call plans to migrate
	KeysMoved  int64  // keys moved with MIGRATE so far in this Reconcile call
	// Observed is set on the report of a wait only: the Result of the observation that
	// found it, which is what Reconcile returns (with ErrNotReady) if the wait budget runs
	// out there. The caller may report it before the call ends; nil on other reports.
	Observed *Result
}

// ShardStatus summarises one desired shard after Reconcile.
type ShardStatus struct {
	Name         string
	MasterName   string   // endpoint name of the master; empty if unknown or unreachable
	MasterNodeID string   // empty if the shard has no master yet
	ReplicaNames []string // endpoints replicating the master
	SlotRanges   []string // e.g. ["0-5460"]
	SlotCount    int
}

// LostShard describes slots whose data is gone: their owner and every replica of it are
// gone (all endpoints are reachable and none carries the owner's node ID), or, in a formed
// cluster (Desired.Formed), no node claims them any more.
type LostShard struct {
	// Shards names the shards the slots belonged to, when known: the shard of a vanished
	// owner; for slots nobody claims, the desired shards that own no slots.
	Shards    []string
	NodeIDs   []string // IDs of the vanished owners; none for slots nobody claims
	Slots     []SlotRange
	SlotCount int
}

// Result is the outcome of Reconcile.
type Result struct {
	View *ClusterView
	// Converged: cluster_state ok everywhere, all 16384 slots owned by the desired shards'
	// masters in an even split that every node agrees on, no open slots, each shard with
	// ReplicasPerShard replicas in sync, Leaving shards forgotten.
	Converged bool
	// Settled: not Converged only because of Down endpoints (Endpoint.Down), named in
	// WaitingFor: the steps that need them wait, and nothing else is left to do (no step, no
	// wait; every shard without a Down node has its replicas in sync).
	Settled    bool
	WaitingFor []string
	// Removable lists Leaving shards that are drained — every node of theirs reachable, none
	// owning a slot or having an open slot, every master answering DBSIZE 0 (a replica's keys
	// are its master's copy) — and that every other reachable node has forgotten: their pods
	// and claims can be deleted.
	Removable []string
	Shards    []ShardStatus
	Message   string
	// DataLoss is set when a shard is lost and AllowDataLoss is false.
	DataLoss *LostShard
}

// Options configures an Engine.
type Options struct {
	Password string // AUTH for every node (may be empty); never logged
	// TLS, when set, is the TLS configuration of every connection to the nodes (spec.tls);
	// TLSID names its material (certificate, key, CA): a pooled client made with another
	// TLSID is replaced. Nil speaks plain text.
	TLS            *tls.Config
	TLSID          string
	DialTimeout    time.Duration // default 2 s
	CommandTimeout time.Duration // per ordinary command; default 5 s
	// MigrateBatch is the number of keys per CLUSTER GETKEYSINSLOT and at most per MIGRATE ...
	// KEYS (default 200; redis-cli uses 10). Larger batches mean fewer round trips but longer
	// MIGRATE calls, during which the source serves no other client.
	MigrateBatch int
	// MigrateBatchBytes bounds the bytes of one MIGRATE ... KEYS, summed from MEMORY USAGE of
	// its keys (default 2 MiB); a single larger key is migrated alone.
	MigrateBatchBytes int64
	// MigrateRoundBytes bounds the bytes of the MIGRATE calls pipelined to one source at once
	// (default 8 MiB): the source runs them back to back in its event loop, so this bounds
	// how long it answers neither clients nor the cluster bus. Cancellation is honoured
	// between such chunks.
	MigrateRoundBytes int64
	// MigrateServingOps is the rate (commands per second, INFO stats
	// instantaneous_ops_per_sec) from which a node counts as serving clients; moves touching
	// such a node run at the serving pace (one at a time, 8 slots per round, MIGRATE chunks
	// sized by how long the source takes to run them; see Engine.pace) instead of at
	// MigrateParallel, MigrateSlotsPerRound and MigrateRoundBytes, trading speed for their
	// clients' latency (default 10).
	MigrateServingOps int64
	// MigrateTimeout is MIGRATE's timeout argument, the longest the source waits on the
	// target for one read or write (default 30 s); it is capped at a quarter of the nodes'
	// cluster-node-timeout, so a stalled target cannot make the source look failed.
	MigrateTimeout time.Duration
	// MigrateSlotsPerRound is how many slots of one move are handled together: their
	// SETSLOT, GETKEYSINSLOT and MIGRATE commands are pipelined (default 64).
	MigrateSlotsPerRound int
	// MigrateParallel bounds the moves that run at once (default 4). A node is the source of
	// one running move at most and never a source and a target at once; moves may share a
	// target.
	MigrateParallel int
	// PollInterval is how long Reconcile sleeps while waiting for Redis to settle (gossip,
	// failover, replica sync). Default 200 ms.
	PollInterval time.Duration
	// WaitBudget bounds how long Reconcile waits in a row while Redis converges by itself
	// (planned steps are only Wait): past it Reconcile returns ErrNotReady naming what it
	// waits for, with the Result of its last observation, so that the caller can report
	// that observation (a master unreachable, a failover Redis has not done yet) instead of
	// holding on to the call. Zero waits until ctx is done.
	WaitBudget time.Duration
	// Pool, when set, keeps clients and what observations remember per node across calls
	// (see Pool); PoolOwner names the cluster they belong to and is required with it.
	// Without a Pool every call dials its own connections.
	Pool      *Pool
	PoolOwner string
	// Logger receives the engine's log lines (keys lowerCamel); the zero value discards them.
	Logger logr.Logger
	// OnCommand, when set, is called once for every command the engine sends to a node,
	// each of a pipeline, a new connection's HELLO (or AUTH) and one whose dial fails
	// included, with its name as INFO commandstats spells it: lower case, a container
	// command with its subcommand ("cluster|nodes", "memory|usage"). It must be cheap and
	// safe for concurrent use. With a Pool, a pooled client keeps the OnCommand of the call
	// that created it.
	OnCommand func(name string)
}
