package controllers

import (
	"fmt"
	"net"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/resources"
	"github.com/redis-operator/redis-operator/controllers/tlscerts"
)

// TestTLSOneCertificatePerScaleOut: two new pods, one with an IP and one
// still without: passes issue nothing while the second waits for its IP;
// once it has one, one new certificate names both, and later passes keep
// it (envtest; the pods are made by the test, as a StatefulSet would).
func TestTLSOneCertificatePerScaleOut(t *testing.T) {
	ns := newNamespace(t)
	rc := newCluster(t, ns, "so", func(rc *cachev1beta1.RedisCluster) {
		rc.Spec.TLS = &cachev1beta1.TLSSpec{Enabled: true}
	})
	eventually(t, "the certificate Secret", func() error {
		return k8s.Get(testCtx, client.ObjectKey{Namespace: ns, Name: "so-tls"}, &corev1.Secret{})
	})
	reconcileUntilQuiet(t, rc)
	serial := func() string {
		s := &corev1.Secret{}
		if err := k8s.Get(testCtx, client.ObjectKey{Namespace: ns, Name: "so-tls"}, s); err != nil {
			t.Fatal(err)
		}
		l, err := tlscerts.ParseCertificate(s.Data[resources.TLSCertKey])
		if err != nil {
			t.Fatal(err)
		}
		return tlscerts.Serial(l) + " " + fmt.Sprint(l.IPAddresses)
	}
	before := serial()
	newPod := func(name string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: managedBy(rc)},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "redis", Image: "redis"}}}}
		if err := k8s.Create(testCtx, p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// As a StatefulSet does: both pods made, then their IPs one by one.
	first, waiting := newPod("so-shard-3-0"), newPod("so-shard-3-1")
	first.Status.PodIP = "10.244.9.1"
	if err := k8s.Status().Update(testCtx, first); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the reconciler's cache sees both pods", func() error {
		var pods corev1.PodList
		if err := reconciler.Client.List(testCtx, &pods, client.InNamespace(ns), managedBy(rc)); err != nil {
			return err
		}
		if len(pods.Items) != 2 || (pods.Items[0].Status.PodIP == "" && pods.Items[1].Status.PodIP == "") {
			return fmt.Errorf("%d pods", len(pods.Items))
		}
		return nil
	})
	for range 3 {
		if _, err := reconciler.Reconcile(testCtx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(rc)}); err != nil {
			t.Fatal(err)
		}
	}
	if got := serial(); got != before {
		t.Fatalf("a certificate was issued while a new pod had no IP: %s, was %s", got, before)
	}
	waiting.Status.PodIP = "10.244.9.2"
	if err := k8s.Status().Update(testCtx, waiting); err != nil {
		t.Fatal(err)
	}
	var issued string
	eventually(t, "one certificate naming both new pods", func() error {
		if _, err := reconciler.Reconcile(testCtx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(rc)}); err != nil {
			return err
		}
		s := &corev1.Secret{}
		if err := k8s.Get(testCtx, client.ObjectKey{Namespace: ns, Name: "so-tls"}, s); err != nil {
			return err
		}
		l, err := tlscerts.ParseCertificate(s.Data[resources.TLSCertKey])
		if err != nil {
			return err
		}
		if !tlscerts.Covers(l, nil, []net.IP{net.ParseIP("10.244.9.1"), net.ParseIP("10.244.9.2")}) {
			return fmt.Errorf("certificate names %v", l.IPAddresses)
		}
		issued = serial()
		return nil
	})
	reconcileUntilQuiet(t, rc)
	if got := serial(); got != issued {
		t.Errorf("the certificate was issued again: %s, was %s", got, issued)
	}
}
