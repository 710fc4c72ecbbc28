//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
)

// lossFor is the product design's chaos test: one master's pod loses
// 100% of its packets for 30 s.
const lossFor = 30 * time.Second

// nodeTimeout is the operator's default cluster-node-timeout (5000 ms):
// a master unreachable that long is PFAIL, and FAIL soon after.
const nodeTimeout = 5 * time.Second

// serveWithin bounds how long after a node is lost the cluster must serve
// every slot again: node-timeout, the FAIL agreement and the replica's
// election (a few hundred ms plus a random 0–500 ms), on a busy 2-core
// machine.
const serveWithin = nodeTimeout + 25*time.Second

func TestChaos(t *testing.T) {
	tier(t, tierCI)
	t.Run("master-packet-loss", func(t *testing.T) {
		testMasterFault(t, "master-packet-loss", func(t *testing.T, c *cluster, M string) *fault {
			return packetLoss(t, M, 100, lossFor)
		})
	})
	// NetworkChaos partition, both directions: the master is cut from
	// every other Redis pod (the operator and the writer, on the host,
	// still reach it; it takes writes no replica confirms).
	t.Run("master-partitioned", func(t *testing.T) {
		tier(t, tierAll) // master-one-way-partition and master-packet-loss cover it (doc.go, Tiers)
		testMasterFault(t, "master-partitioned", func(t *testing.T, c *cluster, M string) *fault {
			return partition(t, []string{M}, c.podIPsBut(M), directionBoth, lossFor)
		})
	})
	// PodChaos freeze: every process of the master's pod stopped.
	t.Run("master-frozen", func(t *testing.T) {
		tier(t, tierAll) // TestFailover/master-crash freezes a master too (doc.go, Tiers)
		testMasterFault(t, "master-frozen", func(t *testing.T, c *cluster, M string) *fault {
			return freezePod(t, M, lossFor)
		})
	})
	// NetworkChaos partition, one way: what the master sends to every
	// other Redis pod is dropped, what they send it arrives. The others
	// stop hearing it and fail it over; it hears them, but cannot follow
	// its new master until the partition ends.
	t.Run("master-one-way-partition", func(t *testing.T) {
		testMasterFault(t, "master-one-way-partition", func(t *testing.T, c *cluster, M string) *fault {
			return partition(t, []string{M}, c.podIPsBut(M), directionTo, lossFor)
		})
	})
	t.Run("master-delayed", testMasterDelayed)
	t.Run("replica-killed", testReplicaKilled)
	t.Run("node-lost", func(t *testing.T) {
		tier(t, tierAll) // zone-lost loses this and one more node (doc.go, Tiers)
		testNodeLost(t)
	})
	t.Run("zone-lost", testZoneLost)
	t.Run("drain-every-node", testDrainEveryNode)
}

// slowNetwork is the delay of master-delayed: far above a LAN's round
// trip, far below the node timeout.
const slowNetwork = 200 * time.Millisecond

