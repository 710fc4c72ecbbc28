// Command redis-operator runs the RedisCluster operator: a controller-runtime
// manager with the RedisCluster controller, leader election, health probes
// and Prometheus metrics. It runs in a cluster (in-cluster config) or
// against any kubeconfig (--kubeconfig, or $KUBECONFIG).
package main

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	cachev1alpha1 "github.com/redis-operator/redis-operator/apis/cache/v1alpha1"
	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers"
	"github.com/redis-operator/redis-operator/controllers/backup"
	"github.com/redis-operator/redis-operator/controllers/tlscerts"
	"github.com/redis-operator/redis-operator/controllers/topology"
	"github.com/redis-operator/redis-operator/kustomize/rendered"
	"github.com/redis-operator/redis-operator/webhooks"
)

// serviceAccountNamespaceFile is where a pod finds its own namespace.
const serviceAccountNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

func main() {
	// `redis-operator manifests --overlay NAME` prints the install manifests
	// as kustomize rendered them at build time (kustomize/rendered).
	if len(os.Args) > 1 && os.Args[1] == "manifests" {
		os.Exit(rendered.RunManifests(os.Args[2:], os.Stdout, os.Stderr))
	}
	// `redis-operator status NAME`, also run as the kubectl plugin
	// `kubectl rediscluster status NAME` (status.go).
	if isPlugin(os.Args[0]) {
		os.Exit(runPlugin(os.Args[1:], os.Stdout, os.Stderr))
	}
	if len(os.Args) > 1 && os.Args[1] == "status" {
		os.Exit(runStatus(os.Args[2:], os.Stdout, os.Stderr))
	}
	// `redis-operator restore-fetch ...`: a restored pod's init container
	// (restorefetch.go).
	if len(os.Args) > 1 && os.Args[1] == "restore-fetch" {
		os.Exit(runRestoreFetch(os.Args[2:], os.Stderr))
	}
	var (
		metricsAddr, probeAddr  string
		secureMetrics           bool
		pprofAddr               string
		leaderElect             bool
		leaderElectionNamespace string
		maxConcurrent           int
		redisPoolSize           int
		reconciler              controllers.RedisClusterReconciler
	)
	// --kubeconfig is registered on flag.CommandLine by controller-runtime
	// (sigs.k8s.io/controller-runtime/pkg/client/config).
	flag.StringVar(&metricsAddr, "metrics-bind-address", ":8443", "Address of the Prometheus metrics endpoint (/metrics); 0 disables it")
	flag.BoolVar(&secureMetrics, "metrics-secure", true,
		"Serve /metrics over HTTPS (a self-signed certificate) to callers whose bearer token passes a TokenReview and who may get the non-resource URL /metrics (a SubjectAccessReview; ClusterRole redis-operator-metrics-reader grants it); false serves plain HTTP to anyone who reaches the address")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "Address of the health probes (/healthz, /readyz)")
	flag.StringVar(&pprofAddr, "pprof-bind-address", "", "Address of Go's pprof endpoints (/debug/pprof/), for profiling; empty or 0 disables them")
	flag.BoolVar(&leaderElect, "leader-elect", true, "Elect a leader (a Lease) so that one replica reconciles at a time")
	flag.StringVar(&leaderElectionNamespace, "leader-election-namespace", defaultNamespace(),
		"Namespace of the leader election Lease (default: $POD_NAMESPACE, the pod's own namespace, or \"default\" outside a cluster)")
	flag.StringVar(&reconciler.OperatorNamespace, "operator-namespace", defaultNamespace(),
		"Namespace of the operator's pods, which the NetworkPolicy of spec.networkPolicy lets reach Redis (default: $POD_NAMESPACE, the pod's own namespace, or \"default\" outside a cluster)")
	flag.DurationVar(&reconciler.ResyncPeriod, "resync-period", controllers.DefaultResyncPeriod, "How often a settled RedisCluster is observed again")
	flag.DurationVar(&reconciler.PassBudget, "pass-budget", controllers.DefaultPassBudget,
		"Longest topology engine run per reconcile pass (the slot round in flight is finished or rolled back after it); longer migrations continue in the next pass")
	flag.DurationVar(&reconciler.RedisTimeout, "redis-timeout", controllers.DefaultRedisTimeout, "Timeout of every Redis dial and command")
	flag.DurationVar(&reconciler.DeletionTimeout, "deletion-timeout", controllers.DefaultDeletionTimeout,
		"Longest cleanup on RedisCluster deletion before the finalizer is removed anyway")
	flag.DurationVar(&reconciler.CAValidity, "tls-ca-validity", tlscerts.DefaultCAValidity,
		"Validity of the CA the operator makes for a RedisCluster's TLS (spec.tls without secretName); renewed with a third of it left, without a handshake failing. At least 10m")
	flag.IntVar(&maxConcurrent, "max-concurrent-reconciles", 4, "RedisClusters reconciled at once")
	flag.StringVar(&reconciler.RestoreImage, "restore-image", controllers.DefaultRestoreImage,
		"Image of the init container that fetches a restored shard's RDB (spec.bootstrap.fromBackup): the operator's own image")
	watchNamespaces := flag.String("watch-namespaces", "",
		"Comma-separated namespaces whose RedisClusters the operator reconciles and whose objects it caches and watches; empty: all namespaces. "+
			"The namespaced install (kustomize/components/namespaced) grants access in those namespaces only")
	flag.IntVar(&redisPoolSize, "redis-pool-size", controllers.DefaultRedisPoolSize,
		"Redis clients kept across passes, one per node, so a resync reuses authenticated connections; past it the least recently used is closed")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	// Webhooks (package webhooks): --webhook-certs and the names the
	// self-managed certificates use.
	var webhookOpts webhooks.Options
	webhookOpts.BindFlags(flag.CommandLine)
	// Where spec.auth.vault.address may point, enforced by the controller
	// and the validating webhook alike: --vault-address-allowlist and
	// --vault-allow-insecure-http (package credentials).
	vaultAddresses := &webhookOpts.VaultAddresses
	vaultAddresses.BindFlags(flag.CommandLine)
	// Where object stores (backups, schedules, restores) may point, enforced
	// by the backup controllers, the restore and the webhooks alike:
	// --object-store-endpoint-allowlist and --object-store-allow-insecure-http
	// (package backup).
	var objectStores backup.EndpointPolicy
	objectStores.BindFlags(flag.CommandLine)
	enableWebhooks := flag.Bool("webhooks", true,
		"Serve the conversion and validating webhooks; false runs the controller alone, for example outside a cluster against a kubeconfig whose CRDs have no webhooks configured")
	flag.Parse()
	reconciler.VaultAddresses = *vaultAddresses
	webhookOpts.ObjectStores = objectStores
	reconciler.WatchNamespaces = splitNamespaces(*watchNamespaces)
	reconciler.Redis = topology.NewPool(redisPoolSize)

	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	log := ctrl.Log.WithName("setup")
	if reconciler.CAValidity < tlscerts.MinCAValidity {
		log.Error(fmt.Errorf("--tls-ca-validity %s is shorter than %s", reconciler.CAValidity, tlscerts.MinCAValidity), "Invalid TLS CA validity")
		os.Exit(1)
	}
	if err := objectStores.Validate(); err != nil {
		log.Error(err, "Invalid object store endpoint policy")
		os.Exit(1)
	}

	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(cachev1alpha1.AddToScheme(scheme))
	utilruntime.Must(cachev1beta1.AddToScheme(scheme))

	// Applied in the same sync as its CRDs, the operator waits until they
	// are served rather than exiting (waitkinds.go); the manager binds the
	// probe address only after the wait.
	ctx := ctrl.SetupSignalHandler()
	cfg := ctrl.GetConfigOrDie()
	if err := waitForKinds(ctx, cfg, probeAddr, log); err != nil {
		log.Error(err, "Stopped before the API server served the operator's kinds")
		os.Exit(1)
	}

	shutdownTimeout := gracefulShutdownTimeout(reconciler.PassBudget)
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme,
		GracefulShutdownTimeout: &shutdownTimeout,
		Metrics:                 metricsOptions(metricsAddr, secureMetrics),
		HealthProbeBindAddress:  probeAddr,
		PprofBindAddress:        pprofAddr,
		LeaderElection:          leaderElect,
		LeaderElectionID:        "redis-operator.cache.redis.io",
		LeaderElectionNamespace: leaderElectionNamespace,
		// Step down cleanly on SIGTERM so a new leader takes over at once.
		LeaderElectionReleaseOnCancel: true,
		// client-go's default spam filter lets 25 events per object through
		// and then one per 5 minutes, which a rolling update or a scale-out
		// of a large cluster exceeds; the operator reports each topology
		// action once, so allow more. The manager lives as long as the
		// process, so the broadcaster it deprecates for leaking goroutines
		// in shorter-lived managers is safe here.
		EventBroadcaster: record.NewBroadcasterWithCorrelatorOptions(record.CorrelatorOptions{BurstSize: 200, QPS: 1.0 / 10}),
		// Children, pods and claims are cached only when they carry the
		// operator's label; referenced Secrets are never cached.
		Cache: controllers.CacheOptions(reconciler.WatchNamespaces),
	})
	if err != nil {
		log.Error(err, "Cannot create the manager")
		os.Exit(1)
	}

	// The backup controllers and a restore (spec.bootstrap.fromBackup) read
	// an object store's credentialsVault with spec.auth.vault's address
	// policy.
	backupVault, err := backup.NewVaultKeys(mgr.GetConfig(), *vaultAddresses, reconciler.RedisTimeout, log.WithName("backup-vault"))
	if err != nil {
		log.Error(err, "Cannot set up the backups' Vault client")
		os.Exit(1)
	}
	backupVault.Endpoints = objectStores
	reconciler.BackupVault = backupVault
	if err := reconciler.SetupWithManager(ctx, mgr, controller.Options{MaxConcurrentReconciles: maxConcurrent}); err != nil {
		log.Error(err, "Cannot set up the RedisCluster controller")
		os.Exit(1)
	}

	// RedisClusterBackups (controllers/backup): each shard's RDB streamed
	// to the object store, the manifest last.
	if err := (&backup.Reconciler{Vault: backupVault, Endpoints: objectStores}).SetupWithManager(mgr, controller.Options{MaxConcurrentReconciles: 2}); err != nil {
		log.Error(err, "Cannot set up the RedisClusterBackup controller")
		os.Exit(1)
	}
	// RedisClusterScheduledBackups (controllers/backup): a backup at each
	// scheduled time, retention of old ones with their objects.
	if err := (&backup.ScheduledReconciler{Vault: backupVault, Endpoints: objectStores}).SetupWithManager(mgr, controller.Options{MaxConcurrentReconciles: 1}); err != nil {
		log.Error(err, "Cannot set up the RedisClusterScheduledBackup controller")
		os.Exit(1)
	}

	// Webhooks: conversion (v1alpha1 <-> v1beta1) and validation of both
	// versions, served by every replica (not only the leader), with the
	// serving certificate self-managed or mounted (--webhook-certs). Adds
	// the readiness checks webhook-server and webhook-certs.
	if *enableWebhooks {
		if err := webhooks.Setup(mgr, webhookOpts); err != nil {
			log.Error(err, "Cannot set up the webhooks")
			os.Exit(1)
		}
	}

	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		log.Error(err, "Cannot add the health check")
		os.Exit(1)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		log.Error(err, "Cannot add the readiness check")
		os.Exit(1)
	}

	log.Info("Starting the manager", "leaderElect", leaderElect, "resyncPeriod", reconciler.ResyncPeriod.String(),
		"gracefulShutdownTimeout", shutdownTimeout.String(), "watchNamespaces", reconciler.WatchNamespaces)
	err = mgr.Start(ctx)
	// Only now: a pass cancelled by the shutdown settles its slot round
	// over the pooled connections until the manager returns.
	reconciler.Redis.Close()
	if err != nil {
		log.Error(err, "The manager stopped with an error")
		os.Exit(1)
	}
}

