//go:build e2e

package e2e

import (
	"strings"
	"time"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
)

// masterMoveMark is in the Topology event of each planned failover the
// operator makes to spread masters piled up on a node (the engine's step
// reason: "moving master of <shard> from node X to node Y: ...").
const masterMoveMark = "moving master of"

// spread reports whether no node and no zone holds more than its share of
// status.shards' masters (overShare, over the nodes the cluster's pods run
// on), as aboveShare judges the promotions.
func spread(rc *cachev1beta1.RedisCluster, zones map[string]string) (bool, string) {
	var masterNodes, used []string
	for _, sh := range rc.Status.Shards {
		if sh.MasterNode == "" {
			return false, "shard " + sh.Name + " has no master node in the status"
		}
		masterNodes = append(masterNodes, sh.MasterNode)
		used = append(append(used, sh.MasterNode), sh.ReplicaNodes...)
	}
	over, load := overShare(masterNodes, used, zones)
	return !over, load
}

// waitSpread waits until the cluster is settled with its masters spread
// (no node or zone above its share) and returns it with the time that was
// seen.
func (c *cluster) waitSpread(timeout time.Duration) (*cachev1beta1.RedisCluster, time.Time) {
	c.t.Helper()
	zones := nodeZones(c.t)
	c.poll("settled with masters spread over the nodes and zones", timeout, func() (bool, string) {
		if ok, why := c.settled(); !ok {
			return false, why
		}
		return spread(c.get(), zones)
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
