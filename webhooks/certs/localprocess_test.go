package certs_test

import (
	"context"
	"flag"
	iofs "io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/kustomize/api/krusty"
	kusttypes "sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/redis-operator/redis-operator/webhooks"
	"github.com/redis-operator/redis-operator/webhooks/certs"
)

// localPlaneManifests is the kustomization hack/localplane.sh installs for
// an operator running as a local process.
const localPlaneManifests = "test/localplane/manifests/webhooks"

// renderLocalPlaneManifests builds localPlaneManifests with kustomize's
// library, its webhooks pointed at https://localhost:port instead of 9443
// (as hack/localplane.sh does for another port), and decodes the CRD and
// the ValidatingWebhookConfiguration. It fails when it renders anything
// else (the in-cluster Service must be gone).
func renderLocalPlaneManifests(t *testing.T, port int) (crd *apiextensionsv1.CustomResourceDefinition, vwc *admissionv1.ValidatingWebhookConfiguration, others []*apiextensionsv1.CustomResourceDefinition) {
	t.Helper()
	// kustomize takes no absolute roots: copy the pieces into memory at
	// their places relative to the repository root.
	fs := filesys.MakeFsInMemory()
	for _, dir := range []string{"kustomize", localPlaneManifests} {
		src := filepath.Join(repoRoot, dir)
		err := filepath.WalkDir(src, func(path string, d iofs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".yaml") {
				return err
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			rel, err := filepath.Rel(repoRoot, path)
			if err != nil {
				return err
			}
			return fs.WriteFile(filepath.Join("/", rel), data)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	opts := krusty.MakeDefaultOptions()
	opts.LoadRestrictions = kusttypes.LoadRestrictionsRootOnly
	m, err := krusty.MakeKustomizer(opts).Run(fs, filepath.Join("/", localPlaneManifests))
	if err != nil {
		t.Fatalf("kustomize build %s: %v", localPlaneManifests, err)
	}
	vwc = &admissionv1.ValidatingWebhookConfiguration{}
	for _, r := range m.Resources() {
		raw, err := r.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		raw = []byte(strings.ReplaceAll(string(raw), "https://localhost:9443/", "https://localhost:"+strconv.Itoa(port)+"/"))
		var out any
		switch r.GetKind() {
		case "CustomResourceDefinition":
			c := &apiextensionsv1.CustomResourceDefinition{}
			if r.GetName() == certs.DefaultCRDName {
				crd = c
			} else {
				others = append(others, c)
			}
			out = c
		case "ValidatingWebhookConfiguration":
			out = vwc
		default:
			t.Fatalf("%s renders %s %s; want only CRDs and the ValidatingWebhookConfiguration", localPlaneManifests, r.GetKind(), r.GetName())
		}
		if err := yaml.UnmarshalStrict(raw, out); err != nil {
			t.Fatal(err)
		}
	}
	if crd == nil {
		t.Fatalf("%s renders no CRD %s", localPlaneManifests, certs.DefaultCRDName)
	}
	return crd, vwc, others
}

// TestLocalPlaneManifests: every webhook in the local plane's manifests is
// a url clientConfig on localhost:9443 with the path this operator serves
// for its version.
func TestLocalPlaneManifests(t *testing.T) {
	crd, vwc, _ := renderLocalPlaneManifests(t, 9443)
	if crd.Name != certs.DefaultCRDName || vwc.Name != certs.DefaultValidatingWebhookConfigurationName {
		t.Fatalf("rendered CRD %q and configuration %q, want the names the certificates are injected into (%q, %q)",
			crd.Name, vwc.Name, certs.DefaultCRDName, certs.DefaultValidatingWebhookConfigurationName)
	}
	conv := crd.Spec.Conversion
	if conv == nil || conv.Strategy != apiextensionsv1.WebhookConverter || conv.Webhook == nil || conv.Webhook.ClientConfig == nil {
		t.Fatalf("CRD conversion is %+v, want the webhook strategy", conv)
	}
	if cc := conv.Webhook.ClientConfig; cc.Service != nil || cc.URL == nil || *cc.URL != "https://localhost:9443"+webhooks.ConvertPath {
		t.Errorf("CRD conversion clientConfig is %+v, want url https://localhost:9443%s", cc, webhooks.ConvertPath)
	}
	want := map[string]string{
		"redisclusters/v1alpha1":               "https://localhost:9443" + webhooks.ValidateV1alpha1Path,
		"redisclusters/v1beta1":                "https://localhost:9443" + webhooks.ValidateV1beta1Path,
		"redisclusterbackups/v1beta1":          "https://localhost:9443" + webhooks.ValidateBackupPath,
		"redisclusterscheduledbackups/v1beta1": "https://localhost:9443" + webhooks.ValidateSchedulePath,
	}
	if len(vwc.Webhooks) != len(want) {
		t.Fatalf("%d webhooks, want %d", len(vwc.Webhooks), len(want))
	}
	for _, wh := range vwc.Webhooks {
		version := wh.Rules[0].Resources[0] + "/" + wh.Rules[0].APIVersions[0]
		if cc := wh.ClientConfig; cc.Service != nil || cc.URL == nil || *cc.URL != want[version] {
			t.Errorf("webhook %s (%s) clientConfig is %+v, want url %s", wh.Name, version, cc, want[version])
		}
	}
}

// TestOperatorAsLocalProcess runs the webhooks as hack/localplane.sh runs
// the operator: configured by the command-line flags --webhook-host and
// --webhook-bind-address, with self-managed certificates, against the
// local plane's manifests installed in a real API server. The operator
// becomes ready and the API server converts and validates through it.
func TestOperatorAsLocalProcess(t *testing.T) {
	captureLogs()
	cfg, scheme, c := startAPIServer(t)
	ctx := context.Background()
	port := freePort(t)
	crd, vwc, others := renderLocalPlaneManifests(t, port)
	objs := []client.Object{crd, vwc, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: certs.DefaultNamespace}}}
	for _, o := range others { // the webhooks read RedisClusterBackups too
		objs = append(objs, o)
	}
	for _, obj := range objs {
		if err := c.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}

	var opts webhooks.Options
	fs := flag.NewFlagSet("redis-operator", flag.ContinueOnError)
	opts.BindFlags(fs)
	bindAddress := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	if err := fs.Parse([]string{"--webhook-host=localhost", "--webhook-bind-address=" + bindAddress}); err != nil {
		t.Fatal(err)
	}
	opts.SelfManaged.ControllerName = "cert-rotator-local-process"
	r := &replica{webhookPort: port, probePort: freePort(t), done: make(chan error, 1)}
	// The manager's webhook server as cmd/redis-operator makes it: no host
	// or port of its own (a certificate directory of the test's, so runs
	// do not share one).
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: net.JoinHostPort("127.0.0.1", strconv.Itoa(r.probePort)),
		WebhookServer:          webhook.NewServer(webhook.Options{CertDir: t.TempDir()}),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := webhooks.Setup(mgr, opts); err != nil {
		t.Fatal(err)
	}
	mgrCtx, cancel := context.WithCancel(ctx)
	go func() { r.done <- mgr.Start(mgrCtx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-r.done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})

	eventually(t, "operator ready", func() error { return r.readiness("") })
	served, err := r.servedCert()
	if err != nil {
		t.Fatalf("no TLS on %s: %v", bindAddress, err)
	}
	if err := served.VerifyHostname("localhost"); err != nil {
		t.Errorf("the served certificate is not for localhost: %v", err)
	}
	secret := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: certs.DefaultNamespace, Name: certs.DefaultSecretName}, secret); err != nil {
		t.Fatal(err)
	}
	if err := injected(ctx, c, secret.Data["ca.crt"]); err != nil {
		t.Errorf("after readiness: %v", err)
	}
	if err := webhooksWork(ctx, c, "default", "local-process"); err != nil {
		t.Errorf("through the API server: %v", err)
	}
}

