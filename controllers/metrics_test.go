package controllers

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
)

// TestCredentialsReadyGauge: redis_cluster_credentials_ready follows the
// CredentialsReady condition (what the RedisCredentialSourceFailing alert
// reads), and forget drops the series.
func TestCredentialsReadyGauge(t *testing.T) {
	m := registerMetrics()
	rc := &cachev1beta1.RedisCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "creds"}}
	l := prometheus.Labels{"namespace": "ns", "name": "creds"}
	for _, tc := range []struct {
		status metav1.ConditionStatus
		want   float64
	}{{metav1.ConditionTrue, 1}, {metav1.ConditionFalse, 0}, {metav1.ConditionUnknown, 0}} {
		rc.Status.Conditions = []metav1.Condition{{Type: cachev1beta1.RedisClusterCredentialsReadyCondition, Status: tc.status}}
		m.observe(rc, nil)
		var got dto.Metric
		if err := m.credentials.With(l).Write(&got); err != nil {
			t.Fatal(err)
		}
		if got.GetGauge().GetValue() != tc.want {
			t.Errorf("CredentialsReady %s: gauge %v, want %v", tc.status, got.GetGauge().GetValue(), tc.want)
		}
	}
	m.forget("ns", "creds")
	if m.credentials.Delete(l) {
		t.Error("forget left the series")
	}
}

// TestTLSExpiryGauge: redis_cluster_tls_certificate_expiry_timestamp_seconds
// is status.tls.notAfter in Unix seconds while spec.tls is on (what the
// RedisTLSCertificateExpiringSoon alert reads), and has no series once TLS
// is off.
func TestTLSExpiryGauge(t *testing.T) {
	m := registerMetrics()
	notAfter := metav1.Unix(1_900_000_000, 0)
	rc := &cachev1beta1.RedisCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "tls"},
		Spec:       cachev1beta1.RedisClusterSpec{TLS: &cachev1beta1.TLSSpec{Enabled: true}},
		Status:     cachev1beta1.RedisClusterStatus{TLS: &cachev1beta1.TLSStatus{NotAfter: &notAfter}},
	}
	l := prometheus.Labels{"namespace": "ns", "name": "tls"}
	m.observe(rc, nil)
	var got dto.Metric
	if err := m.tlsNotAfter.With(l).Write(&got); err != nil {
		t.Fatal(err)
	}
	if v := got.GetGauge().GetValue(); v != 1_900_000_000 {
		t.Errorf("gauge %v, want 1900000000", v)
	}
	rc.Spec.TLS.Enabled = false
	m.observe(rc, nil)
	if m.tlsNotAfter.Delete(l) {
		t.Error("TLS off left the series")
	}
	m.forget("ns", "tls")
}
