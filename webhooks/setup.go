// Package webhooks serves the RedisCluster webhooks from the operator's
// manager: conversion between v1alpha1 and v1beta1 (controller-runtime's
// hub-and-spoke conversion, v1beta1 being the hub), and validation of both
// versions on top of the CRD's schema and CEL rules.
//
// The webhook server runs in every operator replica, not only the leader,
// so that the API server can reach one while another replica leads: the
// conversion webhook in particular sits on the read path of every
// RedisCluster, and while it is unreachable nothing can read them (Argo CD
// then shows every application holding one as Unknown).
//
// The serving certificate comes from package certs (self-managed, the
// default) or from files mounted into the webhook server's CertDir (for
// example by cert-manager).
package webhooks

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"

	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/conversion"

	cachev1alpha1 "github.com/redis-operator/redis-operator/apis/cache/v1alpha1"
	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/credentials"
	"github.com/redis-operator/redis-operator/webhooks/certs"
)

// The paths the webhooks are served at. The ValidatingWebhookConfiguration
// under kustomize/base/webhook and the CRD's conversion patch name them.
const (
	ConvertPath          = "/convert"
	ValidateV1beta1Path  = "/validate-cache-redis-io-v1beta1-rediscluster"
	ValidateV1alpha1Path = "/validate-cache-redis-io-v1alpha1-rediscluster"
	ValidateBackupPath   = "/validate-cache-redis-io-v1beta1-redisclusterbackup"
	ValidateSchedulePath = "/validate-cache-redis-io-v1beta1-redisclusterscheduledbackup"
)

// The markers below generate kustomize/base/webhook/manifests.yaml (make
// manifests). matchPolicy=Exact sends each version's requests to its own
// webhook only, so a v1alpha1 request is validated once, with v1alpha1
// field names; failurePolicy=fail never lets an unvalidated object in.
//
// +kubebuilder:webhook:path=/validate-cache-redis-io-v1beta1-rediscluster,mutating=false,failurePolicy=fail,sideEffects=None,groups=cache.redis.io,resources=redisclusters,verbs=create;update,versions=v1beta1,name=v1beta1.redisclusters.cache.redis.io,admissionReviewVersions=v1,matchPolicy=Exact,timeoutSeconds=10
// +kubebuilder:webhook:path=/validate-cache-redis-io-v1alpha1-rediscluster,mutating=false,failurePolicy=fail,sideEffects=None,groups=cache.redis.io,resources=redisclusters,verbs=create;update,versions=v1alpha1,name=v1alpha1.redisclusters.cache.redis.io,admissionReviewVersions=v1,matchPolicy=Exact,timeoutSeconds=10
// +kubebuilder:webhook:path=/validate-cache-redis-io-v1beta1-redisclusterbackup,mutating=false,failurePolicy=fail,sideEffects=None,groups=cache.redis.io,resources=redisclusterbackups,verbs=create;update,versions=v1beta1,name=v1beta1.redisclusterbackups.cache.redis.io,admissionReviewVersions=v1,matchPolicy=Exact,timeoutSeconds=10
// +kubebuilder:webhook:path=/validate-cache-redis-io-v1beta1-redisclusterscheduledbackup,mutating=false,failurePolicy=fail,sideEffects=None,groups=cache.redis.io,resources=redisclusterscheduledbackups,verbs=create;update,versions=v1beta1,name=v1beta1.redisclusterscheduledbackups.cache.redis.io,admissionReviewVersions=v1,matchPolicy=Exact,timeoutSeconds=10

// Where the webhook server's serving certificate comes from.
const (
	// CertsSelfManaged: the operator makes, injects and renews its own CA and
	// certificate (package certs). The default.
	CertsSelfManaged = "self-managed"
	// CertsCertManager: the certificate is mounted into the webhook server's
	// CertDir (kustomize/components/cert-manager mounts the Secret
	// cert-manager issues) and the CA bundle is injected by someone else
	// (cert-manager's cainjector).
	CertsCertManager = "cert-manager"
)