// testMasterDelayed: NetworkChaos delay, every packet shard 0's master
// sends held slowNetwork, for lossFor, under WAIT-1 writes. A slow network
// is not a dead node: pass when no failover happens (its replica never
// becomes master, the master is the same after), writes go on being
// acknowledged during the delay, 0 acknowledged writes are lost and the
// cluster is settled with the same master.
func testMasterDelayed(t *testing.T) {
	const name = "chaos/master-delayed"
	c, rc, w := underWrites(t, name, "chaos-delay")
	pw := c.password()
	master, replica := masterOf(rc, 0), rc.Status.Shards[0].ReplicaPods[0]
	M, R := c.pod(master).Status.PodIP, c.pod(replica).Status.PodIP
	start := time.Now()
	f := delayPod(t, M, slowNetwork, lossFor)
	// Writes go on being acknowledged while the master is slow.
	w.waitWrites(20, lossFor)
	promoted := watchPromotion(c.nodeClient(R, pw), start.Add(lossFor))
	f.wait()
	if !promoted.IsZero() {
		t.Errorf("%s was promoted while master %s was only %s slow", replica, master, slowNetwork)
	}
	rc = c.waitSettled(4 * time.Minute)
	w.waitWrites(200, time.Minute)
	r := w.result()
	lost, wrong := w.readBack(c.clusterClient(), r.Acked)
	fmt.Printf("e2e: %s acknowledged %d, acknowledged lost %d; no failover during %s of %s delay; settled %.0fs after it began\n",
		name, len(r.Acked), len(lost)+len(wrong), lossFor, slowNetwork, time.Since(start).Seconds())
	if len(lost)+len(wrong) > 0 {
		t.Errorf("%s; %d acknowledged writes lost (first %s), %d with another value", r, len(lost), first(lost), len(wrong))
	}
	if got := masterOf(rc, 0); got != master {
		t.Errorf("shard 0: master %s after a slow network, want %s still", got, master)
	}
	ids := c.checkConverged(rc)
	c.checkStatusShards(rc, ids)
}

// underWrites starts scenario name with a converged 3×1 cluster called
// clusterName and a WAIT-1 writer on it that has had 200 writes
// acknowledged.
func underWrites(t *testing.T, name, clusterName string) (*cluster, *cachev1beta1.RedisCluster, *writer) {
	t.Helper()
	scenario(t, name)
	c := newCluster(t, clusterName, nil)
	rc := c.waitReady(5 * time.Minute)
	c.checkConverged(rc)
	w := startWriter(t, c.clusterClient(), clusterName, writerOptions{Wait: true})
	w.waitWrites(200, time.Minute)
	return c, rc, w
}

// watchPromotion polls the replica behind replica (ROLE, every 200 ms)
// until it reports master or until is reached, and returns when it first
// did (zero if it did not).
func watchPromotion(replica *redis.Client, until time.Time) time.Time {
	for time.Now().Before(until) {
		ctx, cancel := redisCtx()
		r, err := role(ctx, replica)
		cancel()
		if err == nil && r == "master" {
			return time.Now()
		}
		time.Sleep(200 * time.Millisecond)
	}
	return time.Time{}
}

// podIPsBut lists the IPs of the cluster's pods other than ip.
func (c *cluster) podIPsBut(ip string) []string {
	var out []string
	for _, p := range c.pods() {
		if p.Status.PodIP != ip {
			out = append(out, p.Status.PodIP)
		}
	}
	return out
}

// testReplicaKilled: PodChaos container-kill of shard 1's replica (SIGKILL
// to every process of its pod) under WAIT-1 writes. Pass: the node
// restarts its container (restart count up), the cluster is settled again
// with the same master, and 0 acknowledged writes are lost.
func testReplicaKilled(t *testing.T) {
	const name = "chaos/replica-killed"
	scenario(t, name)
	c := newCluster(t, "chaos-kill", nil)
	rc := c.waitReady(5 * time.Minute)
	c.checkConverged(rc)
	master, replica := masterOf(rc, 1), rc.Status.Shards[1].ReplicaPods[0]
	before := c.pod(replica)
	w := startWriter(t, c.clusterClient(), "chaos-kill", writerOptions{Wait: true})
	w.waitWrites(200, time.Minute)
	start := time.Now()
	killPod(t, before.Status.PodIP)
	c.poll("the killed container restarted", 2*time.Minute, func() (bool, string) {
		p := c.pod(replica)
		return p.UID == before.UID && restartCount(p) > restartCount(before), fmt.Sprintf("restarts %d", restartCount(p))
	})
	rc = c.waitSettled(4 * time.Minute)
	ready := time.Now()
	w.waitWrites(200, time.Minute)
	r := w.result()
	lost, wrong := w.readBack(c.clusterClient(), r.Acked)
	fmt.Printf("e2e: %s acknowledged %d, acknowledged lost %d; Ready %.0fs after the kill\n",
		name, len(r.Acked), len(lost)+len(wrong), ready.Sub(start).Seconds())
	if len(lost)+len(wrong) > 0 {
		t.Errorf("%s; %d acknowledged writes lost (first %s), %d with another value", r, len(lost), first(lost), len(wrong))
	}
	if got := masterOf(rc, 1); got != master {
		t.Errorf("shard 1: master %s after its replica was killed, want %s still", got, master)
	}
	c.checkConverged(rc)
}

