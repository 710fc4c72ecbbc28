package redistest

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// Dataset describes a deterministic set of keys of mixed types. Key i has type i%5
// (string, hash, list, set, sorted set); every LargeEvery-th key is a hash with LargeFields
// fields. Values derive from the key index, so Verify needs no stored copy.
type Dataset struct {
	Prefix      string
	Keys        int
	LargeEvery  int // 0: no large hashes
	LargeFields int
}

// Key returns the name of key i.
func (d Dataset) Key(i int) string { return d.Prefix + ":" + strconv.Itoa(i) }

// ClusterClient returns a cluster-aware client seeded with the given nodes' addresses; it is
// closed when the test ends.
func ClusterClient(t testing.TB, password string, addrs ...string) *redis.ClusterClient {
	c := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:                    addrs,
		Password:                 password,
		Protocol:                 2,
		DisableIdentity:          true,
		MaxRedirects:             16,
		ReadTimeout:              20 * time.Second,
		WriteTimeout:             20 * time.Second,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func (d Dataset) large(i int) bool { return d.LargeEvery > 0 && i%d.LargeEvery == 0 }

func (d Dataset) write(ctx context.Context, p redis.Pipeliner, i int) {
	k := d.Key(i)
	v := "v" + strconv.Itoa(i)
	switch {
	case d.large(i):
		fields := make([]any, 0, 2*d.LargeFields)
		for f := range d.LargeFields {
			fields = append(fields, "f"+strconv.Itoa(f), v+"-"+strconv.Itoa(f))
		}
		p.HSet(ctx, k, fields...)
	case i%5 == 0:
		p.Set(ctx, k, v, 0)
	case i%5 == 1:
		p.HSet(ctx, k, "a", v, "b", i)
	case i%5 == 2:
		p.RPush(ctx, k, v, "x", "y")
	case i%5 == 3:
		p.SAdd(ctx, k, v, "s")
	default:
		p.ZAdd(ctx, k, redis.Z{Score: float64(i), Member: v})
	}
}

// queueCheck queues the reads that verify key i and returns a function that checks their
// results after the pipeline ran.
func (d Dataset) queueCheck(ctx context.Context, p redis.Pipeliner, i int) func() error {
	k := d.Key(i)
	v := "v" + strconv.Itoa(i)
	switch {
	case d.large(i):
		n := p.HLen(ctx, k)
		lastField := "f" + strconv.Itoa(d.LargeFields-1)
		last := p.HGet(ctx, k, lastField)
		return func() error {
			if n.Err() != nil || last.Err() != nil {
				return fmt.Errorf("large hash %s: %v %v", k, n.Err(), last.Err())
			}
			if int(n.Val()) != d.LargeFields || last.Val() != v+"-"+strconv.Itoa(d.LargeFields-1) {
				return fmt.Errorf("large hash %s: %d fields, %s=%q", k, n.Val(), lastField, last.Val())
			}
			return nil
		}
	case i%5 == 0:
		c := p.Get(ctx, k)
		return func() error { return want(k, c.Val(), c.Err(), v) }
	case i%5 == 1:
		c := p.HGet(ctx, k, "a")
		return func() error { return want(k, c.Val(), c.Err(), v) }
	case i%5 == 2:
		c := p.LIndex(ctx, k, 0)
		return func() error { return want(k, c.Val(), c.Err(), v) }
	case i%5 == 3:
		c := p.SIsMember(ctx, k, v)
		return func() error { return want(k, strconv.FormatBool(c.Val()), c.Err(), "true") }
	default:
		c := p.ZScore(ctx, k, v)
		return func() error { return want(k, strconv.Itoa(int(c.Val())), c.Err(), strconv.Itoa(i)) }
	}
}

func want(key, got string, err error, expected string) error {
	if err != nil {
		return fmt.Errorf("%s: %w", key, err)
	}
	if got != expected {
		return fmt.Errorf("%s: got %q, want %q", key, got, expected)
	}
	return nil
}

// Load writes the dataset through c with pipelines in parallel.
func Load(t testing.TB, c *redis.ClusterClient, d Dataset) {
	t.Helper()
	if err := forChunks(d.Keys, func(ctx context.Context, from, to int) error {
		_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i := from; i < to; i++ {
				d.write(ctx, p, i)
			}
			return nil
		})
		return err
	}); err != nil {
		t.Fatalf("redistest: load %d keys: %v", d.Keys, err)
	}
}

// Verify reads every key of the dataset back through c and fails the test on the first
// missing or wrong value.
func Verify(t testing.TB, c *redis.ClusterClient, d Dataset) {
	t.Helper()
	if err := VerifyErr(c, d); err != nil {
		t.Fatalf("redistest: verify: %v", err)
	}
}

// VerifyErr is Verify returning the first error instead of failing.
func VerifyErr(c *redis.ClusterClient, d Dataset) error {
	return forChunks(d.Keys, func(ctx context.Context, from, to int) error {
		checks := make([]func() error, 0, to-from)
		// Per-command errors (redis.Nil for a missing key) are checked one by one below.
		_, _ = c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i := from; i < to; i++ {
				checks = append(checks, d.queueCheck(ctx, p, i))
			}
			return nil
		})
		for _, check := range checks {
			if err := check(); err != nil {
				return err
			}
		}
		return nil
	})
}

// forChunks runs fn over [0,n) in chunks of 1000 with 8 workers.
func forChunks(n int, fn func(ctx context.Context, from, to int) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const chunk = 1000
	next := make(chan int)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for from := range next {
				to := min(from+chunk, n)
				if err := fn(ctx, from, to); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
						cancel()
					}
					mu.Unlock()
				}
			}
		}()
	}
	for from := 0; from < n; from += chunk {
		if ctx.Err() != nil {
			break
		}
		next <- from
	}
	close(next)
	wg.Wait()
	return firstErr
}
