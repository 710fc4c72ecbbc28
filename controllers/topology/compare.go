package topology

import (
	"context"
	"maps"
	"slices"

	"github.com/redis/go-redis/v9"
)

// sameValue compares the value of key on two nodes logically, for when their DUMP payloads
// differ although the data may be the same (an encoding chosen differently, e.g. a listpack
// on one node and a hash table on the other, or a set in another order). Strings, hashes,
// lists, sets and sorted sets are compared by content (GET, HGETALL, LRANGE, SMEMBERS,
// ZRANGE WITHSCORES); other types, and different types, count as different. Every read is
// preceded by ASKING (the key's slot may be importing). Expiry times are not compared. A key
// that vanished from either node meanwhile counts as the same: moving the remaining copy
// overwrites nothing.
func (e *Engine) sameValue(ctx context.Context, a, b *redis.Client, key string) (bool, error) {
	read := func(cl *redis.Client, f func(context.Context, redis.Pipeliner, string) redis.Cmder) (redis.Cmder, error) {
		cmds, err := e.askingPipe(ctx, cl, cl.Options().Addr, []string{key}, f)
		if err != nil {
			return nil, err
		}
		return cmds[0], nil
	}
	typeOf := func(ctx context.Context, p redis.Pipeliner, k string) redis.Cmder { return p.Type(ctx, k) }
	ta, err := read(a, typeOf)
	if err != nil {
		return false, err
	}
	tb, err := read(b, typeOf)
	if err != nil {
		return false, err
	}
	typ, typB := ta.(*redis.StatusCmd).Val(), tb.(*redis.StatusCmd).Val()
	if absent := func(t string) bool { return t == "" || t == "none" }; absent(typ) || absent(typB) {
		// Gone from one node since the DUMP: nothing is overwritten by moving the other.
		return true, nil
	}
	if typ != typB {
		return false, nil
	}
	var get func(context.Context, redis.Pipeliner, string) redis.Cmder
	switch typ {
	case "string":
		get = func(ctx context.Context, p redis.Pipeliner, k string) redis.Cmder { return p.Get(ctx, k) }
	case "hash":
		get = func(ctx context.Context, p redis.Pipeliner, k string) redis.Cmder { return p.HGetAll(ctx, k) }
	case "list":
		get = func(ctx context.Context, p redis.Pipeliner, k string) redis.Cmder { return p.LRange(ctx, k, 0, -1) }
	case "set":
		get = func(ctx context.Context, p redis.Pipeliner, k string) redis.Cmder { return p.SMembers(ctx, k) }
	case "zset":
		get = func(ctx context.Context, p redis.Pipeliner, k string) redis.Cmder {
			return p.ZRangeWithScores(ctx, k, 0, -1)
		}
	default:
		return false, nil
	}
	va, err := read(a, get)
	if err != nil {
		return false, err
	}
	vb, err := read(b, get)
	if err != nil {
		return false, err
	}
	switch x := va.(type) {
	case *redis.StringCmd:
		return x.Val() == vb.(*redis.StringCmd).Val(), nil
	case *redis.MapStringStringCmd:
		return maps.Equal(x.Val(), vb.(*redis.MapStringStringCmd).Val()), nil
	case *redis.StringSliceCmd:
		xa, xb := x.Val(), vb.(*redis.StringSliceCmd).Val()
		if typ == "set" {
			xa, xb = slices.Clone(xa), slices.Clone(xb)
			slices.Sort(xa)
			slices.Sort(xb)
		}
		return slices.Equal(xa, xb), nil
	case *redis.ZSliceCmd:
		// ZRANGE orders by score then member: equal sets give equal slices.
		return slices.EqualFunc(x.Val(), vb.(*redis.ZSliceCmd).Val(), func(p, q redis.Z) bool {
			return p.Score == q.Score && p.Member == q.Member
		}), nil
	}
	return false, nil
}
