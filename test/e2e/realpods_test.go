//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/test/s3test"
)

// staleRoutingEnd is until when, after a disruption that ended at ready,
// a write may still fail because of it: ready plus clientReloadInterval
// plus writeTimeout. Pods come back with new addresses, and a client whose
// slot map still names an old one waits for its dial timeouts, as on any
// real network, where nothing refuses a connection to an address nobody
// holds, until its periodic reload of the slot map (a timeout is no
// redirection, so nothing else reloads it: clusterClient). The map read
// when the roll's last failover redirected the client may name a new
// master by its old address, when the node answering had not yet learnt
// the new one by gossip (a failed write 30 s after Ready in CI of
// 2026-12-07 with go-redis's 60 s default).
func (c *cluster) staleRoutingEnd(ready time.Time) time.Time {
	return ready.Add(clientReloadInterval + writeTimeout)
}

// server is one server of the version matrix: an image as users write it
// and what the server itself must report.
type server struct {
	name    string // scenario name
	cluster string // a DNS label for its RedisCluster and namespace
	image   string
	field   string // INFO server field holding the version
	version string
	// tier of its full scenario: the ci tier runs Valkey's (the server most
	// unlike the redis:7.0 the other scenarios run); Redis 7.0 and
	// 8.0 form and roll in upgrade-7.0-8.0 there, and their full scenarios
	// run in tier all (make test-e2e-all), with the rest of the matrix.
	tier tierName
}

// matrix is every server the operator supports that runs here.
var matrix = []server{
	{name: "redis-7.0", cluster: "real-redis-70", image: "redis:7.0.15", field: "redis_version", version: "7.0.15", tier: tierAll},
	{name: "redis-8.0", cluster: "real-redis-80", image: "redis:8.0.2", field: "redis_version", version: "8.0.2", tier: tierAll},
	{name: "valkey-8.1", cluster: "real-valkey-81", image: "valkey/valkey:8.1.1", field: "valkey_version", version: "8.1.1", tier: tierCI},
}

// TestRealPods (label realpods): the version matrix on real pods. For each
// server, a 3×1 cluster on the real nodes forms (every pod's container run
// by containerd, the server reporting its own version), takes a live config
// change, rolls a restart-only config change with planned failovers, scales
// out to 4 shards and back in to 3 moving keys, and loses a master's pod, all under
// WAIT-acknowledged writes, none of which is lost, and is backed up and
// restored into a new cluster of the same server, where every
// acknowledged write is read back (the ci tier runs this
// for Valkey 8.1, tier all for every server: server.tier). And a running
// 7.0 cluster upgrades to 8.0 by a rolling image change under writes.
func TestRealPods(t *testing.T) {
	tier(t, tierCI)
	sideBySide(t) // see doc.go; its scenarios take a place of the group each
	for _, s := range matrix {
		t.Run(s.name, func(t *testing.T) {
			if s.tier == tierAll {
				tier(t, tierAll)
			}
			t.Parallel()
			scenario(t, "realpods/"+s.name)
			c := newCluster(t, s.cluster, func(rc *cachev1beta1.RedisCluster) {
				rc.Spec.Image = s.image
			})
			rc := c.waitReady(5 * time.Minute)
			c.checkConverged(rc)
			c.checkServer(s)

			c.update(func(rc *cachev1beta1.RedisCluster) {
				rc.Spec.Config = map[string]string{"maxmemory-policy": "allkeys-lru"}
			})
			c.poll("applying maxmemory-policy everywhere", 2*time.Minute, func() (bool, string) {
				return c.configOn("maxmemory-policy", "allkeys-lru", "")
			})
			// tcp-backlog cannot change at run time: a rolling restart.
			c.rollingUpdate(t, "config", func(rc *cachev1beta1.RedisCluster) { rc.Spec.Config["tcp-backlog"] = "256" })
			c.checkConfigEverywhere("tcp-backlog", "256")

			w := startWriter(t, c.clusterClient(), "real", writerOptions{Wait: true})
			w.waitWrites(200, time.Minute)
			c.scaleTo(4, w)
			// Back to 3: the fourth shard's slots moved back, its pods removed.
			c.scaleTo(3, w)
			w.verify(c.clusterClient()) // stops the writer; fails on any acknowledged key lost
			c.loseMaster(0, func(pod, _ string) {
				if err := env.k8s.Delete(context.Background(), c.pod(pod)); err != nil {
					t.Fatalf("deleting pod %s: %v", pod, err)
				}
			}, false)
			c.checkServer(s)
			c.backupAndRestore(t, s, w)
		})
	}

	t.Run("upgrade-7.0-8.0", func(t *testing.T) {
		// Tier all, with the rest of the matrix. A write failed 30 s after
		// this roll once (CI of 2026-12-07), when the suite's clients kept
		// go-redis's 60 s slot-map reload (staleRoutingEnd).
		tier(t, tierAll)
		t.Parallel()
		scenario(t, "realpods/upgrade-7.0-8.0")
		from, to := matrix[0], matrix[1]
		c := newCluster(t, "real-upgrade", func(rc *cachev1beta1.RedisCluster) {
			rc.Spec.Image = from.image
		})
		c.waitReady(5 * time.Minute)
		c.checkServer(from)
		c.rollingUpdate(t, "image", func(rc *cachev1beta1.RedisCluster) { rc.Spec.Image = to.image })
		c.checkServer(to)
	})
}

