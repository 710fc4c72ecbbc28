package argocd

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/kustomize/kyaml/openapi"
	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// Argo CD annotations (Argo CD user guide: "Sync Phases and Waves", "Sync Options").
const (
	syncWaveAnnotation    = "argocd.argoproj.io/sync-wave"
	syncOptionsAnnotation = "argocd.argoproj.io/sync-options"
	// lastAppliedLimit is the API server's bound on the total size of an
	// object's annotations (256 KiB); client-side apply, Argo CD's default,
	// stores the whole object in one of them.
	lastAppliedLimit = 256 * 1024
)

var exampleDir = filepath.Join(repoRoot, "examples", "argocd")

// example is the rendered examples/argocd: the AppProject and the
// ApplicationSet, and what the test reads from them.
type example struct {
	project *unstructured.Unstructured
	appSet  *unstructured.Unstructured
	envs    []string // the env label values the ApplicationSet selects
}

func renderExample(t *testing.T) example {
	t.Helper()
	var ex example
	for _, o := range render(t, exampleDir) {
		if o.GetNamespace() != "argocd" {
			t.Errorf("%s %s is in namespace %q, want argocd", o.GetKind(), o.GetName(), o.GetNamespace())
		}
		switch o.GroupVersionKind() {
		case schema.GroupVersionKind{Group: "argoproj.io", Version: "v1alpha1", Kind: "AppProject"}:
			ex.project = o
		case schema.GroupVersionKind{Group: "argoproj.io", Version: "v1alpha1", Kind: "ApplicationSet"}:
			ex.appSet = o
		default:
			t.Errorf("unexpected %s in examples/argocd", o.GroupVersionKind())
		}
	}
	if ex.project == nil || ex.appSet == nil {
		t.Fatal("examples/argocd renders no AppProject or no ApplicationSet")
	}
	generators, _, _ := unstructured.NestedSlice(ex.appSet.Object, "spec", "generators")
	if len(generators) != 1 {
		t.Fatalf("%d generators, want one clusters generator", len(generators))
	}
	exprs, _, _ := unstructured.NestedSlice(generators[0].(map[string]any), "clusters", "selector", "matchExpressions")
	for _, e := range exprs {
		e := e.(map[string]any)
		if e["key"] == "env" && e["operator"] == "In" {
			for _, v := range e["values"].([]any) {
				ex.envs = append(ex.envs, v.(string))
			}
		}
	}
	if len(ex.envs) == 0 {
		t.Fatal("the clusters generator selects no env label values")
	}
	return ex
}

func TestExampleApplicationSet(t *testing.T) {
	ex := renderExample(t)

	// One environment directory per selected env value, and no other.
	entries, err := os.ReadDir(filepath.Join(exampleDir, "envs"))
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, e := range entries {
		dirs = append(dirs, e.Name())
	}
	if !slices.Equal(sorted(dirs), sorted(ex.envs)) {
		t.Errorf("envs/ has %v, the ApplicationSet selects env in %v", dirs, ex.envs)
	}

	if goTemplate, _, _ := unstructured.NestedBool(ex.appSet.Object, "spec", "goTemplate"); !goTemplate {
		t.Error("spec.goTemplate is not true; the template uses Go template syntax")
	}
	spec, _, _ := unstructured.NestedMap(ex.appSet.Object, "spec", "template", "spec")
	path, _, _ := unstructured.NestedString(spec, "source", "path")
	for _, env := range ex.envs {
		p := strings.ReplaceAll(path, `{{index .metadata.labels "env"}}`, env)
		if p != "examples/argocd/envs/"+env {
			t.Errorf("source.path for env %s is %q, want examples/argocd/envs/%s", env, p, env)
		}
	}
	if name, _, _ := unstructured.NestedString(ex.appSet.Object, "spec", "template", "metadata", "name"); !strings.Contains(name, `{{index .metadata.labels "env"}}`) {
		t.Errorf("Application name %q does not vary with the environment", name)
	}

	// The Applications belong to the example's project and stay inside it.
	if spec["project"] != ex.project.GetName() {
		t.Errorf("project %v, want %s", spec["project"], ex.project.GetName())
	}
	repo, _, _ := unstructured.NestedString(spec, "source", "repoURL")
	repos, _, _ := unstructured.NestedStringSlice(ex.project.Object, "spec", "sourceRepos")
	if !slices.Contains(repos, repo) {
		t.Errorf("repoURL %s is not among the project's sourceRepos %v", repo, repos)
	}
	destNS, _, _ := unstructured.NestedString(spec, "destination", "namespace")
	if !projectAllowsNamespace(ex.project, destNS) {
		t.Errorf("destination namespace %s is not a project destination", destNS)
	}

	// Synced automatically, creating the RedisCluster's namespace, with no
	// ignoreDifferences (see TestExampleNeedsNoIgnoreDifferences).
	if _, ok, _ := unstructured.NestedMap(spec, "syncPolicy", "automated"); !ok {
		t.Error("no automated sync policy")
	}
	options, _, _ := unstructured.NestedStringSlice(spec, "syncPolicy", "syncOptions")
	if !slices.Contains(options, "CreateNamespace=true") {
		t.Errorf("syncOptions %v lack CreateNamespace=true", options)
	}
	if _, ok := spec["ignoreDifferences"]; ok {
		t.Error("the Application template has ignoreDifferences; the example needs none")
	}
}

