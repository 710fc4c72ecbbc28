package backup

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
)

// DefaultProgressInterval is how often a running backup's status.progress
// is written: a bounded rate of API writes, whatever the chunk rate.
const DefaultProgressInterval = 5 * time.Second

// Progress counts the bytes read of each shard's stream while Take runs.
// Safe for concurrent use.
type Progress struct {
	read []atomic.Int64
}

// NewProgress counts for n shards.
func NewProgress(n int) *Progress { return &Progress{read: make([]atomic.Int64, n)} }

func (p *Progress) counter(i int) *atomic.Int64 { return &p.read[i] }

// BytesRead is shard i's count so far, in bytes.
func (p *Progress) BytesRead(i int) int64 { return p.read[i].Load() }

// reportProgress writes b's status.progress from p every interval until
// the returned stop is called (stop waits for a write in flight; b is the
// caller's again after it). b must be what the API server holds: each
// write is a merge patch from the previous one.
func (r *Reconciler) reportProgress(ctx context.Context, b *cachev1beta1.RedisClusterBackup, sources []Source, p *Progress) (stop func()) {
	interval := r.ProgressInterval
	if interval <= 0 {
		interval = DefaultProgressInterval
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			before := b.DeepCopy()
			b.Status.Progress = make([]cachev1beta1.BackupShardProgress, len(sources))
			for i, s := range sources {
				b.Status.Progress[i] = cachev1beta1.BackupShardProgress{Name: s.Shard, BytesRead: p.BytesRead(i)}
			}
			b.Status.ProgressTime = &metav1.Time{Time: r.Clock.Now()}
			if err := r.patchStatus(ctx, before, b); err != nil {
				ctrl.LoggerFrom(ctx).Error(err, "Cannot write the backup's progress", "backup", b.Name)
				b.Status = before.Status
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
	}
}
