package topology

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// Engine drives a Redis Cluster towards a Desired shape. Without Options.Pool it holds no
// connections between calls: each call opens what it needs and closes it before returning;
// with a Pool, clients (and what observations remember per node) outlive the call. Safe for
// concurrent use, but two calls acting on the same cluster at once would fight: the
// controller runs one at a time per cluster.
type Engine struct {
	opts Options
	log  logr.Logger
}

// New returns an Engine with defaults filled in for zero Options fields.
func New(opts Options) *Engine {
	if opts.DialTimeout <= 0 {
		opts.DialTimeout = 2 * time.Second
	}
	if opts.CommandTimeout <= 0 {
		opts.CommandTimeout = 5 * time.Second
	}
	if opts.MigrateBatch <= 0 {
		opts.MigrateBatch = 200
	}
	if opts.MigrateBatchBytes <= 0 {
		opts.MigrateBatchBytes = 2 << 20
	}
	if opts.MigrateRoundBytes <= 0 {
		opts.MigrateRoundBytes = 8 << 20
	}
	if opts.MigrateServingOps <= 0 {
		opts.MigrateServingOps = 10
	}
	if opts.MigrateTimeout <= 0 {
		opts.MigrateTimeout = 30 * time.Second
	}
	if opts.MigrateSlotsPerRound <= 0 {
		opts.MigrateSlotsPerRound = 64
	}
	if opts.MigrateParallel <= 0 {
		opts.MigrateParallel = 4
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = 200 * time.Millisecond
	}
	log := opts.Logger
	if log.GetSink() == nil {
		log = logr.Discard()
	}
	return &Engine{opts: opts, log: log}
}

// clientBufferSize is the read and the write buffer of each connection, one page: go-redis's
// 32 KiB defaults (and 128 KiB for its separate pipeline pool) would cost a long-lived pool
// of a few hundred nodes tens of MiB. Nothing needs a bigger one: go-redis reads a bulk reply
// longer than the buffer (a CLUSTER NODES of 100 nodes is about 20 KiB) into a slice of its
// own and a line longer than it in pieces, and writes a command longer than it (a MIGRATE of
// many keys) in several writes.
const clientBufferSize = 4 << 10

// newClient is the one go-redis client configuration of the engine, for the node at addr
// with password ("" for none): RESP2, no CLIENT SETINFO on connect (a Redis 7.2 command),
// go-redis's maintenance notifications off, opts' dial and command timeouts bounding every
// call along with its context, poolSize connections shared by commands and pipelines (no
// separate pipeline pool), clientBufferSize buffers, and no retries (the engine observes
// again and plans anew instead).
func newClient(opts Options, addr, password string, poolSize int) *redis.Client {
	cl := redis.NewClient(&redis.Options{
		Addr:                  addr,
		Password:              password,
		TLSConfig:             opts.TLS,
		Protocol:              2,
		DisableIdentity:       true,
		DialTimeout:           opts.DialTimeout,
		ReadTimeout:           opts.CommandTimeout,
		WriteTimeout:          opts.CommandTimeout,
		ContextTimeoutEnabled: true,
		MaxRetries:            -1,
		PoolSize:              poolSize,
		PipelinePoolSize:      -1,
		ReadBufferSize:        clientBufferSize,
		WriteBufferSize:       clientBufferSize,
		MaintNotificationsConfig: &maintnotifications.Config{
			Mode: maintnotifications.ModeDisabled,
		},
	})
	if opts.OnCommand != nil {
		cl.AddHook(commandHook(opts.OnCommand))
	}
	return cl
}

// conns gives one engine call its client per address: opts.Pool's when set, otherwise
// clients of its own, closed by close. Without a pool, what observations remember per node
// lasts for the call.
type conns struct {
	opts    Options
	mu      sync.Mutex
	clients map[string]*redis.Client
	memos   map[string]nodeMemo
}

func (e *Engine) newConns() *conns {
	return &conns{opts: e.opts, clients: map[string]*redis.Client{}, memos: map[string]nodeMemo{}}
}