// Options configure the webhooks.
type Options struct {
	// ScaleInWarningFraction is the share of shards that, removed in one
	// update, draws an admission warning. Zero means
	// DefaultScaleInWarningFraction (one half).
	ScaleInWarningFraction float64
	// Certs is CertsSelfManaged (also when empty) or CertsCertManager.
	Certs string
	// SelfManaged configures the self-managed certificates. Its DNSName
	// (flag --webhook-host) is the name the API server dials when that is
	// not the in-cluster Service: for an operator running as a process
	// outside the cluster, installed with url clientConfigs such as
	// https://localhost:9443/convert (test/localplane/manifests/webhooks).
	SelfManaged certs.Options
	// VaultAddresses is where spec.auth.vault.address may point; give it
	// the controller's policy (cmd/redis-operator binds both to the flags
	// --vault-address-allowlist and --vault-allow-insecure-http).
	VaultAddresses credentials.AddressPolicy
	// ObjectStores is where object-store endpoints (a backup's, a
	// schedule's, a restore's) may point: the backup controller's
	// backup.EndpointPolicy (cmd/redis-operator binds both to
	// --object-store-endpoint-allowlist and
	// --object-store-allow-insecure-http). Nil allows every endpoint.
	ObjectStores ObjectStorePolicy
	// BindAddress is host:port the webhook server listens on, for example
	// 127.0.0.1:9443. Empty keeps the manager's webhook server as it is
	// (controller-runtime's default: port 9443 on every address, what a
	// pod behind the webhook Service needs).
	BindAddress string
}

// BindFlags registers the webhook flags on fs. The namespace defaults to
// $POD_NAMESPACE (the downward API in the manager's Deployment).
func (o *Options) BindFlags(fs *flag.FlagSet) {
	namespace := os.Getenv("POD_NAMESPACE")
	if namespace == "" {
		namespace = certs.DefaultNamespace
	}
	fs.StringVar(&o.Certs, "webhook-certs", CertsSelfManaged,
		"Where the webhook serving certificate comes from: self-managed (the operator issues, injects and renews it) or cert-manager (mounted into the webhook certificate directory)")
	fs.StringVar(&o.SelfManaged.Namespace, "webhook-namespace", namespace, "Namespace of the webhook Service and of the self-managed certificate Secret")
	fs.StringVar(&o.SelfManaged.SecretName, "webhook-secret-name", certs.DefaultSecretName, "Secret holding the self-managed webhook CA and certificate")
	fs.StringVar(&o.SelfManaged.ServiceName, "webhook-service-name", certs.DefaultServiceName, "Service the API server reaches the webhooks through (the certificate's name)")
	fs.StringVar(&o.SelfManaged.DNSName, "webhook-host", "",
		"Name the API server dials to reach the webhooks, issued in the self-managed certificate (default <webhook-service-name>.<webhook-namespace>.svc); "+
			"for example localhost for an operator running outside the cluster, with url clientConfigs pointing at it")
	fs.StringVar(&o.BindAddress, "webhook-bind-address", "",
		"host:port the webhook server listens on, for example 127.0.0.1:9443 (default: port 9443 on every address)")
	fs.StringVar(&o.SelfManaged.ValidatingWebhookConfigurationName, "webhook-configuration-name", certs.DefaultValidatingWebhookConfigurationName,
		"ValidatingWebhookConfiguration that receives the self-managed CA bundle")
	fs.Float64Var(&o.ScaleInWarningFraction, "webhook-scale-in-warning-fraction", DefaultScaleInWarningFraction,
		"Share of shards that, removed in one update, draws an admission warning")
}

