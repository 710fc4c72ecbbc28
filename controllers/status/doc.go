// Package status derives a RedisCluster's status from what one reconcile
// pass observed, with no I/O: Summarize reduces the topology engine's view
// (and Result) of Redis to a Topology; the controller fills an
// Observation with it, the pods and the credentials; Apply turns the
// Observation into the six owned conditions, the phase, status.shards and
// the counts, a pure function of the observation, the object and the time.
// The controller writes the result and emits the events.
package status
