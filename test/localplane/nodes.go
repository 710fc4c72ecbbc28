package localplane

import (
	"fmt"

	"github.com/redis-operator/redis-operator/test/localplane/internal/node"
	"github.com/redis-operator/redis-operator/test/localplane/internal/realnode"
)

// LoseNode makes node name fail as a machine that lost power: its lease
// and status stop being renewed (after controlplane.NodeMonitorGracePeriod
// the node lifecycle controller sets its Ready condition to Unknown, taints
// it node.kubernetes.io/unreachable and marks its pods not ready), and
// every container of its pods is killed with SIGKILL, without hooks. The
// pod objects stay bound to it, as on a real cluster. A real node loses
// everything a power cut takes: its kubelet, containerd, shims and
// containers are killed with SIGKILL, its pods' network namespaces, mounts
// and runtime state go (see realnode.Node.Crash). Losing a lost node does
// nothing; an unknown name is an error.
func (p *Plane) LoseNode(name string) error {
	if _, real := p.realConfig[name]; real {
		p.mu.Lock()
		n, running := p.real[name]
		delete(p.real, name)
		p.mu.Unlock()
		if running {
			n.Crash()
		}
		return nil
	}
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

// RestoreNode starts node name again after LoseNode, as a machine that
// boots: it takes over its Node object and renews its lease (the lifecycle
// controller lifts the taints), and starts the pods still bound to it,
// with fresh addresses. A real node boots as a machine does: containerd
// starts on its kept images with fresh state, then the kubelet, which
// starts its pods' containers again. Restoring a running node does
// nothing. The node runs until Stop or LoseNode (or the end of the context
// given to Start).
func (p *Plane) RestoreNode(name string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if cfg, real := p.realConfig[name]; real {
		if _, running := p.real[name]; running {
			return nil
		}
		n, err := realnode.Start(p.ctx, cfg)
		if err != nil {
			return fmt.Errorf("localplane: node %s: %w", name, err)
		}
		p.real[name] = n
		return nil
	}
	cfg, known := p.config[name]
	if !known {
		return fmt.Errorf("localplane: no node %q", name)
	}
	if _, running := p.nodes[name]; running {
		return nil
	}
	n, err := node.Start(p.ctx, cfg)
	if err != nil {
		return fmt.Errorf("localplane: node %s: %w", name, err)
	}
	p.nodes[name] = n
	return nil
}
