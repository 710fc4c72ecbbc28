package pki

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"testing"
)

func TestEnsure(t *testing.T) {
	dir := t.TempDir()
	f, err := Ensure(dir, []net.IP{net.ParseIP("127.0.0.1")}, []string{"kubernetes.default.svc"})
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(f.CACert())
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)

	serving, err := tls.LoadX509KeyPair(f.ServingCert(), f.ServingKey())
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(serving.Certificate[0])
	for _, name := range []string{"127.0.0.1", "kubernetes.default.svc"} {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: name}); err != nil {
			t.Errorf("serving certificate for %s: %v", name, err)
		}
	}
	admin, err := tls.LoadX509KeyPair(f.ClientCert(Admin), f.ClientKey(Admin))
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ = x509.ParseCertificate(admin.Certificate[0])
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("admin client certificate: %v", err)
	}
	if got := leaf.Subject.Organization; len(got) != 1 || got[0] != "system:masters" {
		t.Errorf("admin organization = %v, want [system:masters]", got)
	}

	// A second run keeps what exists, so issued kubeconfigs stay valid.
	if _, err := Ensure(dir, nil, nil); err != nil {
		t.Fatal(err)
	}
	again, _ := os.ReadFile(f.CACert())
	if string(again) != string(caPEM) {
		t.Error("the CA was regenerated")
	}
}
