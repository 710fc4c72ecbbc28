package topology

import (
	"context"
	"fmt"
	"time"
)

// Failover makes replicaName the master of shard with a plain CLUSTER FAILOVER (command page
// CLUSTER FAILOVER, "manual failover": the master stops its clients until the replica has
// its whole replication stream, then the replica wins an election; spec: "Replica election
// and promotion"), so no acknowledged write is lost. It waits until the replica reports
// itself master and until the old master has rejoined as the new master's replica. Rolling
// updates call it before restarting a master.
//
// It never escalates to FORCE or TAKEOVER: when the manual failover cannot run safely — the
// engine cannot reach the master, the replica sees its master failing, or the replica is not
// in sync (master_link_status down) — it returns ErrNotReady with the reason and changes
// nothing. A master that is really gone is Redis's own failover to handle (Reconcile waits
// for it and forces a promotion only when no majority of masters can elect one).
//
// Calling it again after success is a no-op. Errors: ErrInvalidDesired (unknown shard or
// replica), ErrNotReady (replica or master unreachable, replica not in sync), ErrFailover
// (not a replica, or the promotion did not happen in time), or ctx.Err().
func (e *Engine) Failover(ctx context.Context, desired Desired, shard string, replicaName string) error {
	if err := desired.Validate(); err != nil {
		return err
	}
	var spec *ShardSpec
	for i := range desired.Shards {
		if desired.Shards[i].Name == shard {
			spec = &desired.Shards[i]
		}
	}
	if spec == nil {
		return fmt.Errorf("%w: no desired shard %q", ErrInvalidDesired, shard)
	}
	found := false
	for _, ep := range spec.Nodes {
		found = found || ep.Name == replicaName
	}
	if !found {
		return fmt.Errorf("%w: shard %s has no node %q", ErrInvalidDesired, shard, replicaName)
	}
	c := e.newConns()
	defer c.close()
	eps := desired.endpoints()
	log := e.log.WithValues("shard", shard, "node", replicaName)

	view, err := e.observe(ctx, c, eps)
	if err != nil {
		return err
	}
	r := view.Node(replicaName)
	if !r.Reachable() {
		return fmt.Errorf("%w: %s unreachable: %v", ErrNotReady, replicaName, r.Err)
	}
	oldMasterID := r.MasterID()
	if oldMasterID == "" {
		if r.OwnSlots().Len() > 0 {
			return nil // already the master
		}
		return fmt.Errorf("%w: %s is not a replica", ErrFailover, replicaName)
	}
	m := view.NodeByID(oldMasterID)
	switch rec := r.Lookup(oldMasterID); {
	case m == nil || !m.IsMaster():
		return fmt.Errorf("%w: shard %s: master %s of %s is unreachable from the engine; a planned failover needs it (no forced promotion)",
			ErrNotReady, shard, oldMasterID, replicaName)
	case rec == nil || rec.Failing():
		return fmt.Errorf("%w: shard %s: %s sees its master %s failing; a planned failover needs a healthy link (no forced promotion)",
			ErrNotReady, shard, replicaName, m.Endpoint.Name)
	case !r.Replication.MasterLinkUp:
		return fmt.Errorf("%w: shard %s: %s is not in sync with its master %s (master_link_status down)",
			ErrNotReady, shard, replicaName, m.Endpoint.Name)
	}
	timeout := max(3*maxNodeTimeout(view.Nodes...), 10*time.Second)
	const attempts = 3 // a manual failover can time out under load: try again
	promoted := false
	for range attempts {
		log.Info("Starting failover", "mode", "CLUSTER FAILOVER", "masterID", oldMasterID)
		if err := e.do(ctx, c, r, "CLUSTER", "FAILOVER"); err != nil {
			return fmt.Errorf("%w: %s: %w", ErrFailover, replicaName, err)
		}
		ok, err := e.pollNode(ctx, c, r, timeout, func(self *NodeRecord) bool { return self.Flags.Master })
		if err != nil {
			return err
		}
		if ok {
			promoted = true
			break
		}
	}
	if !promoted {
		return fmt.Errorf("%w: %s not promoted after %d attempts", ErrFailover, replicaName, attempts)
	}
	log.Info("Replica promoted", "newMasterID", r.ID)
	ok, err := e.pollNode(ctx, c, m, timeout, func(self *NodeRecord) bool {
		return self.Flags.Replica && self.MasterID == r.ID
	})
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: old master %s did not rejoin as a replica of %s", ErrFailover, m.Endpoint.Name, replicaName)
	}
	return nil
}

// pollNode reads n's own CLUSTER NODES entry until cond holds (true) or timeout passes
// (false).
func (e *Engine) pollNode(ctx context.Context, c *conns, n *NodeView, timeout time.Duration, cond func(*NodeRecord) bool) (bool, error) {
	deadline := time.Now().Add(timeout)
	for {
		if self, err := e.selfRecord(ctx, c, n); err == nil && cond(self) {
			return true, nil
		}
		if time.Now().After(deadline) {
			return false, nil
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return false, err
		}
	}
}