// shutdownSettleMargin is what gracefulShutdownTimeout allows, past the
// pass budget, for a cancelled pass to settle the slot round in flight.
const shutdownSettleMargin = 20 * time.Second

// gracefulShutdownTimeout is how long the manager waits, on SIGTERM, for
// the reconciles in flight to return: passBudget (--pass-budget;
// controllers.DefaultPassBudget when not positive) plus
// shutdownSettleMargin, 30 s with the defaults.
//
// On SIGTERM controller-runtime cancels the context of every reconcile in
// flight and waits this long for them (after it the manager returns an
// error and the process exits, cutting whatever still runs). A pass runs
// the topology engine for at most passBudget; a cancelled engine then
// settles the slot round in flight, finishing it or rolling it back
// (controllers/topology/migrate.go, settleRound: CLUSTER COUNTKEYSINSLOT
// on both nodes, MIGRATE of the round's remaining keys, CLUSTER SETSLOT
// NODE or STABLE), a few Redis commands each bounded by --redis-timeout
// (5 s by default): 20 s is four of them back to back. So whether a step
// honours the cancellation at once or runs out its budget, no slot is left
// importing or migrating by the shutdown. The Deployment's
// terminationGracePeriodSeconds (kustomize/base/manager/manager.yaml, 45)
// must exceed this, or the kubelet's SIGKILL cuts the settle short.
func gracefulShutdownTimeout(passBudget time.Duration) time.Duration {
	if passBudget <= 0 {
		passBudget = controllers.DefaultPassBudget
	}
	return passBudget + shutdownSettleMargin
}

