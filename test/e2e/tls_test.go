//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/resources"
	"github.com/redis-operator/redis-operator/controllers/tlscerts"
)

// TestTLS (label tls). scale-rotate: a cluster with spec.tls and the operator's CA.
// Clients verify the nodes' certificate against the cluster's CA by pod IP
// (Go's full verification, so the certificate must name every pod IP), a
// plain-text client and one trusting another CA are refused; 3→4 shards
// under WAIT writes over TLS loses no acknowledged write, and the new pods'
// IPs get a new certificate that every node serves without a restart
// (run_id unchanged); a deleted certificate Secret is issued again and
// applied live the same way, under writes.
func TestTLS(t *testing.T) {
	tier(t, tierCI)
	sideBySide(t) // see doc.go
	t.Run("scale-rotate", func(t *testing.T) {
		t.Parallel()
		scenario(t, "tls/scale-rotate")
		c := newCluster(t, "tls", func(rc *cachev1beta1.RedisCluster) {
			rc.Spec.TLS = &cachev1beta1.TLSSpec{Enabled: true}
		})
		rc := c.waitApplied(c.waitReady(5 * time.Minute))
		c.tls = c.trustCA()
		c.checkConverged(rc)
		c.checkRefusesStrangers()

		w := startWriter(t, c.clusterClient(), "tls", writerOptions{Wait: true})
		w.waitWrites(200, time.Minute)
		runIDs := c.runIDs()
		before := rc.Status.TLS.Serial
		c.scaleTo(4, w)
		rc = c.waitApplied(c.get())
		// The new master receives slots only once it serves a certificate
		// naming its IP: no client sent there by MOVED fails its handshake.
		for _, f := range w.failures() {
			if strings.Contains(f.err, "x509") || strings.Contains(f.err, "certificate") {
				t.Errorf("a write failed the TLS handshake during the scale-out at %s: %s", f.at.Format("15:04:05.000"), f.err)
			}
		}
		if rc.Status.TLS.Serial == before {
			t.Errorf("the certificate was not issued again for the new pods' IPs (serial %s)", before)
		}
		c.checkSameRunIDs(runIDs)

		// The certificate Secret deleted: the operator issues a new one,
		// the Secret volumes follow and every node reloads it.
		before = rc.Status.TLS.Serial
		runIDs = c.runIDs()
		sec := &corev1.Secret{}
		sec.Namespace, sec.Name = c.ns, resources.TLSOperatorSecretName(c.name)
		if err := env.k8s.Delete(context.Background(), sec); err != nil {
			t.Fatalf("deleting Secret %s: %v", sec.Name, err)
		}
		c.poll("a new certificate applied", 3*time.Minute, func() (bool, string) {
			st := c.get().Status.TLS
			return st != nil && st.Serial != before && st.AppliedSerial == st.Serial, statusTLS(st)
		})
		w.waitWrites(100, time.Minute)
		c.checkSameRunIDs(runIDs)
		c.tls = c.trustCA()
		r := w.verify(c.clusterClient())
		t.Logf("TLS 3→4 and rotation under WAIT writes: %s", r)
	})

	// A certificate of the user's own CA in a Secret (what cert-manager's
	// Certificate writes), naming the Services only: clients verify it by
	// the headless Service's name. A renewed certificate written into the
	// Secret is served by every node without a restart, under writes.
	t.Run("user-secret-rotate", func(t *testing.T) {
		t.Parallel()
		scenario(t, "tls/user-secret-rotate")
		const name, secret = "tls-user", "tls-user-cert"
		ns := "e2e-" + name
		if err := ensureNamespace(context.Background(), ns); err != nil {
			t.Fatal(err)
		}
		ca, caKey, err := tlscerts.NewCA("user CA", time.Now(), tlscerts.DefaultCAValidity)
		if err != nil {
			t.Fatal(err)
		}
		serverName := resources.HeadlessServiceName(name) + "." + ns + ".svc"
		dns := []string{serverName, "*." + serverName}
		sec := userTLSSecret(t, ns, secret, ca, caKey, dns)
		if err := env.k8s.Create(context.Background(), sec); err != nil {
			t.Fatalf("creating Secret %s: %v", secret, err)
		}
		c := newCluster(t, name, func(rc *cachev1beta1.RedisCluster) {
			rc.Spec.TLS = &cachev1beta1.TLSSpec{Enabled: true, SecretName: secret}
		})
		rc := c.waitApplied(c.waitReady(5 * time.Minute))
		if rc.Status.TLS.SecretName != secret {
			t.Errorf("status.tls.secretName %q, want %q", rc.Status.TLS.SecretName, secret)
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(ca)
		c.tls = &tls.Config{RootCAs: pool, ServerName: serverName, MinVersion: tls.VersionTLS12}
		c.checkConverged(rc)

		w := startWriter(t, c.clusterClient(), "tlsuser", writerOptions{Wait: true})
		w.waitWrites(200, time.Minute)
		runIDs := c.runIDs()
		before := rc.Status.TLS.Serial
		renewed := userTLSSecret(t, ns, secret, ca, caKey, dns)
		if err := env.k8s.Get(context.Background(), client.ObjectKeyFromObject(sec), sec); err != nil {
			t.Fatal(err)
		}
		sec.Data = renewed.Data
		if err := env.k8s.Update(context.Background(), sec); err != nil {
			t.Fatalf("renewing Secret %s: %v", secret, err)
		}
		leaf, _ := tlscerts.ParseCertificate(renewed.Data[resources.TLSCertKey])
		c.poll("the renewed certificate applied", 3*time.Minute, func() (bool, string) {
			st := c.get().Status.TLS
			return st != nil && st.Serial == tlscerts.Serial(leaf) && st.AppliedSerial == st.Serial, statusTLS(st) + ", was " + before
		})
		w.waitWrites(100, time.Minute)
		c.checkSameRunIDs(runIDs)
		r := w.verify(c.clusterClient())
		t.Logf("user certificate renewed under WAIT writes: %s", r)
	})
}

// userTLSSecret is a Secret as cert-manager writes it for a Certificate:
// tls.crt and tls.key issued by the CA (ca, caKey) for dns, and ca.crt.
func userTLSSecret(t *testing.T, ns, name string, ca, caKey []byte, dns []string) *corev1.Secret {
	t.Helper()
	cert, key, err := tlscerts.Issue(ca, caKey, dns, nil, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{resources.TLSCertKey: cert, resources.TLSKeyKey: key, resources.TLSCAKey: ca},
	}
}

func statusTLS(st *cachev1beta1.TLSStatus) string {
	if st == nil {
		return "no status.tls"
	}
	return "serial " + st.Serial + ", applied " + st.AppliedSerial
}

// waitApplied polls until status.tls says every node serves the current
// certificate, and returns the RedisCluster.
func (c *cluster) waitApplied(rc *cachev1beta1.RedisCluster) *cachev1beta1.RedisCluster {
	c.t.Helper()
	c.poll("serving its certificate on every node", 2*time.Minute, func() (bool, string) {
		rc = c.get()
		st := rc.Status.TLS
		return st != nil && st.Serial != "" && st.AppliedSerial == st.Serial && st.NotAfter != nil, statusTLS(st)
	})
	if left := time.Until(rc.Status.TLS.NotAfter.Time); left < 80*24*time.Hour {
		c.t.Errorf("status.tls.notAfter %s is %s away, want about %s", rc.Status.TLS.NotAfter, left, tlscerts.LeafValidity)
	}
	return rc
}

// trustCA is a client TLS configuration that trusts the cluster's CA
// (ca.crt of the operator's certificate Secret) and nothing else, with Go's
// full verification: the node's certificate must name the IP dialled.
func (c *cluster) trustCA() *tls.Config {
	c.t.Helper()
	sec := &corev1.Secret{}
	if err := env.k8s.Get(context.Background(), client.ObjectKey{Namespace: c.ns, Name: resources.TLSOperatorSecretName(c.name)}, sec); err != nil {
		c.t.Fatalf("reading the certificate Secret: %v", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(sec.Data[resources.TLSCAKey]) {
		c.t.Fatalf("ca.crt of %s holds no certificate", sec.Name)
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
}

// checkRefusesStrangers: a plain-text client gets no answer from a node's
// client port, and a TLS client that trusts another CA fails the handshake.
func (c *cluster) checkRefusesStrangers() {
	c.t.Helper()
	ip := c.pods()[0].Status.PodIP
	ctx, cancel := redisCtx()
	defer cancel()
	plain := nodeOptions(ip, c.password())
	pc := redis.NewClient(plain)
	defer pc.Close()
	if err := pc.Ping(ctx).Err(); err == nil {
		c.t.Errorf("a plain-text PING to %s succeeded with TLS on", ip)
	}
	otherCA, _, err := tlscerts.NewCA("stranger", time.Now(), tlscerts.DefaultCAValidity)
	if err != nil {
		c.t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(otherCA)
	_, err = tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", addr(ip), &tls.Config{RootCAs: pool})
	var unknown x509.UnknownAuthorityError
	if !errors.As(err, &unknown) {
		c.t.Errorf("a TLS handshake trusting another CA: %v, want x509.UnknownAuthorityError", err)
	}
}

// runIDs maps each pod to its redis run_id (INFO server).
func (c *cluster) runIDs() map[string]string {
	c.t.Helper()
	out := map[string]string{}
	pw := c.password()
	for _, p := range c.pods() {
		ctx, cancel := redisCtx()
		info, err := c.nodeClient(p.Status.PodIP, pw).Info(ctx, "server").Result()
		cancel()
		if err != nil {
			c.t.Fatalf("INFO server on %s: %v", p.Name, err)
		}
		out[p.Name] = infoMap(info)["run_id"]
	}
	return out
}

// checkSameRunIDs fails when a pod of before runs another redis process now.
func (c *cluster) checkSameRunIDs(before map[string]string) {
	c.t.Helper()
	now := c.runIDs()
	for pod, id := range before {
		if now[pod] != id {
			c.t.Errorf("pod %s restarted: run_id %s, was %s", pod, now[pod], id)
		}
	}
}
