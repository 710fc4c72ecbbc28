// Package pki creates the certificates and keys a single-machine control
// plane needs: a CA, the API server's serving certificate, client
// certificates, and the service-account signing key pair. Files are PEM, in
// one directory, and are reused when already present so a restarted plane
// keeps trusting the kubeconfigs it handed out.
package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// validity of every certificate issued here; a local plane is short-lived.
const validity = 10 * 365 * 24 * time.Hour

// Client identities issued by Ensure. Each is in the system:masters group,
// which Kubernetes RBAC binds to cluster-admin.
const (
	Admin             = "admin"
	ControllerManager = "controller-manager"
	KubeletClient     = "kubelet-client"
)

// Files names the PEM files Ensure writes in Dir.
type Files struct {
	Dir string
}

// CACert is the CA certificate that signs every certificate here.
func (f Files) CACert() string { return filepath.Join(f.Dir, "ca.crt") }

// CAKey is the CA's private key.
func (f Files) CAKey() string { return filepath.Join(f.Dir, "ca.key") }

// ServingCert is the API server's serving certificate.
func (f Files) ServingCert() string { return filepath.Join(f.Dir, "apiserver.crt") }

// ServingKey is the API server's serving key.
func (f Files) ServingKey() string { return filepath.Join(f.Dir, "apiserver.key") }

// ClientCert is the client certificate of identity name.
func (f Files) ClientCert(name string) string { return filepath.Join(f.Dir, name+".crt") }

// ClientKey is the client key of identity name.
func (f Files) ClientKey(name string) string { return filepath.Join(f.Dir, name+".key") }

// ServiceAccountKey is the RSA key that signs service-account tokens.
func (f Files) ServiceAccountKey() string { return filepath.Join(f.Dir, "sa.key") }

// ServiceAccountPub is the public half of ServiceAccountKey.
func (f Files) ServiceAccountPub() string { return filepath.Join(f.Dir, "sa.pub") }

// Ensure creates, in dir, whatever of the CA, the serving certificate (valid
// for servingIPs and servingNames), the client certificates and the
// service-account keys is missing.
func Ensure(dir string, servingIPs []net.IP, servingNames []string) (Files, error) {
	f := Files{Dir: dir}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return f, fmt.Errorf("creating pki directory: %w", err)
	}
	ca, caKey, err := ensureCA(f)
	if err != nil {
		return f, err
	}
	if err := ensureLeaf(f.ServingCert(), f.ServingKey(), ca, caKey, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: servingIPs,
		DNSNames:    servingNames,
	}); err != nil {
		return f, err
	}
	for _, id := range []string{Admin, ControllerManager, KubeletClient} {
		if err := ensureLeaf(f.ClientCert(id), f.ClientKey(id), ca, caKey, &x509.Certificate{
			Subject:     pkix.Name{CommonName: "localplane:" + id, Organization: []string{"system:masters"}},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		}); err != nil {
			return f, err
		}
	}
	if err := ensureServiceAccountKeys(f); err != nil {
		return f, err
	}
	return f, nil
}

func exists(paths ...string) bool {
	for _, p := range paths {
		if _, err := os.Stat(p); err != nil {
			return false
		}
	}
	return true
}

func ensureCA(f Files) (*x509.Certificate, crypto.Signer, error) {
	if exists(f.CACert(), f.CAKey()) {
		cert, err := readCert(f.CACert())
		if err != nil {
			return nil, nil, err
		}
		key, err := readKey(f.CAKey())
		if err != nil {
			return nil, nil, err
		}
		return cert, key, nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: "localplane-ca"},
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := sign(tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, nil, err
	}
	if err := writeKey(f.CAKey(), key); err != nil {
		return nil, nil, err
	}
	if err := writePEM(f.CACert(), "CERTIFICATE", der, 0o644); err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	return cert, key, err
}

