package docs

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/yaml"

	cachev1alpha1 "github.com/redis-operator/redis-operator/apis/cache/v1alpha1"
	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/backup"
	"github.com/redis-operator/redis-operator/test/apiwarnings"
	"github.com/redis-operator/redis-operator/webhooks"
)

// A ```yaml block is applied as it stands unless the line before its fence
// marks it (an HTML comment, which neither the site nor the forge shows):
//
//	<!-- yaml: part of a RedisCluster -->  a partial RedisCluster (say, spec.tls alone):
//	                                        merged into partOf, then applied
//	<!-- yaml: not applied: WHY -->        skipped; the test logs WHY
var (
	fence       = regexp.MustCompile("^(\\s*)```(\\S*)\\s*$")
	partMarker  = regexp.MustCompile(`^\s*<!-- yaml: part of a RedisCluster -->\s*$`)
	notApplied  = regexp.MustCompile(`^\s*<!-- yaml: not applied: (.+\S)\s*-->\s*$`)
	anyYAMLMark = regexp.MustCompile(`^\s*<!-- yaml:`)
)

// partOf is the RedisCluster a block marked as a part is merged into: the
// smallest one the schema and the webhooks admit (named part-LINE).
const partOf = `
apiVersion: cache.redis.io/v1beta1
kind: RedisCluster
metadata:
  name: part
spec:
  shards: 3
`

// yamlBlock is one ```yaml block of a page.
type yamlBlock struct {
	page string
	line int    // of the opening fence
	mark string // "", "part" or "skip"
	why  string // a skipped block's reason
	body string
}

func (b yamlBlock) String() string { return fmt.Sprintf("%s:%d", b.page, b.line) }

// yamlBlocks returns the ```yaml blocks of file, with their marks.
func yamlBlocks(t *testing.T, file string) []yamlBlock {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var (
		out   []yamlBlock
		cur   *yamlBlock
		ind   string
		lines []string
		prev  string
	)
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if cur != nil {
			if m := fence.FindStringSubmatch(line); m != nil && m[1] == ind && m[2] == "" {
				cur.body = strings.Join(lines, "\n") + "\n"
				out = append(out, *cur)
				cur, lines = nil, nil
			} else {
				lines = append(lines, strings.TrimPrefix(line, ind))
			}
			continue
		}
		if m := fence.FindStringSubmatch(line); m != nil && (m[2] == "yaml" || m[2] == "yml") {
			cur, ind = &yamlBlock{page: file, line: n}, m[1]
			switch {
			case partMarker.MatchString(prev):
				cur.mark = "part"
			case notApplied.MatchString(prev):
				cur.mark, cur.why = "skip", notApplied.FindStringSubmatch(prev)[1]
			case anyYAMLMark.MatchString(prev):
				t.Errorf("%s:%d: unknown mark %q (want <!-- yaml: part of a RedisCluster --> or <!-- yaml: not applied: WHY -->)", file, n-1, prev)
			}
		}
		prev = line
	}
	if cur != nil {
		t.Errorf("%s:%d: a ```yaml block that never closes", file, cur.line)
	}
	return out
}

// documentedPages are the Markdown pages whose YAML a reader may paste:
// the README and every page of docs/.
func documentedPages(t *testing.T) []string {
	t.Helper()
	pages := []string{filepath.Join("..", "README.md")}
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".md") {
			pages = append(pages, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return pages
}

// objects decodes the documents of a block into objects; a document
// without apiVersion or kind is an error (mark the block if it is meant
// to be partial).
func objects(body string) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(body), 4096)
	for {
		var m map[string]any
		if err := dec.Decode(&m); err == io.EOF {
			return out, nil
		} else if err != nil {
			return nil, err
		}
		if m == nil {
			continue
		}
		u := &unstructured.Unstructured{Object: m}
		if u.GetAPIVersion() == "" || u.GetKind() == "" {
			return nil, errors.New("a document without apiVersion and kind: mark the block <!-- yaml: part of a RedisCluster --> or <!-- yaml: not applied: WHY -->")
		}
		out = append(out, u)
	}
}

// partObject returns partOf with the block laid over it, named after the
// block's line so that the parts of a page are distinct clusters.
func partObject(body string, line int) ([]*unstructured.Unstructured, error) {
	var base, part map[string]any
	if err := yaml.Unmarshal([]byte(partOf), &base); err != nil {
		return nil, err
	}
	if err := yaml.Unmarshal([]byte(body), &part); err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: merge(base, part)}
	u.SetName(fmt.Sprintf("part-%d", line))
	return []*unstructured.Unstructured{u}, nil
}

// merge returns base with part laid over it, maps merged key by key.
func merge(base, part map[string]any) map[string]any {
	out := make(map[string]any, len(base))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range part {
		if pm, ok := v.(map[string]any); ok {
			if bm, ok := out[k].(map[string]any); ok {
				out[k] = merge(bm, pm)
				continue
			}
		}
		out[k] = v
	}
	return out
}

