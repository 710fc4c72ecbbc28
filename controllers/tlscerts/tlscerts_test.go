package tlscerts

import (
	"crypto/tls"
	"net"
	"strings"
	"testing"
	"time"
)

func TestIssueChainsToItsCAAndNamesTheNodes(t *testing.T) {
	now := time.Now()
	caCert, caKey, err := NewCA("test-ca", now, DefaultCAValidity)
	if err != nil {
		t.Fatal(err)
	}
	dns := []string{"rc-headless.ns.svc", "*.rc-headless.ns.svc.cluster.local"}
	ips := []net.IP{net.ParseIP("10.244.0.7")}
	cert, key, err := Issue(caCert, caKey, dns, ips, now)
	if err != nil {
		t.Fatal(err)
	}
	if err := Verify(caCert, cert, key, now); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	leaf, err := ParseCertificate(cert)
	if err != nil {
		t.Fatal(err)
	}
	if !Covers(leaf, dns, ips) {
		t.Errorf("SANs %v %v do not cover %v %v", leaf.DNSNames, leaf.IPAddresses, dns, ips)
	}
	if Covers(leaf, dns, []net.IP{net.ParseIP("10.244.0.8")}) {
		t.Error("Covers accepts an IP the certificate does not name")
	}
	if NeedsRenewal(leaf, now) {
		t.Error("a fresh certificate needs renewal")
	}
	if !NeedsRenewal(leaf, now.Add(LeafValidity*2/3+time.Hour)) {
		t.Error("a certificate with less than a third of its life left does not need renewal")
	}
	if s := Serial(leaf); len(s)%2 != 0 || strings.ToUpper(s) != s {
		t.Errorf("Serial %q is not even-length upper-case hex", s)
	}

	otherCA, otherKey, err := NewCA("other", now, DefaultCAValidity)
	if err != nil {
		t.Fatal(err)
	}
	if err := Verify(otherCA, cert, key, now); err == nil {
		t.Error("Verify accepts a certificate of another CA")
	}
	_, otherLeafKey, err := Issue(otherCA, otherKey, dns, ips, now)
	if err != nil {
		t.Fatal(err)
	}
	if err := Verify(caCert, cert, otherLeafKey, now); err == nil || !strings.Contains(err.Error(), "not the key") {
		t.Errorf("Verify with another key: %v, want a key mismatch", err)
	}
}

// TestClientConfigHandshake: a TLS server with the CA's certificate is
// accepted whatever address it is dialled at; one of another CA is refused.
func TestClientConfigHandshake(t *testing.T) {
	now := time.Now()
	caCert, caKey, _ := NewCA("ca", now, DefaultCAValidity)
	cert, key, _ := Issue(caCert, caKey, []string{"not-the-address"}, nil, now)
	otherCA, otherKey, _ := NewCA("other", now, DefaultCAValidity)
	otherCert, otherLeafKey, _ := Issue(otherCA, otherKey, []string{"x"}, nil, now)
	cfg, err := ClientConfig(caCert, cert, key)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		cert, key []byte
		ok        bool
	}{{"same CA", cert, key, true}, {"other CA", otherCert, otherLeafKey, false}} {
		pair, err := tls.X509KeyPair(tc.cert, tc.key)
		if err != nil {
			t.Fatal(err)
		}
		ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{pair}})
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			c, err := ln.Accept()
			if err == nil {
				_ = c.(*tls.Conn).Handshake()
				_ = c.Close()
			}
		}()
		conn, err := tls.Dial("tcp", ln.Addr().String(), cfg)
		if conn != nil {
			_ = conn.Close()
		}
		_ = ln.Close()
		if (err == nil) != tc.ok {
			t.Errorf("%s: handshake error %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}
