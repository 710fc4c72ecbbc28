// Package certs gives the operator's webhook server a serving certificate
// the operator makes and renews itself, so installing the operator needs no
// cert-manager.
//
// It uses github.com/open-policy-agent/cert-controller (the rotator
// Gatekeeper uses): the rotator keeps a CA and a serving certificate signed
// by it in one Secret in the operator's namespace (keys ca.crt, ca.key,
// tls.crt, tls.key), renews them when they come within RenewBefore of
// expiry (checked every CheckInterval and whenever the Secret changes), and
// writes the CA into the caBundle of the ValidatingWebhookConfiguration and
// of the CRD's conversion webhook. The rotator runs in every replica; the
// replicas agree through the Secret's resourceVersion.
//
// This package adds what the rotator leaves to its user: it creates the
// Secret when it is missing, already holding a CA and a serving certificate
// made by the rotator's own functions, and starts the rotator only once the
// rotator's cache holds that Secret, so that a normal start logs no error
// (an empty Secret made every replica's rotator and its webhook reconciler
// race to fill it: "the object has been modified", "Cert secret is not
// well-formed, missing ca.crt"). It serves the certificate to the webhook
// server straight from the Secret (no volume mount, so no wait for the
// kubelet to refresh one): every replica watches the Secret and swaps the
// certificate in as soon as it changes. It also writes tls.crt and tls.key
// into the webhook server's CertDir, where the rotator checks for them.
package certs

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

// Defaults of Options. They match the manifests under kustomize/base/webhook
// and kustomize/base/crd/patches.
const (
	DefaultNamespace                          = "redis-operator-system"
	DefaultSecretName                         = "redis-operator-webhook-cert"
	DefaultServiceName                        = "redis-operator-webhook"
	DefaultValidatingWebhookConfigurationName = "redis-operator-validating-webhook"
	DefaultCRDName                            = "redisclusters.cache.redis.io"
	DefaultControllerName                     = "webhook-cert-rotator"

	DefaultCAValidity     = 10 * 365 * 24 * time.Hour
	DefaultServerValidity = 365 * 24 * time.Hour
	DefaultRenewBefore    = 90 * 24 * time.Hour
	DefaultCheckInterval  = time.Hour
)

// The RBAC the self-managed certificates need: the Secret in the operator's
// namespace, and the two objects the CA bundle goes into. Reading and
// writing are granted on those objects by name (the defaults above; an
// install that changes --webhook-secret-name, --webhook-configuration-name
// or the CRD must change these rules too). Listing and watching cannot
// be: the rotator (github.com/open-policy-agent/cert-controller
// pkg/rotator) watches Secrets of the namespace, webhook configurations
// and CRDs through informers without a name selector, and creating the
// Secret cannot be either (the name is not part of a create's
// authorization).
//
// +kubebuilder:rbac:groups="",namespace=redis-operator-system,resources=secrets,verbs=list;watch;create
// +kubebuilder:rbac:groups="",namespace=redis-operator-system,resources=secrets,verbs=get;update,resourceNames=redis-operator-webhook-cert
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations,verbs=list;watch
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations,verbs=get;update,resourceNames=redis-operator-validating-webhook
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=list;watch
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;update,resourceNames=redisclusters.cache.redis.io

// Options configure the self-managed certificates. Zero values take the
// defaults above; Namespace defaults to DefaultNamespace.
type Options struct {
	// Namespace is the operator's namespace, where the Secret lives.
	Namespace string
	// SecretName is the Secret holding the CA and the serving certificate.
	SecretName string
	// ServiceName is the webhook Service; the certificate is issued for
	// <ServiceName>.<Namespace>.svc, the name the API server dials.
	ServiceName string
	// DNSName replaces <ServiceName>.<Namespace>.svc as the certificate's
	// main name: the host of url clientConfigs when the API server reaches
	// the operator other than through the Service (localhost for an
	// operator running as a local process, as on test/localplane).
	DNSName string
	// ValidatingWebhookConfigurationName receives the CA bundle.
	ValidatingWebhookConfigurationName string
	// CRDName is the CRD whose conversion webhook receives the CA bundle.
	CRDName string
	// CAValidity and ServerValidity are how long a new CA and a new serving
	// certificate are valid.
	CAValidity, ServerValidity time.Duration
	// RenewBefore is how long before expiry a certificate is replaced. It
	// must be shorter than ServerValidity, or every check renews.
	RenewBefore time.Duration
	// CheckInterval is how often expiry is checked besides on every change
	// of the Secret.
	CheckInterval time.Duration
	// ControllerName names the rotator's controller; controller names are
	// unique per process.
	ControllerName string
}