// TestExampleEnvironmentsSyncInWaves renders every environment's source and
// checks the sync waves: CRDs in wave -1, the operator in wave 0 (no
// annotation), the RedisCluster in wave 1 with SkipDryRunOnMissingResource;
// that the project allows every object; and that nothing in the install
// mutates objects on admission.
func TestExampleEnvironmentsSyncInWaves(t *testing.T) {
	ex := renderExample(t)
	for _, env := range ex.envs {
		t.Run(env, func(t *testing.T) {
			objs := render(t, filepath.Join(exampleDir, "envs", env))
			var crds, clusters, deployments int
			var servedVersions []string
			for _, o := range objs {
				id := o.GetKind() + " " + o.GetName()
				wave, hasWave := o.GetAnnotations()[syncWaveAnnotation]
				switch o.GroupVersionKind().GroupKind() {
				case schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}:
					crds++
					if wave != "-1" {
						t.Errorf("%s: sync wave %q, want -1", id, wave)
					}
					if o.GetName() == "redisclusters.cache.redis.io" {
						for _, v := range mustSlice(t, o, "spec", "versions") {
							if v := v.(map[string]any); v["served"] == true {
								servedVersions = append(servedVersions, "cache.redis.io/"+v["name"].(string))
							}
						}
					}
					size, err := json.Marshal(o.Object)
					if err != nil {
						t.Fatal(err)
					}
					if len(size) >= lastAppliedLimit {
						t.Errorf("%s: %d bytes of JSON do not fit the last-applied annotation of client-side apply; "+
							"add ServerSideApply=true to its sync options", id, len(size))
					}
				case schema.GroupKind{Group: "cache.redis.io", Kind: "RedisCluster"}:
					clusters++
					if wave != "1" {
						t.Errorf("%s: sync wave %q, want 1", id, wave)
					}
					if !slices.Contains(strings.Split(o.GetAnnotations()[syncOptionsAnnotation], ","), "SkipDryRunOnMissingResource=true") {
						t.Errorf("%s: sync options %q lack SkipDryRunOnMissingResource=true", id, o.GetAnnotations()[syncOptionsAnnotation])
					}
				case schema.GroupKind{Group: "admissionregistration.k8s.io", Kind: "MutatingWebhookConfiguration"}:
					t.Errorf("%s: a mutating webhook would make live objects differ from Git; the example promises none", id)
				default:
					if o.GetKind() == "Deployment" {
						deployments++
					}
					if hasWave && wave != "0" {
						t.Errorf("%s: sync wave %q, want 0 (none)", id, wave)
					}
				}
				checkProjectAllows(t, ex.project, o)
			}
			if crds == 0 || clusters != 1 || deployments == 0 {
				t.Fatalf("%d CRDs, %d RedisClusters, %d Deployments; want the CRDs, one RedisCluster and the operator", crds, clusters, deployments)
			}
			for _, o := range objs {
				if o.GetKind() == "RedisCluster" && !slices.Contains(servedVersions, o.GetAPIVersion()) {
					t.Errorf("the RedisCluster's %s is not served by the CRD (served: %v)", o.GetAPIVersion(), servedVersions)
				}
			}
		})
	}
}

// checkProjectAllows fails when Argo CD would refuse o under the project:
// cluster-scoped kinds must be in clusterResourceWhitelist, namespaced
// objects must name a destination namespace (an object without one would
// land in the Application's destination namespace, silently).
func checkProjectAllows(t *testing.T, project, o *unstructured.Unstructured) {
	t.Helper()
	gvk := o.GroupVersionKind()
	id := o.GetKind() + " " + o.GetName()
	namespaced, known := openapi.IsNamespaceScoped(yaml.TypeMeta{APIVersion: o.GetAPIVersion(), Kind: o.GetKind()})
	if known && !namespaced {
		if o.GetNamespace() != "" {
			t.Errorf("%s: cluster-scoped with namespace %s", id, o.GetNamespace())
		}
		for _, w := range mustSlice(t, project, "spec", "clusterResourceWhitelist") {
			w := w.(map[string]any)
			if w["group"] == gvk.Group && w["kind"] == gvk.Kind {
				return
			}
		}
		t.Errorf("%s: group %q kind %s is not in the project's clusterResourceWhitelist", id, gvk.Group, gvk.Kind)
		return
	}
	if o.GetNamespace() == "" {
		t.Errorf("%s: namespaced object without a namespace", id)
		return
	}
	if !projectAllowsNamespace(project, o.GetNamespace()) {
		t.Errorf("%s: namespace %s is not a project destination", id, o.GetNamespace())
	}
}

func projectAllowsNamespace(project *unstructured.Unstructured, namespace string) bool {
	dests, _, _ := unstructured.NestedSlice(project.Object, "spec", "destinations")
	for _, d := range dests {
		if d.(map[string]any)["namespace"] == namespace {
			return true
		}
	}
	return false
}

func mustSlice(t *testing.T, o *unstructured.Unstructured, fields ...string) []any {
	t.Helper()
	s, ok, err := unstructured.NestedSlice(o.Object, fields...)
	if err != nil || !ok {
		t.Fatalf("%s %s: no list at %s (%v)", o.GetKind(), o.GetName(), strings.Join(fields, "."), err)
	}
	return s
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}