// defaultNamespace is $POD_NAMESPACE, else the namespace of the pod's
// service account, else "default" (a process outside any cluster).
func defaultNamespace() string {
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	if b, err := os.ReadFile(serviceAccountNamespaceFile); err == nil {
		if ns := strings.TrimSpace(string(b)); ns != "" {
			return ns
		}
	}
	return "default"
}

// splitNamespaces parses --watch-namespaces: comma-separated names, blanks
// around them and empty entries ignored, duplicates dropped, in the given
// order; nil when none is named (all namespaces).
func splitNamespaces(flagValue string) []string {
	var out []string
	for _, ns := range strings.Split(flagValue, ",") {
		if ns = strings.TrimSpace(ns); ns != "" && !slices.Contains(out, ns) {
			out = append(out, ns)
		}
	}
	return out
}

// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create

// metricsOptions serves /metrics on address (0 disables it); secure
// serves HTTPS with controller-runtime's authentication and authorization
// filter: a caller's bearer token is checked with a TokenReview and its
// right to get /metrics with a SubjectAccessReview (the operator's
// ClusterRole allows it to create both), others get 401 or 403.
func metricsOptions(address string, secure bool) metricsserver.Options {
	o := metricsserver.Options{BindAddress: address}
	if secure {
		o.SecureServing = true
		o.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	return o
}