// TestEveryYAMLThroughTheWebhooks: every ```yaml block of the README and of
// every page of docs/ is what the operator admits. Each object is sent as a
// server-side apply with dryRun=All (strict field validation: a misspelt
// field fails) to a real kube-apiserver (envtest) holding this checkout's
// CRDs and the third-party CRDs the components use, whose conversion and
// validating webhooks are served by this checkout's webhooks package with
// the operator's default flags. A block that adds a part to a RedisCluster
// is applied merged into one; a block that cannot be applied says why, and
// the test logs it. A warning from the API server or a webhook fails too.
// Each page's blocks go, in order, into a namespace of the page's own, and
// each object is created for real after its dry run.
func TestEveryYAMLThroughTheWebhooks(t *testing.T) {
	var blocks []yamlBlock
	for _, p := range documentedPages(t) {
		blocks = append(blocks, yamlBlocks(t, p)...)
	}
	if len(blocks) < 10 {
		t.Fatalf("found only %d ```yaml blocks in the README and docs/", len(blocks))
	}
	c, warned := startAPIServer(t)
	ctx := context.Background()
	namespaces := map[string]string{}
	for _, b := range blocks {
		if _, ok := namespaces[b.page]; !ok {
			namespaces[b.page] = fmt.Sprintf("docs-%d", len(namespaces))
		}
	}
	applied := 0
	for _, b := range blocks {
		t.Run(b.String(), func(t *testing.T) {
			if b.mark == "skip" {
				t.Logf("not applied: %s", b.why)
				return
			}
			var objs []*unstructured.Unstructured
			var err error
			if b.mark == "part" {
				objs, err = partObject(b.body, b.line)
			} else {
				objs, err = objects(b.body)
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(objs) == 0 {
				t.Fatal("an empty block")
			}
			ns := namespaces[b.page]
			ensureNamespace(t, c, ns)
			for _, o := range objs {
				namespaced, err := c.IsObjectNamespaced(o)
				if err != nil {
					t.Fatalf("%s %s: %v", o.GetKind(), o.GetName(), err)
				}
				if namespaced && o.GetNamespace() == "" {
					o.SetNamespace(ns)
				} else if namespaced {
					ensureNamespace(t, c, o.GetNamespace())
				}
				if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(o.DeepCopy()),
					client.FieldOwner("docs-test"), client.ForceOwnership, client.DryRunAll); err != nil {
					t.Errorf("%s %s refused: %v", o.GetKind(), o.GetName(), err)
					continue
				}
				applied++
				if w := warned.Take(); len(w) > 0 {
					t.Errorf("%s %s: the API server warns: %q", o.GetKind(), o.GetName(), w)
				}
				// Then for real, so that a later block of the page may
				// name it, as a reader's would (a restore its backup).
				if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(o),
					client.FieldOwner("docs-test"), client.ForceOwnership); err != nil {
					t.Errorf("%s %s: creating it after its dry run: %v", o.GetKind(), o.GetName(), err)
				}
				warned.Take()
			}
		})
	}
	t.Logf("%d blocks, %d objects applied", len(blocks), applied)
}

// ensureNamespace creates namespace name unless it exists.
func ensureNamespace(t *testing.T, c client.Client, name string) {
	t.Helper()
	err := c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// startAPIServer starts kube-apiserver and etcd (envtest, the binaries
// `make tools` builds into bin/) with the CRDs of kustomize/base and
// kustomize/testdata/crds, and a manager serving the webhooks of package
// webhooks as the operator does with its default flags; it stops them when
// the test ends.
func startAPIServer(t *testing.T) (client.Client, *apiwarnings.Collector) {
	t.Helper()
	root := ".."
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, cachev1alpha1.AddToScheme, cachev1beta1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	env := &envtest.Environment{
		Scheme:                scheme,
		BinaryAssetsDirectory: filepath.Join(root, "bin"),
		ErrorIfCRDPathMissing: true,
		CRDInstallOptions: envtest.CRDInstallOptions{Paths: []string{
			filepath.Join(root, "kustomize", "base", "crd", "bases"),
			filepath.Join(root, "kustomize", "testdata", "crds"),
		}},
		WebhookInstallOptions: envtest.WebhookInstallOptions{Paths: []string{filepath.Join(root, "kustomize", "base", "webhook", "manifests.yaml")}},
	}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("starting envtest (run `make tools` first): %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stopping envtest: %v", err)
		}
	})

	// The operator's flags at their defaults, as cmd/redis-operator binds them.
	var opts webhooks.Options
	var stores backup.EndpointPolicy
	fs := flag.NewFlagSet("redis-operator", flag.ContinueOnError)
	opts.BindFlags(fs)
	opts.VaultAddresses.BindFlags(fs)
	stores.BindFlags(fs)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	opts.ObjectStores = stores
	opts.Certs = webhooks.CertsCertManager // envtest writes the serving certificate

	wio := &env.WebhookInstallOptions
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		WebhookServer: webhook.NewServer(webhook.Options{
			Host: wio.LocalServingHost, Port: wio.LocalServingPort, CertDir: wio.LocalServingCertDir,
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := webhooks.Setup(mgr, opts); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("webhook manager: %v", err)
		}
	})

	addr := net.JoinHostPort(wio.LocalServingHost, strconv.Itoa(wio.LocalServingPort))
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", addr, &tls.Config{InsecureSkipVerify: true})
		if err == nil {
			_ = conn.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the webhook server did not come up: %v", err)
		}
	}

	w := &apiwarnings.Collector{}
	clientCfg := rest.CopyConfig(cfg)
	clientCfg.WarningHandlerWithContext = w
	c, err := client.New(clientCfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c, w
}
