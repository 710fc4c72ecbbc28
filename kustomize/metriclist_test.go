package kustomize

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/redis-operator/redis-operator/controllers/acl"
)

// exporterMetricsFile lists the series redis_exporter exposes, one per line:
// NAME and its exporter labels, comma-separated (none: "-"). Lines starting
// with # say how it was made. TestExporterMetricsList checks it against a
// real exporter and rewrites it with UPDATE_EXPORTER_METRICS=1.
var exporterMetricsFile = filepath.Join("testdata", "redis_exporter_metrics.txt")

// metricLabels is, for each series name, the label names it carries.
type metricLabels map[string]map[string]bool

// readExporterMetrics reads exporterMetricsFile.
func readExporterMetrics(t *testing.T) metricLabels {
	t.Helper()
	raw, err := os.ReadFile(exporterMetricsFile)
	if err != nil {
		t.Fatal(err)
	}
	out := metricLabels{}
	for _, line := range strings.Split(string(raw), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, labels, ok := strings.Cut(line, " ")
		if !ok {
			t.Fatalf("%s: malformed line %q", exporterMetricsFile, line)
		}
		out[name] = map[string]bool{}
		if labels != "-" {
			for _, l := range strings.Split(labels, ",") {
				out[name][l] = true
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s lists no metric", exporterMetricsFile)
	}
	return out
}

// labelsOf returns the label names of each series name of scrapes.
func labelsOf(scrapes ...map[string][]sample) metricLabels {
	out := metricLabels{}
	for _, sc := range scrapes {
		for name, series := range sc {
			if out[name] == nil {
				out[name] = map[string]bool{}
			}
			for _, s := range series {
				for l := range s.labels {
					out[name][string(l)] = true
				}
			}
		}
	}
	return out
}

// TestExporterMetricsList: every series and label of
// testdata/redis_exporter_metrics.txt is exposed by the real redis_exporter
// (Debian's prometheus-redis-exporter) scraping a real Redis Cluster's master
// and replica. With UPDATE_EXPORTER_METRICS=1 it writes the file from that
// scrape instead.
func TestExporterMetricsList(t *testing.T) {
	scrapes := healthyClusterScrapes(t)
	live := labelsOf(scrapes["master"], scrapes["replica"])
	for name := range live {
		if strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_") || strings.HasPrefix(name, "promhttp_") {
			delete(live, name)
		}
	}
	if os.Getenv("UPDATE_EXPORTER_METRICS") == "1" {
		version := "unknown"
		if bi := scrapes["master"]["redis_exporter_build_info"]; len(bi) == 1 {
			version = string(bi[0].labels["version"])
		}
		redisVersion := "unknown"
		if ii := scrapes["master"]["redis_instance_info"]; len(ii) == 1 {
			redisVersion = string(ii[0].labels["redis_version"])
		}
		var b strings.Builder
		fmt.Fprintf(&b, "# The series redis_exporter exposes: NAME LABEL,LABEL,... (\"-\": no label).\n")
		fmt.Fprintf(&b, "# Made by `UPDATE_EXPORTER_METRICS=1 go test -run TestExporterMetricsList ./kustomize/`:\n")
		fmt.Fprintf(&b, "# Debian's prometheus-redis-exporter %s scraping a redis-server %s master that owns\n", version, redisVersion)
		fmt.Fprintf(&b, "# all 16384 slots and holds one key, and its replica, logged in as the sidecar does\n")
		fmt.Fprintf(&b, "# (ACL user %s, no CONFIG GET) (the union of both scrapes,\n", acl.ExporterUser)
		fmt.Fprintf(&b, "# without go_*, process_* and promhttp_*). The sidecar's default image is a newer\n")
		fmt.Fprintf(&b, "# redis_exporter; the dashboard and alerts use only series listed here.\n")
		for _, name := range slices.Sorted(func(yield func(string) bool) {
			for n := range live {
				if !yield(n) {
					return
				}
			}
		}) {
			labels := make([]string, 0, len(live[name]))
			for l := range live[name] {
				labels = append(labels, l)
			}
			sort.Strings(labels)
			if len(labels) == 0 {
				labels = []string{"-"}
			}
			fmt.Fprintf(&b, "%s %s\n", name, strings.Join(labels, ","))
		}
		if err := os.WriteFile(exporterMetricsFile, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s: %d series", exporterMetricsFile, len(live))
		return
	}
	for name, labels := range readExporterMetrics(t) {
		got, ok := live[name]
		if !ok {
			t.Errorf("%s lists %s, which redis_exporter did not expose", exporterMetricsFile, name)
			continue
		}
		for l := range labels {
			if !got[l] {
				t.Errorf("%s lists %s with label %s, which redis_exporter did not set", exporterMetricsFile, name, l)
			}
		}
	}
}

// operatorMetrics returns the series the operator exposes on its metrics
// endpoint, with their labels: the redis_cluster_* gauges of controllers/
// (labels namespace and name; found in the source, since a gauge has no
// series before its first cluster) and what controller-runtime's
// metrics.Registry really gathers once a controller named rediscluster (the
// RedisCluster controller's name) has started and reconciled once.
func operatorMetrics(t *testing.T) metricLabels {
	t.Helper()
	out := metricLabels{}
	for name := range operatorGauges(t) {
		out[name] = map[string]bool{"namespace": true, "name": true}
	}
	c, err := controller.NewUnmanaged("rediscluster", controller.Options{
		Reconciler: reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
			return reconcile.Result{}, nil
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	// One event, so that the reconcile duration histogram has a series.
	events := make(chan event.GenericEvent, 1)
	events <- event.GenericEvent{Object: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "x"}}}
	if err := c.Watch(source.Channel(events, &handler.EnqueueRequestForObject{})); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		families, err := metrics.Registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		byName := map[string]*dto.MetricFamily{}
		for _, f := range families {
			byName[f.GetName()] = f
		}
		if _, ok := byName["controller_runtime_reconcile_time_seconds"]; ok {
			for name, labels := range labelsOf(samplesOf(byName)) {
				out[name] = labels
			}
			return out
		}
		if time.Now().After(deadline) {
			t.Fatal("controller-runtime gathered no controller_runtime_reconcile_time_seconds after a reconcile")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// targetLabels are the labels Prometheus and the ServiceMonitors add to
// every scraped series (the Prometheus Operator's target labels and our
// relabelings), not the exporter or the operator.
var targetLabels = map[model.LabelName]bool{
	"job": true, "namespace": true, "pod": true, "instance": true, "service": true,
	"endpoint": true, "container": true, "rediscluster": true, "shard": true,
}
