// Package tlscerts issues and inspects the X.509 material of a Redis
// cluster's TLS: a CA per cluster and the nodes' certificate it signs. It
// uses only the standard library's crypto and knows no Kubernetes.
package tlscerts

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"slices"
	"strings"
	"time"
)

const (
	// DefaultCAValidity is how long an operator-made CA is valid unless
	// the operator is told otherwise (--tls-ca-validity); it is renewed
	// once less than a third of that is left (Renew).
	DefaultCAValidity = 10 * 365 * 24 * time.Hour
	// MinCAValidity is the shortest CA validity the operator accepts: a
	// renewal starts with a third of the CA's life left (which counts the
	// backdate: under 2.5 minutes a new CA would be due at once) and then
	// needs three reloads of every node.
	MinCAValidity = 10 * time.Minute
	// LeafValidity is how long a nodes' certificate the operator issues is
	// valid at most (never beyond its CA); it is renewed once less than a
	// third of that is left (NeedsRenewal).
	LeafValidity = 90 * 24 * time.Hour
	// backdate covers clocks a little behind the operator's.
	backdate = 5 * time.Minute
)

// NewCA returns a self-signed CA certificate and its ECDSA P-256 key, both
// PEM, named after cn and valid for validity from now (backdated a few
// minutes).
func NewCA(cn string, now time.Time, validity time.Duration) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generating CA key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, fmt.Errorf("signing CA certificate: %w", err)
	}
	return encode(der, key)
}

// Issue signs a certificate for the Redis nodes with the CA (PEM cert and
// key, as NewCA returns them): a fresh ECDSA P-256 key, the first DNS name
// as common name, dnsNames and ips as subject alternative names, usable
// for TLS servers and clients (Redis presents it on its replication and bus
// links too), valid for LeafValidity from now or until the CA expires,
// whichever comes first (a certificate outliving its CA would not verify).
func Issue(caCertPEM, caKeyPEM []byte, dnsNames []string, ips []net.IP, now time.Time) (certPEM, keyPEM []byte, err error) {
	ca, err := ParseCertificate(caCertPEM)
	if err != nil {
		return nil, nil, fmt.Errorf("CA certificate: %w", err)
	}
	caKey, err := parseECKey(caKeyPEM)
	if err != nil {
		return nil, nil, fmt.Errorf("CA key: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generating key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, nil, err
	}
	cn := "redis"
	if len(dnsNames) > 0 {
		cn = dnsNames[0]
	}
	notAfter := now.Add(LeafValidity)
	if ca.NotAfter.Before(notAfter) {
		notAfter = ca.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn},
		DNSNames:     dnsNames,
		IPAddresses:  ips,
		NotBefore:    now.Add(-backdate),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("signing certificate: %w", err)
	}
	return encode(der, key)
}

// ParseCertificate parses the first CERTIFICATE block of pemData.
func ParseCertificate(pemData []byte) (*x509.Certificate, error) {
	for rest := pemData; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return nil, errors.New("no PEM CERTIFICATE block")
		}
		if block.Type == "CERTIFICATE" {
			return x509.ParseCertificate(block.Bytes)
		}
	}
}

// Serial is cert's serial number in upper-case hex with an even number of
// digits, as `openssl x509 -noout -serial` prints it.
func Serial(cert *x509.Certificate) string {
	s := strings.ToUpper(cert.SerialNumber.Text(16))
	if len(s)%2 == 1 {
		s = "0" + s
	}
	return s
}

// NeedsRenewal reports whether cert has less than a third of its validity
// left at now (or is not valid yet, or has expired).
func NeedsRenewal(cert *x509.Certificate, now time.Time) bool {
	life := cert.NotAfter.Sub(cert.NotBefore)
	return now.Before(cert.NotBefore) || now.After(cert.NotAfter.Add(-life/3))
}

// Covers reports whether cert names every one of dnsNames and ips among
// its subject alternative names.
func Covers(cert *x509.Certificate, dnsNames []string, ips []net.IP) bool {
	for _, n := range dnsNames {
		if !slices.Contains(cert.DNSNames, n) {
			return false
		}
	}
	for _, ip := range ips {
		if !slices.ContainsFunc(cert.IPAddresses, ip.Equal) {
			return false
		}
	}
	return true
}

// Verify checks that the certificate certPEM chains to one of the CA
// certificates in caPEM (a bundle) at now, for TLS servers, and that keyPEM
// is its key.
func Verify(caPEM, certPEM, keyPEM []byte, now time.Time) error {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return errors.New("ca.crt holds no PEM certificate")
	}
	cert, err := ParseCertificate(certPEM)
	if err != nil {
		return fmt.Errorf("tls.crt: %w", err)
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		return fmt.Errorf("tls.crt does not chain to ca.crt: %w", err)
	}
	if err := matchesKey(cert, keyPEM); err != nil {
		return err
	}
	return nil
}

func matchesKey(cert *x509.Certificate, keyPEM []byte) error {
	block, _ := pem.Decode(keyPEM)
	if block == nil {
		return errors.New("tls.key holds no PEM block")
	}
	var key any
	var err error
	switch block.Type {
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(block.Bytes)
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
	default:
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	}
	if err != nil {
		return fmt.Errorf("tls.key: %w", err)
	}
	pub, ok := key.(crypto.Signer)
	if !ok {
		return errors.New("tls.key: not a private key")
	}
	want, err := x509.MarshalPKIXPublicKey(cert.PublicKey)
	if err != nil {
		return fmt.Errorf("tls.crt public key: %w", err)
	}
	got, err := x509.MarshalPKIXPublicKey(pub.Public())
	if err != nil {
		return fmt.Errorf("tls.key public key: %w", err)
	}
	if !bytes.Equal(want, got) {
		return errors.New("tls.key is not the key of tls.crt")
	}
	return nil
}

func parseECKey(keyPEM []byte) (*ecdsa.PrivateKey, error) {
	block, _ := pem.Decode(keyPEM)
	if block == nil || block.Type != "EC PRIVATE KEY" {
		return nil, errors.New("no PEM EC PRIVATE KEY block")
	}
	return x509.ParseECPrivateKey(block.Bytes)
}

func encode(der []byte, key *ecdsa.PrivateKey) (certPEM, keyPEM []byte, err error) {
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("encoding key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), nil
}

// newSerial is a random positive 128-bit serial number (RFC 5280 allows up
// to 20 octets).
func newSerial() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("generating serial: %w", err)
	}
	return n.Add(n, big.NewInt(1)), nil
}
