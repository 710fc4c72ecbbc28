// Package topology drives a Redis Cluster (Redis 7.0) to a desired shape: how many shards
// (masters), how many replicas each, which nodes belong to which shard. It has no
// Kubernetes dependency: the controller hands it endpoints grouped by shard.
//
// The engine works in three parts, following the Redis Cluster specification
// (https://redis.io/docs/latest/operate/oss_and_stack/reference/cluster-spec/):
//
//   - Observe reads CLUSTER NODES, CLUSTER INFO, CLUSTER SHARDS and INFO replication from
//     every endpoint into a ClusterView ("Cluster topology").
//   - Plan is a pure, deterministic function from a view and the Desired shape to typed,
//     idempotent Steps: assign slots, meet ("Node handshake"), repair open slots, forget
//     dead nodes ("Removing nodes from a cluster"), attach replicas, move slots ("Live
//     resharding").
//   - Reconcile loops observe → plan → execute until the cluster converges, repairing what a
//     crash left half-done at the start of every pass. Failover ("Replica election and
//     promotion", CLUSTER FAILOVER) and ApplyConfig serve rolling updates and live config.
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
