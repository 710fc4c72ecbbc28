package localplane_test

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/redis-operator/redis-operator/test/localplane"
)

// TestPodNetwork runs three redis pods on a plane of two nodes: a
// (master) on the first node, b (replica of a, found by its DNS name
// through the headless Service peers) and c (standalone) on the second,
// each listening on 0.0.0.0:6379 in its own network namespace. It checks
// that pods get addresses in their node's range and connect from them (no
// NAT between nodes), that a ClusterIP Service routes to its ready
// endpoint from the host and from a pod of another node, that cluster
// names resolve, that one DROP rule on a pod IP cuts both the connections
// it opens and those opened to it, that a pod reaches the API server
// through the kubernetes Service, and that stopping the plane removes
// the nodes' bridges, its gateway and every pod namespace.
func TestPodNetwork(t *testing.T) {
	p, err := localplane.Start(t.Context(), localplane.Options{StateDir: t.TempDir(), BinDir: binDir(t), Nodes: 2})
	if err != nil {
		t.Fatalf("starting the local plane (needs root, `make tools` and `make images`): %v", err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			p.Stop()
		}
	})
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	c, ns := p.Client, "default"

	const aName = "a.peers.default.svc.cluster.local"
	for _, obj := range []*corev1.Service{
		{ObjectMeta: metav1.ObjectMeta{Name: "peers"}, Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone,
			PublishNotReadyAddresses: true, Selector: map[string]string{"app": "redis"}, Ports: []corev1.ServicePort{{Port: 6379}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "client"}, Spec: corev1.ServiceSpec{
			Selector: map[string]string{"role": "a"}, Ports: []corev1.ServicePort{{Port: 6379}}}},
	} {
		if _, err := c.CoreV1().Services(ns).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for name, args := range map[string][]string{"a": nil, "b": {"--replicaof", aName, "6379"}, "c": nil} {
		pod := peerPod(name, args)
		pod.Spec.NodeSelector = map[string]string{corev1.LabelHostname: p.Nodes[1]}
		if name == "a" {
			pod.Spec.NodeSelector[corev1.LabelHostname] = p.Nodes[0]
		}
		if _, err := c.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.CoreV1().Pods(ns).Create(ctx, apiPod(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pods := waitReadyPods(ctx, t, c, ns, 3, nil)
	ip := map[string]string{}
	nodeIPs := map[string]bool{}
	for _, pod := range pods {
		// The node's IP is its bridge's address, the .1 of the node's /24.
		nodeNet := &net.IPNet{IP: net.ParseIP(pod.Status.HostIP).Mask(net.CIDRMask(24, 32)), Mask: net.CIDRMask(24, 32)}
		if !podRange.Contains(net.ParseIP(pod.Status.HostIP)) || !nodeNet.Contains(net.ParseIP(pod.Status.PodIP)) {
			t.Fatalf("pod %s on node %s (IP %s) has IP %q, want one in the node's %s", pod.Name, pod.Spec.NodeName, pod.Status.HostIP, pod.Status.PodIP, nodeNet)
		}
		ip[pod.Name] = pod.Status.PodIP
		nodeIPs[pod.Status.HostIP] = true
	}
	if len(nodeIPs) != 2 {
		t.Fatalf("pods on node IPs %v, want two nodes", nodeIPs)
	}
	rdb := func(addr string) *redis.Client {
		cl := redis.NewClient(&redis.Options{Addr: net.JoinHostPort(addr, "6379"), MaxRetries: -1})
		t.Cleanup(func() { cl.Close() })
		return cl
	}
	a, cc := rdb(ip["a"]), rdb(ip["c"])

	// b resolved a's name and replicates from it; a, on the other node,
	// sees the link coming from b's pod IP.
	poll(ctx, t, "b's replication link from its pod IP", func() (bool, string) {
		list, err := a.ClientList(ctx).Result()
		return err == nil && strings.Contains(list, "addr="+ip["b"]+":") && strings.Contains(list, "flags=S"), list
	})

	// The cluster DNS answers the Service, headless and per-pod names.
	resolver := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, p.DNS)
	}}
	svc, err := c.CoreV1().Services(ns).Get(ctx, "client", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"client.default.svc.cluster.local": svc.Spec.ClusterIP,
		aName:                              ip["a"],
		"peers.default.svc.cluster.local":  ip["c"],
	} {
		addrs, err := resolver.LookupHost(ctx, name)
		if err != nil || !slices.Contains(addrs, want) {
			t.Errorf("resolving %s = %v, %v; want %s among them", name, addrs, err, want)
		}
	}
	if addrs, err := resolver.LookupHost(ctx, "nothing.default.svc.cluster.local"); err == nil {
		t.Errorf("resolving an unknown Service gave %v, want NXDOMAIN", addrs)
	}

	// The ClusterIP reaches a, from the host and from pod c on the other
	// node, once kube-proxy
	// has programmed the Service's ready endpoint (it syncs after the
	// EndpointSlice changes, as on any cluster; until then it rejects).
	viaService := rdb(svc.Spec.ClusterIP)
	poll(ctx, t, "SET through the ClusterIP "+svc.Spec.ClusterIP, func() (bool, string) {
		err := viaService.Set(ctx, "via-service", "1", 0).Err()
		return err == nil, fmt.Sprint(err)
	})
	if got, err := a.Get(ctx, "via-service").Result(); err != nil || got != "1" {
		t.Fatalf("GET via-service on a = %q, %v; want 1", got, err)
	}
	if err := a.Set(ctx, "k1", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := cc.Set(ctx, "via-pod", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := migrate(ctx, cc, svc.Spec.ClusterIP, "via-pod"); err != nil {
		t.Errorf("MIGRATE from c to the ClusterIP %s: %v", svc.Spec.ClusterIP, err)
	}
	if got, err := a.Get(ctx, "via-pod").Result(); err != nil || got != "1" {
		t.Errorf("GET via-pod on a = %q, %v after c migrated it to the ClusterIP; want 1", got, err)
	}

	// One rule on c's IP cuts c both ways: a connection a opens to c
	// (MIGRATE a->c) and one c opens to a (MIGRATE c->a) both fail, and
	// both work again once the rule is gone. (Between pods of one node the
	// bridge hands packets to iptables too: the rule cuts those as well.)
	rule := []string{"FORWARD", "-d", ip["c"], "-j", "DROP"}
	if out, err := exec.Command("iptables", append([]string{"-w", "-I"}, rule...)...).CombinedOutput(); err != nil {
		t.Fatalf("iptables: %v: %s", err, out)
	}
	ruleOn := true
	unrule := func() {
		if ruleOn {
			ruleOn = false
			if out, err := exec.Command("iptables", append([]string{"-w", "-D"}, rule...)...).CombinedOutput(); err != nil {
				t.Errorf("iptables -D: %v: %s", err, out)
			}
		}
	}
	t.Cleanup(unrule)
	if err := migrate(ctx, a, ip["c"], "k1"); err == nil {
		t.Error("MIGRATE a->c succeeded with c cut off")
	}
	if err := cc.Set(ctx, "k2", "v", 0).Err(); err != nil {
		t.Fatal(err) // the host's own link to c is not forwarded, so not cut
	}
	if err := migrate(ctx, cc, ip["a"], "k2"); err == nil {
		t.Error("MIGRATE c->a succeeded with c cut off")
	}
	unrule()
	poll(ctx, t, "MIGRATE both ways after the rule is removed", func() (bool, string) {
		e1 := migrate(ctx, a, ip["c"], "k1")
		e2 := migrate(ctx, cc, ip["a"], "k2")
		return e1 == nil && e2 == nil, errString(e1) + " / " + errString(e2)
	})
	if got, _ := cc.Get(ctx, "k1").Result(); got != "v" {
		t.Errorf("k1 on c = %q after MIGRATE a->c, want v", got)
	}
	if got, _ := a.Get(ctx, "k2").Result(); got != "v" {
		t.Errorf("k2 on a = %q after MIGRATE c->a, want v", got)
	}

	// A pod reaches the API server at the kubernetes Service
	// (KUBERNETES_SERVICE_HOST/PORT), with TLS verified against the
	// service account's CA (apiPod's readiness probe).
	poll(ctx, t, "pod api ready (a TLS session with the API server from inside it)", func() (bool, string) {
		pod, err := c.CoreV1().Pods(ns).Get(ctx, "api", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return conditionStatus(pod, corev1.PodReady) == corev1.ConditionTrue, string(conditionStatus(pod, corev1.PodReady))
	})

	// Stopping the plane removes the nodes' bridges (their addresses), the
	// plane's gateway and the pods' network namespaces (containerd keeps
	// them under the nodes' directories).
	p.Stop()
	stopped = true
	for addr := range nodeIPs {
		if out, err := exec.Command("ip", "-4", "-o", "addr", "show", "to", addr+"/32").CombinedOutput(); err != nil || len(out) > 0 {
			t.Errorf("node IP %s still on an interface after Stop: %s %v", addr, out, err)
		}
	}
	gateway, _, _ := net.SplitHostPort(p.DNS)
	if out, err := exec.Command("ip", "-4", "-o", "addr", "show", "to", gateway+"/32").CombinedOutput(); err != nil || len(out) > 0 {
		t.Errorf("gateway %s still on an interface after Stop: %s %v", gateway, out, err)
	}
	if m := mountsUnder(p.StateDir); len(m) > 0 {
		t.Errorf("mounts (network namespaces among them) left after Stop: %v", m)
	}
}

// peerPod is a redis pod labelled app=redis and role=<name>, with hostname
// <name> in subdomain peers, listening on every address of its namespace.
func peerPod(name string, args []string) *corev1.Pod {
	grace := int64(2)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "redis", "role": name}},
		Spec: corev1.PodSpec{
			Hostname: name, Subdomain: "peers", TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{
				Name: "redis", Image: "redis:7.0",
				Args: append([]string{"--protected-mode", "no", "--save", "", "--appendonly", "no"}, args...),
				ReadinessProbe: &corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"sh", "-c", "redis-cli ping | grep -q PONG"}}},
					PeriodSeconds: 1,
				},
			}},
		},
	}
}

