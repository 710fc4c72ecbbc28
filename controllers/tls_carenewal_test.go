package controllers

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/resources"
	"github.com/redis-operator/redis-operator/controllers/tlscerts"
)

// nodeFiles are the files of a node's mounted certificate Secret, as the
// kubelet writes them: all three of one version of the Secret.
type nodeFiles struct{ ca, cert, key []byte }

// TestTLSCARenewal drives the renewal of the operator's CA through each
// step with a fake clock (envtest; the RedisCluster's stored status is
// kept by the test, which is its only reconciler, and a pass counts as
// applied, status.tls.appliedSerial, only when the test says every node
// serves it). At every step, nodes still on the files before it and nodes
// on the files after it handshake each way as Redis's bus does (both sides
// present their certificate and check the other's against their own
// ca.crt), and a client trusting the published ca.crt verifies whichever
// certificate a node serves. The operator dies between the CA Secret's
// write and the certificate's at every step, and the next pass carries on
// from the stored Secrets; a pass that finds nothing applied writes
// nothing. The old CA leaves ca.crt only once every node serves the new
// CA's certificate. Events and status.tls.caRenewal and caNotAfter tell
// each step.
func TestTLSCARenewal(t *testing.T) {
	ns := newNamespace(t)
	stored := &cachev1beta1.RedisCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "car", Namespace: ns, UID: types.UID("c0ffee00-0000-4000-8000-000000000001")},
		Spec:       cachev1beta1.RedisClusterSpec{Shards: 3, ReplicasPerShard: 1, TLS: &cachev1beta1.TLSSpec{Enabled: true}},
	}
	const validity = time.Hour
	r := &RedisClusterReconciler{Client: k8s, APIReader: k8s, Scheme: reconciler.Scheme, CAValidity: validity}
	crashing := &RedisClusterReconciler{Client: failLeafWrites{k8s}, APIReader: k8s, Scheme: reconciler.Scheme, CAValidity: validity}
	pass := func(r *RedisClusterReconciler, at time.Time) (*scope, error) {
		t.Helper()
		s := newScope(stored.DeepCopy(), at, testr.New(t))
		_, _, err := r.reconcileTLS(testCtx, s)
		if err == nil {
			stored = s.rc
		}
		return s, err
	}
	secret := func(name string) *corev1.Secret {
		t.Helper()
		sec := &corev1.Secret{}
		if err := k8s.Get(testCtx, client.ObjectKey{Namespace: ns, Name: name}, sec); err != nil {
			t.Fatal(err)
		}
		return sec
	}
	files := func() nodeFiles {
		l := secret("car-tls")
		return nodeFiles{ca: l.Data[resources.TLSCAKey], cert: l.Data[resources.TLSCertKey], key: l.Data[resources.TLSKeyKey]}
	}
	// allServe is what reconcileTLSReload records once every node serves
	// the current certificate.
	allServe := func() { stored.Status.TLS.AppliedSerial = stored.Status.TLS.Serial }
	versions := func() string {
		return secret("car-tls-ca").ResourceVersion + "/" + secret("car-tls").ResourceVersion
	}
	reasons := func(s *scope) []string {
		var out []string
		for _, e := range s.events {
			out = append(out, e.reason)
		}
		return out
	}
	bundleSize := func() int {
		return strings.Count(string(secret("car-tls-ca").Data[resources.TLSCAKey]), "BEGIN CERTIFICATE")
	}

	// The passes' clock ends a few minutes before the real one, so the
	// handshakes, which check validity at the real time, find every
	// certificate valid.
	t0 := time.Now().Add(-50 * time.Minute).Truncate(time.Second)
	s, err := pass(r, t0)
	if err != nil {
		t.Fatal(err)
	}
	first := files()
	caA, _ := tlscerts.ParseCertificate(first.ca)
	if st := stored.Status.TLS; st.CANotAfter == nil || !st.CANotAfter.Time.Equal(t0.Add(validity)) || st.CARenewal != "" {
		t.Fatalf("status.tls %+v: want caNotAfter %s (--tls-ca-validity), no renewal", st, t0.Add(validity))
	}
	allServe()
	// Two thirds of the CA's life (it counts the 5-minute backdate) not gone yet.
	before := versions()
	if s, err = pass(r, t0.Add(35*time.Minute)); err != nil || versions() != before || len(s.events) > 0 {
		t.Fatalf("a pass before the CA is due: %v, events %v, Secrets changed %v", err, reasons(s), versions() != before)
	}

	at := t0.Add(45 * time.Minute)
	steps := []struct {
		name    string
		event   string
		renewal cachev1beta1.TLSCARenewal
		bundle  int
		// signer: the CA that signs the certificate after the step
		// ("old", "new").
		signer string
	}{
		{"publish", "TLSCARenewing", cachev1beta1.TLSCARenewalPublished, 2, "old"},
		{"sign", "TLSCASigning", cachev1beta1.TLSCARenewalSigning, 2, "new"},
		{"drop", "TLSCARenewed", "", 1, "new"},
	}
	prev := first
	for _, step := range steps {
		// The operator dies after writing the CA Secret, before the
		// certificate: the CA moved, the nodes' files did not.
		caBefore := secret("car-tls-ca").ResourceVersion
		if s, err = pass(crashing, at); !errors.Is(err, errOperatorStopped) {
			t.Fatalf("%s: the crashing pass: %v", step.name, err)
		}
		if got := reasons(s); !slices.Equal(got, []string{step.event}) {
			t.Errorf("%s: events of the crashing pass %v, want %s", step.name, got, step.event)
		}
		if secret("car-tls-ca").ResourceVersion == caBefore {
			t.Fatalf("%s: the CA Secret was not written", step.name)
		}
		if got := files(); string(got.cert) != string(prev.cert) {
			t.Fatalf("%s: the certificate changed in the crashed pass", step.name)
		}
		// The next operator carries on from the Secrets.
		if s, err = pass(r, at); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		if got := reasons(s); !slices.Equal(got, []string{"TLSCertificateIssued"}) {
			t.Errorf("%s: events of the next pass %v, want only the certificate issued", step.name, got)
		}
		cur := files()
		if string(cur.ca) != string(secret("car-tls-ca").Data[resources.TLSCAKey]) {
			t.Fatalf("%s: ca.crt of car-tls is not the bundle of car-tls-ca", step.name)
		}
		if bundleSize() != step.bundle {
			t.Errorf("%s: ca.crt holds %d CAs, want %d", step.name, bundleSize(), step.bundle)
		}
		leaf, _ := tlscerts.ParseCertificate(cur.cert)
		if signedByOld := leaf.CheckSignatureFrom(caA) == nil; signedByOld != (step.signer == "old") {
			t.Errorf("%s: the certificate is signed by the old CA: %v, want the %s one", step.name, signedByOld, step.signer)
		}
		st := stored.Status.TLS
		signer, _ := tlscerts.ParseAuthority(secret("car-tls-ca").Data[resources.TLSCAKey], secret("car-tls-ca").Data[resources.TLSCAPrivateKey], nil)
		if st.CARenewal != step.renewal || st.CANotAfter == nil || !st.CANotAfter.Time.Equal(signer.Signer().NotAfter) {
			t.Errorf("%s: status.tls caRenewal %q caNotAfter %v, want %q and the signing CA's %s",
				step.name, st.CARenewal, st.CANotAfter, step.renewal, signer.Signer().NotAfter)
		}
		// The kubelet updates the pods one by one: old and new files side
		// by side, and the operator with the new material.
		checkNodesTalk(t, step.name, ns, []nodeFiles{prev, cur}, cur.ca)
		checkNodesTalk(t, step.name+", a client of the bundle before", ns, []nodeFiles{prev, cur}, prev.ca)
		if err := handshake(t, s.tls.config, prev, tls.RequireAndVerifyClientCert); err != nil {
			t.Errorf("%s: the operator and a node on the files before: %v", step.name, err)
		}

		// Not every node serves it yet: passes change nothing, the old
		// CA stays.
		before := versions()
		for range 2 {
			if s, err = pass(r, at); err != nil || versions() != before || len(s.events) > 0 {
				t.Fatalf("%s: a pass before every node serves the certificate: %v, events %v, Secrets changed %v",
					step.name, err, reasons(s), versions() != before)
			}
		}
		allServe()
		prev = cur
		at = at.Add(time.Minute)
	}

	// Done: one CA, the new one; nothing more to do.
	before = versions()
	if s, err = pass(r, at); err != nil || versions() != before || len(s.events) > 0 || stored.Status.TLS.CARenewal != "" {
		t.Fatalf("after the renewal: %v, events %v, Secrets changed %v, status %+v", err, reasons(s), versions() != before, stored.Status.TLS)
	}
	if err := tlscerts.Verify(prev.ca, first.cert, first.key, time.Now()); err == nil {
		t.Error("the final ca.crt still trusts the old CA's certificate")
	}
}

