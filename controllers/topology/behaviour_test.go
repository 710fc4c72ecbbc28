package topology

import (
	"fmt"
	"testing"

	"github.com/redis-operator/redis-operator/test/redistest"
)

// Behaviour 1: bootstrap N masters × R replicas from fresh nodes.
func TestBootstrap(t *testing.T) {
	for _, n := range []int{3, 5} {
		for _, r := range []int{0, 1, 2} {
			t.Run(fmt.Sprintf("%dx%d", n, r), func(t *testing.T) {
				c := newTestCluster(t, redistest.Options{Password: "pw-" + t.Name()}, Options{})
				names := c.addShards(n, 1+r)
				d := c.desired(r, names)
				res := c.reconcile(d, nil)
				c.assertShape(d, res)
				// The cluster serves reads and writes, and a second run has nothing to do.
				cc := c.client(d)
				ds := redistest.Dataset{Prefix: "boot", Keys: 500}
				redistest.Load(t, cc, ds)
				redistest.Verify(t, cc, ds)
				steps, err := Plan(c.observe(d), d)
				if err != nil || len(steps) != 0 {
					t.Fatalf("converged cluster plans %v (%v)", stepStrings(steps), err)
				}
			})
		}
	}
}
