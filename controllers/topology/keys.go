package topology

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// migrateBatch is one MIGRATE ... KEYS call: keys of one slot.
type migrateBatch struct {
	slot  int
	keys  []string
	bytes int64
}

// migrateTimeout is MIGRATE's timeout argument for a move between n and t: the longest the
// source's event loop waits on the target for one read or write (command page MIGRATE:
// "the maximum idle time in any moment of the communication with the destination
// instance"). It is MigrateTimeout, capped at a quarter of the larger cluster-node-timeout
// of the two (15 s when unknown) and at least 100 ms, so that a stalled target cannot keep
// the source from answering the cluster bus until it is flagged as failing.
func (e *Engine) migrateTimeout(n, t *NodeView) time.Duration {
	nt := maxNodeTimeout(n, t)
	return max(min(e.opts.MigrateTimeout, nt/4), 100*time.Millisecond)
}

// drainKeys moves every key of slots from n to t and returns the number of keys moved. Each
// pass reads up to MigrateBatch key names per slot (pipelined CLUSTER GETKEYSINSLOT) and
// their sizes (pipelined MEMORY USAGE), cuts them into MIGRATE ... KEYS batches of at most
// MigrateBatch keys and the sizer's batch bytes (a larger key goes alone), and sends the
// batches pipelined in chunks of at most the sizer's chunk bytes (a chunk holds one batch at
// least), telling the sizer how long each took: the source runs a chunk's MIGRATEs back to
// back in its event loop, so the chunk bounds how long it serves nobody else. ctx is checked
// between chunks; commands run to completion once sent.
//
// MIGRATE runs without REPLACE, so a key that already exists on t is never overwritten
// blindly: Redis answers BUSYKEY for it (the other keys of the batch still move), and
// resolveBusy compares the two values: equal values finish with REPLACE; different values
// stop the move with ErrKeyConflict, with both copies left as they are.
//
// first, when not nil, holds the CLUSTER GETKEYSINSLOT replies for slots already read (the
// caller pipelined them with its own commands) and serves the first pass.
func (e *Engine) drainKeys(ctx context.Context, c *conns, n, t *NodeView, slots []int, first []*redis.StringSliceCmd, sizer *chunkSizer) (int64, error) {
	host, port, err := net.SplitHostPort(t.Endpoint.Addr)
	if err != nil {
		return 0, err
	}
	cl := c.get(n.Endpoint.Addr)
	timeout := e.migrateTimeout(n, t)
	var moved int64
	pending := slots
	for len(pending) > 0 {
		if err := ctx.Err(); err != nil {
			return moved, err
		}
		_, batchBytes := sizer.size()
		batches, next, err := e.scanBatches(ctx, cl, n, pending, first, batchBytes)
		first = nil
		if err != nil {
			return moved, err
		}
		for len(batches) > 0 {
			if err := ctx.Err(); err != nil {
				return moved, err
			}
			chunkBytes, _ := sizer.size()
			k, bytes := 1, batches[0].bytes
			for k < len(batches) && bytes+batches[k].bytes <= chunkBytes {
				bytes += batches[k].bytes
				k++
			}
			chunk := batches[:k]
			batches = batches[k:]
			sent := time.Now()
			keys, busy, err := e.migrateChunk(ctx, cl, n, t, host, port, timeout, chunk, false)
			sizer.observe(bytes, time.Since(sent))
			moved += keys
			if err != nil {
				return moved, err
			}
			for _, b := range busy {
				keys, err := e.resolveBusy(ctx, c, n, t, host, port, timeout, b)
				moved += keys
				if err != nil {
					return moved, err
				}
				if !slices.Contains(next, b.slot) {
					next = append(next, b.slot) // scan again: the slot may hold more
				}
			}
		}
		pending = next
	}
	return moved, nil
}