// testMasterFault: shard 0's master suffers the fault inject makes (for
// lossFor) under WAIT-1 writes; the product design's chaos test is 100%
// packet loss. Pass: its replica is promoted, the old master rejoins as a
// replica once the fault ends, 0 acknowledged writes are lost, and the
// cluster is Ready again.
func testMasterFault(t *testing.T, fault string, inject func(t *testing.T, c *cluster, M string) *fault) {
	name := "chaos/" + fault
	c, rc, w := underWrites(t, name, "chaos-"+fault)
	pw := c.password()
	master, replica := masterOf(rc, 0), rc.Status.Shards[0].ReplicaPods[0]
	M, R := c.pod(master).Status.PodIP, c.pod(replica).Status.PodIP
	start := time.Now()
	f := inject(t, c, M)
	promoted := watchPromotion(c.nodeClient(R, pw), start.Add(lossFor))
	f.wait()
	healed := time.Now()
	if promoted.IsZero() {
		t.Errorf("%s was not promoted during %s of %s on master %s", replica, lossFor, fault, master)
	}

	// Settled, and the status names the promoted master: a settled
	// status may still be the one written before the fault (the operator
	// observes a settled cluster every resync period).
	c.waitSettled(4 * time.Minute)
	c.poll("the status naming "+replica+" master", 2*time.Minute, func() (bool, string) {
		rc = c.get()
		return masterOf(rc, 0) == replica && isReady(rc), statusSummary(rc)
	})
	ready := time.Now()
	w.waitWrites(200, time.Minute)
	r := w.result()
	lost, wrong := w.readBack(c.clusterClient(), r.Acked)
	fmt.Printf("e2e: %s acknowledged %d, acknowledged lost %d; replica promoted after %s; Ready %.0fs after the fault ended (%.0fs after it began)\n",
		name, len(r.Acked), len(lost)+len(wrong), since(start, promoted), ready.Sub(healed).Seconds(), ready.Sub(start).Seconds())
	if len(lost)+len(wrong) > 0 {
		t.Errorf("%s; %d acknowledged writes lost (first %s), %d with another value", r, len(lost), first(lost), len(wrong))
	}
	ids := c.checkConverged(rc)
	c.checkStatusShards(rc, ids)
	ctx, cancel := redisCtx()
	defer cancel()
	if got, err := role(ctx, c.nodeClient(c.pod(master).Status.PodIP, pw)); got != "slave" {
		t.Errorf("%s is %q after the %s (%v), want a replica", master, got, fault, err)
	}
}

// testNodeLost: the node holding shard 0's master is lost (its processes
// killed, its heartbeat stopped) under WAIT-1 writes; see testLost.
func testNodeLost(t *testing.T) {
	testLost(t, "chaos/node-lost", "chaos-node", func(t *testing.T, rc *cachev1beta1.RedisCluster, pods map[string]corev1.Pod) (string, []string) {
		node := pods[masterOf(rc, 0)].Spec.NodeName
		return "node " + node, []string{node}
	})
}

