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
