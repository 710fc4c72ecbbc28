//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/resources"
)

// TestExternalAccessLoadBalancer (label external-access): with
// spec.externalAccess of type LoadBalancer, a scale-out moves no slot onto
// a new shard whose load balancer has no address yet, since every node
// would redirect clients of those slots to "?"; the status says which
// Service it waits for, and the slots move once it has an address. The
// test plays the cloud's load balancer controller: it gives each per-pod
// Service status.loadBalancer.ingress its own cluster IP (which the plane's
// kube-proxy routes), and withholds the new shard's until it has seen the
// wait. Writes go on throughout and are all read back.
func TestExternalAccessLoadBalancer(t *testing.T) {
	t.Parallel()
	scenario(t, "external-access/load-balancer-scale-out")
	c := newCluster(t, "external-lb", func(rc *cachev1beta1.RedisCluster) {
		rc.Spec.ReplicasPerShard = 0
		rc.Spec.ExternalAccess = &cachev1beta1.ExternalAccessSpec{Enabled: true, Type: corev1.ServiceTypeLoadBalancer}
	})
	ctx := context.Background()
	// provide gives every per-pod Service but except a load balancer address.
	provide := func(except string) (withAddress int) {
		var list corev1.ServiceList
		if err := env.k8s.List(ctx, &list, client.InNamespace(c.ns),
			client.MatchingLabels{resources.LabelCluster: c.name, resources.LabelComponent: resources.ComponentExternal}); err != nil {
			t.Fatalf("listing per-pod Services: %v", err)
		}
		for i := range list.Items {
			svc := &list.Items[i]
			switch {
			case len(svc.Status.LoadBalancer.Ingress) > 0:
				withAddress++
			case svc.Name != except && svc.Spec.ClusterIP != "" && svc.Spec.ClusterIP != corev1.ClusterIPNone:
				svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: svc.Spec.ClusterIP}}
				if err := env.k8s.Status().Update(ctx, svc); err == nil {
					withAddress++
				}
			}
		}
		return withAddress
	}
	c.poll("Ready once every per-pod Service has a load balancer address", 5*time.Minute, func() (bool, string) {
		n := provide("")
		rc := c.get()
		return n == 3 && isReady(rc), fmt.Sprintf("%d Services with an address; phase %s", n, rc.Status.Phase)
	})
	w := startWriter(t, c.clusterClient(), "lb", writerOptions{})
	w.waitWrites(100, time.Minute)

	newPod := resources.PodName(c.name, 3, 0)
	newSvc := resources.ExternalServiceName(newPod)
	c.update(func(rc *cachev1beta1.RedisCluster) { rc.Spec.Shards = 4 })
	c.poll("the new shard waiting for its load balancer", 3*time.Minute, func() (bool, string) {
		provide(newSvc)
		cond := meta.FindStatusCondition(c.get().Status.Conditions, cachev1beta1.RedisClusterProgressingCondition)
		if cond == nil {
			return false, "no Progressing condition"
		}
		return strings.Contains(cond.Message, newSvc+" has no external address yet"), cond.Reason + ": " + cond.Message
	})
	// Meanwhile it owns no slot.
	rctx, cancel := redisCtx()
	out, err := c.nodeClient(c.pod(newPod).Status.PodIP, c.password()).ClusterNodes(rctx).Result()
	cancel()
	if err != nil {
		t.Fatalf("CLUSTER NODES on %s: %v", newPod, err)
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if f := strings.Fields(line); len(f) > 8 && strings.Contains(f[2], "myself") {
			t.Fatalf("%s owns slots %v before its load balancer has an address", newPod, f[8:])
		}
	}

	provide("")
	rc := c.waitReady(5 * time.Minute)
	if ok, why := c.evenSplit(rc, 4); !ok {
		t.Fatalf("after the load balancer's address: %s", why)
	}
	w.verify(c.clusterClient())
}