func (c *conns) get(addr string) *redis.Client {
	if c.opts.Pool != nil {
		return c.opts.Pool.client(c.opts, c.opts.PoolOwner, addr)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if cl, ok := c.clients[addr]; ok {
		return cl
	}
	cl := newClient(c.opts, addr, c.opts.Password, 4)
	c.clients[addr] = cl
	return cl
}

func (c *conns) memo(addr string) nodeMemo {
	if c.opts.Pool != nil {
		return c.opts.Pool.memo(c.opts.PoolOwner, addr)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.memos[addr]
}

func (c *conns) remember(addr string, m nodeMemo) {
	if c.opts.Pool != nil {
		c.opts.Pool.remember(c.opts.PoolOwner, addr, m)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.memos[addr] = m
}

// usersSet records that the node at addr got the users in digests (name → digest of the
// ACL SETUSER arguments) at now (see nodeMemo.usersApplied); an empty digest forgets the
// user (ACL DELUSER).
func (c *conns) usersSet(addr string, digests map[string]string, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var m nodeMemo
	if c.opts.Pool != nil {
		m = c.opts.Pool.memo(c.opts.PoolOwner, addr)
	} else {
		m = c.memos[addr]
	}
	users := make(map[string]appliedUser, len(m.users)+len(digests))
	maps.Copy(users, m.users)
	for name, d := range digests {
		if d == "" {
			delete(users, name)
			continue
		}
		users[name] = appliedUser{digest: d, at: now}
	}
	m.users = users
	if c.opts.Pool != nil {
		c.opts.Pool.remember(c.opts.PoolOwner, addr, m)
		return
	}
	c.memos[addr] = m
}

// configChanged makes the next observation of addr read its config again.
func (c *conns) configChanged(addr string) {
	m := c.memo(addr)
	m.timeoutAt = time.Time{}
	c.remember(addr, m)
}

// retain closes the pooled clients of the call's owner for addresses not among eps.
func (c *conns) retain(eps []Endpoint) {
	if c.opts.Pool == nil || c.opts.PoolOwner == "" {
		return
	}
	keep := make(map[string]bool, len(eps))
	for _, ep := range eps {
		keep[ep.Addr] = true
	}
	c.opts.Pool.retain(c.opts.PoolOwner, keep)
}

func (c *conns) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cl := range c.clients {
		_ = cl.Close()
	}
	c.clients = map[string]*redis.Client{}
}

// cmdCtx bounds one ordinary command.
func (e *Engine) cmdCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, e.opts.CommandTimeout)
}

// Observe reads each endpoint's CLUSTER NODES, CLUSTER INFO, INFO replication, keyspace and
// server (the number of keys, the run_id) and cluster-node-timeout into a typed view (spec:
// "Cluster topology"); see observeNode for what a settled node is spared. Unreachable nodes,
// and nodes whose replies do not parse, are kept with their error; an authentication failure
// wraps ErrAuth. The error is non-nil only for invalid endpoints (ErrInvalidDesired) or a
// done context. With Options.Pool, the owner's pooled clients for addresses not among eps
// are closed.
func (e *Engine) Observe(ctx context.Context, eps []Endpoint) (*ClusterView, error) {
	c := e.newConns()
	defer c.close()
	return e.observe(ctx, c, eps)
}

func (e *Engine) observe(ctx context.Context, c *conns, eps []Endpoint) (*ClusterView, error) {
	names := map[string]bool{}
	for _, ep := range eps {
		if ep.Name == "" || names[ep.Name] {
			return nil, fmt.Errorf("%w: endpoint name %q empty or repeated", ErrInvalidDesired, ep.Name)
		}
		names[ep.Name] = true
		if err := validateAddr(ep.Addr); err != nil {
			return nil, fmt.Errorf("%w: endpoint %s: %w", ErrInvalidDesired, ep.Name, err)
		}
	}
	c.retain(eps)
	view := &ClusterView{Nodes: make([]*NodeView, len(eps))}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i, ep := range eps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			view.Nodes[i] = e.observeNode(ctx, c, ep)
		}()
	}
	wg.Wait()
	view.ObservedAt = time.Now()
	if err := ctx.Err(); err != nil {
		return view, err
	}
	return view, nil
}

// observeNode reads one node. A settled node costs two commands, pipelined: CLUSTER NODES and
// INFO replication keyspace server. CLUSTER INFO joins them unless the node said
// cluster_state:ok over two observations whose CLUSTER NODES had the same shape (nodesShape)
// and this one's shape and run_id are still the same (nodeMemo.infoReusable): the reply is
// then the remembered one, which every field of it but the epochs and the message counters
// follows from that shape. When the shape or the run_id turned out changed, the node is read
// again with CLUSTER INFO, so the view never pairs a remembered CLUSTER INFO with a changed
// topology. CONFIG GET cluster-node-timeout joins the first read of a node, after a restart
// (a new run_id), after the engine set config on it and every configMaxAge.
func (e *Engine) observeNode(ctx context.Context, c *conns, ep Endpoint) *NodeView {
	cl := c.get(ep.Addr)
	memo := c.memo(ep.Addr)
	cctx, cancel := e.cmdCtx(ctx)
	defer cancel()
	now := time.Now()
	reusable := memo.infoReusable()
	r := e.readNode(cctx, cl, !reusable, memo.configStale(now))
	if r.err != nil {
		return &NodeView{Endpoint: ep, Err: r.err}
	}
	if r.runID != memo.runID {
		memo = nodeMemo{runID: r.runID}
	}
	again := false
	if r.info == nil && !(memo.infoReusable() && r.shape == memo.shape) || memo.configStale(now) && !r.configRead {
		again = true
		if r = e.readNode(cctx, cl, true, memo.configStale(now)); r.err != nil {
			return &NodeView{Endpoint: ep, Err: r.err}
		}
		if r.runID != memo.runID {
			memo = nodeMemo{runID: r.runID}
		}
	}
	if r.info != nil {
		memo.stable = !again && memo.shape == r.shape
		memo.info, memo.shape = *r.info, r.shape
	}
	if r.configRead {
		memo.nodeTimeout, memo.timeoutAt = r.nodeTimeout, now
	}
	c.remember(ep.Addr, memo)
	return &NodeView{
		Endpoint: ep, ID: r.id, Known: r.known, Info: memo.info,
		Replication: r.repl, Keys: r.keys, NodeTimeout: memo.nodeTimeout,
	}
}

