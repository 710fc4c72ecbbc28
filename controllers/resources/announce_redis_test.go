package resources

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
)

// TestStartAnnouncesHostname: with spec.externalAccess a real
// redis-server 7.0 started by the start script announces the address of
// its announce file as its hostname (CLUSTER NODES "ip:port@cport,host",
// CLUSTER SHARDS endpoint), prefers it as endpoint, and keeps its pod IP
// for the bus; without an address yet it starts announcing none, and a
// CONFIG SET of cluster-announce-hostname (what the operator sends) takes
// effect live.
func TestStartAnnouncesHostname(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct{ name, want string }{{"announced", "10.96.0.9"}, {"not-yet", ""}} {
		t.Run(tc.name, func(t *testing.T) {
			rc := cluster(func(rc *cachev1beta1.RedisCluster) {
				rc.Name = tc.name
				rc.Spec.ExternalAccess = &cachev1beta1.ExternalAccessSpec{Enabled: true, Type: corev1.ServiceTypeClusterIP}
			})
			p := startPod(t, rc, "pw")
			c := p.client("pw")
			defer c.Close()
			myself := func() string {
				out, err := c.ClusterNodes(ctx).Result()
				if err != nil {
					t.Fatal(err)
				}
				for _, line := range strings.Split(out, "\n") {
					if f := strings.Fields(line); len(f) > 2 && strings.Contains(f[2], "myself") {
						return f[1]
					}
				}
				t.Fatalf("no myself line in %q", out)
				return ""
			}
			wantAddr := p.ip + ":6379@16379"
			if tc.want != "" {
				wantAddr += "," + tc.want
			}
			if got := myself(); got != wantAddr {
				t.Errorf("myself %q, want %q", got, wantAddr)
			}
			if got, err := c.ConfigGet(ctx, "cluster-preferred-endpoint-type").Result(); err != nil || got["cluster-preferred-endpoint-type"] != "hostname" {
				t.Errorf("cluster-preferred-endpoint-type %v (%v)", got, err)
			}
			if err := c.ConfigSet(ctx, "cluster-announce-hostname", "10.96.0.10").Err(); err != nil {
				t.Fatal(err)
			}
			if got := myself(); got != p.ip+":6379@16379,10.96.0.10" {
				t.Errorf("after CONFIG SET: myself %q", got)
			}
			if err := c.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", 0, 16383).Err(); err != nil {
				t.Fatal(err)
			}
			shards, err := c.ClusterShards(ctx).Result()
			if err != nil || len(shards) != 1 || shards[0].Nodes[0].Endpoint != "10.96.0.10" {
				t.Errorf("CLUSTER SHARDS %+v (%v)", shards, err)
			}
		})
	}
}
