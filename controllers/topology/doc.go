// Package topology drives a Redis Cluster (Redis 7.0) to a desired shape: how many shards
// (masters), how many replicas each, which nodes belong to which shard. It has no
// Kubernetes dependency: the controller hands it endpoints grouped by shard.
//
// The engine works in three parts, following the Redis Cluster specification
// (https://redis.io/docs/latest/operate/oss_and_stack/reference/cluster-spec/):
//
//   - Observe reads CLUSTER NODES, CLUSTER INFO and INFO replication, keyspace and server
//     from every endpoint into a ClusterView ("Cluster topology").
//   - Plan is a pure, deterministic function from a view and the Desired shape to typed,
//     idempotent Steps: assign slots, meet ("Node handshake"), repair open slots, forget
//     dead nodes ("Removing nodes from a cluster"), attach replicas, move slots ("Live
//     resharding").
//   - Reconcile loops observe → plan → execute until the cluster converges, repairing what a
//     crash left half-done at the start of every pass. Failover ("Replica election and
//     promotion", CLUSTER FAILOVER) and ApplyConfig serve rolling updates and live config.
//
// What the engine guarantees about data: it never assigns slots that held data as if the
// cluster were new (Desired.Formed; ErrShardLost until AllowDataLoss); it never forces a
// promotion while a majority of the slot-owning masters can elect one (only then could a
// forced one leave two masters taking writes), and a planned Failover never forces; keys move
// with MIGRATE without REPLACE, so a key present on both ends is compared, never overwritten
// blindly (ErrKeyConflict when the values differ), in byte-bounded chunks that keep a source
// from stalling past its node timeout; a leaving shard is drained (no slot, DBSIZE 0)
// before it is forgotten and reported Removable.
//
// What the engine expects of each node's configuration: cluster-enabled yes; the address
// in Endpoint.Addr is the one the node announces (cluster-announce-ip behind NAT or in
// pods); masterauth equal to requirepass so replicas can sync; CLUSTER and CONFIG commands
// not renamed. cluster-allow-replica-migration no is recommended: the engine places every
// replica in its own shard, and Redis's own "Replica migration" would otherwise move
// replicas between shards while a shard has lost its replicas, only for the engine to move
// them back.
//
// The engine never resets a node nor flushes data: nodes that restart are re-introduced
// with CLUSTER MEET and keep their data (a test checks the source for such commands).
package topology
