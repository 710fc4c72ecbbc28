package topology

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// loadWriter writes SETs through a cluster-aware client (go-redis follows MOVED and ASK) at
// a fixed rate, open loop: write n is due at start + n/rate, and its latency is measured
// from that due time, so time spent queued behind slow writes counts (no coordinated
// omission). Worker w owns keys load:k with k%workers == w and writes them in turn, one at a
// time, so the last acknowledged value of every key is known exactly; a value is its write's
// sequence number, ':' and padding up to the value size.
type loadWriter struct {
	c       *redis.ClusterClient
	rate    int
	pad     string
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	workers []*writerWorker
	start   time.Time
}

type writerWorker struct {
	keys   []int   // key indexes owned
	acked  []int64 // last acknowledged sequence per owned key; -1: none
	unsure []int64 // highest failed sequence per owned key; -1: none
	next   int
	seq    int64
	due    []time.Time // when each write was due
	lat    []time.Duration
	failed int
	err    error // first failure
}

// writerResult is what a loadWriter saw in a window: writes due in it and how many failed,
// the achieved rate (writes/s) and latency percentiles; then what verify read back.
type writerResult struct {
	writes, failed int
	rate           float64
	p50, p99, max  time.Duration
	firstErr       error
	verified, lost int // keys whose last acknowledged write was read back, or not
	verifyErr      error
}

// startLoadWriter starts writing rate SETs per second of value bytes over keyspace keys (split
// among enough workers for the rate at up to 10 ms a write); stop ends it.
func startLoadWriter(c *redis.ClusterClient, rate, value, keyspace int) *loadWriter {
	workers := max(8, rate/100)
	w := &loadWriter{c: c, rate: rate, pad: strings.Repeat("x", value)}
	for i := range workers {
		ww := &writerWorker{}
		for k := i; k < keyspace; k += workers {
			ww.keys = append(ww.keys, k)
			ww.acked = append(ww.acked, -1)
			ww.unsure = append(ww.unsure, -1)
		}
		w.workers = append(w.workers, ww)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	due := make(chan time.Time, rate) // at most one second of backlog
	w.start = time.Now()
	go func() {
		defer close(due)
		sent := 0
		for ctx.Err() == nil {
			for owed := int(time.Since(w.start) * time.Duration(rate) / time.Second); sent < owed; sent++ {
				select {
				case due <- w.start.Add(time.Duration(sent) * time.Second / time.Duration(rate)):
				case <-ctx.Done():
					return
				}
			}
			time.Sleep(time.Millisecond)
		}
	}()
	for _, ww := range w.workers {
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			for at := range due {
				w.write(ww, at)
			}
		}()
	}
	return w
}

func (w *loadWriter) write(ww *writerWorker, at time.Time) {
	i := ww.next
	ww.next = (ww.next + 1) % len(ww.keys)
	ww.seq++
	err := w.c.Set(context.Background(), "load:"+strconv.Itoa(ww.keys[i]), w.value(ww.seq), 0).Err()
	ww.due = append(ww.due, at)
	ww.lat = append(ww.lat, time.Since(at))
	if err != nil {
		ww.failed++
		ww.unsure[i] = ww.seq
		if ww.err == nil {
			ww.err = err
		}
		return
	}
	ww.acked[i] = ww.seq
}

func (w *loadWriter) value(seq int64) string {
	s := strconv.FormatInt(seq, 10) + ":"
	return s + w.pad[min(len(s), len(w.pad)):]
}

// stop ends the writes (the ones already due still run) and returns what was seen of the
// writes due in [from, to): the window of the move, after the writer's warm-up. Failed
// writes count whenever they were due.
func (w *loadWriter) stop(from, to time.Time) writerResult {
	w.cancel()
	w.wg.Wait()
	var r writerResult
	var lat []time.Duration
	for _, ww := range w.workers {
		for i, at := range ww.due {
			if !at.Before(from) && at.Before(to) {
				lat = append(lat, ww.lat[i])
			}
		}
		r.failed += ww.failed
		if r.firstErr == nil {
			r.firstErr = ww.err
		}
	}
	r.writes = len(lat)
	r.rate = float64(r.writes) / to.Sub(from).Seconds()
	slices.Sort(lat)
	if n := len(lat); n > 0 {
		r.p50, r.p99, r.max = lat[n*50/100], lat[n*99/100], lat[n-1]
	}
	return r
}

// verify reads every written key back and counts it verified when it holds its last
// acknowledged value (or, after a failed write to it, a later one), lost otherwise.
func (w *loadWriter) verify(r *writerResult) {
	ctx := context.Background()
	for _, ww := range w.workers {
		for from := 0; from < len(ww.keys); from += 500 {
			to := min(from+500, len(ww.keys))
			cmds := make([]*redis.StringCmd, to-from)
			_, _ = w.c.Pipelined(ctx, func(p redis.Pipeliner) error {
				for i := from; i < to; i++ {
					cmds[i-from] = p.Get(ctx, "load:"+strconv.Itoa(ww.keys[i]))
				}
				return nil
			})
			for i := from; i < to; i++ {
				if ww.acked[i] < 0 && ww.unsure[i] < 0 {
					continue
				}
				if err := checkLoad(cmds[i-from], ww.acked[i], ww.unsure[i]); err != nil {
					r.lost++
					if r.verifyErr == nil {
						r.verifyErr = fmt.Errorf("load:%d: %w", ww.keys[i], err)
					}
				} else if ww.acked[i] >= 0 {
					r.verified++
				}
			}
		}
	}
}

func checkLoad(c *redis.StringCmd, acked, unsure int64) error {
	if c.Err() == redis.Nil && acked < 0 {
		return nil // only a failed write ever went to it
	}
	if c.Err() != nil {
		return c.Err()
	}
	head, _, _ := strings.Cut(c.Val(), ":")
	seq, err := strconv.ParseInt(head, 10, 64)
	switch {
	case err != nil:
		return fmt.Errorf("value %.20q: %w", c.Val(), err)
	case seq == acked, unsure > acked && seq > acked && seq <= unsure:
		return nil
	default:
		return fmt.Errorf("holds write %d, last acknowledged %d", seq, acked)
	}
}
