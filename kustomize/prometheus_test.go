package kustomize

import (
	"go/ast"
	goparser "go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// alertRule is one rule of the PrometheusRule, as the tests need it.
type alertRule struct {
	Alert  string
	Expr   string
	For    string
	Labels map[string]string
}

// prometheusRules returns the alerting rules of the prod overlay's
// PrometheusRule.
func prometheusRules(t *testing.T) []alertRule {
	t.Helper()
	pr := find(t, rendered(t, "prod"), "PrometheusRule", "redis-cluster")
	groups, _, err := unstructured.NestedSlice(pr.Object, "spec", "groups")
	if err != nil || len(groups) == 0 {
		t.Fatalf("spec.groups: %v %v", groups, err)
	}
	var rules []alertRule
	for _, g := range groups {
		rs, _, _ := unstructured.NestedSlice(g.(map[string]any), "rules")
		for _, r := range rs {
			m := r.(map[string]any)
			ar := alertRule{Labels: map[string]string{}}
			ar.Alert, _ = m["alert"].(string)
			ar.Expr, _ = m["expr"].(string)
			ar.For, _ = m["for"].(string)
			ls, _, _ := unstructured.NestedStringMap(m, "labels")
			for k, v := range ls {
				ar.Labels[k] = v
			}
			rules = append(rules, ar)
		}
	}
	return rules
}

// selectors returns every vector selector of expr.
func selectors(expr parser.Expr) []*parser.VectorSelector {
	var out []*parser.VectorSelector
	parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			out = append(out, vs)
		}
		return nil
	})
	return out
}

// TestPrometheusRulesParse parses every expression with Prometheus's own
// PromQL parser and checks the alerts the issue asks for are there, with
// their severity and duration.
func TestPrometheusRulesParse(t *testing.T) {
	rules := prometheusRules(t)
	want := map[string]struct {
		severity  string
		forAtMost time.Duration
		metric    string
	}{
		"RedisPodDown":                    {"critical", 5 * time.Minute, "redis_up"},
		"RedisClusterStateNotOK":          {"critical", 5 * time.Minute, "redis_cluster_state"},
		"RedisClusterSlotsNotCovered":     {"critical", 5 * time.Minute, "redis_cluster_slots_ok"},
		"RedisShardWithoutReplica":        {"warning", 15 * time.Minute, "redis_connected_slaves"},
		"RedisClusterNotReady":            {"warning", 15 * time.Minute, "redis_cluster_ready"},
		"RedisMemoryNearMaxmemory":        {"warning", 15 * time.Minute, "redis_memory_max_bytes"},
		"RedisCredentialSourceFailing":    {"warning", 15 * time.Minute, "redis_cluster_credentials_ready"},
		"RedisTLSCertificateExpiringSoon": {"warning", time.Hour, "redis_cluster_tls_certificate_expiry_timestamp_seconds"},
	}
	var names []string
	for _, r := range rules {
		names = append(names, r.Alert)
		expr, err := parser.ParseExpr(r.Expr)
		if err != nil {
			t.Errorf("%s: %v", r.Alert, err)
			continue
		}
		if expr.Type() != parser.ValueTypeVector {
			t.Errorf("%s: expression is a %s, an alert needs a vector", r.Alert, expr.Type())
		}
		d, err := model.ParseDuration(r.For)
		if err != nil {
			t.Errorf("%s: for %q: %v", r.Alert, r.For, err)
		}
		w, ok := want[r.Alert]
		if !ok {
			continue
		}
		if r.Labels["severity"] != w.severity {
			t.Errorf("%s: severity %q, want %q", r.Alert, r.Labels["severity"], w.severity)
		}
		if time.Duration(d) > w.forAtMost || d == 0 {
			t.Errorf("%s: for %s, want (0, %s]", r.Alert, r.For, w.forAtMost)
		}
		if !slices.ContainsFunc(selectors(expr), func(vs *parser.VectorSelector) bool { return vs.Name == w.metric }) {
			t.Errorf("%s: expression does not use %s:\n%s", r.Alert, w.metric, r.Expr)
		}
	}
	for name := range want {
		if !slices.Contains(names, name) {
			t.Errorf("no alert %s (have %v)", name, names)
		}
	}
	// The original design's alert, exactly: a pod down for 5 minutes.
	for _, r := range rules {
		if r.Alert == "RedisPodDown" && r.For != "5m" {
			t.Errorf("RedisPodDown for %q, want 5m", r.For)
		}
	}
}

