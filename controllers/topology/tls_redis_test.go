package topology

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis-operator/redis-operator/controllers/tlscerts"
	"github.com/redis-operator/redis-operator/test/redistest"
)

// tlsFiles writes a CA and a nodes' certificate it signed into dir and
// returns their PEM and the redistest material using them.
func tlsFiles(t *testing.T, dir string) (ca, caKey []byte, files *redistest.TLS) {
	t.Helper()
	now := time.Now()
	ca, caKey, err := tlscerts.NewCA("test", now, tlscerts.DefaultCAValidity)
	if err != nil {
		t.Fatal(err)
	}
	cert, key, err := tlscerts.Issue(ca, caKey, []string{"redis"}, nil, now)
	if err != nil {
		t.Fatal(err)
	}
	files = &redistest.TLS{CertFile: filepath.Join(dir, "tls.crt"), KeyFile: filepath.Join(dir, "tls.key"),
		CAFile: filepath.Join(dir, "ca.crt"), AuthClients: "yes"}
	writeTLS(t, files, ca, cert, key)
	if files.Client, err = tlscerts.ClientConfig(ca, cert, key); err != nil {
		t.Fatal(err)
	}
	return ca, caKey, files
}

func writeTLS(t *testing.T, f *redistest.TLS, ca, cert, key []byte) {
	t.Helper()
	for path, data := range map[string][]byte{f.CAFile: ca, f.CertFile: cert, f.KeyFile: key} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// TestTLSCluster: the engine forms a cluster of TLS-only nodes
// (tls-replication and tls-cluster yes, client certificates required) over
// TLS; a client trusting another CA fails the handshake and one without a
// client certificate is refused, while the cluster's own CA is accepted; a
// new certificate written over the files is served after ReloadTLS, by the
// same processes (run_id unchanged), and the cluster stays ok.
func TestTLSCluster(t *testing.T) {
	dir := t.TempDir()
	ca, caKey, files := tlsFiles(t, dir)
	c := newTestCluster(t, redistest.Options{Password: "tls pw", TLS: files},
		Options{TLS: files.Client, TLSID: "first"})
	all := c.addShards(3, 2)
	d := c.desired(1, all)
	res := c.reconcile(d, nil)
	if !res.Converged {
		t.Fatalf("not converged over TLS: %+v", res)
	}
	ctx := context.Background()
	eps := d.endpoints()
	for _, ep := range eps {
		info, _ := c.node(ep.Name).Do("CLUSTER", "INFO").(string)
		if !strings.Contains(info, "cluster_state:ok") {
			t.Fatalf("%s: %s", ep.Addr, info)
		}
		repl, _ := c.node(ep.Name).Do("INFO", "replication").(string)
		if strings.Contains(repl, "role:slave") && !strings.Contains(repl, "master_link_status:up") {
			t.Errorf("%s: replica link over TLS is not up: %s", ep.Addr, repl)
		}
	}

	// Another CA: the handshake fails on the certificate's authority.
	otherDir := t.TempDir()
	_, _, other := tlsFiles(t, otherDir)
	stranger := New(Options{TLS: other.Client, DialTimeout: 2 * time.Second})
	_, err := stranger.ServedSerial(ctx, eps[0].Addr)
	var unknown x509.UnknownAuthorityError
	if !errors.As(err, &unknown) {
		t.Errorf("handshake trusting another CA: %v, want x509.UnknownAuthorityError", err)
	}
	// The right CA but no client certificate: tls-auth-clients yes refuses it.
	noCert := files.Client.Clone()
	noCert.Certificates = nil
	if err := redisPing(ctx, noCert, eps[0].Addr); err == nil {
		t.Error("a client without a certificate was served with tls-auth-clients yes")
	}
	if err := redisPing(ctx, files.Client, eps[0].Addr); err != nil {
		t.Errorf("PING with the cluster's CA and certificate: %v", err)
	}

	// Rotation: a new certificate of the same CA over the same files.
	runIDs := map[string]string{}
	for _, ep := range eps {
		runIDs[ep.Addr] = runID(t, c.node(ep.Name))
	}
	cert2, key2, err := tlscerts.Issue(ca, caKey, []string{"redis"}, nil, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	leaf2, _ := tlscerts.ParseCertificate(cert2)
	writeTLS(t, files, ca, cert2, key2)
	cfg2, err := tlscerts.ClientConfig(ca, cert2, key2)
	if err != nil {
		t.Fatal(err)
	}
	e2 := New(Options{TLS: cfg2, TLSID: "second", Password: "tls pw", DialTimeout: 2 * time.Second})
	pending, err := e2.ReloadTLS(ctx, addrs(eps), tlscerts.Serial(leaf2), TLSFiles{Cert: files.CertFile, Key: files.KeyFile, CA: files.CAFile})
	if err != nil || len(pending) > 0 {
		t.Fatalf("ReloadTLS: pending %v, %v", pending, err)
	}
	for _, ep := range eps {
		if got, err := e2.ServedSerial(ctx, ep.Addr); err != nil || got != tlscerts.Serial(leaf2) {
			t.Errorf("%s serves %s (%v), want %s", ep.Addr, got, err, tlscerts.Serial(leaf2))
		}
		if id := runID(t, c.node(ep.Name)); id != runIDs[ep.Addr] {
			t.Errorf("%s restarted: run_id %s, was %s", ep.Addr, id, runIDs[ep.Addr])
		}
	}
	files.Client = cfg2
	waitFor(t, 30*time.Second, "cluster ok after the rotation", func() bool {
		for _, ep := range eps {
			info, _ := c.node(ep.Name).Do("CLUSTER", "INFO").(string)
			if !strings.Contains(info, "cluster_state:ok") {
				return false
			}
		}
		return true
	})
}

func addrs(eps []Endpoint) []string {
	var out []string
	for _, ep := range eps {
		out = append(out, ep.Addr)
	}
	return out
}

func runID(t *testing.T, n *redistest.Node) string {
	t.Helper()
	info, _ := n.Do("INFO", "server").(string)
	for _, l := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(l, "run_id:"); ok {
			return v
		}
	}
	t.Fatalf("no run_id in INFO server of %s", n.Addr())
	return ""
}

// redisPing sends PING over TLS with cfg and reads the reply (PONG, or
// NOAUTH from a node with a password: either way the node served the
// client); a server that requires a client certificate drops the connection
// instead.
func redisPing(ctx context.Context, cfg *tls.Config, addr string) error {
	d := tls.Dialer{NetDialer: &net.Dialer{Timeout: 2 * time.Second}, Config: cfg}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	buf := make([]byte, 64)
	n, err := conn.Read(buf)
	if err != nil {
		return err
	}
	if !strings.HasPrefix(string(buf[:n]), "+PONG") && !strings.HasPrefix(string(buf[:n]), "-NOAUTH") {
		return fmt.Errorf("reply %q", buf[:n])
	}
	return nil
}

// TestTLSCARenewalLive renews the CA of a running TLS cluster of real
// redis-server processes (3 masters, 3 replicas, client certificates
// required) through tlscerts.Renew's three steps, the way the operator
// does: after each step, a certificate from the signing CA with the
// step's bundle as ca.crt, which each node loads in turn (ReloadTLS, one
// node at a time, as the kubelet updates pods one by one). After every
// single node's reload, with nodes on both sides of the step, every node's
// cluster bus links and every replica's link to its master are dialled
// again and come up (each side checks the other's certificate against its
// own ca.crt), the cluster stays ok, and a client trusting the published
// ca.crt verifies each node's certificate. The clock of the steps ends a
// minute before the real one, so Redis, which checks validity at the real
// time, finds every certificate valid.
func TestTLSCARenewalLive(t *testing.T) {
	t.Parallel()
	const validity = time.Hour
	t0 := time.Now().Add(-45 * time.Minute)
	caPEM, caKey, err := tlscerts.NewCA("renewed", t0, validity)
	if err != nil {
		t.Fatal(err)
	}
	a, err := tlscerts.ParseAuthority(caPEM, caKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	type version struct {
		files          TLSFiles
		ca, cert       []byte
		serial         string
		client, bundle *tls.Config
	}
	issue := func(a *tlscerts.Authority, at time.Time) version {
		t.Helper()
		cert, key, err := tlscerts.Issue(a.SignerPEM(), a.Key, []string{"redis"}, nil, at)
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		f := &redistest.TLS{CertFile: filepath.Join(dir, "tls.crt"), KeyFile: filepath.Join(dir, "tls.key"), CAFile: filepath.Join(dir, "ca.crt")}
		writeTLS(t, f, a.Bundle, cert, key)
		v := version{files: TLSFiles{Cert: f.CertFile, Key: f.KeyFile, CA: f.CAFile}, ca: a.Bundle, cert: cert}
		leaf, _ := tlscerts.ParseCertificate(cert)
		v.serial = tlscerts.Serial(leaf)
		if v.client, err = tlscerts.ClientConfig(a.Bundle, cert, key); err != nil {
			t.Fatal(err)
		}
		// An application's client: the published ca.crt, no certificate of its own.
		v.bundle = v.client.Clone()
		v.bundle.Certificates = nil
		return v
	}
	v := issue(a, t0)
	files := &redistest.TLS{CertFile: v.files.Cert, KeyFile: v.files.Key, CAFile: v.files.CA, AuthClients: "optional", Client: v.client}
	const password = "renew pw"
	c := newTestCluster(t, redistest.Options{Password: password, TLS: files, Extra: []string{"enable-debug-command yes"}},
		Options{TLS: v.client, TLSID: v.serial})
	d := c.desired(1, c.addShards(3, 2))
	if res := c.reconcile(d, nil); !res.Converged {
		t.Fatalf("not converged over TLS: %+v", res)
	}
	eps := d.endpoints()
	ctx := context.Background()

	due := t0.Add(44 * time.Minute)
	for _, want := range []tlscerts.Step{tlscerts.StepPublish, tlscerts.StepSign, tlscerts.StepDrop} {
		next, step, err := tlscerts.Renew(a, v.cert, v.ca, true, "renewed", due, validity)
		if err != nil || step != want {
			t.Fatalf("Renew: step %q, %v; want %q", step, err, want)
		}
		a = next
		cur := issue(a, due)
		e := New(Options{TLS: cur.client, TLSID: cur.serial, Password: password, DialTimeout: 2 * time.Second, CommandTimeout: 2 * time.Second})
		for i, ep := range eps {
			if pending, err := e.ReloadTLS(ctx, []string{ep.Addr}, cur.serial, cur.files); err != nil || len(pending) > 0 {
				t.Fatalf("%s: reloading %s: pending %v, %v", step, ep.Addr, pending, err)
			}
			// The helper's clients follow the node's new files.
			files.Client = cur.client
			what := fmt.Sprintf("%s, %d of %d nodes reloaded", step, i+1, len(eps))
			relinkAll(t, c, eps, what)
			for _, other := range eps {
				if _, err := New(Options{TLS: cur.bundle, DialTimeout: 2 * time.Second}).ServedSerial(ctx, other.Addr); err != nil {
					t.Errorf("%s: a client trusting the published ca.crt and %s: %v", what, other.Addr, err)
				}
			}
		}
		v = cur
	}
	if _, err := New(Options{TLS: v.bundle, DialTimeout: 2 * time.Second}).ServedSerial(ctx, eps[0].Addr); err != nil {
		t.Fatal(err)
	}
	if strings.Count(string(v.ca), "BEGIN CERTIFICATE") != 1 || !bytes.Contains(v.ca, a.SignerPEM()) {
		t.Error("the final ca.crt is not the new CA alone")
	}
}

// relinkAll drops every cluster bus link of every node (DEBUG CLUSTERLINK
// KILL TO each peer) and every replica's link to its master (CLIENT KILL
// TYPE master),
// then waits until each node has an inbound bus link from every other node
// made after that (a peer's outbound link that passed both certificate
// checks and delivered a packet), every replica's link is up again and
// the cluster is ok.
func relinkAll(t *testing.T, c *testCluster, eps []Endpoint, what string) {
	t.Helper()
	ids := map[string]string{}
	for _, ep := range eps {
		ids[ep.Name], _ = c.node(ep.Name).Do("CLUSTER", "MYID").(string)
	}
	since := time.Now().UnixMilli()
	for _, ep := range eps {
		n := c.node(ep.Name)
		for _, other := range eps {
			if other.Name != ep.Name {
				// Outbound only: KILL ALL crashes redis-server 7.0.15. Each
				// node's new outbound link is its peer's new inbound one.
				n.Do("DEBUG", "CLUSTERLINK", "KILL", "TO", ids[other.Name])
			}
		}
		if repl, _ := n.Do("INFO", "replication").(string); strings.Contains(repl, "role:slave") {
			n.Do("CLIENT", "KILL", "TYPE", "master")
		}
	}
	waitFor(t, time.Minute, what+": every bus and replication link made again", func() bool {
		for _, ep := range eps {
			n := c.node(ep.Name)
			links, _ := n.Do("CLUSTER", "LINKS").([]any)
			from := map[string]bool{}
			for _, l := range links {
				f := map[string]any{}
				kv, _ := l.([]any)
				for i := 0; i+1 < len(kv); i += 2 {
					f[fmt.Sprint(kv[i])] = kv[i+1]
				}
				if created, _ := f["create-time"].(int64); f["direction"] == "from" && created >= since {
					from[fmt.Sprint(f["node"])] = true
				}
			}
			for _, other := range eps {
				if other.Name != ep.Name && !from[ids[other.Name]] {
					return false
				}
			}
			info, _ := n.Do("CLUSTER", "INFO").(string)
			repl, _ := n.Do("INFO", "replication").(string)
			if !strings.Contains(info, "cluster_state:ok") ||
				(strings.Contains(repl, "role:slave") && !strings.Contains(repl, "master_link_status:up")) {
				return false
			}
		}
		return true
	})
}
