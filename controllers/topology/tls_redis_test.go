package topology

import (
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
