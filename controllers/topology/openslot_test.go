package topology

import (
	"fmt"
	"testing"
	"time"

	"github.com/redis-operator/redis-operator/test/redistest"
)

// Behaviour 4d (field case R9): a slot is half-moved from s0 to s1 (IMPORTING on s1's
// master, MIGRATING on s0's, part of its keys already on s1), then one end of the move fails
// over to its replica (CLUSTER FAILOVER on the replica, as the start script of a killed
// destination does, and as Redis's own failover does): the open slot now points at, or is
// held by, a node that is a replica. The next run converges: no open slot anywhere, all
// slots covered, every key readable through a cluster client. When the source failed over,
// the run starts once the importing end holds the slot unbound (bindUnbound).
func TestOpenSlotPeerFailedOver(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, end string
		scaleIn   bool // s0 is leaving: the run must drain it and report it removable
	}{{"destination", "destination", false}, {"source", "source", false}, {"destination-scale-in", "destination", true}} {
		t.Run(tc.name, func(t *testing.T) {
			c := newTestCluster(t, redistest.Options{Password: "fo-pw"}, Options{})
			all, d := c.form(4, 2)
			ds := redistest.Dataset{Prefix: "fo", Keys: 20_000}
			redistest.Load(t, c.client(d), ds)

			v := c.observe(d)
			src, dst := v.Node("s0-0"), v.Node("s1-0")
			srcN, dstN := c.nodes["s0"][0], c.nodes["s1"][0]
			slot := -1
			for s := 0; s < NumSlots; s++ {
				if src.OwnSlots().Has(s) && srcN.Do("CLUSTER", "COUNTKEYSINSLOT", s).(int64) >= 4 {
					slot = s
					break
				}
			}
			if slot < 0 {
				t.Fatal("no slot with keys")
			}
			dstN.Do("CLUSTER", "SETSLOT", slot, "IMPORTING", src.ID)
			srcN.Do("CLUSTER", "SETSLOT", slot, "MIGRATING", dst.ID)
			keys := srcN.Do("CLUSTER", "GETKEYSINSLOT", slot, 1000).([]any)
			args := []any{"MIGRATE", dstN.IP(), dstN.Port(), "", 0, 5000, "AUTH", "fo-pw", "KEYS"}
			srcN.Do(append(args, keys[:len(keys)/2]...)...)
			syncReplicas(t, c, all)

			shard := map[string]string{"destination": "s1", "source": "s0"}[tc.end]
			oldM, newM := shard+"-0", shard+"-1"
			// A manual failover that does not complete within its 5 s timeout is dropped by
			// Redis: ask again until it did.
			var asked time.Time
			waitFor(t, time.Minute, newM+" to become master", func() bool {
				if time.Since(asked) > 6*time.Second {
					c.node(newM).Do("CLUSTER", "FAILOVER")
					asked = time.Now()
				}
				v := c.observe(d)
				return v.Node(newM).IsMaster() && v.Node(newM).OwnSlots().Len() > 0 && v.Node(oldM).MasterID() == v.Node(newM).ID
			})
			t.Logf("open slots after the failover: %v", openSlots(c.observe(d)))
			if tc.end == "source" {
				// The importing end learns of the failover by gossip and then, importing,
				// holds the slot unbound (cluster_state:fail, MIGRATE refused): the state the
				// operator finds when it comes after gossip, as it usually does.
				waitFor(t, 30*time.Second, "s1-0 to hold the slot unbound", func() bool {
					return !c.observe(d).Node("s1-0").Info.OK()
				})
			}

			if tc.scaleIn {
				d = c.desired(1, all[1:], all[0])
			}
			res, err := c.tryReconcile(d, nil, 90*time.Second)
			if err != nil {
				t.Fatalf("Reconcile: %v (result %+v)", err, res)
			}
			if tc.scaleIn {
				if fmt.Sprint(res.Removable) != "[s0]" {
					t.Fatalf("removable %v", res.Removable)
				}
				d = c.desired(1, all[1:])
			}
			c.assertShape(d, res)
			redistest.Verify(t, c.client(d), ds)
		})
	}
}
