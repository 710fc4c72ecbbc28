package kustomize

import (
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/redis-operator/redis-operator/controllers/acl"
	"github.com/redis-operator/redis-operator/controllers/resources"
	"github.com/redis-operator/redis-operator/test/redistest"
)

// exporterBinary is redis_exporter as Debian packages it (make deps).
const exporterBinary = "prometheus-redis-exporter"

// sample is one series of a scrape.
type sample struct {
	labels model.LabelSet
	value  float64
}

// scrapeExporter runs redis_exporter against node as the sidecar does: as
// the ACL user acl.ExporterUser (set on node here, with the operator's
// rules), with resources.ExporterSettings. It returns one scrape of its
// /metrics, parsed, by metric name, and fails when node's ACL LOG shows a
// command of the scrape refused (the rules would miss part of it) or the
// exporter reports Redis down.
func scrapeExporter(t *testing.T, node *redistest.Node) map[string][]sample {
	t.Helper()
	bin, err := exec.LookPath(exporterBinary)
	if err != nil {
		t.Fatalf("%s not found (run make deps): %v", exporterBinary, err)
	}
	const password = "exporter-test-password"
	user := acl.User{Name: acl.ExporterUser, Rules: acl.ExporterRules, Passwords: []string{password}}
	node.Do(append([]any{"ACL", "SETUSER", user.Name}, toAny(user.Args())...)...)
	node.Do("ACL", "LOG", "RESET")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	listen := l.Addr().String()
	l.Close()
	cmd := exec.Command(bin, "-redis.addr", "redis://"+node.Addr(), "-web.listen-address", listen)
	cmd.Env = append(cmd.Environ(), "REDIS_PASSWORD="+password)
	for _, e := range resources.ExporterSettings() {
		cmd.Env = append(cmd.Env, e.Name+"="+e.Value)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	var body []byte
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get("http://" + listen + "/metrics")
		if err == nil {
			body, err = io.ReadAll(resp.Body)
			resp.Body.Close()
			if err == nil && resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis_exporter on %s did not serve /metrics: %v", listen, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	if log := node.Do("ACL", "LOG").([]any); len(log) > 0 {
		t.Fatalf("the scrape as %s had commands refused (ACL LOG): %v", acl.ExporterUser, log)
	}
	samples := samplesOf(families)
	if up := samples["redis_up"]; len(up) != 1 || up[0].value != 1 {
		t.Fatalf("redis_exporter logged in as %s reports redis_up %v", acl.ExporterUser, up)
	}
	return samples
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// samplesOf returns the series of metric families by series name: a
// summary's NAME{quantile}, NAME_sum and NAME_count, a histogram's
// NAME_bucket{le}, NAME_sum and NAME_count, as PromQL names them.
func samplesOf(families map[string]*dto.MetricFamily) map[string][]sample {
	out := map[string][]sample{}
	for name, f := range families {
		for _, m := range f.GetMetric() {
			ls := model.LabelSet{}
			for _, lp := range m.GetLabel() {
				ls[model.LabelName(lp.GetName())] = model.LabelValue(lp.GetValue())
			}
			switch f.GetType() {
			case dto.MetricType_SUMMARY:
				out[name] = append(out[name], sample{labels: ls.Merge(model.LabelSet{"quantile": ""})})
				out[name+"_sum"] = append(out[name+"_sum"], sample{ls, m.GetSummary().GetSampleSum()})
				out[name+"_count"] = append(out[name+"_count"], sample{ls, float64(m.GetSummary().GetSampleCount())})
			case dto.MetricType_HISTOGRAM:
				out[name+"_bucket"] = append(out[name+"_bucket"], sample{labels: ls.Merge(model.LabelSet{"le": ""})})
				out[name+"_sum"] = append(out[name+"_sum"], sample{ls, m.GetHistogram().GetSampleSum()})
				out[name+"_count"] = append(out[name+"_count"], sample{ls, float64(m.GetHistogram().GetSampleCount())})
			case dto.MetricType_COUNTER:
				out[name] = append(out[name], sample{ls, m.GetCounter().GetValue()})
			case dto.MetricType_UNTYPED:
				out[name] = append(out[name], sample{ls, m.GetUntyped().GetValue()})
			default:
				out[name] = append(out[name], sample{ls, m.GetGauge().GetValue()})
			}
		}
	}
	return out
}

// TestAlertsUseRealExporterSeries runs the real redis_exporter against a
// real Redis Cluster (a master owning every slot and its replica) and
// checks that every series the alerts read exists with the label values
// they select (role="master"), and reads as the healthy cluster is:
// cluster_state ok, all slots ok, the master with one connected replica.
func TestAlertsUseRealExporterSeries(t *testing.T) {
	scrapes := healthyClusterScrapes(t)
	role := func(node string) model.LabelValue {

		if s := scrapes[node]["redis_instance_info"]; len(s) == 1 {
			return s[0].labels["role"]
		}
		return ""
	}
	if role("master") != "master" || role("replica") != "slave" {
		t.Errorf("redis_instance_info role: master %q, replica %q", role("master"), role("replica"))
	}

	// Labels the scrape config adds, not the exporter.
	targetLabels := map[string]bool{"job": true, "namespace": true, "pod": true, "instance": true, "rediscluster": true, "shard": true}
	for _, r := range prometheusRules(t) {
		expr, err := parser.ParseExpr(r.Expr)
		if err != nil {
			t.Fatal(err)
		}
		for _, vs := range selectors(expr) {
			if vs.Name == "up" || jobOf(vs) != "redis-exporter" {
				continue // Prometheus's own per-target series, or the operator's.
			}
			series, ok := scrapes["master"][vs.Name]
			if !ok {
				t.Errorf("%s reads %s, which redis_exporter does not export", r.Alert, vs.Name)
				continue
			}
			for _, m := range vs.LabelMatchers {
				if m.Name == model.MetricNameLabel || targetLabels[m.Name] {
					continue
				}
				found := false
				for _, s := range series {
					if m.Matches(string(s.labels[model.LabelName(m.Name)])) {
						found = true
					}
				}
				if !found {
					t.Errorf("%s selects %s, which no %s series of the master has", r.Alert, m, vs.Name)
				}
			}
		}
	}

	// The healthy values, in the exporter's encoding, that the alert
	// thresholds compare against.
	want := []struct {
		node, metric string
		value        float64
	}{
		{"master", "redis_up", 1},
		{"replica", "redis_up", 1},
		{"master", "redis_cluster_state", 1},
		{"replica", "redis_cluster_state", 1},
		{"master", "redis_cluster_slots_ok", 16384},
		{"replica", "redis_cluster_slots_ok", 16384},
		{"master", "redis_connected_slaves", 1},
		{"replica", "redis_connected_slaves", 0},
	}
	for _, w := range want {
		got := scrapes[w.node][w.metric]
		if len(got) != 1 || got[0].value != w.value {
			t.Errorf("%s: %s = %v, want one series of value %v", w.node, w.metric, got, w.value)
		}
	}
}

// healthyClusterScrapes starts a real Redis Cluster (a master owning every
// slot, holding one key, and its replica), waits until replication is up and
// cluster_state is ok, and returns one redis_exporter scrape of each node by
// "master" and "replica".
func healthyClusterScrapes(t *testing.T) map[string]map[string][]sample {
	t.Helper()
	nodes := redistest.Start(t, 2, redistest.Options{})
	master, replica := nodes[0], nodes[1]
	master.Do("CLUSTER", "ADDSLOTSRANGE", 0, 16383)
	replica.Do("CLUSTER", "MEET", "127.0.0.1", master.Port())
	masterID := master.Do("CLUSTER", "MYID").(string)
	waitFor(t, "the replica to learn the master", func() bool {
		return strings.Contains(replica.Do("CLUSTER", "NODES").(string), masterID)
	})
	replica.Do("CLUSTER", "REPLICATE", masterID)
	waitFor(t, "replication and cluster_state ok", func() bool {
		return strings.Contains(master.Do("INFO", "replication").(string), "connected_slaves:1") &&
			strings.Contains(master.Do("CLUSTER", "INFO").(string), "cluster_state:ok")
	})

	master.Do("SET", "key", "value")
	return map[string]map[string][]sample{
		"master":  scrapeExporter(t, master),
		"replica": scrapeExporter(t, replica),
	}
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
