package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"

	"k8s.io/client-go/kubernetes"

	"github.com/redis-operator/redis-operator/test/localplane/internal/clusterdns"
	"github.com/redis-operator/redis-operator/test/localplane/internal/podnet"
	"github.com/redis-operator/redis-operator/test/localplane/internal/proctree"
)

// ServicesConfig configures the plane-wide parts that every process node
// of a plane shares.
type ServicesConfig struct {
	// StateDir is the plane's state directory (pods/ and volumes/ below it).
	StateDir string
	Client   kubernetes.Interface
	// APIPort is the API server's port on 127.0.0.1, relayed to pods on
	// the network's gateway.
	APIPort int
	// Network is the pod network, or nil (no relay and no DNS then).
	Network *podnet.Network
	Log     *slog.Logger
}

// Services are what a real cluster runs once rather than per node: the
// volume provisioner and, with a pod network, the relay that lets pods
// reach the API server and the cluster DNS. They outlive any one node, so
// a lost node takes none of them down.
type Services struct {
	client   kubernetes.Interface
	log      *slog.Logger
	stateDir string
	cancel   context.CancelFunc
	relay    *apiRelay          // nil without a pod network
	dns      *clusterdns.Server // nil without a pod network
	bg       sync.WaitGroup
	stop     sync.Once
}

// StartServices kills the pod processes an earlier run of this state
// directory left behind (after a crash), empties pods/, and starts the
// shared services. Start the nodes after it and stop them before
// Services.Stop.
func StartServices(ctx context.Context, cfg ServicesConfig) (*Services, error) {
	if cfg.StateDir == "" || cfg.Client == nil || cfg.Log == nil {
		return nil, errors.New("node: StateDir, Client and Log are required")
	}
	if _, err := proctree.Sweep(PodsDir(cfg.StateDir)); err != nil {
		return nil, fmt.Errorf("node: killing leftovers of an earlier run: %w", err)
	}
	if err := os.RemoveAll(PodsDir(cfg.StateDir)); err != nil {
		return nil, err
	}
	for _, d := range []string{PodsDir(cfg.StateDir), VolumesDir(cfg.StateDir)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	s := &Services{client: cfg.Client, log: cfg.Log, stateDir: cfg.StateDir, cancel: cancel}
	if cfg.Network != nil {
		var err error
		if s.relay, err = startAPIRelay(cfg.Network.Gateway, cfg.APIPort); err != nil {
			s.Stop()
			return nil, fmt.Errorf("node: API relay for pods: %w", err)
		}
		if s.dns, err = clusterdns.Start(ctx, cfg.Client, net.JoinHostPort(cfg.Network.Gateway, "53")); err != nil {
			s.Stop()
			return nil, fmt.Errorf("node: %w", err)
		}
	}
	s.bg.Go(func() { runProvisioner(ctx, s) })
	return s, nil
}

// Stop stops the provisioner, the relay and the DNS server. It is
// idempotent.
func (s *Services) Stop() {
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
