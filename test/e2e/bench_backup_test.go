//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/test/s3test"
)

// benchBackupKeys is how many keys the backup benchmark loads (about
// 60 bytes of key and value each, as loadKeys writes them).
const benchBackupKeys = 500000

// BenchmarkBackupRestore measures, on the local plane against SeaweedFS, a
// backup of a 3×1 cluster holding benchBackupKeys keys and its restore:
//
//   - backup MB/s: the RDBs' total size over endTime − startTime (which
//     includes the replicas' repl-diskless-sync-delay, 5 s, before they fork);
//   - restore MB/s: the same size over the time from creating the
//     restoring RedisCluster to Ready (pods started, RDBs downloaded,
//     cluster formed);
//   - a writer's p99 SET latency (one SET at a time, as fast as it goes)
//     for 15 s without a backup and for the whole backup.
//
// It prints one `bench:` line:
//
//	go test -tags e2e -run '^$' -bench BackupRestore -benchtime 1x -timeout 30m ./test/e2e/
func BenchmarkBackupRestore(b *testing.B) {
	srv := suiteStore(b)
	srv.MakeBucket(b, "bench")
	for b.Loop() {
		c := newCluster(b, "bench-backup", nil)
		backupSecret(b, c.ns, "s3", s3test.SecretKey)
		c.waitReady(5 * time.Minute)
		loadKeys(b, c.clusterClient(), "bulk", benchBackupKeys)

		cl := c.clusterClient()
		idle := measureSetLatency(cl, func() { time.Sleep(15 * time.Second) })
		var bk *cachev1beta1.RedisClusterBackup
		during := measureSetLatency(cl, func() {
			createBackup(b, c.ns, "b1", c.name, storeSpec(srv, "bench", "s3"))
			bk = waitBackup(b, c.ns, "b1", 10*time.Minute, func(bk *cachev1beta1.RedisClusterBackup) bool {
				return bk.Status.Phase == cachev1beta1.BackupCompleted || bk.Status.Phase == cachev1beta1.BackupFailed
			})
		})
		if bk.Status.Phase != cachev1beta1.BackupCompleted {
			b.Fatalf("backup: %s", backupSummary(bk))
		}
		took := bk.Status.EndTime.Sub(bk.Status.StartTime.Time)
		mb := float64(bk.Status.Size) / 1e6

		start := time.Now()
		restored := restoreCluster(b, c.ns, "bench-restored", "256Mi", "b1")
		restored.waitReady(10 * time.Minute)
		restoreTook := time.Since(start)
		if n, err := restored.clusterClient().DBSize(context.Background()).Result(); err != nil || n < benchBackupKeys {
			b.Fatalf("restored cluster: DBSIZE %d, %v (want at least %d)", n, err, benchBackupKeys)
		}

		b.ReportMetric(mb/took.Seconds(), "backup-MB/s")
		b.ReportMetric(mb/restoreTook.Seconds(), "restore-MB/s")
		b.ReportMetric(ms(idle.p99), "p99-ms-idle")
		b.ReportMetric(ms(during.p99), "p99-ms-backup")
		fmt.Printf("bench: backup %d keys, %.1f MB: backup %.1f MB/s (%.1fs), restore to Ready %.1f MB/s (%.1fs); "+
			"writer p99 %.2f ms without a backup (%d SETs), %.2f ms during it (%d SETs)\n",
			benchBackupKeys, mb, mb/took.Seconds(), took.Seconds(), mb/restoreTook.Seconds(), restoreTook.Seconds(),
			ms(idle.p99), idle.n, ms(during.p99), during.n)
		appendRows(b, backupRows(mb, took, restoreTook, idle, during)...)
		b.StopTimer()
		restored.obs.stop()
		restored.destroy()
		c.obs.stop()
		c.destroy()
		b.StartTimer()
	}
}

type latencies struct {
	p99 time.Duration
	n   int
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// measureSetLatency runs SETs one after the other through c while during
// runs and returns their p99 latency (failed SETs count as their time).
func measureSetLatency(c *redis.ClusterClient, during func()) latencies {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var samples []time.Duration
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			start := time.Now()
			_ = c.Set(context.Background(), fmt.Sprintf("lat:%d", i%10000), i, 0).Err()
			samples = append(samples, time.Since(start))
		}
	})
	during()
	close(stop)
	wg.Wait()
	if len(samples) == 0 {
		return latencies{}
	}
	slices.Sort(samples)
	return latencies{p99: samples[len(samples)*99/100], n: len(samples)}
}
