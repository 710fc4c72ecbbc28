package backup

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
)

// TestReportProgress: against a real API server, status.progress follows
// the counters at the interval, and nothing is written after stop.
func TestReportProgress(t *testing.T) {
	k8s := startAPIServer(t)
	ctx := context.Background()
	b := &cachev1beta1.RedisClusterBackup{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "p"},
		Spec: cachev1beta1.RedisClusterBackupSpec{ClusterName: "demo",
			ObjectStore: cachev1beta1.ObjectStoreSpec{Endpoint: "http://127.0.0.1:1", Bucket: "bkt"}}}
	if err := k8s.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	r := &Reconciler{Client: k8s, Recorder: record.NewFakeRecorder(10), Clock: clock.RealClock{}, ProgressInterval: 200 * time.Millisecond}
	sources := []Source{{Shard: "demo-shard-0"}, {Shard: "demo-shard-1"}}
	p := NewProgress(2)
	stop := r.reportProgress(ctx, b, sources, p)
	p.counter(0).Add(1000)
	p.counter(1).Add(7)
	read := func() *cachev1beta1.RedisClusterBackup {
		var got cachev1beta1.RedisClusterBackup
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(b), &got); err != nil {
			t.Fatal(err)
		}
		return &got
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := read()
		if len(got.Status.Progress) == 2 && got.Status.Progress[0].BytesRead == 1000 && got.Status.Progress[1].BytesRead == 7 &&
			got.Status.Progress[1].Name == "demo-shard-1" && got.Status.ProgressTime != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("progress not written: %+v", got.Status)
		}
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	rv := read().ResourceVersion
	p.counter(0).Add(5)
	time.Sleep(time.Second)
	if got := read(); got.ResourceVersion != rv || got.Status.Progress[0].BytesRead != 1000 {
		t.Fatalf("written after stop: %+v", got.Status)
	}
}