// scanBatches reads up to MigrateBatch key names of each slot (unless gets holds them
// already) and their MEMORY USAGE, and cuts them into batches of at most batchBytes (a
// larger key alone). next lists the slots that returned a full batch of names.
func (e *Engine) scanBatches(ctx context.Context, cl *redis.Client, n *NodeView, slots []int, gets []*redis.StringSliceCmd, batchBytes int64) ([]migrateBatch, []int, error) {
	cctx, cancel := e.cmdCtx(context.WithoutCancel(ctx))
	defer cancel()
	batch := e.opts.MigrateBatch
	if gets == nil {
		pipe := cl.Pipeline()
		gets = e.queueKeysInSlots(cctx, pipe, slots)
		if err := execPipe(cctx, pipe, n.Endpoint.Name); err != nil {
			return nil, nil, err
		}
	}
	var next []int
	pipe := cl.Pipeline()
	sizes := make([][]*redis.IntCmd, len(slots))
	for i, g := range gets {
		if len(g.Val()) == batch {
			next = append(next, slots[i])
		}
		for _, k := range g.Val() {
			sizes[i] = append(sizes[i], pipe.MemoryUsage(cctx, k))
		}
	}
	// MEMORY USAGE answers nil for a key deleted since the scan: it then counts as 0 bytes.
	if _, err := pipe.Exec(cctx); connErr(err) != nil {
		return nil, nil, fmt.Errorf("%s: MEMORY USAGE: %w", n.Endpoint.Name, connErr(err))
	}
	var out []migrateBatch
	for i, g := range gets {
		var cur *migrateBatch
		for j, k := range g.Val() {
			size := sizes[i][j].Val()
			if cur == nil || len(cur.keys) >= batch || (len(cur.keys) > 0 && cur.bytes+size > batchBytes) {
				out = append(out, migrateBatch{slot: slots[i]})
				cur = &out[len(out)-1]
			}
			cur.keys = append(cur.keys, k)
			cur.bytes += size
		}
	}
	return out, next, nil
}

// queueKeysInSlots queues CLUSTER GETKEYSINSLOT <slot> MigrateBatch for each slot.
func (e *Engine) queueKeysInSlots(ctx context.Context, pipe redis.Pipeliner, slots []int) []*redis.StringSliceCmd {
	gets := make([]*redis.StringSliceCmd, len(slots))
	for i, s := range slots {
		gets[i] = pipe.ClusterGetKeysInSlot(ctx, s, e.opts.MigrateBatch)
	}
	return gets
}

// migrateArgs builds MIGRATE host port "" 0 timeout [REPLACE] [AUTH pw] KEYS keys...
func (e *Engine) migrateArgs(host, port string, timeout time.Duration, replace bool, keys []string) []any {
	args := []any{"MIGRATE", host, port, "", 0, timeout.Milliseconds()}
	if replace {
		args = append(args, "REPLACE")
	}
	if e.opts.Password != "" {
		args = append(args, "AUTH", e.opts.Password)
	}
	args = append(args, "KEYS")
	for _, k := range keys {
		args = append(args, k)
	}
	return args
}

// migrateChunk pipelines one MIGRATE per batch and returns the keys moved and the batches
// that hit BUSYKEY.
func (e *Engine) migrateChunk(ctx context.Context, cl *redis.Client, n, t *NodeView, host, port string, timeout time.Duration,
	chunk []migrateBatch, replace bool) (int64, []migrateBatch, error) {
	// Each MIGRATE may wait up to timeout per I/O on the target; allow a few of them each.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.opts.CommandTimeout+time.Duration(3*len(chunk))*timeout)
	defer cancel()
	pipe := cl.Pipeline()
	cmds := make([]*redis.Cmd, len(chunk))
	for i, b := range chunk {
		cmds[i] = pipe.Do(cctx, e.migrateArgs(host, port, timeout, replace, b.keys)...)
	}
	if _, err := pipe.Exec(cctx); connErr(err) != nil {
		return 0, nil, fmt.Errorf("%s: %w", n.Endpoint.Name, connErr(err))
	}
	var moved int64
	var busy []migrateBatch
	for i, cmd := range cmds {
		switch err := cmd.Err(); {
		case err == nil:
			moved += int64(len(chunk[i].keys))
		case strings.HasPrefix(err.Error(), "NOKEY"):
		case strings.Contains(err.Error(), "BUSYKEY"):
			busy = append(busy, chunk[i])
		default:
			return moved, busy, fmt.Errorf("%s: MIGRATE to %s: %w", n.Endpoint.Name, t.Endpoint.Name, classify(err))
		}
	}
	return moved, busy, nil
}

