package topology

import (
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Pool keeps one client per node address across engine calls (Options.Pool), so that a
// resync reuses a connection that is already authenticated instead of dialing and sending
// HELLO with AUTH to every node on every pass, and remembers per node what the observation
// need not read on every pass (see nodeMemo). Each entry belongs to one owner (the caller's
// name for a cluster, Options.PoolOwner), one password and one TLS material (Options.TLSID):
// a different owner, password or TLS material for the same address replaces the entry,
// closing its client. Safe for concurrent use.
type Pool struct {
	mu      sync.Mutex
	max     int
	tick    uint64
	entries map[string]*poolEntry // by address
}

type poolEntry struct {
	owner    string
	password string
	tlsID    string
	client   *redis.Client
	used     uint64 // Pool.tick at the last use: the least recently used entry goes first
	memo     nodeMemo
}

// NewPool returns a Pool of at most size clients (at least 1); past it, the least recently
// used client is closed.
func NewPool(size int) *Pool {
	return &Pool{max: max(size, 1), entries: map[string]*poolEntry{}}
}

// client returns the pooled client of owner for addr with password, creating it (and
// evicting the least recently used entry when the pool is full) when there is none.
func (p *Pool) client(opts Options, owner, addr string) *redis.Client {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.tick++
	if e, ok := p.entries[addr]; ok {
		if e.owner == owner && e.password == opts.Password && e.tlsID == opts.TLSID {
			e.used = p.tick
			return e.client
		}
		p.dropLocked(addr)
	}
	for len(p.entries) >= p.max {
		oldest, at := "", p.tick
		for a, e := range p.entries {
			if e.used < at {
				oldest, at = a, e.used
			}
		}
		p.dropLocked(oldest)
	}
	e := &poolEntry{owner: owner, password: opts.Password, tlsID: opts.TLSID, client: newClient(opts, addr, opts.Password, 4), used: p.tick}
	p.entries[addr] = e
	return e.client
}

// memo returns a copy of what the pool remembers about the node at addr for owner (the
// zero nodeMemo when nothing).
func (p *Pool) memo(owner, addr string) nodeMemo {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e, ok := p.entries[addr]; ok && e.owner == owner {
		return e.memo
	}
	return nodeMemo{}
}

// remember stores m for the node at addr, if its entry still belongs to owner.
func (p *Pool) remember(owner, addr string, m nodeMemo) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e, ok := p.entries[addr]; ok && e.owner == owner {
		e.memo = m
	}
}

// retain closes the clients of owner whose address is not in keep: a pod that moved to a
// new address, or a node no longer part of the cluster.
func (p *Pool) retain(owner string, keep map[string]bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for addr, e := range p.entries {
		if e.owner == owner && !keep[addr] {
			p.dropLocked(addr)
		}
	}
}

// Forget closes every client of owner, e.g. when its cluster is deleted. A nil Pool holds
// nothing to forget.
func (p *Pool) Forget(owner string) {
	if p != nil {
		p.retain(owner, nil)
	}
}

// Len is the number of pooled clients.
func (p *Pool) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.entries)
}

// Close closes every client.
func (p *Pool) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for addr := range p.entries {
		p.dropLocked(addr)
	}
}

func (p *Pool) dropLocked(addr string) {
	if e, ok := p.entries[addr]; ok {
		_ = e.client.Close()
		delete(p.entries, addr)
	}
}

// configMaxAge is how long a node's cluster-node-timeout, read with CONFIG GET, is trusted
// without reading it again, while the node keeps its run_id and the engine sets no config on
// it: a bound on how long a CONFIG SET made by someone else goes unseen.
const configMaxAge = 5 * time.Minute

// nodeMemo is what an observation remembers about one node for the next one (see
// Engine.observeNode).
type nodeMemo struct {
	// runID is the node's run_id (INFO server): a new one means the process restarted.
	runID string
	// nodeTimeout is cluster-node-timeout as CONFIG GET read it at timeoutAt (zero time:
	// not read); 0 when CONFIG GET was refused.
	nodeTimeout time.Duration
	timeoutAt   time.Time
	// info is the last CLUSTER INFO reply, read in one pipeline with the CLUSTER NODES reply
	// whose shape (nodesShape) is shape; stable says the observation before it saw the same
	// shape.
	info   ClusterInfo
	shape  string
	stable bool
	// users holds, by ACL user name, the digest of the ACL SETUSER arguments ApplyUsers last
	// sent the node under runID, and when. Never modified in place: a new map replaces it.
	users map[string]appliedUser
}

// appliedUser is one ACL user's last ACL SETUSER on a node (nodeMemo.users).
type appliedUser struct {
	digest string
	at     time.Time
}

// usersApplied reports whether the node got every user in digests (name → digest of its
// ACL SETUSER arguments) with those very arguments less than configMaxAge before now, under
// the run_id an observation saw.
func (m nodeMemo) usersApplied(digests map[string]string, now time.Time) bool {
	if m.runID == "" {
		return false
	}
	for name, d := range digests {
		a, ok := m.users[name]
		if !ok || a.digest != d || now.Sub(a.at) >= configMaxAge {
			return false
		}
	}
	return true
}

// infoReusable reports whether the next observation may skip CLUSTER INFO and reuse info,
// provided its CLUSTER NODES shape equals shape and the run_id is unchanged: the node said
// cluster_state:ok over two observations of the same shape. Every way Redis leaves
// cluster_state:ok changes CLUSTER NODES (clusterUpdateState in Redis's cluster.c: a slot
// unassigned or owned by a node flagged fail, or a majority of the masters serving slots
// flagged fail or fail?), and a restart changes the run_id.
func (m nodeMemo) infoReusable() bool {
	return m.stable && m.runID != "" && m.info.OK()
}

// configStale reports whether cluster-node-timeout is to be read again at now.
func (m nodeMemo) configStale(now time.Time) bool {
	return m.timeoutAt.IsZero() || now.Sub(m.timeoutAt) >= configMaxAge
}