// Setup registers the conversion webhook and the validating webhooks (both
// RedisCluster versions, RedisClusterBackup, RedisClusterScheduledBackup) with
// the manager's webhook server, makes that server listen on
// opts.BindAddress when set, sets up the self-managed certificates
// (certs.Setup) unless opts.Certs is CertsCertManager, and adds the
// readiness check "webhook-server", which fails until the server accepts
// TLS connections (and, with self-managed certificates, "webhook-certs").
//
// The manager's scheme must hold both API versions (v1alpha1 and v1beta1
// AddToScheme). Call Setup before the manager starts.
func Setup(mgr manager.Manager, opts Options) error {
	if opts.ScaleInWarningFraction < 0 || opts.ScaleInWarningFraction > 1 {
		return fmt.Errorf("setting up webhooks: scale-in warning fraction %v is not within (0, 1]", opts.ScaleInWarningFraction)
	}
	if err := opts.VaultAddresses.Validate(); err != nil {
		return fmt.Errorf("setting up webhooks: %w", err)
	}
	if opts.BindAddress != "" {
		if err := bind(mgr, opts.BindAddress); err != nil {
			return err
		}
	}
	started := mgr.GetWebhookServer().StartedChecker()
	switch opts.Certs {
	case "", CertsSelfManaged:
		c, err := certs.Setup(mgr, opts.SelfManaged)
		if err != nil {
			return err
		}
		// Dial the server only once it has a certificate to present: a
		// handshake it must refuse is logged by net/http as an error.
		tlsStarted := started
		started = func(req *http.Request) error {
			if _, err := c.GetCertificate(nil); err != nil {
				return err
			}
			return tlsStarted(req)
		}
	case CertsCertManager:
	default:
		return fmt.Errorf("setting up webhooks: certificate source %q is neither %s nor %s", opts.Certs, CertsSelfManaged, CertsCertManager)
	}
	scheme := mgr.GetScheme()
	for _, gv := range []schema.GroupVersion{cachev1alpha1.GroupVersion, cachev1beta1.GroupVersion} {
		if !scheme.Recognizes(gv.WithKind("RedisCluster")) {
			return fmt.Errorf("setting up webhooks: the manager's scheme lacks %s RedisCluster: add %s's AddToScheme", gv.Version, gv)
		}
	}
	if ok, err := conversion.IsConvertible(scheme, &cachev1beta1.RedisCluster{}); err != nil || !ok {
		return errors.Join(errors.New("setting up webhooks: RedisCluster versions are not convertible (v1beta1 must be the hub, v1alpha1 a spoke)"), err)
	}

	v := &Validator{
		ScaleInWarningFraction: opts.ScaleInWarningFraction,
		VaultAddresses:         opts.VaultAddresses,
		// SubjectAccessReviews are created, never read from a cache.
		Access: SubjectAccessReviewer{Client: mgr.GetClient()},
		// Uncached: the webhook serves in every replica, not only the leader.
		Backups:      mgr.GetAPIReader(),
		Claims:       mgr.GetAPIReader(),
		ObjectStores: opts.ObjectStores,
	}
	// For the hub, the builder also registers the conversion webhook at
	// /convert, as the types implement conversion.Hub and Convertible.
	if err := ctrl.NewWebhookManagedBy(mgr).
		For(&cachev1beta1.RedisCluster{}).
		WithValidator(v.V1beta1()).
		WithValidatorCustomPath(ValidateV1beta1Path).
		Complete(); err != nil {
		return fmt.Errorf("setting up the v1beta1 RedisCluster webhooks: %w", err)
	}
	if err := ctrl.NewWebhookManagedBy(mgr).
		For(&cachev1alpha1.RedisCluster{}).
		WithValidator(v.V1alpha1()).
		WithValidatorCustomPath(ValidateV1alpha1Path).
		Complete(); err != nil {
		return fmt.Errorf("setting up the v1alpha1 RedisCluster webhooks: %w", err)
	}
	if err := ctrl.NewWebhookManagedBy(mgr).
		For(&cachev1beta1.RedisClusterBackup{}).
		WithValidator(backupValidator{v}).
		WithValidatorCustomPath(ValidateBackupPath).
		Complete(); err != nil {
		return fmt.Errorf("setting up the RedisClusterBackup webhook: %w", err)
	}
	if err := ctrl.NewWebhookManagedBy(mgr).
		For(&cachev1beta1.RedisClusterScheduledBackup{}).
		WithValidator(scheduledBackupValidator{v}).
		WithValidatorCustomPath(ValidateSchedulePath).
		Complete(); err != nil {
		return fmt.Errorf("setting up the RedisClusterScheduledBackup webhook: %w", err)
	}
	if err := mgr.AddReadyzCheck("webhook-server", started); err != nil {
		return fmt.Errorf("adding the webhook server readiness check: %w", err)
	}
	return nil
}

// bind makes the manager's webhook server, which has not started yet,
// listen on address (host:port).
func bind(mgr manager.Manager, address string) error {
	host, portText, err := net.SplitHostPort(address)
	if err != nil {
		return fmt.Errorf("setting up webhooks: bind address %q is not host:port: %w", address, err)
	}
	port, err := strconv.Atoi(portText)
	if err != nil || port < 1 || port > 65535 {
		return fmt.Errorf("setting up webhooks: bind address %q: port %q is not a number from 1 to 65535", address, portText)
	}
	srv, ok := mgr.GetWebhookServer().(*webhook.DefaultServer)
	if !ok {
		return fmt.Errorf("setting up webhooks: cannot set the bind address of a %T, only of controller-runtime's *webhook.DefaultServer", mgr.GetWebhookServer())
	}
	srv.Options.Host, srv.Options.Port = host, port
	return nil
}
