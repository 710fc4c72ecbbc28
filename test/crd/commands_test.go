package crd

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
)

var (
	// exampleCommand is a kubectl line in a YAML example's header comment
	// ("#   kubectl get redisclusters   # a remark").
	exampleCommand = regexp.MustCompile(`(?m)^#\s+(kubectl [^#\n]*)`)
	// proseCommand is a kubectl command in Markdown inline code.
	proseCommand = regexp.MustCompile("`(kubectl [^`]+)`")
)

// needsOtherSoftware are documented commands that need more than the
// operator's CRD: Argo CD's CRDs, the Secrets Store CSI driver's.
var needsOtherSoftware = map[string]string{
	"kubectl apply -k examples/argocd": "Argo CD's AppProject and ApplicationSet CRDs",
	"kubectl apply -f examples/vault-csi/secretproviderclass.yaml -f examples/vault-csi/sync.yaml": "the Secrets Store CSI driver's SecretProviderClass CRD",
}

// commandsFrom is where a page's commands start: the troubleshooting
// guide's commands before its repair knobs need a running operator and its
// pods (logs, exec, leases), which this API server without them cannot
// serve; the repair knobs' come from the README.
var commandsFrom = map[string]string{
	filepath.Join("docs", "troubleshooting.md"): "## Repair knobs",
}

// documentedCommands returns the kubectl commands of examples/ (YAML header
// comments and READMEs), of the top-level README and of the pages of docs/,
// with the placeholders filled in (NAME: the example cluster, <ns>:
// default). Mentions of a bare verb in prose ("`kubectl apply`") are not
// commands.
func documentedCommands(t *testing.T) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir("examples", func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && (strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".md")) {
			files = append(files, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	pages, err := filepath.Glob(filepath.Join("docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(append(files, "README.md"), pages...)
	seen := map[string]bool{}
	var out []string
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if from, ok := commandsFrom[f]; ok {
			i := strings.Index(string(raw), from)
			if i < 0 {
				t.Fatalf("%s has no %q", f, from)
			}
			raw = raw[i:]
		}
		re := proseCommand
		if strings.HasSuffix(f, ".yaml") {
			re = exampleCommand
		}
		for _, m := range re.FindAllStringSubmatch(string(raw), -1) {
			cmd := strings.TrimSpace(m[1])
			if len(strings.Fields(cmd)) < 3 || seen[cmd] {
				continue
			}
			seen[cmd] = true
			cmd = strings.ReplaceAll(strings.ReplaceAll(cmd, "<ns>", "default"), " NAME", " example")
			out = append(out, cmd)
		}
	}
	return out
}

// TestDocumentedKubectlCommands runs every kubectl command of examples/, the
// README and docs/, as written, with bin/kubectl (or the kubectl on PATH) against a real API
// server holding the CRD (no operator: what the commands themselves do).
// Applies go first, as a reader runs them; the Vault example's README
// assumes its rediscluster.yaml applied. Each must succeed without a
// warning, a get must find something, and the scale must reach spec.shards.
func TestDocumentedKubectlCommands(t *testing.T) {
	user, err := testEnv.AddUser(envtest.User{Name: "docs", Groups: []string{"system:masters"}}, nil)
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
	t.Chdir(filepath.Join("..", ".."))
	run := func(cmd string) (string, string, error) {
		c := exec.Command("sh", "-c", cmd)
		c.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
		var stdout, stderr strings.Builder
		c.Stdout, c.Stderr = &stdout, &stderr
		err := c.Run()
		return stdout.String(), stderr.String(), err
	}
	cmds := documentedCommands(t)
	var applies, others []string
	for _, c := range cmds {
		if why, ok := needsOtherSoftware[c]; ok {
			t.Logf("not run (needs %s): %s", why, c)
			continue
		}
		if strings.HasPrefix(c, "kubectl apply ") {
			applies = append(applies, c)
		} else {
			others = append(others, c)
		}
	}
	if _, stderr, err := run("kubectl apply -f examples/vault/rediscluster.yaml"); err != nil {
		t.Fatalf("applying the Vault example: %v\n%s", err, stderr)
	}
	for _, c := range append(applies, others...) {
		stdout, stderr, err := run(c)
		// kubectl explain finds a new CRD only once the API server has
		// published its OpenAPI, a few seconds after creating it.
		for deadline := time.Now().Add(time.Minute); err != nil && strings.Contains(stderr, "couldn't find resource") && time.Now().Before(deadline); {
			time.Sleep(time.Second)
			stdout, stderr, err = run(c)
		}
		if err != nil {
			t.Errorf("%s: %v\n%s%s", c, err, stdout, stderr)
			continue
		}
		if strings.Contains(strings.ToLower(stderr), "warning") {
			t.Errorf("%s warns:\n%s", c, stderr)
		}
		if strings.HasPrefix(c, "kubectl get ") && (strings.Contains(stdout+stderr, "No resources found") || !strings.Contains(stdout, "example")) {
			t.Errorf("%s finds no RedisCluster example:\n%s%s", c, stdout, stderr)
		}
		t.Logf("ran: %s", c)
	}
	rc := &cachev1beta1.RedisCluster{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: "example"}, rc); err != nil {
		t.Fatal(err)
	}
	if rc.Spec.Shards != 5 {
		t.Errorf("after the documented kubectl scale --replicas=5, spec.shards = %d", rc.Spec.Shards)
	}
	if len(cmds) < 8 {
		t.Errorf("found only %d documented kubectl commands: %v", len(cmds), cmds)
	}
}

// TestReadmeExampleIsTheFile: the RedisCluster the README shows is the one
// examples/rediscluster.yaml applies, field for field (comments aside).
func TestReadmeExampleIsTheFile(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	file, err := os.ReadFile(filepath.Join("..", "..", "examples", "rediscluster.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var shown string
	for _, block := range regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(string(readme), -1) {
		if strings.Contains(block[1], "kind: RedisCluster") && strings.Contains(block[1], "name: example") {
			shown = block[1]
			break
		}
	}
	if shown == "" {
		t.Fatal("the README shows no RedisCluster named example")
	}
	var want, got map[string]any
	if err := yaml.Unmarshal(file, &want); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal([]byte(shown), &got); err != nil {
		t.Fatalf("the README's example: %v", err)
	}
	if !cmp.Equal(got, want) {
		t.Errorf("the README's example differs from examples/rediscluster.yaml:\n%s", cmp.Diff(want, got))
	}
}