// testZoneLost: every node of a zone holding a master is lost at once (on
// the e2e plane zone-a has two nodes, see startPlane); the zone with the
// most nodes among those holding a master is taken. See testLost.
func testZoneLost(t *testing.T) {
	testLost(t, "chaos/zone-lost", "chaos-zone", func(t *testing.T, rc *cachev1beta1.RedisCluster, pods map[string]corev1.Pod) (string, []string) {
		zones := nodeZones(t)
		byZone := map[string][]string{}
		for node, z := range zones {
			byZone[z] = append(byZone[z], node)
		}
		best := ""
		for _, sh := range rc.Status.Shards {
			z := zones[pods[sh.MasterPod].Spec.NodeName]
			if best == "" || len(byZone[z]) > len(byZone[best]) || len(byZone[z]) == len(byZone[best]) && z < best {
				best = z
			}
		}
		if best == "" {
			t.Fatalf("no master runs on a node with a zone label: zones %v", zones)
		}
		nodes := byZone[best]
		slices.Sort(nodes)
		return fmt.Sprintf("zone %s (nodes %s)", best, strings.Join(nodes, ", ")), nodes
	})
}

// testLost: under WAIT-1 writes, the nodes lose picks from a Ready 3×1
// cluster are lost at once (their processes killed, their heartbeats
// stopped; what names them for the messages). Pass: the default placement
// put no shard's two pods on one node or in one zone, so no shard loses
// both, and the masters start spread (no node or zone above its share);
// every slot is served again within serveWithin, by replicas
// elsewhere, which then hold two masters on a node or zone; once the nodes
// are back the operator moves masters back with planned failovers
// (Topology events "moving master of ...") until no node and no zone
// holds more than its share (at least one move when the promotions left
// one above it), and the cluster is Ready with 0 acknowledged
// writes lost.
func testLost(t *testing.T, name, clusterName string, lose func(*testing.T, *cachev1beta1.RedisCluster, map[string]corev1.Pod) (string, []string)) {
	scenario(t, name)
	c := newCluster(t, clusterName, nil)
	rc := c.waitReady(5 * time.Minute)
	c.checkConverged(rc)
	pw := c.password()
	pods := map[string]corev1.Pod{}
	for _, p := range c.pods() {
		pods[p.Name] = p
	}
	zones := nodeZones(t)
	for i, sh := range rc.Status.Shards {
		nodes := map[string]bool{pods[sh.MasterPod].Spec.NodeName: true}
		inZone := map[string]string{zones[pods[sh.MasterPod].Spec.NodeName]: sh.MasterPod}
		for _, rp := range sh.ReplicaPods {
			node := pods[rp].Spec.NodeName
			if nodes[node] {
				t.Fatalf("shard %d has two pods on node %s (master %s, replica %s): the default anti-affinity did not hold",
					i, node, sh.MasterPod, rp)
			}
			nodes[node] = true
			if z := zones[node]; z != "" && inZone[z] != "" {
				t.Fatalf("shard %d has two pods in zone %s (%s and %s): the default zone anti-affinity did not hold", i, z, inZone[z], rp)
			} else {
				inZone[z] = rp
			}
		}
	}
	for i, sh := range rc.Status.Shards {
		if sh.MasterNode != pods[sh.MasterPod].Spec.NodeName || len(sh.ReplicaNodes) != len(sh.ReplicaPods) {
			t.Errorf("status.shards[%d] places master %s on %q and replicas %v on %v; the pods run on %s and %v",
				i, sh.MasterPod, sh.MasterNode, sh.ReplicaPods, sh.ReplicaNodes, pods[sh.MasterPod].Spec.NodeName, nodesOf(pods, sh.ReplicaPods))
		}
	}
	// A new cluster's masters start spread (the bootstrap chooses each
	// shard's master among its pods by the spread measure), with no planned
	// failover: the loss may come right after Ready.
	var startNodes []string
	for _, sh := range rc.Status.Shards {
		startNodes = append(startNodes, pods[sh.MasterPod].Spec.NodeName)
	}
	if over, load := aboveShare(startNodes, slices.Collect(maps.Keys(pods)), pods, zones); over {
		t.Errorf("the new cluster's masters start above a node's or zone's share (%s); the bootstrap should have spread them", load)
	}
	what, lostNodes := lose(t, rc, pods)
	var mastersThere, heirs []string // the lost nodes' masters, and their replicas
	var survivor string              // a master pod on another node
	for _, sh := range rc.Status.Shards {
		if slices.Contains(lostNodes, pods[sh.MasterPod].Spec.NodeName) {
			mastersThere = append(mastersThere, sh.MasterPod)
			heirs = append(heirs, sh.ReplicaPods...)
		} else if survivor == "" {
			survivor = sh.MasterPod
		}
	}
	if survivor == "" {
		t.Fatalf("every master is in %s: the default spread of the masters did not hold", what)
	}
	t.Logf("losing %s with masters %v", what, mastersThere)

	w := startWriter(t, c.clusterClient(), clusterName, writerOptions{Wait: true})
	w.waitWrites(200, time.Minute)
	start := time.Now()
	var faults []*fault
	for _, n := range lostNodes {
		faults = append(faults, loseNode(t, n, 0))
	}
	surv := c.nodeClient(pods[survivor].Status.PodIP, pw)
	// Serving again: a replica of each lost master is master, and a
	// surviving master sees every slot served (no slot on a failed node).
	var serving time.Time
	for serving.IsZero() && time.Since(start) < 2*serveWithin {
		ctx, cancel := redisCtx()
		promoted := 0
		for _, h := range heirs {
			if r, err := role(ctx, c.nodeClient(pods[h].Status.PodIP, pw)); err == nil && r == "master" {
				promoted++
			}
		}
		info, err := surv.ClusterInfo(ctx).Result()
		cancel()
		if ci := infoMap(info); promoted == len(mastersThere) && err == nil && ci["cluster_state"] == "ok" &&
			ci["cluster_slots_fail"] == "0" && ci["cluster_slots_pfail"] == "0" {
			serving = time.Now()
		}
		time.Sleep(200 * time.Millisecond)
	}
	// The writer's WAIT-1 writes mostly fail meanwhile: the promoted
	// masters and the masters whose replicas were lost have no replica
	// until the nodes are back.
	if serving.IsZero() || serving.Sub(start) > serveWithin {
		t.Errorf("every slot served again %s after %s was lost, want within %s", since(start, serving), what, serveWithin)
	}

	// Whether the promotions piled masters up: then the operator must move
	// one back. On 4 nodes a 3×1 cluster leaves one node without a master,
	// and a replica there takes over without exceeding any share.
	masterNodes := []string{}
	for _, sh := range rc.Status.Shards {
		node := pods[sh.MasterPod].Spec.NodeName
		if slices.Contains(lostNodes, node) && len(sh.ReplicaPods) > 0 {
			node = pods[sh.ReplicaPods[0]].Spec.NodeName
		}
		masterNodes = append(masterNodes, node)
	}
	promotedOver, promotedLoad := aboveShare(masterNodes, slices.Collect(maps.Keys(pods)), pods, zones)

	for _, f := range faults {
		f.stop()
	}
	restored := time.Now()
	rc, spreadAt := c.waitSpread(5 * time.Minute)
	w.waitWrites(200, time.Minute)
	r := w.result()
	lost, wrong := w.readBack(c.clusterClient(), r.Acked)
	moves := c.masterMoves()
	fmt.Printf("e2e: %s acknowledged %d, acknowledged lost %d; %d master(s) in the lost %s; all slots served after %s; %d planned move(s) (%s after the promotions); Ready with masters spread %.0fs after it came back\n",
		name, len(r.Acked), len(lost)+len(wrong), len(mastersThere), what, since(start, serving), moves, promotedLoad, spreadAt.Sub(restored).Seconds())
	if len(lost)+len(wrong) > 0 {
		t.Errorf("%s; %d acknowledged writes lost (first %s), %d with another value", r, len(lost), first(lost), len(wrong))
	}
	ids := c.checkConverged(rc)
	c.checkStatusShards(rc, ids)
	if moves == 0 && promotedOver {
		t.Errorf("the replicas promoted while %s was lost left a node or zone above its share of masters (%s), the masters are spread now, but no planned move was recorded", what, promotedLoad)
	}
	for _, n := range lostNodes {
		checkNodeReady(t, n)
	}
}

