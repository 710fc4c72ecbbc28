package tlscerts

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
)

// ClientConfig is the TLS configuration for dialling the cluster's nodes:
// it presents certPEM/keyPEM as client certificate (for tls-auth-clients)
// and accepts a node whose certificate chains to a CA of caPEM. Like
// Redis's own replication and bus links, it does not match the node's name
// or IP against the certificate: nodes are dialled by pod IP, which a
// user-supplied certificate need not name; the chain to the cluster's own
// CA is what authenticates a node.
func ClientConfig(caPEM, certPEM, keyPEM []byte) (*tls.Config, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("ca.crt holds no PEM certificate")
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("tls.crt and tls.key: %w", err)
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{pair},
		// Verification without a name: VerifyConnection below checks the chain.
		InsecureSkipVerify: true, //nolint:gosec // the chain is verified in VerifyConnection
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("the node sent no certificate")
			}
			inter := x509.NewCertPool()
			for _, c := range cs.PeerCertificates[1:] {
				inter.AddCert(c)
			}
			_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter,
				KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
			if err != nil {
				return fmt.Errorf("the node's certificate does not chain to the cluster's CA: %w", err)
			}
			return nil
		},
	}, nil
}
