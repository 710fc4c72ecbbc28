//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// writerOptions shape a background writer.
type writerOptions struct {
	// Wait counts a write as acknowledged only once `WAIT 1` confirms that
	// a replica has it: for scenarios with an unplanned failure, where an
	// acknowledged write the master had not replicated may legitimately
	// be lost (Redis replicates asynchronously).
	Wait bool
	// Interval is the pause between two writes (default 10 ms).
	Interval time.Duration
	// Max bounds the number of writes (default 30000).
	Max int
}

// writer writes unique keys one after the other until stopped and
// records every acknowledged write and every failed one.
type writer struct {
	t      testing.TB
	c      *redis.ClusterClient
	prefix string
	token  string
	opts   writerOptions

	mu           sync.Mutex
	acked        []int
	unreplicated []int
	attempts     int
	failed       []writeFailure

	stopCh chan struct{}
	done   chan struct{}
}

// writeTimeout bounds one write with its retries.
const writeTimeout = 15 * time.Second

// writeFailure is one write the client gave up on: it was sent at
// started and given up at at (after its retries or writeTimeout).
type writeFailure struct {
	started time.Time
	at      time.Time
	err     string
}

// errNotReplicated: the master took the write but no replica confirmed it
// within the WAIT timeout.
var errNotReplicated = errors.New("WAIT 1: no replica acknowledged the write")

// startWriter starts writing keys <prefix>:<n> with values that name the
// run, so that a stale value from another run cannot pass.
func startWriter(t testing.TB, c *redis.ClusterClient, prefix string, opts writerOptions) *writer {
	if opts.Interval == 0 {
		opts.Interval = 10 * time.Millisecond
	}
	if opts.Max == 0 {
		opts.Max = 30000
	}
	w := &writer{t: t, c: c, prefix: prefix, token: randomToken(), opts: opts,
		stopCh: make(chan struct{}), done: make(chan struct{})}
	go w.run()
	t.Cleanup(w.stop)
	return w
}

func (w *writer) key(i int) string   { return fmt.Sprintf("%s:%d", w.prefix, i) }
func (w *writer) value(i int) string { return fmt.Sprintf("%s-%d-%s", w.prefix, i, w.token) }

func (w *writer) run() {
	defer close(w.done)
	for i := 0; i < w.opts.Max; i++ {
		select {
		case <-w.stopCh:
			return
		default:
		}
		started := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
		var err error
		if w.opts.Wait {
			err = w.writeWaited(ctx, w.key(i), w.value(i))
		} else {
			err = w.c.Set(ctx, w.key(i), w.value(i), 0).Err()
		}
		cancel()
		w.mu.Lock()
		w.attempts++
		if err == nil {
			w.acked = append(w.acked, i)
		} else {
			w.failed = append(w.failed, writeFailure{started: started, at: time.Now(), err: err.Error()})
		}
		if errors.Is(err, errNotReplicated) {
			w.unreplicated = append(w.unreplicated, i)
		}
		w.mu.Unlock()
		select {
		case <-w.stopCh:
			return
		case <-time.After(w.opts.Interval):
		}
	}
}

// writeWaited sends SET and WAIT 1 in one pipeline to the key's master,
// following MOVED, ASK and connection errors by reloading the slot map
// and trying again, a few times.
func (w *writer) writeWaited(ctx context.Context, key, value string) error {
	var err error
	for try := 0; try < 6; try++ {
		if try > 0 {
			w.c.ReloadState(ctx)
			select {
			case <-ctx.Done():
				return err
			case <-time.After(time.Duration(100*try) * time.Millisecond):
			}
		}
		var node *redis.Client
		if node, err = w.c.MasterForKey(ctx, key); err != nil {
			continue
		}
		var wait *redis.Cmd
		_, err = node.Pipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, key, value, 0)
			wait = p.Do(ctx, "WAIT", 1, 2000) // replicas that confirmed, waiting at most 2000 ms
			return nil
		})
		if err != nil {
			continue
		}
		if n, _ := wait.Int64(); n >= 1 {
			return nil
		}
		err = errNotReplicated
	}
	return err
}

// stop ends the writing and waits for the write in flight.
func (w *writer) stop() {
	select {
	case <-w.stopCh:
	default:
		close(w.stopCh)
	}
	<-w.done
}

// writerResult is what a stopped writer did.
type writerResult struct {
	Attempts int
	Acked    []int
	Failed   []writeFailure
	// Unreplicated are the writes (with Wait) whose last try a master took
	// but no replica confirmed within the WAIT timeout: not acknowledged,
	// yet a master that keeps its role keeps them.
	Unreplicated []int
}