func (o *Options) setDefaults() {
	set := func(s *string, def string) {
		if *s == "" {
			*s = def
		}
	}
	setDuration := func(d *time.Duration, def time.Duration) {
		if *d == 0 {
			*d = def
		}
	}
	set(&o.Namespace, DefaultNamespace)
	set(&o.SecretName, DefaultSecretName)
	set(&o.ServiceName, DefaultServiceName)
	set(&o.DNSName, fmt.Sprintf("%s.%s.svc", o.ServiceName, o.Namespace))
	set(&o.ValidatingWebhookConfigurationName, DefaultValidatingWebhookConfigurationName)
	set(&o.CRDName, DefaultCRDName)
	set(&o.ControllerName, DefaultControllerName)
	setDuration(&o.CAValidity, DefaultCAValidity)
	setDuration(&o.ServerValidity, DefaultServerValidity)
	setDuration(&o.RenewBefore, DefaultRenewBefore)
	setDuration(&o.CheckInterval, DefaultCheckInterval)
}

// Certs is the self-managed serving certificate of one operator replica.
type Certs struct {
	opts     Options
	certDir  string
	certName string
	keyName  string

	// ready is closed by the rotator once the certificate files exist and
	// the CA bundle is injected.
	ready chan struct{}
	// current is the serving certificate last loaded from the Secret.
	current atomic.Pointer[tls.Certificate]

	mu         sync.Mutex
	loadedCert []byte
}

// Setup makes the manager's webhook server serve the self-managed
// certificate and adds to the manager, in every replica: the creation of
// the Secret when missing, the rotator, the watch that loads the Secret's
// certificate, and the readiness check "webhook-certs", which fails until
// this replica serves a certificate from the Secret and the CA bundle has
// been injected.
//
// The manager's webhook server must be controller-runtime's
// *webhook.DefaultServer and not started yet. Setup sets its TLS
// GetCertificate, so the server needs no certificate files at start.
func Setup(mgr manager.Manager, opts Options) (*Certs, error) {
	opts.setDefaults()
	if opts.RenewBefore >= opts.ServerValidity || opts.RenewBefore >= opts.CAValidity {
		return nil, fmt.Errorf("setting up webhook certificates: renewing %s before expiry needs certificates valid longer than that (CA %s, server %s)",
			opts.RenewBefore, opts.CAValidity, opts.ServerValidity)
	}
	srv, ok := mgr.GetWebhookServer().(*webhook.DefaultServer)
	if !ok {
		return nil, fmt.Errorf("setting up webhook certificates: the manager's webhook server is a %T, not controller-runtime's *webhook.DefaultServer", mgr.GetWebhookServer())
	}
	c := &Certs{
		opts:     opts,
		certDir:  srv.Options.CertDir,
		certName: srv.Options.CertName,
		keyName:  srv.Options.KeyName,
		ready:    make(chan struct{}),
	}
	if c.certDir == "" {
		c.certDir = filepath.Join(os.TempDir(), "k8s-webhook-server", "serving-certs")
		srv.Options.CertDir = c.certDir
	}
	if c.certName == "" {
		c.certName = "tls.crt"
	}
	if c.keyName == "" {
		c.keyName = "tls.key"
	}
	srv.Options.TLSOpts = append(srv.Options.TLSOpts, func(cfg *tls.Config) {
		cfg.GetCertificate = c.GetCertificate
	})

	cr := &rotator.CertRotator{
		SecretKey:      types.NamespacedName{Namespace: opts.Namespace, Name: opts.SecretName},
		CertDir:        c.certDir,
		CertName:       c.certName,
		KeyName:        c.keyName,
		CAName:         "redis-operator-webhook-ca",
		CAOrganization: "redis-operator",
		DNSName:        opts.DNSName,
		ExtraDNSNames: []string{
			fmt.Sprintf("%s.%s.svc.cluster.local", opts.ServiceName, opts.Namespace),
			fmt.Sprintf("%s.%s", opts.ServiceName, opts.Namespace),
		},
		IsReady: c.ready,
		Webhooks: []rotator.WebhookInfo{
			{Name: opts.ValidatingWebhookConfigurationName, Type: rotator.Validating},
			{Name: opts.CRDName, Type: rotator.CRDConversion},
		},
		FieldOwner:             "redis-operator",
		RequireLeaderElection:  false,
		CaCertDuration:         opts.CAValidity,
		ServerCertDuration:     opts.ServerValidity,
		LookaheadInterval:      opts.RenewBefore,
		RotationCheckFrequency: opts.CheckInterval,
		ControllerName:         opts.ControllerName,
	}
	ensure := &ensureSecretThenRotate{rotator: cr, certs: c, client: mgr.GetClient(), apiReader: mgr.GetAPIReader(),
		logger: mgr.GetLogger().WithName("webhook-certs"), released: make(chan struct{})}
	if err := rotator.AddRotator(secretFirst{Manager: mgr, rotator: cr, certs: c, ensure: ensure}, cr); err != nil {
		return nil, fmt.Errorf("setting up the webhook certificate rotator: %w", err)
	}
	if err := mgr.Add(&secretWatch{certs: c, mgr: mgr}); err != nil {
		return nil, fmt.Errorf("setting up the webhook certificate watch: %w", err)
	}
	if err := mgr.AddReadyzCheck("webhook-certs", c.ReadyCheck); err != nil {
		return nil, fmt.Errorf("adding the webhook certificate readiness check: %w", err)
	}
	return c, nil
}

