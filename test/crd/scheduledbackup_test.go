package crd

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
)

func newSchedule(name, schedule string) *cachev1beta1.RedisClusterScheduledBackup {
	return &cachev1beta1.RedisClusterScheduledBackup{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: cachev1beta1.RedisClusterScheduledBackupSpec{Schedule: schedule,
			Template: cachev1beta1.RedisClusterBackupSpec{ClusterName: "c",
				ObjectStore: cachev1beta1.ObjectStoreSpec{Endpoint: "http://127.0.0.1:8333", Bucket: "backups"}}},
	}
}

// TestScheduledBackupSchema: the schedules robfig/cron parses pass the
// schema, malformed ones are rejected naming spec.schedule, and the
// defaults (keepLast 7, suspend false) are set.
func TestScheduledBackupSchema(t *testing.T) {
	ctx := context.Background()
	for i, s := range []string{"0 3 * * *", "*/5 * * * *", "@daily", "@every 20s", "@every 1h30m", "30 2 * * MON-FRI"} {
		sb := newSchedule("ok-"+string(rune('a'+i)), s)
		if err := k8s.Create(ctx, sb); err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		if sb.Spec.Retention.KeepLast != 7 || sb.Spec.Suspend {
			t.Fatalf("%q: defaults not set: %+v", s, sb.Spec)
		}
	}
	for i, s := range []string{"* * * *", "every day", "@sometimes", "@every 3 days", "* * * * * *", "0 3 * * * ; rm"} {
		assertInvalid(t, k8s.Create(ctx, newSchedule("bad-"+string(rune('a'+i)), s)), "spec.schedule", "should match")
	}
	assertInvalid(t, k8s.Create(ctx, newSchedule(strings.Repeat("n", 64), "@daily")), "metadata.name", "at most 63 characters")
	sb := newSchedule("zero-keep", "@daily")
	sb.Spec.Retention.KeepLast = -1
	assertInvalid(t, k8s.Create(ctx, sb), "spec.retention.keepLast", "greater than or equal to 1")
}
