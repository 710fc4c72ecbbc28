package topology

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// Engine drives a Redis Cluster towards a Desired shape. It holds no connections between
// calls; each call opens what it needs and closes it before returning. Safe for concurrent
// use, but two calls acting on the same cluster at once would fight: the controller runs
// one at a time per cluster.
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

// newClient is the one go-redis client configuration of the engine, for the node at addr
// with password ("" for none): RESP2 (no HELLO), no CLIENT SETINFO on connect (a Redis 7.2
// command), go-redis's maintenance notifications off, opts' dial and command timeouts
// bounding every call along with its context, poolSize connections, and no retries (the
// engine observes again and plans anew instead).
func newClient(opts Options, addr, password string, poolSize int) *redis.Client {
	return redis.NewClient(&redis.Options{
		Addr:                  addr,
		Password:              password,
		Protocol:              2,
		DisableIdentity:       true,
		DialTimeout:           opts.DialTimeout,
		ReadTimeout:           opts.CommandTimeout,
		WriteTimeout:          opts.CommandTimeout,
		ContextTimeoutEnabled: true,
		MaxRetries:            -1,
		PoolSize:              poolSize,
		MaintNotificationsConfig: &maintnotifications.Config{
			Mode: maintnotifications.ModeDisabled,
		},
	})
}

// conns caches one client per address for the duration of one engine call.
type conns struct {
	opts    Options
	mu      sync.Mutex
	clients map[string]*redis.Client
}

func (e *Engine) newConns() *conns {
	return &conns{opts: e.opts, clients: map[string]*redis.Client{}}
}

func (c *conns) get(addr string) *redis.Client {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cl, ok := c.clients[addr]; ok {
		return cl
	}
	cl := newClient(c.opts, addr, c.opts.Password, 4)
	c.clients[addr] = cl
	return cl
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

// Observe connects to each endpoint and reads CLUSTER NODES, CLUSTER INFO, CLUSTER SHARDS,
// INFO replication, DBSIZE and cluster-node-timeout into a typed view (spec: "Cluster
// topology"). Unreachable nodes, and nodes whose replies do not parse, are kept with their
// error; an authentication failure wraps ErrAuth. The error is non-nil only for invalid
// endpoints (ErrInvalidDesired) or a done context.
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
	view := &ClusterView{Nodes: make([]*NodeView, len(eps))}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i, ep := range eps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			view.Nodes[i] = e.observeNode(ctx, c.get(ep.Addr), ep)
		}()
	}
	wg.Wait()
	view.ObservedAt = time.Now()
	if err := ctx.Err(); err != nil {
		return view, err
	}
	return view, nil
}

func (e *Engine) observeNode(ctx context.Context, cl *redis.Client, ep Endpoint) *NodeView {
	n := &NodeView{Endpoint: ep}
	cctx, cancel := e.cmdCtx(ctx)
	defer cancel()
	pipe := cl.Pipeline()
	nodesCmd := pipe.ClusterNodes(cctx)
	infoCmd := pipe.ClusterInfo(cctx)
	shardsCmd := pipe.Do(cctx, "CLUSTER", "SHARDS")
	replCmd := pipe.Info(cctx, "replication")
	sizeCmd := pipe.DBSize(cctx)
	timeoutCmd := pipe.ConfigGet(cctx, "cluster-node-timeout")
	_, execErr := pipe.Exec(cctx) // per-command errors are examined below
	if err := connErr(execErr); err != nil {
		n.Err = err
		return n
	}
	if err := nodesCmd.Err(); err != nil {
		n.Err = classify(err)
		return n
	}
	var err error
	if n.Known, err = ParseClusterNodes(nodesCmd.Val()); err != nil {
		n.Err = err
		return n
	}
	self := n.Self()
	if self == nil {
		n.Err = parseErr("CLUSTER NODES has no myself entry")
		n.Known = nil
		return n
	}
	n.ID = self.ID
	fail := func(err error) *NodeView {
		return &NodeView{Endpoint: ep, Err: err}
	}
	if err := infoCmd.Err(); err != nil {
		return fail(classify(err))
	}
	if n.Info, err = ParseClusterInfo(infoCmd.Val()); err != nil {
		return fail(err)
	}
	if err := shardsCmd.Err(); err != nil {
		return fail(classify(err))
	}
	if n.Shards, err = ParseClusterShards(shardsCmd.Val()); err != nil {
		return fail(err)
	}
	if err := replCmd.Err(); err != nil {
		return fail(classify(err))
	}
	if n.Replication, err = ParseReplicationInfo(replCmd.Val()); err != nil {
		return fail(err)
	}
	if err := sizeCmd.Err(); err != nil {
		return fail(classify(err))
	}
	n.Keys = sizeCmd.Val()
	if timeoutCmd.Err() == nil { // CONFIG may be renamed away; the default is then assumed
		if ms, err := strconv.Atoi(timeoutCmd.Val()["cluster-node-timeout"]); err == nil {
			n.NodeTimeout = time.Duration(ms) * time.Millisecond
		}
	}
	return n
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
