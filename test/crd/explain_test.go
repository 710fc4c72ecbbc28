package crd

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"
)

// defaulted is one schema property with a default: the kubectl explain path
// of the object holding it (such as "redisclusters.spec.storage"), its name
// and the sentence its description must carry ("Defaults to 1Gi.").
type defaulted struct {
	parent, field, sentence string
}

// coreTypeFields are the RedisCluster fields holding lists of whole
// Kubernetes core types, whose descriptions are Kubernetes' own.
var coreTypeFields = map[string]bool{
	"redisclusters.spec.pod.sidecars":       true,
	"redisclusters.spec.pod.initContainers": true,
	"redisclusters.spec.pod.volumes":        true,
}

// defaultedFields walks a version's schema and returns every property that
// has a default, with the sentence documenting it.
func defaultedFields(t *testing.T, path string, props map[string]apiextensionsv1.JSONSchemaProps) []defaulted {
	t.Helper()
	var out []defaulted
	for name, p := range props {
		// Whole Kubernetes types (a Container, a Volume) document their
		// defaults in Kubernetes' words ("Default is xfs").
		if coreTypeFields[path+"."+name] {
			continue
		}
		// An empty string default comes only from Kubernetes' own types
		// (LocalObjectReference.name), whose descriptions are not ours.
		if p.Default != nil && string(p.Default.Raw) != `""` {
			var v any
			if err := json.Unmarshal(p.Default.Raw, &v); err != nil {
				t.Fatalf("%s.%s: default %s: %v", path, name, p.Default.Raw, err)
			}
			text := string(p.Default.Raw)
			if s, ok := v.(string); ok {
				text = s
			}
			out = append(out, defaulted{parent: path, field: name, sentence: "Defaults to " + text})
		}
		out = append(out, defaultedFields(t, path+"."+name, p.Properties)...)
		if p.Items != nil && p.Items.Schema != nil {
			out = append(out, defaultedFields(t, path+"."+name, p.Items.Schema.Properties)...)
		}
	}
	return out
}

// explainFields runs kubectl explain on one path and returns each field's
// description as one line (kubectl wraps long descriptions).
func explainFields(t *testing.T, kubeconfig, apiVersion, path string) map[string]string {
	t.Helper()
	// The API server publishes a new CRD's OpenAPI a few seconds after
	// creating it; until then kubectl finds no such resource.
	var out []byte
	deadline := time.Now().Add(time.Minute)
	for {
		cmd := exec.Command("kubectl", "--kubeconfig", kubeconfig, "explain", path, "--api-version", apiVersion)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		var err error
		if out, err = cmd.Output(); err == nil {
			break
		}
		if !strings.Contains(stderr.String(), "couldn't find resource") || time.Now().After(deadline) {
			t.Fatalf("kubectl explain %s: %v\n%s", path, err, stderr.String())
		}
		time.Sleep(time.Second)
	}
	// FIELDS:
	//   name	<type>
	//   enum: A, B        (enum fields only)
	//     description, indented by four spaces
	fields := map[string]string{}
	var current string
	inFields := false
	for _, line := range strings.Split(string(out), "\n") {
		switch {
		case strings.HasPrefix(line, "FIELDS:"):
			inFields = true
		case !inFields:
		case strings.HasPrefix(line, "    "):
			if current != "" {
				fields[current] += " " + strings.TrimSpace(line)
			}
		case strings.HasPrefix(line, "  enum: "):
			// An enum's values, between the field's line and its description.
		case strings.HasPrefix(line, "  ") && strings.TrimSpace(line) != "":
			current = strings.Fields(line)[0]
			fields[current] = ""
		}
	}
	return fields
}

// TestExplainShowsDefaults: every field with a schema default says so in
// `kubectl explain`, which prints descriptions and never the schema's
// default itself. Run against the real API server's published OpenAPI with
// bin/kubectl, or the kubectl on PATH.
func TestExplainShowsDefaults(t *testing.T) {
	if _, err := exec.LookPath("kubectl"); err != nil {
		t.Fatalf("kubectl is needed (make tools builds bin/kubectl): %v", err)
	}
	raw, err := os.ReadFile(filepath.Join("..", "..", "kustomize", "base", "crd", "bases", "cache.redis.io_redisclusters.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(raw, &crd); err != nil {
		t.Fatal(err)
	}
	user, err := testEnv.AddUser(envtest.User{Name: "explain", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, v := range crd.Spec.Versions {
		want := defaultedFields(t, crd.Spec.Names.Plural, v.Schema.OpenAPIV3Schema.Properties)
		sort.Slice(want, func(i, j int) bool { return want[i].parent+want[i].field < want[j].parent+want[j].field })
		explained := map[string]map[string]string{}
		for _, d := range want {
			if explained[d.parent] == nil {
				explained[d.parent] = explainFields(t, kubeconfig, crd.Spec.Group+"/"+v.Name, d.parent)
			}
			desc, ok := explained[d.parent][d.field]
			if !ok {
				t.Errorf("%s: kubectl explain %s lists no field %s", v.Name, d.parent, d.field)
				continue
			}
			if !strings.Contains(desc, d.sentence) {
				t.Errorf("%s: kubectl explain %s.%s does not say %q:\n%s", v.Name, d.parent, d.field, d.sentence, desc)
			}
			checked++
		}
	}
	if checked == 0 {
		t.Fatal("no defaulted field found in the CRD")
	}
	t.Logf("%d defaulted fields documented in kubectl explain", checked)
}