// aboveShare reports whether the masters on masterNodes leave a node, or a
// zone, above its share: ceil(masters / nodes, or zones, the cluster's
// pods run on), the engine's own measure (controllers/topology/spread.go).
// load describes the count per node and per zone.
func aboveShare(masterNodes, podNames []string, pods map[string]corev1.Pod, zones map[string]string) (over bool, load string) {
	used := make([]string, 0, len(podNames))
	for _, p := range podNames {
		used = append(used, pods[p].Spec.NodeName)
	}
	return overShare(masterNodes, used, zones)
}

// overShare reports whether a node or a zone holds more than its share of
// the masters on masterNodes: ceil(masters / nodes in usedNodes), and the
// same over their zones (zones maps node to zone); load says the counts.
func overShare(masterNodes, usedNodes []string, zones map[string]string) (over bool, load string) {
	nodes, usedZones := map[string]bool{}, map[string]bool{}
	for _, n := range usedNodes {
		nodes[n] = true
		usedZones[zones[n]] = true
	}
	perNode, perZone := map[string]int{}, map[string]int{}
	for _, n := range masterNodes {
		perNode[n]++
		perZone[zones[n]]++
	}
	nodeShare := (len(masterNodes) + len(nodes) - 1) / len(nodes)
	zoneShare := (len(masterNodes) + len(usedZones) - 1) / len(usedZones)
	for _, k := range perNode {
		over = over || k > nodeShare
	}
	for _, k := range perZone {
		over = over || k > zoneShare
	}
	return over, fmt.Sprintf("masters per node %v (share %d), per zone %v (share %d)", perNode, nodeShare, perZone, zoneShare)
}

