//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"time"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
)

// masterMoveMark is in the Topology event of each planned failover the
// operator makes to spread masters piled up on a node (the engine's step
// reason: "moving master of <shard> from node X to node Y: ...").
const masterMoveMark = "moving master of"

// mastersPerNode counts status.shards' masters per node, and the share of
// each: ceil(masters / nodes the cluster's pods run on).
func mastersPerNode(rc *cachev1beta1.RedisCluster) (map[string]int, int) {
	per, used := map[string]int{}, map[string]bool{}
	for _, sh := range rc.Status.Shards {
		per[sh.MasterNode]++
		used[sh.MasterNode] = true
		for _, n := range sh.ReplicaNodes {
			used[n] = true
		}
	}
	return per, (len(rc.Status.Shards) + len(used) - 1) / len(used)
}

// spread reports whether no node holds more than its share of masters.
func spread(rc *cachev1beta1.RedisCluster) (bool, string) {
	per, share := mastersPerNode(rc)
	for n, k := range per {
		if k > share || n == "" {
			return false, fmt.Sprintf("masters per node %v, share %d", per, share)
		}
	}
	return true, ""
}

// waitSpread waits until the cluster is settled with its masters spread
// (no node above its share) and returns it with the time that was seen.
func (c *cluster) waitSpread(timeout time.Duration) (*cachev1beta1.RedisCluster, time.Time) {
	c.t.Helper()
	c.poll("settled with masters spread over the nodes", timeout, func() (bool, string) {
		if ok, why := c.settled(); !ok {
			return false, why
		}
		return spread(c.get())
	})
	return c.get(), time.Now()
}

// masterMoves counts the planned failovers the operator made to spread
// masters, from its Topology events (an aggregated event counts as often
// as it was recorded).
func (c *cluster) masterMoves() int {
	n := 0
	for _, e := range c.events() {
		if k := strings.Count(e.Message, masterMoveMark); k > 0 {
			n += k * int(max(e.Count, 1))
		}
	}
	return n
}
