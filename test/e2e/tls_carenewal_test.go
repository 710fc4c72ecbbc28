//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/resources"
)

// shortCAValidity is the --tls-ca-validity TestTLSCARenewal runs the
// operator with: the floor the operator accepts, so the renewal (with a
// third of the CA's life left) starts about 6 min 40 s after the cluster's
// CA is made.
const shortCAValidity = "10m"

// TestTLSCARenewal (label tls, tier all, one at a time: it runs the suite's
// operator with --tls-ca-validity=10m). ca-renewal: the operator's own CA
// of a TLS cluster renews before it expires with no downtime. Under WAIT
// writes from a client that re-reads ca.crt from the cluster's certificate
// Secret at each new connection (as one re-reading its mounted ca.crt
// does) and recycles its connections every 2 s, and a prober making a new
// handshake with every pod each second, the renewal goes through its three
// steps (events TLSCARenewing, TLSCASigning, TLSCARenewed, in that order),
// status.tls.caNotAfter moves past the old CA's end, no handshake and no
// write fails, no redis-server restarts, and every acknowledged write is
// read back through the new CA.
func TestTLSCARenewal(t *testing.T) {
	tier(t, tierAll)
	scenario(t, "tls/ca-renewal")
	installWith(t, filepath.Join(env.binDir, "redis-operator"), suiteOverlay, func(d *unstructured.Unstructured) {
		containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
		manager := containers[0].(map[string]any)
		args, _ := manager["args"].([]any)
		manager["args"] = append(args, "--tls-ca-validity="+shortCAValidity)
		_ = unstructured.SetNestedSlice(d.Object, containers, "spec", "template", "spec", "containers")
	})
	env.operatorRestarts = operatorRestarts(t)
	// Registered before the cluster's clean-up, so it runs after it: the
	// suite's operator comes back with its own flags once the cluster is
	// gone.
	t.Cleanup(func() { startOperator(t) })

	c := newCluster(t, "ca-renewal", func(rc *cachev1beta1.RedisCluster) {
		rc.Spec.TLS = &cachev1beta1.TLSSpec{Enabled: true}
	})
	var rc *cachev1beta1.RedisCluster
	c.poll("ready and serving its certificate", 6*time.Minute, func() (bool, string) {
		rc = c.get()
		st := rc.Status.TLS
		ready := false
		for _, cond := range rc.Status.Conditions {
			if cond.Type == cachev1beta1.RedisClusterReadyCondition && cond.Status == "True" {
				ready = true
			}
		}
		return ready && st != nil && st.Serial != "" && st.AppliedSerial == st.Serial && st.CANotAfter != nil, statusTLS(st)
	})
	oldEnd := rc.Status.TLS.CANotAfter.Time
	if left := time.Until(oldEnd); left > 11*time.Minute {
		t.Fatalf("status.tls.caNotAfter %s is %s away: the operator does not run with --tls-ca-validity=%s", oldEnd, left, shortCAValidity)
	}
	c.tls = c.trustCA()
	runIDs := c.runIDs()

	f := &caFollower{c: c}
	w := startWriter(t, c.clusterClient(func(o *redis.ClusterOptions) {
		o.TLSConfig = nil // each connection's TLS is f's, with the ca.crt of the moment
		o.Dialer = f.dial
		o.ConnMaxLifetime = 2 * time.Second
	}), "carenew", writerOptions{Wait: true, Interval: 50 * time.Millisecond, Max: 1 << 20})
	w.waitWrites(100, time.Minute)
	stopProbe := f.probeEverySecond(c)

	c.poll("the CA renewed (TLSCARenewed, caNotAfter past the old CA's)", 15*time.Minute, func() (bool, string) {
		st := c.get().Status.TLS
		renewed := false
		for _, e := range c.events() {
			renewed = renewed || e.Reason == "TLSCARenewed"
		}
		done := renewed && st != nil && st.CANotAfter != nil && st.CANotAfter.After(oldEnd) && st.CARenewal == ""
		return done, fmt.Sprintf("caRenewal %q, caNotAfter %v (old CA's %s), TLSCARenewed seen %v", caRenewalOf(st), caNotAfterOf(st), oldEnd.Format(time.RFC3339), renewed)
	})
	w.waitWrites(100, time.Minute)
	stopProbe()

	var order []string
	for _, e := range c.events() {
		switch e.Reason {
		case "TLSCARenewing", "TLSCASigning", "TLSCARenewed":
			order = append(order, e.Reason)
		}
	}
	if strings.Join(order, ",") != "TLSCARenewing,TLSCASigning,TLSCARenewed" {
		t.Errorf("renewal events %v, want TLSCARenewing, TLSCASigning, TLSCARenewed once each and in that order", order)
	}
	handshakes, failed := f.result()
	if handshakes == 0 {
		t.Errorf("the prober made no handshake")
	}
	for _, e := range failed {
		t.Errorf("a handshake or PING failed during the renewal: %s", e)
	}
	for _, e := range w.failures() {
		t.Errorf("a write failed during the renewal at %s: %s", e.at.Format("15:04:05.000"), e.err)
	}
	c.tls = c.trustCA() // the new CA alone: the old one has left ca.crt
	c.checkSameRunIDs(runIDs)
	r := w.verify(c.clusterClient())
	t.Logf("CA renewed under WAIT writes (%d prober handshakes, none failed): %s", handshakes, r)
}