// TestPrometheusRulesLabels: every label the alert expressions select on
// or group by is one the exporter's series carry: set by the Prometheus
// Operator (namespace, pod, job) or by the ServiceMonitor's relabelings
// (rediscluster, shard), or an exporter label (role).
func TestPrometheusRulesLabels(t *testing.T) {
	objs := rendered(t, "prod")
	sm := find(t, objs, "ServiceMonitor", "redis-exporter")
	endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	if len(endpoints) != 1 {
		t.Fatalf("redis-exporter ServiceMonitor has %d endpoints", len(endpoints))
	}
	ep := endpoints[0].(map[string]any)
	if ep["port"] != "metrics" {
		t.Errorf("redis-exporter scrapes port %v, want the exporter's port name metrics", ep["port"])
	}
	// Labels the series carry: target labels of the Prometheus Operator,
	// the exporter's role, the operator's gauges' name.
	known := map[string]bool{"namespace": true, "pod": true, "instance": true, "role": true, "name": true}
	relabelings, _, _ := unstructured.NestedSlice(ep, "relabelings")
	for _, r := range relabelings {
		known[r.(map[string]any)["targetLabel"].(string)] = true
	}
	for _, l := range []string{"job", "rediscluster", "shard"} {
		if !known[l] {
			t.Errorf("the ServiceMonitor sets no label %s", l)
		}
	}
	for _, r := range prometheusRules(t) {
		expr, err := parser.ParseExpr(r.Expr)
		if err != nil {
			t.Fatal(err)
		}
		var used []string
		parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
			switch n := n.(type) {
			case *parser.VectorSelector:
				for _, m := range n.LabelMatchers {
					if m.Name != model.MetricNameLabel {
						used = append(used, m.Name)
					}
				}
				// Every series an alert reads comes from one of the two
				// jobs the ServiceMonitors set.
				if jobOf(n) == "" {
					t.Errorf("%s: selector %s is not restricted to job=redis-exporter or job=redis-operator", r.Alert, n)
				}
			case *parser.AggregateExpr:
				used = append(used, n.Grouping...)
			case *parser.BinaryExpr:
				if n.VectorMatching != nil {
					used = append(used, n.VectorMatching.MatchingLabels...)
				}
			}
			return nil
		})
		parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
			// label_replace(v, dst, replacement, src, regex) adds dst.
			if c, ok := n.(*parser.Call); ok && c.Func.Name == "label_replace" {
				known[c.Args[1].(*parser.StringLiteral).Val] = true
			}
			return nil
		})
		for _, l := range used {
			if !known[l] {
				t.Errorf("%s uses label %s, which no scrape sets", r.Alert, l)
			}
		}
	}
}

// jobOf is the job a selector is restricted to: "redis-exporter",
// "redis-operator", or "" for neither.
func jobOf(vs *parser.VectorSelector) string {
	for _, m := range vs.LabelMatchers {
		if m.Name == "job" && m.Type == labels.MatchEqual && (m.Value == "redis-exporter" || m.Value == "redis-operator") {
			return m.Value
		}
	}
	return ""
}

// operatorGauges returns the metric names the controllers register: the
// string literals of controllers/*.go that are redis_cluster_* names.
func operatorGauges(t *testing.T) map[string]bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "controllers", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := goparser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if v, err := strconv.Unquote(lit.Value); err == nil && operatorMetricName.MatchString(v) {
					names[v] = true
				}
			}
			return true
		})
	}
	return names
}

var operatorMetricName = regexp.MustCompile(`^redis_cluster_[a-z_]+$`)

// TestAlertsUseOperatorGauges: every series an alert reads from the
// operator (job="redis-operator") is a gauge controllers/ registers.
func TestAlertsUseOperatorGauges(t *testing.T) {
	gauges := operatorGauges(t)
	if len(gauges) == 0 {
		t.Fatal("found no redis_cluster_* metric names in controllers/")
	}
	used := 0
	for _, r := range prometheusRules(t) {
		expr, err := parser.ParseExpr(r.Expr)
		if err != nil {
			t.Fatal(err)
		}
		for _, vs := range selectors(expr) {
			if jobOf(vs) != "redis-operator" {
				continue
			}
			used++
			if !gauges[vs.Name] {
				t.Errorf("%s reads %s, which controllers/ does not register (it has %v)", r.Alert, vs.Name, gauges)
			}
		}
	}
	if used == 0 {
		t.Error("no alert reads the operator's gauges")
	}
}
