package certs_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
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
	"github.com/redis-operator/redis-operator/webhooks"
	"github.com/redis-operator/redis-operator/webhooks/certs"
)

const (
	repoRoot = "../.."
	// waitLimit bounds every wait for an eventual outcome; it is a guard
	// against hanging, not a performance expectation.
	waitLimit = 2 * time.Minute
)

// startAPIServer starts envtest's API server and etcd from bin/ (stopped
// when t ends) and returns its config, the tests' scheme and a client.
func startAPIServer(t *testing.T) (*rest.Config, *runtime.Scheme, client.Client) {
	t.Helper()
	env := &envtest.Environment{BinaryAssetsDirectory: filepath.Join(repoRoot, "bin")}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("starting the API server: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Error(err)
		}
	})
	scheme := newScheme(t)
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return cfg, scheme, c
}

func newScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, cachev1alpha1.AddToScheme, cachev1beta1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	return scheme
}

// freePort returns a TCP port on 127.0.0.1 nobody listens on right now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// eventually polls check until it returns nil, failing the test with the
// last error after waitLimit.
func eventually(t *testing.T, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// installWebhookObjects installs the generated CRD, its conversion webhook
// and the generated ValidatingWebhookConfiguration, all pointing at
// https://localhost:port and with no CA bundle: the operator must inject it.
func installWebhookObjects(t *testing.T, c client.Client, port int) {
	t.Helper()
	ctx := context.Background()
	base := fmt.Sprintf("https://localhost:%d", port)

	raw, err := os.ReadFile(filepath.Join(repoRoot, "kustomize", "base", "crd", "bases", "cache.redis.io_redisclusters.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(raw, crd); err != nil {
		t.Fatal(err)
	}
	url := base + webhooks.ConvertPath
	crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{
		Strategy: apiextensionsv1.WebhookConverter,
		Webhook: &apiextensionsv1.WebhookConversion{
			ClientConfig:             &apiextensionsv1.WebhookClientConfig{URL: &url},
			ConversionReviewVersions: []string{"v1"},
		},
	}
	if err := c.Create(ctx, crd); err != nil {
		t.Fatal(err)
	}
	eventually(t, "CRD established", func() error {
		got := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(crd), got); err != nil {
			return err
		}
		for _, cond := range got.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return nil
			}
		}
		return errors.New("not established")
	})

	raw, err = os.ReadFile(filepath.Join(repoRoot, "kustomize", "base", "webhook", "manifests.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	vwc := &admissionv1.ValidatingWebhookConfiguration{}
	if err := yaml.UnmarshalStrict(bytes.TrimPrefix(raw, []byte("---\n")), vwc); err != nil {
		t.Fatal(err)
	}
	vwc.Name = certs.DefaultValidatingWebhookConfigurationName
	for i := range vwc.Webhooks {
		cc := &vwc.Webhooks[i].ClientConfig
		u := base + *cc.Service.Path
		cc.URL, cc.Service = &u, nil
	}
	if err := c.Create(ctx, vwc); err != nil {
		t.Fatal(err)
	}
}

// replica is one operator replica: a manager with the webhooks and
// self-managed certificates, its webhook server on webhookPort and its
// health probes on probePort.
type replica struct {
	webhookPort, probePort int
	stop                   context.CancelFunc
	done                   chan error
}

func startReplica(t *testing.T, cfg *rest.Config, scheme *runtime.Scheme, namespace string, webhookPort int, name string) *replica {
	t.Helper()
	r := &replica{webhookPort: webhookPort, probePort: freePort(t), done: make(chan error, 1)}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: net.JoinHostPort("127.0.0.1", strconv.Itoa(r.probePort)),
		WebhookServer:          webhook.NewServer(webhook.Options{Host: "127.0.0.1", Port: webhookPort, CertDir: t.TempDir()}),
	})
	if err != nil {
		t.Fatal(err)
	}
	opts := webhooks.Options{Certs: webhooks.CertsSelfManaged, SelfManaged: certs.Options{
		Namespace:      namespace,
		DNSName:        "localhost",
		ControllerName: name,
		CheckInterval:  time.Hour,
	}}
	if err := webhooks.Setup(mgr, opts); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.stop = cancel
	go func() { r.done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-r.done; err != nil {
			t.Errorf("manager %s: %v", name, err)
		}
	})
	return r
}

// readyzStatus returns the HTTP status of the replica's /readyz/<check>;
// check "" is the manager's whole readiness (every check together).
func (r *replica) readyzStatus(check string) (int, error) {
	path := "/readyz"
	if check != "" {
		path += "/" + check
	}
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d%s", r.probePort, path))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	return resp.StatusCode, nil
}

// readiness returns nil when /readyz/<check> answers 200.
func (r *replica) readiness(check string) error {
	code, err := r.readyzStatus(check)
	if err != nil {
		return err
	}
	if code != http.StatusOK {
		return fmt.Errorf("readyz/%s: HTTP %d", check, code)
	}
	return nil
}

