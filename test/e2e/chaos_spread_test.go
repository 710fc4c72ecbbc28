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

// spread reports whether no node and no zone holds more than its share of
// status.shards' masters: ceil(masters / nodes the cluster's pods run on),
// and the same over their zones (zones maps node to zone), as aboveShare
// judges the promotions.
func spread(rc *cachev1beta1.RedisCluster, zones map[string]string) (bool, string) {
	var masterNodes []string
	usedNodes, usedZones := map[string]bool{}, map[string]bool{}
	for _, sh := range rc.Status.Shards {
		if sh.MasterNode == "" {
			return false, "shard " + sh.Name + " has no master node in the status"
		}
		masterNodes = append(masterNodes, sh.MasterNode)
		for _, n := range append([]string{sh.MasterNode}, sh.ReplicaNodes...) {
			usedNodes[n], usedZones[zones[n]] = true, true
		}
	}
	perNode, perZone := map[string]int{}, map[string]int{}
	for _, n := range masterNodes {
		perNode[n]++
		perZone[zones[n]]++
	}
	nodeShare := (len(masterNodes) + len(usedNodes) - 1) / len(usedNodes)
	zoneShare := (len(masterNodes) + len(usedZones) - 1) / len(usedZones)
	why := fmt.Sprintf("masters per node %v (share %d), per zone %v (share %d)", perNode, nodeShare, perZone, zoneShare)
	for _, k := range perNode {
		if k > nodeShare {
			return false, why
		}
	}
	for _, k := range perZone {
		if k > zoneShare {
			return false, why
		}
	}
	return true, ""
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
