package topology

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// This file holds what the planner knows about Down endpoints (Endpoint.Down): nodes known
// not to run, which it does not contact and whose steps wait while the others go on.

// errDown is the error of a Down endpoint's NodeView: the engine knows it does not run.
var errDown = errors.New("down")

// Down reports whether the node is a Down endpoint (Endpoint.Down): known not to run, not
// contacted.
func (n *NodeView) Down() bool { return n != nil && n.Endpoint.Down != "" }

// downReason says which node is down and why, for messages: "demo-shard-1-1 (Pending)".
func downReason(n *NodeView) string { return fmt.Sprintf("%s (%s)", n.Endpoint.Name, n.Endpoint.Down) }

// downNodes lists the shard's Down nodes.
func (sh *shardState) downNodes() []*NodeView {
	var out []*NodeView
	for _, n := range sh.nodes {
		if n.Down() {
			out = append(out, n)
		}
	}
	return out
}

// ownersReachable reports whether every slot owner is a reachable node.
func (a *assessment) ownersReachable() bool {
	for id := range a.slotCount {
		if a.byID[id] == nil {
			return false
		}
	}
	return true
}

// waitDown records a step that waits for Down nodes: an ErrNotReady blocker naming them
// ("<what>: waiting for <pod> (<why>)"), counted apart so that a plan held up only by
// them is Settled.
func (p *planner) waitDown(nodes []*NodeView, format string, args ...any) {
	var names []string
	for _, n := range nodes {
		names = append(names, downReason(n))
		if !slices.Contains(p.waitingFor, n.Endpoint.Name) {
			p.waitingFor = append(p.waitingFor, n.Endpoint.Name)
		}
	}
	p.block(ErrNotReady, "%s: waiting for %s", fmt.Sprintf(format, args...), strings.Join(names, ", "))
	p.downBlocks++
}

// settled reports whether the plan is held up only by Down nodes: no step, no wait, every
// blocker from waitDown.
func (p *planner) settled(steps []Step) bool {
	return len(steps) == 0 && len(p.waits) == 0 && !p.short && len(p.blockers) > 0 && len(p.blockers) == p.downBlocks
}
