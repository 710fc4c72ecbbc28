// Package services runs what a Kubernetes cluster's add-ons provide, once
// per local plane rather than per node: the cluster DNS (package
// clusterdns) on the pod network's gateway; a relay there to the API
// server, which listens on 127.0.0.1 only, so that pods reach it (the
// kubernetes Service's endpoint is the gateway); and the provisioner of
// the plane's default StorageClass, whose PersistentVolumes are
// directories under VolumesDir. They outlive any one node, so a lost node
// takes none of them down.
package services

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"

	"k8s.io/client-go/kubernetes"

	"github.com/redis-operator/redis-operator/test/localplane/internal/clusterdns"
	"github.com/redis-operator/redis-operator/test/localplane/internal/podnet"
)

// Config configures Start.
type Config struct {
	// StateDir is the plane's state directory; claims' data lives in
	// VolumesDir(StateDir).
	StateDir string
	// Client reads Services and EndpointSlices (DNS) and manages
	// claims, volumes and StorageClasses (provisioner).
	Client kubernetes.Interface
	// APIPort is the API server's port on 127.0.0.1; the relay listens on
	// the same port on the network's gateway.
	APIPort int
	// Network is the plane's pod network: the DNS server and the relay
	// listen on its gateway.
	Network *podnet.Network
	// Log receives the provisioner's messages.
	Log *slog.Logger
}

// Running are the plane's running services.
type Running struct {
	client   kubernetes.Interface
	log      *slog.Logger
	stateDir string
	cancel   context.CancelFunc
	relay    *apiRelay
	dns      *clusterdns.Server
	bg       sync.WaitGroup
	stop     sync.Once
}

// VolumesDir is where the provisioner keeps claims' data:
// <stateDir>/volumes/<namespace>/<claim>-<claim uid>/.
func VolumesDir(stateDir string) string { return filepath.Join(stateDir, "volumes") }

// Start starts the relay (on <gateway>:<APIPort>) and the DNS server (on
// <gateway>:53, UDP and TCP, once its caches have synced), then the
// provisioner in the background, until Stop or the end of ctx. Errors are
// a missing field of cfg, VolumesDir that cannot be made, and an address
// the relay or the DNS server cannot listen on; nothing is left running
// then.
func Start(ctx context.Context, cfg Config) (*Running, error) {
	if cfg.StateDir == "" || cfg.Client == nil || cfg.Network == nil || cfg.Log == nil {
		return nil, errors.New("services: StateDir, Client, Network and Log are required")
	}
	if err := os.MkdirAll(VolumesDir(cfg.StateDir), 0o755); err != nil {
		return nil, fmt.Errorf("services: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	s := &Running{client: cfg.Client, log: cfg.Log, stateDir: cfg.StateDir, cancel: cancel}
	var err error
	if s.relay, err = startAPIRelay(cfg.Network.Gateway, cfg.APIPort); err != nil {
		s.Stop()
		return nil, fmt.Errorf("services: API relay for pods: %w", err)
	}
	if s.dns, err = clusterdns.Start(ctx, cfg.Client, net.JoinHostPort(cfg.Network.Gateway, "53")); err != nil {
		s.Stop()
		return nil, fmt.Errorf("services: %w", err)
	}
	s.bg.Go(func() { runProvisioner(ctx, s) })
	return s, nil
}

// Stop stops the provisioner, the relay (open connections end with their
// peers) and the DNS server. It is idempotent.
func (s *Running) Stop() {
	s.stop.Do(func() {
		s.cancel()
		if s.relay != nil {
			_ = s.relay.close()
		}
		if s.dns != nil {
			s.dns.Stop()
		}
		s.bg.Wait()
	})
}