// resolveBusy handles a batch that MIGRATE answered with BUSYKEY: for every key of it that
// is still on n and also on t, the two values are compared (DUMP payloads, then, when they
// differ, the values themselves: sameValue). Keys with equal values are finished with one
// MIGRATE ... REPLACE (the value on n is the live one while the slot migrates, and t's
// copy is the same data). A key whose values differ stops the move with ErrKeyConflict
// naming the slot and the key; neither copy is touched. It returns the keys moved.
func (e *Engine) resolveBusy(ctx context.Context, c *conns, n, t *NodeView, host, port string, timeout time.Duration, b migrateBatch) (int64, error) {
	srcCl, dstCl := c.get(n.Endpoint.Addr), c.get(t.Endpoint.Addr)
	srcDumps, err := e.dumps(ctx, srcCl, n.Endpoint.Name, b.keys)
	if err != nil {
		return 0, err
	}
	dstDumps, err := e.dumps(ctx, dstCl, t.Endpoint.Name, b.keys)
	if err != nil {
		return 0, err
	}
	var equal []string
	var conflicts []string
	for i, k := range b.keys {
		if srcDumps[i] == nil || dstDumps[i] == nil {
			continue // moved meanwhile, or not on t: the next scan handles it
		}
		same := *srcDumps[i] == *dstDumps[i]
		if !same {
			if same, err = e.sameValue(ctx, srcCl, dstCl, k); err != nil {
				return 0, fmt.Errorf("comparing key %q of slot %d on %s and %s: %w", k, b.slot, n.Endpoint.Name, t.Endpoint.Name, err)
			}
		}
		if same {
			equal = append(equal, k)
		} else {
			conflicts = append(conflicts, k)
		}
	}
	var moved int64
	if len(equal) > 0 {
		e.log.Info("Key already on the target with the same value; finishing it with MIGRATE REPLACE",
			"from", n.Endpoint.Name, "to", t.Endpoint.Name, "slot", b.slot, "keys", len(equal))
		keys, busy, err := e.migrateChunk(ctx, srcCl, n, t, host, port, timeout, []migrateBatch{{slot: b.slot, keys: equal}}, true)
		if err != nil {
			return keys, err
		}
		if len(busy) > 0 {
			return keys, fmt.Errorf("%s: MIGRATE REPLACE to %s answered BUSYKEY", n.Endpoint.Name, t.Endpoint.Name)
		}
		moved += keys
	}
	if len(conflicts) > 0 {
		return moved, fmt.Errorf("%w: slot %d: key %q is on both %s and %s with different values; the move stopped and neither copy was changed (%d such keys in the batch)",
			ErrKeyConflict, b.slot, conflicts[0], n.Endpoint.Name, t.Endpoint.Name, len(conflicts))
	}
	return moved, nil
}

// askingPipe runs one read per key on cl, each preceded by ASKING so that a node importing
// the key's slot serves it (spec: "ASK redirection"); harmless on the slot's owner. A key
// answered with nil or with an ASK redirection is absent on that node (the command then
// carries that error, which callers treat as "no value").
func (e *Engine) askingPipe(ctx context.Context, cl *redis.Client, name string, keys []string, read func(context.Context, redis.Pipeliner, string) redis.Cmder) ([]redis.Cmder, error) {
	cctx, cancel := e.cmdCtx(context.WithoutCancel(ctx))
	defer cancel()
	pipe := cl.Pipeline()
	cmds := make([]redis.Cmder, len(keys))
	for i, k := range keys {
		pipe.Do(cctx, "ASKING")
		cmds[i] = read(cctx, pipe, k)
	}
	if _, err := pipe.Exec(cctx); connErr(err) != nil {
		return nil, fmt.Errorf("%s: %w", name, connErr(err))
	}
	for _, cmd := range cmds {
		// A node migrating the slot answers ASK for a key it no longer holds: absent here.
		if err := cmd.Err(); err != nil && !errors.Is(err, redis.Nil) && !strings.HasPrefix(err.Error(), "ASK ") {
			return nil, fmt.Errorf("%s: %s: %w", name, strings.Join(argStrings(cmd.Args()), " "), classify(err))
		}
	}
	return cmds, nil
}

// dumps reads DUMP of each key (command page DUMP: the serialized value with its RDB version
// and checksum); nil for a key that does not exist.
func (e *Engine) dumps(ctx context.Context, cl *redis.Client, name string, keys []string) ([]*string, error) {
	cmds, err := e.askingPipe(ctx, cl, name, keys, func(ctx context.Context, p redis.Pipeliner, k string) redis.Cmder {
		return p.Dump(ctx, k)
	})
	if err != nil {
		return nil, err
	}
	out := make([]*string, len(keys))
	for i, cmd := range cmds {
		if sc := cmd.(*redis.StringCmd); sc.Err() == nil {
			v := sc.Val()
			out[i] = &v
		}
	}
	return out, nil
}