// backupAndRestore takes a RedisClusterBackup of c (its shards' RDBs, from
// s's server on real pods, streamed by the operator to the suite's object
// store), restores it into a new cluster of the same image and shard count
// on the real nodes (each pod's RDB fetched by the restore init container,
// the operator's image, then loaded by s's server), and reads back every
// write w acknowledged; w has stopped.
func (c *cluster) backupAndRestore(t *testing.T, s server, w *writer) {
	t.Helper()
	srv := suiteStore(t)
	bucket := s.cluster
	srv.MakeBucket(t, bucket)
	backupSecret(t, c.ns, "s3", s3test.SecretKey)
	createBackup(t, c.ns, "b1", c.name, storeSpec(srv, bucket, "s3"))
	b := waitBackup(t, c.ns, "b1", 5*time.Minute, func(b *cachev1beta1.RedisClusterBackup) bool {
		return b.Status.Phase == cachev1beta1.BackupCompleted || b.Status.Phase == cachev1beta1.BackupFailed
	})
	shards := c.get().Spec.Shards
	if b.Status.Phase != cachev1beta1.BackupCompleted || int32(len(b.Status.Shards)) != shards {
		t.Fatalf("backup of %s on real pods: %s", s.name, backupSummary(b))
	}
	restored := restoreClusterWith(t, c.ns, s.cluster+"-restored", "64Mi", "b1", func(rc *cachev1beta1.RedisCluster) {
		rc.Spec.Image = s.image
		rc.Spec.Shards = shards
	})
	restored.waitReady(5 * time.Minute)
	restored.checkServer(s)
	acked := w.result().Acked
	if lost, wrong := w.readBack(restored.clusterClient(), acked); len(lost)+len(wrong) > 0 {
		t.Fatalf("restored from the backup of %s: of %d acknowledged writes %d lost (first %s), %d wrong (first %s)",
			s.name, len(acked), len(lost), first(lost), len(wrong), first(wrong))
	}
	t.Logf("backup of %d bytes (%d shards, redis_version %s recorded) restored on real pods: %d acknowledged writes read back",
		b.Status.Size, len(b.Status.Shards), b.Status.RedisVersion, len(acked))
}

// checkServer checks that every pod of c runs on a node whose runtime is
// containerd, its container run by it, and that the server in it reports s's version; it
// prints one line with what ran.
func (c *cluster) checkServer(s server) {
	c.t.Helper()
	ctx := context.Background()
	pw := c.password()
	runtimes := map[string]bool{}
	for _, p := range c.pods() {
		var node corev1.Node
		if err := env.k8s.Get(ctx, client.ObjectKey{Name: p.Spec.NodeName}, &node); err != nil {
			c.t.Fatalf("node of %s: %v", p.Name, err)
		}
		rt := node.Status.NodeInfo.ContainerRuntimeVersion
		if !strings.HasPrefix(rt, "containerd://") {
			c.t.Fatalf("pod %s runs on %s (runtime %q), not on a real node", p.Name, node.Name, rt)
		}
		runtimes[rt] = true
		if len(p.Status.ContainerStatuses) == 0 || !strings.HasPrefix(p.Status.ContainerStatuses[0].ContainerID, "containerd://") {
			c.t.Fatalf("pod %s: container status %+v is not containerd's", p.Name, p.Status.ContainerStatuses)
		}
		rctx, cancel := redisCtx()
		info, err := c.nodeClient(p.Status.PodIP, pw).Info(rctx, "server").Result()
		cancel()
		if err != nil {
			c.t.Fatalf("INFO server on %s: %v", p.Name, err)
		}
		if got := infoMap(info)[s.field]; got != s.version {
			c.t.Fatalf("pod %s (%s): %s is %q, want %s", p.Name, p.Spec.Containers[0].Image, s.field, got, s.version)
		}
	}
	var rts []string
	for rt := range runtimes {
		rts = append(rts, rt)
	}
	fmt.Printf("e2e: %s server %s %s on %s\n", c.t.Name(), s.name, s.version, strings.Join(rts, ","))
}
