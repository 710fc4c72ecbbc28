package tlscerts

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"time"
)

// Authority is the operator's CA of one cluster as its Secret stores it;
// a renewal's state lives there and nowhere else, so an operator that
// restarts at any moment carries on from it:
//
//   - Bundle (ca.crt): the CA certificates the nodes and clients trust;
//   - Key (ca.key): the key of the one of them that signs the nodes'
//     certificate (Signer);
//   - NextKey (next-ca.key): while a new CA is in Bundle but does not sign
//     yet, its key.
//
// A renewal moves it through Phase's values, one write each (Renew).
type Authority struct {
	Bundle, Key, NextKey []byte

	certs  []*x509.Certificate
	signer int
	next   int
}

// Phase is where an Authority is in a renewal.
type Phase string

const (
	// PhaseNone: one CA, trusted and signing.
	PhaseNone Phase = ""
	// PhasePublished: the old CA signs, the new one is in the bundle
	// beside it, so every node and client learns to trust it first.
	PhasePublished Phase = "Published"
	// PhaseSigning: the new CA signs, the old one stays in the bundle
	// while nodes still serve certificates it signed.
	PhaseSigning Phase = "Signing"
)

// Step is a change Renew makes to an Authority.
type Step string

const (
	// StepNone: nothing to change now.
	StepNone Step = ""
	// StepPublish adds a new CA to the bundle (PhaseNone → PhasePublished).
	StepPublish Step = "Publish"
	// StepSign makes the new CA the signer (PhasePublished → PhaseSigning).
	StepSign Step = "Sign"
	// StepDrop removes the old CA from the bundle (PhaseSigning → PhaseNone).
	StepDrop Step = "Drop"
)

// ParseAuthority reads an Authority from its Secret's ca.crt, ca.key and
// next-ca.key (empty without a renewal under way): every key must be the
// key of a certificate of the bundle.
func ParseAuthority(bundle, key, nextKey []byte) (*Authority, error) {
	a := &Authority{Bundle: bundle, Key: key, NextKey: nextKey, next: -1}
	for rest := bundle; ; {
		var block *pem.Block
		if block, rest = pem.Decode(rest); block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("ca.crt: %w", err)
		}
		a.certs = append(a.certs, c)
	}
	if len(a.certs) == 0 {
		return nil, errors.New("ca.crt holds no PEM certificate")
	}
	var err error
	if a.signer, err = a.certOf(key); err != nil {
		return nil, fmt.Errorf("ca.key: %w", err)
	}
	if len(nextKey) > 0 {
		if a.next, err = a.certOf(nextKey); err != nil {
			return nil, fmt.Errorf("next-ca.key: %w", err)
		}
		if a.next == a.signer {
			return nil, errors.New("next-ca.key is ca.key")
		}
	}
	return a, nil
}

// certOf is the index in the bundle of the certificate of keyPEM.
func (a *Authority) certOf(keyPEM []byte) (int, error) {
	key, err := parseECKey(keyPEM)
	if err != nil {
		return 0, err
	}
	for i, c := range a.certs {
		if pub, ok := c.PublicKey.(*ecdsa.PublicKey); ok && pub.Equal(&key.PublicKey) {
			return i, nil
		}
	}
	return 0, errors.New("the key of no certificate in ca.crt")
}

// Signer is the CA that signs the nodes' certificate.
func (a *Authority) Signer() *x509.Certificate { return a.certs[a.signer] }

// SignerPEM is Signer, PEM-encoded, as Issue takes it.
func (a *Authority) SignerPEM() []byte { return encodeCerts(a.Signer()) }

// Phase is where a is in a renewal.
func (a *Authority) Phase() Phase {
	switch {
	case a.next >= 0:
		return PhasePublished
	case len(a.certs) > 1:
		return PhaseSigning
	}
	return PhaseNone
}

// Signs reports whether cert was signed by the Signer.
func (a *Authority) Signs(cert *x509.Certificate) bool {
	return cert.CheckSignatureFrom(a.Signer()) == nil
}

// Renew is one step of renewing a's CA before it expires, with no moment
// at which a node or a client that reads the bundle refuses a certificate
// it is shown: it returns the Authority to store and the step taken, or a
// and StepNone when there is nothing to do yet.
//
//   - PhaseNone, the Signer with less than a third of its life left
//     (NeedsRenewal): a new CA named cn, valid for validity from now, joins
//     the bundle, the old one still signing (StepPublish). The operator
//     then issues the nodes' certificate again with the new bundle as its
//     ca.crt.
//   - PhasePublished, once every node serves a certificate whose ca.crt
//     is this bundle (leafCA equal to Bundle, applied): a node reloads its
//     certificate, key and ca.crt together, so each trusts both CAs now and
//     the new CA becomes the Signer (StepSign). The operator then issues
//     the nodes' certificate from it.
//   - PhaseSigning, once every node serves a certificate the Signer
//     signed, published with this bundle (applied): no node presents a
//     certificate of the old CA any more and it leaves the bundle
//     (StepDrop).
//
// leafCert and leafCA are the nodes' certificate and the ca.crt stored
// beside it, applied whether every node serves that certificate.
func Renew(a *Authority, leafCert, leafCA []byte, applied bool, cn string, now time.Time, validity time.Duration) (*Authority, Step, error) {
	switch a.Phase() {
	case PhaseNone:
		if !NeedsRenewal(a.Signer(), now) {
			return a, StepNone, nil
		}
		cert, key, err := NewCA(cn, now, validity)
		if err != nil {
			return nil, StepNone, err
		}
		next, err := ParseAuthority(append(encodeCerts(a.Signer()), cert...), a.Key, key)
		if err != nil {
			return nil, StepNone, err
		}
		return next, StepPublish, nil
	case PhasePublished:
		if !applied || !bytes.Equal(leafCA, a.Bundle) {
			return a, StepNone, nil
		}
		next, err := ParseAuthority(a.Bundle, a.NextKey, nil)
		if err != nil {
			return nil, StepNone, err
		}
		return next, StepSign, nil
	}
	if !applied || !bytes.Equal(leafCA, a.Bundle) {
		return a, StepNone, nil
	}
	if leaf, err := ParseCertificate(leafCert); err != nil || !a.Signs(leaf) {
		// Not a certificate of the Signer yet: the operator issues one.
		return a, StepNone, nil
	}
	next, err := ParseAuthority(a.SignerPEM(), a.Key, nil)
	if err != nil {
		return nil, StepNone, err
	}
	return next, StepDrop, nil
}

// Next is the new CA of PhasePublished, nil in the other phases.
func (a *Authority) Next() *x509.Certificate {
	if a.next < 0 {
		return nil
	}
	return a.certs[a.next]
}

// Others are the CAs of the bundle other than the Signer.
func (a *Authority) Others() []*x509.Certificate {
	var out []*x509.Certificate
	for i, c := range a.certs {
		if i != a.signer {
			out = append(out, c)
		}
	}
	return out
}

func encodeCerts(certs ...*x509.Certificate) []byte {
	var b bytes.Buffer
	for _, c := range certs {
		_ = pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
	}
	return b.Bytes()
}
