package controllers

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/status"
)

// clusterMetrics are the redis_cluster_* gauges, one series per
// RedisCluster (labels namespace and name), registered in
// controller-runtime's metrics.Registry beside its reconcile metrics and
// served on the manager's metrics endpoint. They show the last
// observation; a cluster whose nodes were not observed in a pass keeps
// its previous values except readiness and phase.
type clusterMetrics struct {
	stateOK       *prometheus.GaugeVec
	slotsAssigned *prometheus.GaugeVec
	knownNodes    *prometheus.GaugeVec
	migrating     *prometheus.GaugeVec
	shards        *prometheus.GaugeVec
	readyPods     *prometheus.GaugeVec
	ready         *prometheus.GaugeVec
	credentials   *prometheus.GaugeVec
	tlsNotAfter   *prometheus.GaugeVec
	// redisCommands counts the commands the topology engine sent to Redis nodes, by name
	// (topology.Options.OnCommand), over all clusters: what a resync costs the nodes.
	redisCommands *prometheus.CounterVec
}

var (
	metricsOnce sync.Once
	theMetrics  *clusterMetrics
)

// registerMetrics creates and registers the gauges once per process.
func registerMetrics() *clusterMetrics {
	metricsOnce.Do(func() {
		labels := []string{"namespace", "name"}
		gauge := func(name, help string) *prometheus.GaugeVec {
			return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
		}
		theMetrics = &clusterMetrics{
			stateOK:       gauge("redis_cluster_state_ok", "1 when every reachable Redis node reports cluster_state:ok (CLUSTER INFO), else 0."),
			slotsAssigned: gauge("redis_cluster_slots_assigned", "Hash slots (of 16384) owned by a reachable master."),
			knownNodes:    gauge("redis_cluster_known_nodes", "Nodes in the cluster as a Redis node knows it (cluster_known_nodes of CLUSTER INFO, highest over nodes)."),
			migrating:     gauge("redis_cluster_migrations_in_progress", "1 while slots are being migrated or are open (importing/migrating), else 0."),
			shards:        gauge("redis_cluster_shards", "Masters that own slots."),
			readyPods:     gauge("redis_cluster_ready_pods", "Redis pods that are ready, masters and replicas."),
			ready:         gauge("redis_cluster_ready", "1 when the RedisCluster's Ready condition is True, else 0."),
			credentials:   gauge("redis_cluster_credentials_ready", "1 when the RedisCluster's CredentialsReady condition is True (its password source was read), else 0."),
			tlsNotAfter: gauge("redis_cluster_tls_certificate_expiry_timestamp_seconds",
				"When the nodes' TLS certificate expires (status.tls.notAfter), in seconds since the Unix epoch; no series without spec.tls."),
			redisCommands: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "redis_operator_redis_commands_total",
				Help: "Commands the operator sent, or tried to send, to Redis nodes, by name as INFO commandstats spells it (cluster|nodes), connection set-up (hello, auth) included."},
				[]string{"command"}),
		}
		metrics.Registry.MustRegister(theMetrics.redisCommands, theMetrics.stateOK, theMetrics.slotsAssigned, theMetrics.knownNodes,
			theMetrics.migrating, theMetrics.shards, theMetrics.readyPods, theMetrics.ready, theMetrics.credentials,
			theMetrics.tlsNotAfter)
	})
	return theMetrics
}

// countCommand is the engine's OnCommand: one more of command name.
func (m *clusterMetrics) countCommand(name string) {
	m.redisCommands.WithLabelValues(name).Inc()
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// observe records rc's status and, when Redis was observed, its topology.
func (m *clusterMetrics) observe(rc *cachev1beta1.RedisCluster, t *status.Topology) {
	if m == nil {
		return
	}
	l := prometheus.Labels{"namespace": rc.Namespace, "name": rc.Name}
	m.readyPods.With(l).Set(float64(rc.Status.ReadyReplicas))
	m.ready.With(l).Set(b2f(rc.Status.Phase == cachev1beta1.PhaseReady))
	m.credentials.With(l).Set(b2f(meta.IsStatusConditionTrue(rc.Status.Conditions, cachev1beta1.RedisClusterCredentialsReadyCondition)))
	if tls := rc.Status.TLS; rc.Spec.TLSEnabled() && tls != nil && tls.NotAfter != nil {
		m.tlsNotAfter.With(l).Set(float64(tls.NotAfter.Unix()))
	} else {
		m.tlsNotAfter.Delete(l)
	}
	if t == nil {
		return
	}
	m.stateOK.With(l).Set(b2f(t.StateOK))
	m.slotsAssigned.With(l).Set(float64(t.SlotsAssigned))
	m.knownNodes.With(l).Set(float64(t.KnownNodes))
	m.migrating.With(l).Set(b2f(t.OpenSlots || status.MigrationUnfinished(t.Migration)))
	m.shards.With(l).Set(float64(t.CurrentShards))
}

// forget drops the series of a deleted RedisCluster.
func (m *clusterMetrics) forget(namespace, name string) {
	if m == nil {
		return
	}
	l := prometheus.Labels{"namespace": namespace, "name": name}
	for _, g := range []*prometheus.GaugeVec{m.stateOK, m.slotsAssigned, m.knownNodes, m.migrating, m.shards, m.readyPods, m.ready, m.credentials, m.tlsNotAfter} {
		g.Delete(l)
	}
}