// nodeReading is one pipelined read of a node by readNode.
type nodeReading struct {
	err   error // the node's error: unreachable, refused, or a reply that did not parse
	id    string
	known []NodeRecord
	shape string
	repl  ReplicationInfo
	keys  int64
	runID string
	info  *ClusterInfo // nil when not asked
	// configRead says CONFIG GET was asked; nodeTimeout is then its value, 0 when refused.
	configRead  bool
	nodeTimeout time.Duration
}

// readNode pipelines CLUSTER NODES and INFO replication keyspace server (Redis 7 takes
// several sections), with CLUSTER INFO when withInfo and CONFIG GET cluster-node-timeout when
// withConfig.
func (e *Engine) readNode(ctx context.Context, cl *redis.Client, withInfo, withConfig bool) nodeReading {
	var r nodeReading
	pipe := cl.Pipeline()
	nodesCmd := pipe.ClusterNodes(ctx)
	infoCmd := pipe.Info(ctx, "replication", "keyspace", "server")
	var clusterCmd *redis.StringCmd
	if withInfo {
		clusterCmd = pipe.ClusterInfo(ctx)
	}
	var timeoutCmd *redis.MapStringStringCmd
	if withConfig {
		timeoutCmd = pipe.ConfigGet(ctx, "cluster-node-timeout")
	}
	_, execErr := pipe.Exec(ctx) // per-command errors are examined below
	if r.err = connErr(execErr); r.err != nil {
		return r
	}
	if err := nodesCmd.Err(); err != nil {
		r.err = classify(err)
		return r
	}
	known, err := ParseClusterNodes(nodesCmd.Val())
	if err != nil {
		r.err = err
		return r
	}
	for _, k := range known {
		if k.Flags.Myself {
			r.id = k.ID
		}
	}
	if r.id == "" {
		r.err = parseErr("CLUSTER NODES has no myself entry")
		return r
	}
	if err := infoCmd.Err(); err != nil {
		return nodeReading{err: classify(err)}
	}
	if r.repl, r.keys, r.runID, err = ParseNodeInfo(infoCmd.Val()); err != nil {
		return nodeReading{err: err}
	}
	if clusterCmd != nil {
		if err := clusterCmd.Err(); err != nil {
			return nodeReading{err: classify(err)}
		}
		info, err := ParseClusterInfo(clusterCmd.Val())
		if err != nil {
			return nodeReading{err: err}
		}
		r.info = &info
	}
	if timeoutCmd != nil {
		r.configRead = true
		if timeoutCmd.Err() == nil { // CONFIG may be renamed away; the default is then assumed
			if ms, err := strconv.Atoi(timeoutCmd.Val()["cluster-node-timeout"]); err == nil {
				r.nodeTimeout = time.Duration(ms) * time.Millisecond
			}
		}
	}
	r.known, r.shape = known, nodesShape(nodesCmd.Val())
	return r
}

// classify wraps authentication failures in ErrAuth.
func classify(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if strings.HasPrefix(msg, "WRONGPASS") || strings.HasPrefix(msg, "NOAUTH") ||
		strings.Contains(msg, "invalid password") || strings.Contains(msg, "invalid username-password") {
		return fmt.Errorf("%w: %w", ErrAuth, err)
	}
	return err
}

// connErr returns the error of a pipeline that failed as a whole — connection refused,
// timeout, or a rejected AUTH while connecting (go-redis then leaves the commands without
// their own error) — and nil for replies of individual commands.
func connErr(err error) error {
	if err == nil {
		return nil
	}
	if c := classify(err); errors.Is(c, ErrAuth) {
		return c
	}
	var rerr redis.Error
	if errors.As(err, &rerr) {
		return nil
	}
	return err
}

// authErrors lists the nodes of the view that rejected the password.
func (v *ClusterView) authErrors() []error {
	var out []error
	for _, n := range v.Nodes {
		if n.Err != nil && errors.Is(n.Err, ErrAuth) {
			out = append(out, fmt.Errorf("%s: %w", n.Endpoint.Name, n.Err))
		}
	}
	return out
}