// apiPod is Ready once redis-cli in it (the image has no HTTP client)
// opens a TLS session, verified against the projected service-account CA,
// with the server at KUBERNETES_SERVICE_HOST:KUBERNETES_SERVICE_PORT and
// gets HTTP back: the API server's answer to a request it cannot parse.
func apiPod() *corev1.Pod {
	const ca = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"
	get := `redis-cli --tls --cacert ` + ca + ` -h "$KUBERNETES_SERVICE_HOST" -p "$KUBERNETES_SERVICE_PORT" ping 2>&1 | grep -q 'got "H"'`
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "api", Labels: map[string]string{"app": "api"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "sh", Image: "redis:7.0", Command: []string{"sleep", "3600"},
			ReadinessProbe: &corev1.Probe{
				ProbeHandler:  corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"sh", "-c", get}}},
				PeriodSeconds: 1, TimeoutSeconds: 3,
			},
		}}},
	}
}

// migrate moves key from the server of from to host:6379 (MIGRATE with
// REPLACE, so a retry after a reply lost to a timeout succeeds; 2 s
// timeout); NOKEY (already moved) counts as done.
func migrate(ctx context.Context, from *redis.Client, host, key string) error {
	err := from.Do(ctx, "MIGRATE", host, "6379", key, 0, 2000, "REPLACE").Err()
	if err != nil && err.Error() == "NOKEY" {
		return nil
	}
	return err
}

func poll(ctx context.Context, t *testing.T, what string, f func() (bool, string)) {
	t.Helper()
	var last string
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(context.Context) (bool, error) {
		ok, seen := f()
		last = seen
		return ok, nil
	})
	if err != nil {
		t.Fatalf("waiting for %s (last seen: %s): %v", what, last, err)
	}
}

func errString(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}
