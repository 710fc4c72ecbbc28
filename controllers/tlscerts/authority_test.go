package tlscerts

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestRenewSteps: a CA is renewed in three steps, each taken only once
// every node serves the certificate published with the step before:
// publish (new CA in the bundle, the old one signs), sign (the new one
// signs), drop (the old one leaves the bundle). Nothing happens before
// less than a third of the CA's life is left, nor while the nodes have not
// applied the certificate published with the current bundle; a certificate
// of the old CA keeps the old CA in the bundle.
func TestRenewSteps(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	const validity = 30 * time.Minute
	caPEM, caKey, err := NewCA("old", t0, validity)
	if err != nil {
		t.Fatal(err)
	}
	a, err := ParseAuthority(caPEM, caKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	old := a.Signer()
	keys := map[string][]byte{}
	leaf := func(a *Authority, now time.Time) []byte {
		t.Helper()
		cert, key, err := Issue(a.SignerPEM(), a.Key, []string{"redis"}, nil, now)
		if err != nil {
			t.Fatal(err)
		}
		keys[string(cert)] = key
		return cert
	}
	renew := func(a *Authority, cert, ca []byte, applied bool, now time.Time, want Step) *Authority {
		t.Helper()
		next, step, err := Renew(a, cert, ca, applied, "new", now, validity)
		if err != nil {
			t.Fatal(err)
		}
		if step != want {
			t.Fatalf("Renew in phase %q: step %q, want %q", a.Phase(), step, want)
		}
		if step == StepNone && next != a {
			t.Fatal("Renew without a step changed the authority")
		}
		return next
	}
	cert := leaf(a, t0)
	renew(a, cert, a.Bundle, true, t0.Add(validity/2), StepNone)

	// Less than a third left (the life counts the backdate).
	due := t0.Add(validity * 3 / 4)
	pub := renew(a, cert, a.Bundle, true, due, StepPublish)
	if pub.Phase() != PhasePublished || !pub.Signer().Equal(old) || pub.Next() == nil || len(pub.Others()) != 1 {
		t.Fatalf("after publish: phase %q, signer old %v, next %v", pub.Phase(), pub.Signer().Equal(old), pub.Next())
	}
	if !bytes.HasPrefix(pub.Bundle, caPEM) {
		t.Error("the published bundle does not start with the old CA")
	}
	if got, _ := ParseAuthority(pub.Bundle, pub.Key, pub.NextKey); got.Phase() != PhasePublished {
		t.Error("the stored published authority does not read back as published")
	}
	if _, err := ParseAuthority(pub.Bundle, pub.NextKey, pub.NextKey); err == nil {
		t.Error("next-ca.key equal to ca.key accepted")
	}
	// The certificate of the old bundle, or the new one not applied yet.
	renew(pub, cert, a.Bundle, true, due, StepNone)
	certPub := leaf(pub, due)
	if l, _ := ParseCertificate(certPub); !l.NotAfter.Equal(old.NotAfter) {
		t.Errorf("a certificate of the old CA ends at %s, after its CA (%s)", l.NotAfter, old.NotAfter)
	}
	renew(pub, certPub, pub.Bundle, false, due, StepNone)

	signing := renew(pub, certPub, pub.Bundle, true, due, StepSign)
	if signing.Phase() != PhaseSigning || !signing.Signer().Equal(pub.Next()) || !bytes.Equal(signing.Bundle, pub.Bundle) || len(signing.NextKey) != 0 {
		t.Fatalf("after sign: phase %q, bundle kept %v", signing.Phase(), bytes.Equal(signing.Bundle, pub.Bundle))
	}
	// Applied, but the certificate is still the old CA's: the old CA stays.
	renew(signing, certPub, signing.Bundle, true, due, StepNone)
	certNew := leaf(signing, due)
	renew(signing, certNew, signing.Bundle, false, due, StepNone)

	done := renew(signing, certNew, signing.Bundle, true, due, StepDrop)
	if done.Phase() != PhaseNone || !done.Signer().Equal(signing.Signer()) || strings.Count(string(done.Bundle), "BEGIN CERTIFICATE") != 1 {
		t.Fatalf("after drop: phase %q, bundle %d certificates", done.Phase(), strings.Count(string(done.Bundle), "BEGIN CERTIFICATE"))
	}
	if err := Verify(done.Bundle, certNew, keys[string(certNew)], due); err != nil {
		t.Errorf("the new CA's certificate against the final bundle: %v", err)
	}
	if err := Verify(done.Bundle, certPub, keys[string(certPub)], due); err == nil {
		t.Error("the final bundle still trusts the old CA")
	}
	renew(done, certNew, signing.Bundle, true, due, StepNone)
}

// TestParseAuthorityRefuses: a CA Secret whose key belongs to no
// certificate of its bundle is refused, naming the key.
func TestParseAuthorityRefuses(t *testing.T) {
	now := time.Now()
	ca, _, _ := NewCA("a", now, DefaultCAValidity)
	_, otherKey, _ := NewCA("b", now, DefaultCAValidity)
	if _, err := ParseAuthority(ca, otherKey, nil); err == nil || !strings.Contains(err.Error(), "ca.key") {
		t.Errorf("ca.key of another CA: %v", err)
	}
	if _, err := ParseAuthority([]byte("junk"), otherKey, nil); err == nil || !strings.Contains(err.Error(), "ca.crt") {
		t.Errorf("no certificate: %v", err)
	}
}