// GetCertificate serves the certificate last loaded from the Secret; it is
// the webhook server's tls.Config.GetCertificate. Until the rotator has
// issued one, TLS handshakes fail with an error saying so.
func (c *Certs) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if cert := c.current.Load(); cert != nil {
		return cert, nil
	}
	return nil, errors.New("the webhook serving certificate has not been issued yet")
}

// ReadyCheck is a healthz.Checker: nil once this replica serves a
// certificate from the Secret and the rotator has injected the CA bundle.
func (c *Certs) ReadyCheck(*http.Request) error {
	if c.current.Load() == nil {
		return fmt.Errorf("no serving certificate loaded from Secret %s/%s yet", c.opts.Namespace, c.opts.SecretName)
	}
	select {
	case <-c.ready:
		return nil
	default:
		return fmt.Errorf("the CA bundle is not injected into %s and %s yet", c.opts.ValidatingWebhookConfigurationName, c.opts.CRDName)
	}
}

// load takes the serving certificate from the Secret, writes it to the
// certificate directory and serves it. Secrets without a usable pair are
// ignored: the rotator fills them.
func (c *Certs) load(ctx context.Context, secret *corev1.Secret) {
	logger := log.FromContext(ctx).WithValues("secret", client.ObjectKeyFromObject(secret))
	certPEM, keyPEM := secret.Data[c.certName], secret.Data[c.keyName]
	if len(certPEM) == 0 || len(keyPEM) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if string(certPEM) == string(c.loadedCert) {
		return
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		logger.Error(err, "Webhook serving certificate in the Secret is unusable; waiting for the rotator to replace it")
		return
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		logger.Error(err, "Webhook serving certificate in the Secret does not parse; waiting for the rotator to replace it")
		return
	}
	pair.Leaf = leaf
	if err := writeFileAtomic(filepath.Join(c.certDir, c.keyName), keyPEM, 0o600); err != nil {
		logger.Error(err, "Writing the webhook serving key", "certDir", c.certDir)
		return
	}
	if err := writeFileAtomic(filepath.Join(c.certDir, c.certName), certPEM, 0o644); err != nil {
		logger.Error(err, "Writing the webhook serving certificate", "certDir", c.certDir)
		return
	}
	c.current.Store(&pair)
	c.loadedCert = certPEM
	logger.Info("Serving webhook certificate", "notAfter", leaf.NotAfter.UTC().Format(time.RFC3339), "dnsNames", leaf.DNSNames)
}

// writeFileAtomic replaces path with data through a rename, so a reader
// never sees half a file.
func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// secretWatch watches the one Secret, through a cache of its own limited to
// that Secret (the manager's cache may not hold Secrets at all), and loads
// every version of it. It runs in every replica.
type secretWatch struct {
	certs *Certs
	mgr   manager.Manager
}

func (*secretWatch) NeedLeaderElection() bool { return false }

func (w *secretWatch) Start(ctx context.Context) error {
	o := w.certs.opts
	c, err := cache.New(w.mgr.GetConfig(), cache.Options{
		Scheme:            w.mgr.GetScheme(),
		Mapper:            w.mgr.GetRESTMapper(),
		DefaultNamespaces: map[string]cache.Config{o.Namespace: {}},
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Secret{}: {Field: fields.OneTermEqualSelector("metadata.name", o.SecretName)},
		},
	})
	if err != nil {
		return fmt.Errorf("creating the webhook certificate Secret cache: %w", err)
	}
	inf, err := c.GetInformer(ctx, &corev1.Secret{}, cache.BlockUntilSynced(false))
	if err != nil {
		return fmt.Errorf("watching the webhook certificate Secret: %w", err)
	}
	ctx = log.IntoContext(ctx, w.mgr.GetLogger().WithName("webhook-certs"))
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { w.loadObject(ctx, obj) },
		UpdateFunc: func(_, obj any) { w.loadObject(ctx, obj) },
	}); err != nil {
		return fmt.Errorf("watching the webhook certificate Secret: %w", err)
	}
	return c.Start(ctx)
}

func (w *secretWatch) loadObject(ctx context.Context, obj any) {
	if secret, ok := obj.(*corev1.Secret); ok && secret.Name == w.certs.opts.SecretName {
		w.certs.load(ctx, secret)
	}
}