// servedCert returns the certificate the replica's webhook server presents.
func (r *replica) servedCert() (*x509.Certificate, error) {
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(r.webhookPort)),
		&tls.Config{InsecureSkipVerify: true, ServerName: "localhost"})
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0], nil
}

func parseCert(t *testing.T, pemBytes []byte) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(pemBytes)
	if block == nil {
		t.Fatalf("no PEM block in %q", pemBytes)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// injected returns an error unless the CRD's conversion webhook and every
// webhook of the ValidatingWebhookConfiguration carry caPEM.
func injected(ctx context.Context, c client.Client, caPEM []byte) error {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := c.Get(ctx, client.ObjectKey{Name: certs.DefaultCRDName}, crd); err != nil {
		return err
	}
	if got := crd.Spec.Conversion.Webhook.ClientConfig.CABundle; !bytes.Equal(got, caPEM) {
		return fmt.Errorf("CRD conversion caBundle is %d bytes, not the Secret's CA", len(got))
	}
	vwc := &admissionv1.ValidatingWebhookConfiguration{}
	if err := c.Get(ctx, client.ObjectKey{Name: certs.DefaultValidatingWebhookConfigurationName}, vwc); err != nil {
		return err
	}
	for _, wh := range vwc.Webhooks {
		if !bytes.Equal(wh.ClientConfig.CABundle, caPEM) {
			return fmt.Errorf("webhook %s caBundle is %d bytes, not the Secret's CA", wh.Name, len(wh.ClientConfig.CABundle))
		}
	}
	return nil
}

// webhooksWork proves, through the API server, that it trusts the served
// certificate: a v1alpha1 object is created and read back as v1beta1
// (conversion webhook), and a bad spec is rejected by the validating
// webhook naming the field.
func webhooksWork(ctx context.Context, c client.Client, namespace, name string) error {
	alpha := &cachev1alpha1.RedisCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec:       cachev1alpha1.RedisClusterSpec{Replicas: 6},
	}
	if err := c.Create(ctx, alpha); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating through v1alpha1: %w", err)
	}
	beta := &cachev1beta1.RedisCluster{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(alpha), beta); err != nil {
		return fmt.Errorf("reading through v1beta1: %w", err)
	}
	if beta.Spec.Shards != 3 || beta.Spec.ReplicasPerShard != 1 {
		return fmt.Errorf("converted to %d×%d", beta.Spec.Shards, beta.Spec.ReplicasPerShard)
	}
	bad := &cachev1beta1.RedisCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name + "-bad"},
		Spec:       cachev1beta1.RedisClusterSpec{Shards: 3, Config: map[string]string{"dir": "/tmp"}},
	}
	err := c.Create(ctx, bad)
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.config[dir]: Forbidden") {
		return fmt.Errorf("creating with config dir: want the webhook's rejection, got %v", err)
	}
	return nil
}

// signed makes a key pair for names, signed by the CA (ca itself signed
// when caKey is nil), valid until notAfter.
func signed(t *testing.T, names []string, isCA bool, notAfter time.Time, ca *x509.Certificate, caKey *rsa.PrivateKey) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: names[0]},
		DNSNames:              names,
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
	}
	parent, signer := tmpl, key
	if isCA {
		tmpl.IsCA, tmpl.KeyUsage, tmpl.ExtKeyUsage = true, tmpl.KeyUsage|x509.KeyUsageCertSign, nil
	} else {
		parent, signer = ca, caKey
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
}