func (r writerResult) String() string {
	s := fmt.Sprintf("%d writes, %d acknowledged, %d failed", r.Attempts, len(r.Acked), len(r.Failed))
	if len(r.Failed) > 0 {
		s += fmt.Sprintf(" (first: %s at %s)", r.Failed[0].err, r.Failed[0].at.Format("15:04:05.000"))
	}
	return s
}

// result stops the writer and returns what it did.
func (w *writer) result() writerResult {
	w.stop()
	w.mu.Lock()
	defer w.mu.Unlock()
	return writerResult{Attempts: w.attempts, Acked: append([]int(nil), w.acked...), Failed: append([]writeFailure(nil), w.failed...),
		Unreplicated: append([]int(nil), w.unreplicated...)}
}

// failures are the writes that failed so far; the writer goes on.
func (w *writer) failures() []writeFailure {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]writeFailure(nil), w.failed...)
}

// waitWrites blocks until the writer has acknowledged n more writes than
// when called, so that a scenario's disruption happens under writes.
func (w *writer) waitWrites(n int, timeout time.Duration) {
	w.t.Helper()
	w.mu.Lock()
	want := len(w.acked) + n
	w.mu.Unlock()
	deadline := time.Now().Add(timeout)
	for {
		w.mu.Lock()
		have := len(w.acked)
		w.mu.Unlock()
		if have >= want {
			return
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("the writer acknowledged %d of %d writes within %s: %s", have-(want-n), n, timeout, w.result())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// verify stops the writer and reads every acknowledged key back through
// c, a client made after the scenario (one that slept through a scale-in
// may still route slots to a removed node for a while): each key must hold
// exactly the value written. It returns the result.
func (w *writer) verify(c *redis.ClusterClient) writerResult {
	w.t.Helper()
	r := w.result()
	if len(r.Acked) == 0 {
		w.t.Fatalf("the writer had no acknowledged write: %s", r)
	}
	w.t.Logf("writer %s: %s", w.prefix, r)
	lost, wrong := w.readBack(c, r.Acked)
	if len(lost) > 0 || len(wrong) > 0 {
		w.t.Fatalf("%s; %d acknowledged keys lost (first %s), %d with a wrong value (first %s)",
			r, len(lost), first(lost), len(wrong), first(wrong))
	}
	w.t.Logf("writer %s: every acknowledged key read back", w.prefix)
	return r
}

// readBack reads the keys of writes idx through c and returns those
// missing and those holding another value than written (as key=value). It
// fails t only when Redis does not answer.
func (w *writer) readBack(c *redis.ClusterClient, idx []int) (lost, wrong []string) {
	w.t.Helper()
	return readKeys(w.t, c, len(idx), func(j int) (string, string) { return w.key(idx[j]), w.value(idx[j]) })
}

// readKeys reads n keys through c in pipelined batches of 500, kv(j)
// giving the j-th key and the value it must hold, and returns the keys
// missing and those with another value (as key=value). A batch that fails
// as a whole is retried after a slot-map reload, 5 times; a key that still
// cannot be read fails t.
func readKeys(t testing.TB, c *redis.ClusterClient, n int, kv func(j int) (key, value string)) (lost, wrong []string) {
	t.Helper()
	const batch = 500
	for from := 0; from < n; from += batch {
		to := min(from+batch, n)
		var cmds []*redis.StringCmd
		var err error
		for try := 0; try < 5; try++ {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			cmds = nil
			_, err = c.Pipelined(ctx, func(p redis.Pipeliner) error {
				for j := from; j < to; j++ {
					k, _ := kv(j)
					cmds = append(cmds, p.Get(ctx, k))
				}
				return nil
			})
			cancel()
			if err == nil || errors.Is(err, redis.Nil) {
				break
			}
			c.ReloadState(context.Background())
			time.Sleep(time.Second)
		}
		for i, cmd := range cmds {
			k, want := kv(from + i)
			v, err := cmd.Result()
			switch {
			case errors.Is(err, redis.Nil):
				lost = append(lost, k)
			case err != nil:
				t.Fatalf("reading %s back: %v", k, err)
			case v != want:
				wrong = append(wrong, fmt.Sprintf("%s=%q", k, v))
			}
		}
	}
	return lost, wrong
}

func first(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s[:min(5, len(s))], ", ")
}

// failuresOutside lists failed writes that did not overlap [from, to]: given
// up before from or sent after to. A write sent during the window may end
// after it: a client dialling a pod address that went away waits for its
// timeouts on a real network, where nothing refuses the connection.
func (r writerResult) failuresOutside(from, to time.Time) []writeFailure {
	var out []writeFailure
	for _, f := range r.Failed {
		if f.at.Before(from) || f.started.After(to) {
			out = append(out, f)
		}
	}
	return out
}

// randomToken is a short random string for names and passwords.
func randomToken() string { return strconv.FormatUint(rand.Uint64(), 36) }