func ensureLeaf(certPath, keyPath string, ca *x509.Certificate, caKey crypto.Signer, tmpl *x509.Certificate) error {
	if exists(certPath, keyPath) {
		return nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := sign(tmpl, ca, key.Public(), caKey)
	if err != nil {
		return err
	}
	if err := writeKey(keyPath, key); err != nil {
		return err
	}
	return writePEM(certPath, "CERTIFICATE", der, 0o644)
}

func sign(tmpl, parent *x509.Certificate, pub crypto.PublicKey, signer crypto.Signer) ([]byte, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, err
	}
	tmpl.SerialNumber = serial
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(validity)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, signer)
	if err != nil {
		return nil, fmt.Errorf("signing certificate %q: %w", tmpl.Subject.CommonName, err)
	}
	return der, nil
}

func ensureServiceAccountKeys(f Files) error {
	if exists(f.ServiceAccountKey(), f.ServiceAccountPub()) {
		return nil
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return err
	}
	if err := writeKey(f.ServiceAccountKey(), key); err != nil {
		return err
	}
	return writePEM(f.ServiceAccountPub(), "PUBLIC KEY", pub, 0o644)
}

func writeKey(path string, key crypto.Signer) error {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	return writePEM(path, "PRIVATE KEY", der, 0o600)
}

func writePEM(path, kind string, der []byte, mode os.FileMode) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), mode); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func readPEM(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(b)
	if block == nil {
		return nil, fmt.Errorf("%s: no PEM block", path)
	}
	return block.Bytes, nil
}

func readCert(path string) (*x509.Certificate, error) {
	der, err := readPEM(path)
	if err != nil {
		return nil, err
	}
	return x509.ParseCertificate(der)
}

func readKey(path string) (crypto.Signer, error) {
	der, err := readPEM(path)
	if err != nil {
		return nil, err
	}
	key, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, errors.New(path + ": not a signing key")
	}
	return signer, nil
}

// NodeCert is the client certificate of real node name, for its kubelet's
// kubeconfig: CN system:node:<name>, O system:nodes (what the API server's
// Node authorizer and NodeRestriction admission know a kubelet by).
func (f Files) NodeCert(name string) string { return filepath.Join(f.Dir, "node-"+name+".crt") }

// NodeKey is the private key of NodeCert.
func (f Files) NodeKey(name string) string { return filepath.Join(f.Dir, "node-"+name+".key") }

// KubeletServingCert is the serving certificate of real node name's
// kubelet, valid for its node IPs and its name.
func (f Files) KubeletServingCert(name string) string {
	return filepath.Join(f.Dir, "kubelet-"+name+".crt")
}

// KubeletServingKey is the private key of KubeletServingCert.
func (f Files) KubeletServingKey(name string) string {
	return filepath.Join(f.Dir, "kubelet-"+name+".key")
}

// EnsureNode creates, signed by the CA of f (Ensure first), node name's
// client certificate if missing, and its kubelet's serving certificate for
// ips (and DNS name name), made anew unless the existing one is valid for
// exactly those IPs.
func (f Files) EnsureNode(name string, ips []net.IP) error {
	ca, err := readCert(f.CACert())
	if err != nil {
		return err
	}
	caKey, err := readKey(f.CAKey())
	if err != nil {
		return err
	}
	if err := ensureLeaf(f.NodeCert(name), f.NodeKey(name), ca, caKey, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "system:node:" + name, Organization: []string{"system:nodes"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}); err != nil {
		return err
	}
	if cert, err := readCert(f.KubeletServingCert(name)); err == nil && sameIPs(cert.IPAddresses, ips) {
		return nil
	}
	_ = os.Remove(f.KubeletServingCert(name))
	return ensureLeaf(f.KubeletServingCert(name), f.KubeletServingKey(name), ca, caKey, &x509.Certificate{
		Subject:     pkix.Name{CommonName: name},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: ips,
		DNSNames:    []string{name},
	})
}

func sameIPs(a, b []net.IP) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !a[i].Equal(b[i]) {
			return false
		}
	}
	return true
}