// TestSelfManagedCertificates runs operator replicas with self-managed
// certificates against a real API server: the Secret is created, the CA
// lands in the CRD and the ValidatingWebhookConfiguration, readiness
// follows, the API server trusts the served certificate, a certificate or
// CA near expiry is renewed, and a second replica shares the Secret.
func TestSelfManagedCertificates(t *testing.T) {
	captureLogs()
	cfg, scheme, c := startAPIServer(t)
	ctx := context.Background()
	port := freePort(t)
	installWebhookObjects(t, c, port)

	// The operator's namespace does not exist yet: the Secret cannot be
	// created, and the replica must say it is not ready.
	namespace := "redis-operator-system"
	first := startReplica(t, cfg, scheme, namespace, port, "cert-rotator-first")
	for _, check := range []string{"", "webhook-certs"} {
		var code int
		eventually(t, "health probes answering", func() (err error) {
			code, err = first.readyzStatus(check)
			return err
		})
		if code != http.StatusInternalServerError && code != http.StatusServiceUnavailable {
			t.Fatalf("/readyz/%s answers HTTP %d before any certificate exists", check, code)
		}
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "replica ready", func() error {
		return errors.Join(first.readiness(""), first.readiness("webhook-certs"), first.readiness("webhook-server"))
	})

	// The Secret holds a CA and a serving certificate for the DNS name,
	// signed by that CA; the CA is injected; the server presents it.
	secretKey := client.ObjectKey{Namespace: namespace, Name: certs.DefaultSecretName}
	secret := &corev1.Secret{}
	if err := c.Get(ctx, secretKey, secret); err != nil {
		t.Fatal(err)
	}
	caPEM := secret.Data["ca.crt"]
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		t.Fatalf("ca.crt is not a PEM certificate")
	}
	serving := parseCert(t, secret.Data["tls.crt"])
	if _, err := serving.Verify(x509.VerifyOptions{DNSName: "localhost", Roots: pool}); err != nil {
		t.Fatalf("tls.crt does not verify against ca.crt for localhost: %v", err)
	}
	if len(secret.Data["ca.key"]) == 0 || len(secret.Data["tls.key"]) == 0 {
		t.Fatalf("Secret lacks keys: %v", keys(secret.Data))
	}
	eventually(t, "CA injected", func() error { return injected(ctx, c, caPEM) })
	eventually(t, "server presents the Secret's certificate", func() error {
		got, err := first.servedCert()
		if err != nil {
			return err
		}
		if !got.Equal(serving) {
			return fmt.Errorf("serving certificate %v, want %v", got.SerialNumber, serving.SerialNumber)
		}
		return nil
	})
	eventually(t, "webhooks through the API server", func() error { return webhooksWork(ctx, c, "default", "initial") })

	// A serving certificate near expiry (an hour left, renewal is 90 days
	// ahead) is replaced by a fresh one from the same CA.
	ca := parseCert(t, caPEM)
	caKeyBlock, _ := pem.Decode(secret.Data["ca.key"])
	caKey, err := x509.ParsePKCS1PrivateKey(caKeyBlock.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	expiring, expiringKey := signed(t, []string{"localhost"}, false, time.Now().Add(time.Hour), ca, caKey)
	secret.Data["tls.crt"], secret.Data["tls.key"] = expiring, expiringKey
	if err := c.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	eventually(t, "serving certificate renewed", func() error {
		if err := c.Get(ctx, secretKey, secret); err != nil {
			return err
		}
		cert := parseCert(t, secret.Data["tls.crt"])
		if cert.NotAfter.Before(time.Now().Add(300 * 24 * time.Hour)) {
			return fmt.Errorf("tls.crt expires %s", cert.NotAfter)
		}
		if !bytes.Equal(secret.Data["ca.crt"], caPEM) {
			return errors.New("the CA changed, but only the serving certificate was due")
		}
		got, err := first.servedCert()
		if err != nil {
			return err
		}
		if !got.Equal(cert) {
			return errors.New("the server does not present the renewed certificate yet")
		}
		return nil
	})
	eventually(t, "webhooks after the renewal", func() error { return webhooksWork(ctx, c, "default", "renewed") })

	// A CA near expiry is replaced, with a new serving certificate, and the
	// new CA is injected.
	oldCA, oldCAKey := signed(t, []string{"redis-operator-webhook-ca"}, true, time.Now().Add(time.Hour), nil, nil)
	oldCACert := parseCert(t, oldCA)
	oldKeyBlock, _ := pem.Decode(oldCAKey)
	oldCAPriv, err := x509.ParsePKCS1PrivateKey(oldKeyBlock.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	srvPEM, srvKey := signed(t, []string{"localhost"}, false, time.Now().Add(time.Hour), oldCACert, oldCAPriv)
	if err := c.Get(ctx, secretKey, secret); err != nil {
		t.Fatal(err)
	}
	secret.Data = map[string][]byte{"ca.crt": oldCA, "ca.key": oldCAKey, "tls.crt": srvPEM, "tls.key": srvKey}
	if err := c.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	var newCA []byte
	eventually(t, "CA renewed and injected", func() error {
		if err := c.Get(ctx, secretKey, secret); err != nil {
			return err
		}
		newCA = secret.Data["ca.crt"]
		if bytes.Equal(newCA, oldCA) || parseCert(t, newCA).NotAfter.Before(time.Now().Add(5*365*24*time.Hour)) {
			return errors.New("the CA near expiry is still there")
		}
		return injected(ctx, c, newCA)
	})
	eventually(t, "webhooks after the CA renewal", func() error { return webhooksWork(ctx, c, "default", "new-ca") })

	// A second replica uses the Secret as it is: it becomes ready and
	// presents the same certificate, and the CA does not change.
	second := startReplica(t, cfg, scheme, namespace, freePort(t), "cert-rotator-second")
	eventually(t, "second replica ready", func() error { return second.readiness("webhook-certs") })
	if err := c.Get(ctx, secretKey, secret); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(secret.Data["ca.crt"], newCA) {
		t.Fatal("starting a second replica replaced the CA")
	}
	eventually(t, "second replica presents the shared certificate", func() error {
		got, err := second.servedCert()
		if err != nil {
			return err
		}
		if !got.Equal(parseCert(t, secret.Data["tls.crt"])) {
			return errors.New("the second replica presents another certificate")
		}
		return nil
	})
}

func keys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
