//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/resources"
)

// TestExternalAccess (label external-access): with spec.externalAccess
// (type ClusterIP, standing in for load balancer addresses: the plane's
// kube-proxy routes cluster IPs from the host), every pod gets its own
// Service and announces that Service's address, and once Ready every node
// knows every node's address. A go-redis ClusterClient
// seeded only with those addresses, and never told a pod IP, writes and
// reads keys of every slot range, a MOVED reply names the owner's Service
// address, and CLUSTER SHARDS shows each node's announced address.
// Own namespace; it stops nothing shared, so it runs in parallel.
func TestExternalAccess(t *testing.T) {
	tier(t, tierCI)
	sideBySide(t) // see doc.go
	scenario(t, "external-access")
	c := newCluster(t, "external-access", func(rc *cachev1beta1.RedisCluster) {
		rc.Spec.ExternalAccess = &cachev1beta1.ExternalAccessSpec{Enabled: true, Type: corev1.ServiceTypeClusterIP}
	})
	rc := c.waitReady(5 * time.Minute)
	c.checkConverged(rc)

	// Each pod's Service address, and each pod's IP by its address.
	external := map[string]string{} // pod -> Service cluster IP
	podIP := map[string]string{}    // pod -> pod IP
	for _, p := range c.pods() {
		svc := &corev1.Service{}
		if err := env.k8s.Get(context.Background(), client.ObjectKey{Namespace: c.ns, Name: resources.ExternalServiceName(p.Name)}, svc); err != nil {
			t.Fatalf("per-pod Service of %s: %v", p.Name, err)
		}
		if svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == corev1.ClusterIPNone {
			t.Fatalf("per-pod Service of %s has no cluster IP", p.Name)
		}
		external[p.Name], podIP[p.Name] = svc.Spec.ClusterIP, p.Status.PodIP
	}
	// Ready promises that every node knows every node's Service address
	// (Redis spreads it by gossip; a node that does not know one answers
	// MOVED with "?"): no waiting here.
	pw := c.password()
	podByID := map[string]string{}
	for pod, ip := range podIP {
		ctx, cancel := redisCtx()
		id, err := c.nodeClient(ip, pw).ClusterMyID(ctx).Result()
		cancel()
		if err != nil {
			t.Fatalf("CLUSTER MYID on %s: %v", pod, err)
		}
		podByID[id] = pod
	}
	for pod, ip := range podIP {
		ctx, cancel := redisCtx()
		out, err := c.nodeClient(ip, pw).ClusterNodes(ctx).Result()
		cancel()
		if err != nil {
			t.Fatalf("CLUSTER NODES on %s: %v", pod, err)
		}
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			f := strings.Fields(line)
			if len(f) < 3 {
				continue
			}
			if other := podByID[f[0]]; !strings.HasSuffix(f[1], ","+external[other]) {
				t.Errorf("Ready, yet %s shows %s as %s, want hostname %s", pod, other, f[1], external[other])
			}
		}
	}

	var seeds []string
	for _, a := range external {
		seeds = append(seeds, addr(a))
	}
	var mu sync.Mutex
	var dialed []string // the addresses the client connected to
	cl := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs: seeds, Password: pw, Protocol: 2, DisableIdentity: true, MaxRedirects: 16,
		DialTimeout: 2 * time.Second, ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
		OnConnect: func(_ context.Context, cn *redis.Conn) error {
			mu.Lock()
			dialed = append(dialed, cn.String())
			mu.Unlock()
			return nil
		},
	})
	t.Cleanup(func() { _ = cl.Close() })
	const keys = 600
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for i := range keys {
		if err := cl.Set(ctx, fmt.Sprintf("ext:%d", i), i, 0).Err(); err != nil {
			t.Fatalf("SET ext:%d through the external addresses: %v", i, err)
		}
	}
	for i := range keys {
		if v, err := cl.Get(ctx, fmt.Sprintf("ext:%d", i)).Int(); err != nil || v != i {
			t.Fatalf("GET ext:%d through the external addresses: %d, %v", i, v, err)
		}
	}
	// The client only ever connected to Service addresses.
	mu.Lock()
	defer mu.Unlock()
	if len(dialed) == 0 {
		t.Error("the client reported no connection")
	}
	for _, d := range dialed {
		for pod, ip := range podIP {
			if strings.Contains(d, ip+":") {
				t.Errorf("the client connected to pod %s's own IP (%s)", pod, d)
			}
		}
	}
	// Every master holds some of the keys: they spread over all slots.
	masters := 0
	for pod, ip := range podIP {
		cctx, ccancel := redisCtx()
		cn := c.nodeClient(ip, pw)
		r, _ := role(cctx, cn)
		n, err := cn.DBSize(cctx).Result()
		ccancel()
		if r == "master" {
			masters++
			if err != nil || n == 0 {
				t.Errorf("master %s holds %d keys (%v)", pod, n, err)
			}
		}
	}
	if masters != int(rc.Spec.Shards) {
		t.Errorf("%d masters, want %d", masters, rc.Spec.Shards)
	}

	// A MOVED reply from one node names another's Service address.
	moved := ""
	for i := 0; i < keys && moved == ""; i++ {
		for pod := range external {
			one := redis.NewClient(&redis.Options{Addr: addr(external[pod]), Password: pw, Protocol: 2, DisableIdentity: true, MaxRetries: -1,
				MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}})
			err := one.Get(ctx, fmt.Sprintf("ext:%d", i)).Err()
			_ = one.Close()
			if err != nil && strings.HasPrefix(err.Error(), "MOVED ") {
				moved = err.Error()
				break
			}
		}
	}
	target := ""
	if f := strings.Fields(moved); len(f) == 3 {
		target = strings.TrimSuffix(f[2], fmt.Sprintf(":%d", resources.RedisPort))
	}
	found := false
	for _, a := range external {
		found = found || a == target
	}
	if !found {
		t.Errorf("MOVED reply %q does not name a per-pod Service address", moved)
	}

	// CLUSTER SHARDS lists every node with its announced hostname.
	shards, err := cl.ClusterShards(ctx).Result()
	if err != nil {
		t.Fatalf("CLUSTER SHARDS: %v", err)
	}
	announced := map[string]bool{}
	for _, s := range shards {
		for _, n := range s.Nodes {
			announced[n.Hostname] = true
			if n.Endpoint != n.Hostname {
				t.Errorf("CLUSTER SHARDS node %s: endpoint %q, hostname %q", n.ID, n.Endpoint, n.Hostname)
			}
		}
	}
	for pod, a := range external {
		if !announced[a] {
			t.Errorf("CLUSTER SHARDS does not show %s's address %s (shows %v)", pod, a, announced)
		}
	}
	t.Logf("%d keys written and read through %d per-pod Service addresses; MOVED: %s", keys, len(external), moved)
}

// TestExternalAccessLoadBalancer (label external-access): with
// spec.externalAccess of type LoadBalancer, a scale-out moves no slot onto
// a new shard whose load balancer has no address yet, since every node
// would redirect clients of those slots to "?"; the status says which
// Service it waits for, and the slots move once it has an address. The
// test plays the cloud's load balancer controller: it gives each per-pod
// Service status.loadBalancer.ingress its own cluster IP (which the plane's
// kube-proxy routes), and withholds the new shard's until it has seen the
// wait, and slots move only once every node knows the new address (no
// write is ever redirected to "?"). Writes go on throughout and are all read
// back.
func TestExternalAccessLoadBalancer(t *testing.T) {
	tier(t, tierCI)
	sideBySide(t) // see doc.go
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
	// No client was ever redirected to a node without an address.
	for _, f := range w.verify(c.clusterClient()).Failed {
		if strings.Contains(fmt.Sprint(f.err), "?") {
			t.Fatalf("a write was redirected to a node without an address: %v at %s", f.err, f.at.Format("15:04:05.000"))
		}
	}
}