// nodeZones maps each node of the plane to its topology.kubernetes.io/zone
// label.
func nodeZones(t testing.TB) map[string]string {
	t.Helper()
	var nodes corev1.NodeList
	if err := env.k8s.List(context.Background(), &nodes); err != nil {
		t.Fatalf("listing nodes: %v", err)
	}
	out := map[string]string{}
	for _, n := range nodes.Items {
		out[n.Name] = n.Labels[corev1.LabelTopologyZone]
	}
	return out
}

func nodesOf(pods map[string]corev1.Pod, names []string) []string {
	var out []string
	for _, n := range names {
		out = append(out, pods[n].Spec.NodeName)
	}
	return out
}

// since is d from start to at in seconds, or "never" when at is zero.
func since(start, at time.Time) string {
	if at.IsZero() {
		return "never"
	}
	return strconv.FormatFloat(at.Sub(start).Seconds(), 'f', 1, 64) + "s"
}

// checkNodeReady fails t unless node is Ready with no unreachable or
// not-ready taint (the lifecycle controller lifts them once it is back).
func checkNodeReady(t *testing.T, node string) {
	t.Helper()
	waitFor(t, "node "+node+" Ready and untainted", 2*time.Minute, func() (bool, string) {
		var n corev1.Node
		if err := env.k8s.Get(context.Background(), client.ObjectKey{Name: node}, &n); err != nil {
			return false, err.Error()
		}
		for _, taint := range n.Spec.Taints {
			if taint.Key == corev1.TaintNodeUnreachable || taint.Key == corev1.TaintNodeNotReady {
				return false, "tainted " + taint.Key
			}
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				return cond.Status == corev1.ConditionTrue, string(cond.Status)
			}
		}
		return false, "no Ready condition"
	})
}
