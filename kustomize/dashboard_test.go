package kustomize

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/promql/parser"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// query is one PromQL expression of the dashboard or the alerts, with where
// it comes from.
type query struct {
	where, expr string
}

// grafanaVariable matches Grafana's $name and ${name} variables.
var grafanaVariable = regexp.MustCompile(`\$\{?(__rate_interval|__interval|namespace|cluster)\}?`)

// labelValues matches a Grafana query variable's label_values(EXPR, LABEL).
var labelValues = regexp.MustCompile(`^label_values\((.*),\s*([a-zA-Z_][a-zA-Z0-9_]*)\)$`)

// dashboardQueries returns every query of the dashboard in the prod
// overlay's ConfigMap (panel targets, also inside rows, and the template
// variables' label_values expressions) with Grafana's variables replaced
// by what Grafana sends: a range for $__rate_interval, the regex ".*" of
// "All" for the others.
func dashboardQueries(t *testing.T) []query {
	t.Helper()
	cm := find(t, rendered(t, "prod"), "ConfigMap", "redis-operator-grafana-dashboard")
	if cm.GetLabels()["grafana_dashboard"] != "1" {
		t.Errorf("dashboard ConfigMap labels %v, want grafana_dashboard: \"1\" (the Grafana sidecar's default)", cm.GetLabels())
	}
	raw, _, _ := unstructured.NestedString(cm.Object, "data", "redis-cluster.json")
	onDisk, err := os.ReadFile(filepath.Join("components", "prometheus", "dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	if raw != string(onDisk) {
		t.Fatal("the rendered dashboard ConfigMap does not hold components/prometheus/dashboard.json")
	}
	var dash struct {
		Title      string `json:"title"`
		UID        string `json:"uid"`
		Panels     []dashboardPanel
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Type  string `json:"type"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal([]byte(raw), &dash); err != nil {
		t.Fatalf("dashboard.json: %v", err)
	}
	if dash.Title == "" || dash.UID == "" {
		t.Errorf("dashboard has title %q uid %q; Grafana needs both to keep it across reloads", dash.Title, dash.UID)
	}
	subst := func(s string) string {
		return grafanaVariable.ReplaceAllStringFunc(s, func(v string) string {
			if strings.Contains(v, "interval") {
				return "5m"
			}
			return ".*"
		})
	}
	var out []query
	var walk func([]dashboardPanel)
	walk = func(ps []dashboardPanel) {
		for _, p := range ps {
			for _, tg := range p.Targets {
				out = append(out, query{fmt.Sprintf("panel %q target %s", p.Title, tg.RefID), subst(tg.Expr)})
			}
			walk(p.Panels)
		}
	}
	walk(dash.Panels)
	for _, v := range dash.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, _ := v.Query.(map[string]any)
		text, _ := q["query"].(string)
		m := labelValues.FindStringSubmatch(text)
		if m == nil {
			t.Errorf("variable %s: query %q is not label_values(EXPR, LABEL)", v.Name, text)
			continue
		}
		out = append(out, query{fmt.Sprintf("variable %s (label %s)", v.Name, m[2]), subst(m[1])})
	}
	return out
}

// dashboardPanel is what the tests read of a Grafana panel.
type dashboardPanel struct {
	Title   string `json:"title"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
	Panels []dashboardPanel `json:"panels"`
}

// TestDashboardCoversTheIssue: the dashboard has a panel for each thing the
// issue asks for, told by the series its queries read.
func TestDashboardCoversTheIssue(t *testing.T) {
	read := map[string]bool{}
	for _, q := range dashboardQueries(t) {
		expr, err := parser.ParseExpr(q.expr)
		if err != nil {
			continue // TestQueriesNameExposedMetrics reports it.
		}
		for _, vs := range selectors(expr) {
			read[vs.Name] = true
		}
	}
	for what, metric := range map[string]string{
		"cluster state":             "redis_cluster_state_ok",
		"slots":                     "redis_cluster_slots_assigned",
		"memory":                    "redis_memory_used_bytes",
		"ops/s":                     "redis_commands_processed_total",
		"replication lag":           "redis_connected_slave_offset_bytes",
		"migrations":                "redis_cluster_migrations_in_progress",
		"operator reconcile rate":   "controller_runtime_reconcile_total",
		"operator reconcile errors": "controller_runtime_reconcile_errors_total",
	} {
		if !read[metric] {
			t.Errorf("no dashboard query shows %s (%s)", what, metric)
		}
	}
}

// TestQueriesNameExposedMetrics: every query of the dashboard and the
// alerts parses with Prometheus's own PromQL parser, selects one of the two
// jobs the ServiceMonitors set, and names only series (and labels) that job
// really exposes: the operator's (operatorMetrics) or redis_exporter's
// (testdata/redis_exporter_metrics.txt, checked against the real exporter
// by TestExporterMetricsList). Prometheus's own up is allowed for the
// exporter's job.
func TestQueriesNameExposedMetrics(t *testing.T) {
	exposed := map[string]metricLabels{
		"redis-exporter": readExporterMetrics(t),
		"redis-operator": operatorMetrics(t),
	}
	exposed["redis-exporter"]["up"] = map[string]bool{}
	queries := dashboardQueries(t)
	for _, r := range prometheusRules(t) {
		queries = append(queries, query{"alert " + r.Alert, r.Expr})
	}
	for _, q := range queries {
		expr, err := parser.ParseExpr(q.expr)
		if err != nil {
			t.Errorf("%s: %v\n%s", q.where, err, q.expr)
			continue
		}
		if ty := expr.Type(); ty != parser.ValueTypeVector && ty != parser.ValueTypeScalar {
			t.Errorf("%s: a %s, Grafana and alerts need an instant vector", q.where, ty)
		}
		for _, vs := range selectors(expr) {
			job := jobOf(vs)
			if job == "" {
				t.Errorf("%s: selector %s is not restricted to job=redis-exporter or job=redis-operator", q.where, vs)
				continue
			}
			labels, ok := exposed[job][vs.Name]
			if !ok {
				t.Errorf("%s: %s is not a series job %s exposes", q.where, vs.Name, job)
				continue
			}
			for _, m := range vs.LabelMatchers {
				if m.Name == model.MetricNameLabel || targetLabels[model.LabelName(m.Name)] || labels[m.Name] {
					continue
				}
				t.Errorf("%s: %s selects label %s, which %s does not carry", q.where, vs.Name, m.Name, job)
			}
		}
	}
	t.Logf("%d queries checked", len(queries))
}