// TestInClusterDefaults: without the local-process flags the webhook
// server keeps its in-cluster listener and the certificate its Service
// name.
func TestInClusterDefaults(t *testing.T) {
	var opts webhooks.Options
	fs := flag.NewFlagSet("redis-operator", flag.ContinueOnError)
	opts.BindFlags(fs)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if opts.BindAddress != "" || opts.SelfManaged.DNSName != "" {
		t.Errorf("defaults: bind address %q, DNS name %q; want both empty (port 9443 on every address, <service>.<namespace>.svc)",
			opts.BindAddress, opts.SelfManaged.DNSName)
	}
	newManager := func() ctrl.Manager {
		mgr, err := ctrl.NewManager(&rest.Config{Host: "https://127.0.0.1:1"}, ctrl.Options{
			Scheme:  newScheme(t),
			Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		})
		if err != nil {
			t.Fatal(err)
		}
		return mgr
	}
	mgr := newManager()
	opts.Certs = webhooks.CertsCertManager
	if err := webhooks.Setup(mgr, opts); err != nil {
		t.Fatal(err)
	}
	if o := mgr.GetWebhookServer().(*webhook.DefaultServer).Options; o.Host != "" || o.Port != webhook.DefaultPort {
		t.Errorf("webhook server listens on host %q port %d, want controller-runtime's default (every address, 9443)", o.Host, o.Port)
	}
	for _, bad := range []string{"9443", "127.0.0.1:https", "127.0.0.1:70000"} {
		err := webhooks.Setup(newManager(), webhooks.Options{Certs: webhooks.CertsCertManager, BindAddress: bad})
		if err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("bind address %q: error %v, want one naming it", bad, err)
		}
	}
}