// checkNodesTalk: each pair of nodes (the same included) handshakes both
// ways with each side's own files, the server requiring the client's
// certificate as Redis's bus does, and a client trusting bundle alone, as
// an application does (full verification, by the client Service's name),
// handshakes with every node.
func checkNodesTalk(t *testing.T, what, ns string, nodes []nodeFiles, bundle []byte) {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(bundle) {
		t.Fatal("the bundle holds no certificate")
	}
	app := &tls.Config{RootCAs: pool, ServerName: "car." + ns + ".svc", MinVersion: tls.VersionTLS12}
	for i, server := range nodes {
		if err := handshake(t, app, server, tls.VerifyClientCertIfGiven); err != nil {
			t.Errorf("%s: a client trusting the published ca.crt and node %d: %v", what, i, err)
		}
		for j, cl := range nodes {
			cfg, err := tlscerts.ClientConfig(cl.ca, cl.cert, cl.key)
			if err != nil {
				t.Fatal(err)
			}
			if err := handshake(t, cfg, server, tls.RequireAndVerifyClientCert); err != nil {
				t.Errorf("%s: node %d dialling node %d: %v", what, j, i, err)
			}
		}
	}
}

// handshake runs one TLS handshake from a client with cfg to a server on
// node's files that checks a client's certificate against its ca.crt as
// auth says; the error of either side.
func handshake(t *testing.T, cfg *tls.Config, node nodeFiles, auth tls.ClientAuthType) error {
	t.Helper()
	pair, err := tls.X509KeyPair(node.cert, node.key)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(node.ca) {
		t.Fatal("ca.crt holds no certificate")
	}
	cConn, sConn := net.Pipe()
	deadline := time.Now().Add(10 * time.Second)
	_ = cConn.SetDeadline(deadline)
	_ = sConn.SetDeadline(deadline)
	srv := tls.Server(sConn, &tls.Config{Certificates: []tls.Certificate{pair}, ClientCAs: pool, ClientAuth: auth, MinVersion: tls.VersionTLS12})
	done := make(chan error, 1)
	go func() { done <- srv.HandshakeContext(context.Background()); _ = srv.Close() }()
	cl := tls.Client(cConn, cfg)
	cerr := cl.HandshakeContext(context.Background())
	if cerr == nil {
		// TLS 1.3: the server's verdict on the client's certificate
		// comes after the client's handshake; accepted, it closes.
		if _, cerr = cl.Read(make([]byte, 1)); errors.Is(cerr, io.EOF) {
			cerr = nil
		}
	}
	_ = cl.Close()
	if serr := <-done; serr != nil {
		return fmt.Errorf("server: %w", serr)
	}
	return cerr
}

var errOperatorStopped = errors.New("the operator stopped")

// failLeafWrites is the operator's client dying before it writes the
// nodes' certificate Secret.
type failLeafWrites struct{ client.Client }

func (c failLeafWrites) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	if _, ok := obj.(*corev1.Secret); ok && strings.HasSuffix(obj.GetName(), "-tls") {
		return errOperatorStopped
	}
	return c.Client.Update(ctx, obj, opts...)
}
