package controllers

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/resources"
	"github.com/redis-operator/redis-operator/controllers/tlscerts"
)

// TestTLSOperatorCA: spec.tls without a Secret makes the cluster's CA and
// the nodes' certificate, both owned by the RedisCluster, the certificate
// chaining to the CA and naming the Services and the pods under the
// headless Service; the pods mount it and status.tls shows its serial and
// expiry. A settled cluster writes nothing more. A deleted certificate
// Secret is issued again from the same CA with a new serial.
func TestTLSOperatorCA(t *testing.T) {
	ns := newNamespace(t)
	rc := newCluster(t, ns, "sec", func(rc *cachev1beta1.RedisCluster) {
		rc.Spec.TLS = &cachev1beta1.TLSSpec{Enabled: true}
	})
	var leafSecret, caSecret corev1.Secret
	var got *cachev1beta1.RedisCluster
	eventually(t, "the TLS Secrets and status.tls", func() error {
		for name, s := range map[string]*corev1.Secret{"sec-tls": &leafSecret, "sec-tls-ca": &caSecret} {
			if err := k8s.Get(testCtx, client.ObjectKey{Namespace: ns, Name: name}, s); err != nil {
				return err
			}
		}
		got = getCluster(t, rc)
		if got.Status.TLS == nil || got.Status.TLS.Serial == "" {
			return fmt.Errorf("status.tls %+v", got.Status.TLS)
		}
		return nil
	})
	for _, s := range []*corev1.Secret{&leafSecret, &caSecret} {
		if !metav1.IsControlledBy(s, got) {
			t.Errorf("Secret %s is not controlled by the RedisCluster", s.Name)
		}
	}
	ca, cert, key := leafSecret.Data["ca.crt"], leafSecret.Data["tls.crt"], leafSecret.Data["tls.key"]
	if string(ca) != string(caSecret.Data["ca.crt"]) {
		t.Error("ca.crt of sec-tls is not the CA of sec-tls-ca")
	}
	if err := tlscerts.Verify(ca, cert, key, got.CreationTimestamp.Time); err != nil {
		t.Fatal(err)
	}
	leaf, _ := tlscerts.ParseCertificate(cert)
	for _, name := range []string{"sec", "sec." + ns + ".svc", "sec-headless." + ns + ".svc.cluster.local", "*.sec-headless." + ns + ".svc"} {
		if !slices.Contains(leaf.DNSNames, name) {
			t.Errorf("certificate does not name %s: %v", name, leaf.DNSNames)
		}
	}
	st := got.Status.TLS
	if st.Serial != tlscerts.Serial(leaf) || st.SecretName != "sec-tls" || st.NotAfter == nil || !st.NotAfter.Time.Equal(leaf.NotAfter) {
		t.Errorf("status.tls %+v does not describe the certificate (serial %s, notAfter %s)", st, tlscerts.Serial(leaf), leaf.NotAfter)
	}
	sts := &appsv1.StatefulSet{}
	eventually(t, "the StatefulSet", func() error {
		return k8s.Get(testCtx, client.ObjectKey{Namespace: ns, Name: "sec-shard-0"}, sts)
	})
	if !slices.ContainsFunc(sts.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool {
		return v.Secret != nil && v.Secret.SecretName == "sec-tls"
	}) {
		t.Errorf("the pods do not mount sec-tls: %+v", sts.Spec.Template.Spec.Volumes)
	}
	reconcileUntilQuiet(t, rc)

	if err := k8s.Delete(testCtx, &leafSecret); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the certificate issued again", func() error {
		s := &corev1.Secret{}
		if err := k8s.Get(testCtx, client.ObjectKey{Namespace: ns, Name: "sec-tls"}, s); err != nil {
			return err
		}
		if err := tlscerts.Verify(ca, s.Data["tls.crt"], s.Data["tls.key"], got.CreationTimestamp.Time); err != nil {
			return err
		}
		l, _ := tlscerts.ParseCertificate(s.Data["tls.crt"])
		if tlscerts.Serial(l) == st.Serial {
			return fmt.Errorf("same serial %s", st.Serial)
		}
		return nil
	})
}

// TestTLSUserSecretBroken: spec.tls.secretName naming a missing Secret, or
// one whose certificate is not signed by its ca.crt, fails the pass:
// Degraded names the Secret and what is wrong.
func TestTLSUserSecretBroken(t *testing.T) {
	ns := newNamespace(t)
	rc := newCluster(t, ns, "usr", func(rc *cachev1beta1.RedisCluster) {
		rc.Spec.TLS = &cachev1beta1.TLSSpec{Enabled: true, SecretName: "mine"}
	})
	degradedMessage := func(want string) {
		t.Helper()
		eventually(t, "Degraded naming "+want, func() error {
			_, _ = reconciler.Reconcile(testCtx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(rc)})
			c := meta.FindStatusCondition(getCluster(t, rc).Status.Conditions, cachev1beta1.RedisClusterDegradedCondition)
			if c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, want) {
				return fmt.Errorf("Degraded %+v", c)
			}
			return nil
		})
	}
	degradedMessage("TLS Secret mine")

	caA, keyA, _ := tlscerts.NewCA("a", getCluster(t, rc).CreationTimestamp.Time, tlscerts.DefaultCAValidity)
	caB, _, _ := tlscerts.NewCA("b", getCluster(t, rc).CreationTimestamp.Time, tlscerts.DefaultCAValidity)
	cert, key, err := tlscerts.Issue(caA, keyA, []string{"x"}, nil, getCluster(t, rc).CreationTimestamp.Time)
	if err != nil {
		t.Fatal(err)
	}
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mine"},
		Data: map[string][]byte{resources.TLSCertKey: cert, resources.TLSKeyKey: key, resources.TLSCAKey: caB}}
	if err := k8s.Create(testCtx, s); err != nil {
		t.Fatal(err)
	}
	degradedMessage("does not chain to ca.crt")
}