func caRenewalOf(st *cachev1beta1.TLSStatus) string {
	if st == nil {
		return ""
	}
	return string(st.CARenewal)
}

func caNotAfterOf(st *cachev1beta1.TLSStatus) string {
	if st == nil || st.CANotAfter == nil {
		return "none"
	}
	return st.CANotAfter.Time.Format(time.RFC3339)
}

// caFollower dials TLS connections to a cluster's nodes trusting the
// ca.crt its certificate Secret holds at the time of the dial (read again
// at most once a second), with Go's full verification by the IP dialled:
// a client that re-reads its mounted ca.crt.
type caFollower struct {
	c *cluster

	mu         sync.Mutex
	pool       *x509.CertPool
	read       time.Time
	handshakes int
	failed     []string
}

// roots is the cluster's ca.crt as a pool, read from the Secret when the
// last read is over a second old.
func (f *caFollower) roots(ctx context.Context) (*x509.CertPool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.pool != nil && time.Since(f.read) < time.Second {
		return f.pool, nil
	}
	sec := &corev1.Secret{}
	if err := env.k8s.Get(ctx, client.ObjectKey{Namespace: f.c.ns, Name: resources.TLSOperatorSecretName(f.c.name)}, sec); err != nil {
		return nil, fmt.Errorf("reading the certificate Secret: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(sec.Data[resources.TLSCAKey]) {
		return nil, fmt.Errorf("ca.crt holds no certificate")
	}
	f.pool, f.read = pool, time.Now()
	return pool, nil
}

// dial is a go-redis Dialer: TCP to addr, then a TLS handshake verifying
// the node's certificate for addr's IP against the ca.crt of the moment.
func (f *caFollower) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	pool, err := f.roots(ctx)
	if err != nil {
		return nil, err
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	d := tls.Dialer{NetDialer: &net.Dialer{Timeout: 2 * time.Second},
		Config: &tls.Config{RootCAs: pool, ServerName: host, MinVersion: tls.VersionTLS12}}
	return d.DialContext(ctx, network, addr)
}

// probeEverySecond makes, each second, a new connection to every pod of c
// (handshake and an authenticated PING) and records failures; the returned
// func stops it and waits for it.
func (f *caFollower) probeEverySecond(c *cluster) (stop func()) {
	done, stopped := make(chan struct{}), make(chan struct{})
	password := c.password()
	go func() {
		defer close(stopped)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			for _, p := range c.podsQuiet() {
				if p.Status.PodIP == "" {
					continue
				}
				f.probe(p.Name, p.Status.PodIP, password)
			}
		}
	}()
	return func() { close(done); <-stopped }
}

func (f *caFollower) probe(pod, ip, password string) {
	opts := nodeOptions(ip, password)
	opts.Dialer = f.dial
	cl := redis.NewClient(opts)
	defer func() { _ = cl.Close() }()
	ctx, cancel := redisCtx()
	defer cancel()
	err := cl.Ping(ctx).Err()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.handshakes++
	if err != nil {
		f.failed = append(f.failed, fmt.Sprintf("%s %s (%s): %v", time.Now().Format("15:04:05.000"), pod, ip, err))
	}
}

func (f *caFollower) result() (int, []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.handshakes, append([]string(nil), f.failed...)
}
