package localplane

import (
	"fmt"

	"github.com/redis-operator/redis-operator/test/localplane/internal/realnode"
)

// LoseNode makes node name fail as a machine that loses power: its
// kubelet, containerd, shims and containers are killed with SIGKILL, and
// its pods' network namespaces, mounts, runtime state and bridge go (see
// realnode.Node.Crash). Its lease and status are no longer renewed: after
// controlplane.NodeMonitorGracePeriod the node lifecycle controller sets
// its Ready condition to Unknown, taints it node.kubernetes.io/unreachable
// and marks its pods not ready. The pod objects stay bound to it, as on a
// real cluster. Losing a lost node does nothing; a name that is not one of
// Plane.Nodes is an error.
func (p *Plane) LoseNode(name string) error {
	p.mu.Lock()
	n, running := p.nodes[name]
	_, known := p.config[name]
	delete(p.nodes, name)
	p.mu.Unlock()
	if !known {
		return fmt.Errorf("localplane: no node %q", name)
	}
	if running {
		n.Crash()
	}
	return nil
}

// RestoreNode boots node name again after LoseNode, as a machine does:
// containerd starts on its kept images with fresh state, then the kubelet,
// which takes over its Node object (the lifecycle controller lifts the
// taints) and starts its pods' containers again, with fresh addresses.
// Restoring a running node does nothing; a name that is not one of
// Plane.Nodes is an error, and so is a node that fails to start (the error
// names its log). The node runs until Stop or LoseNode (or the end of the
// context given to Start).
func (p *Plane) RestoreNode(name string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	cfg, known := p.config[name]
	if !known {
		return fmt.Errorf("localplane: no node %q", name)
	}
	if _, running := p.nodes[name]; running {
		return nil
	}
	n, err := realnode.Start(p.ctx, cfg)
	if err != nil {
		return fmt.Errorf("localplane: node %s: %w", name, err)
	}
	p.nodes[name] = n
	return nil
}
