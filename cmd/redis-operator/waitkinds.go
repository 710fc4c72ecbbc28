package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"slices"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
)

// servedResources are the resources of cachev1beta1 the operator's
// controllers and field indexes need the API server to serve before they
// are set up: without them the manager's REST mapper answers "no matches
// for kind" and the operator would exit.
var servedResources = []string{"redisclusters", "redisclusterbackups", "redisclusterscheduledbackups"}

// kindsPollInterval is how often waitForKinds asks discovery again;
// kindsLogInterval how often it says it still waits.
const (
	kindsPollInterval = 2 * time.Second
	kindsLogInterval  = 30 * time.Second
)

// waitForKinds returns once the API server serves every resource of
// servedResources in cache.redis.io/v1beta1 (discovery, every
// kindsPollInterval), so an operator applied together with its CRDs (one
// kustomize apply, one Argo CD sync) waits for them to be established
// instead of exiting and being restarted. While it waits, probeAddr (when
// not "" or "0") answers /healthz with 200 and /readyz with 503, so the
// Deployment's liveness probe does not restart a waiting operator; the
// address is free again when it returns, for the manager's own probes. It
// returns ctx's error when ctx ends first, or the error of binding
// probeAddr.
func waitForKinds(ctx context.Context, cfg *rest.Config, probeAddr string, log logr.Logger) error {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return fmt.Errorf("discovery client: %w", err)
	}
	missing := missingResources(dc)
	if len(missing) == 0 {
		return nil
	}
	stop, err := serveWaitingProbes(probeAddr)
	if err != nil {
		return err
	}
	defer stop()
	gv := cachev1beta1.GroupVersion.String()
	log.Info("Waiting for the API server to serve the operator's kinds (are the CRDs applied?)", "groupVersion", gv, "missing", missing)
	lastLog := time.Now()
	tick := time.NewTicker(kindsPollInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		if missing = missingResources(dc); len(missing) == 0 {
			log.Info("The operator's kinds are served", "groupVersion", gv)
			return nil
		}
		if time.Since(lastLog) >= kindsLogInterval {
			log.Info("Still waiting for the operator's kinds", "groupVersion", gv, "missing", missing)
			lastLog = time.Now()
		}
	}
}

// missingResources lists the servedResources that discovery does not
// show in cachev1beta1's group version (all of them when the group version
// is not served or discovery fails).
func missingResources(dc discovery.DiscoveryInterface) []string {
	list, err := dc.ServerResourcesForGroupVersion(cachev1beta1.GroupVersion.String())
	if err != nil || list == nil {
		return servedResources
	}
	var missing []string
	for _, name := range servedResources {
		if !slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == name }) {
			missing = append(missing, name)
		}
	}
	return missing
}

// serveWaitingProbes answers the health probes on addr while the operator
// waits for its kinds; stop closes the listener and returns once it is
// closed. addr "" or "0" serves nothing.
func serveWaitingProbes(addr string) (stop func(), err error) {
	if addr == "" || addr == "0" {
		return func() {}, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("serving the health probes on %s while waiting for the CRDs: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "waiting for the API server to serve "+cachev1beta1.GroupVersion.String()+" (the operator's CRDs)", http.StatusServiceUnavailable)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln) // http.ErrServerClosed once stopped
	}()
	return func() {
		_ = srv.Close()
		<-done
	}, nil
}
