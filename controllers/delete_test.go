package controllers

import (
	"errors"
	"testing"
	"time"
)

func TestDeletionVerdict(t *testing.T) {
	req := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	failed := errors.New("claim data-x-shard-0-0 is not deleted yet")
	for _, tc := range []struct {
		name             string
		after            time.Duration
		err              error
		remove, timedOut bool
		retryAfter       time.Duration
	}{
		{name: "cleanup done", after: time.Second, remove: true},
		{name: "cleanup pending", after: 10 * time.Second, err: failed, retryAfter: deletionRetry},
		{name: "retry never passes the deadline", after: time.Minute - 500*time.Millisecond, err: failed, retryAfter: 500 * time.Millisecond},
		{name: "deadline reached", after: time.Minute, err: failed, remove: true, timedOut: true},
		{name: "long past the deadline", after: time.Hour, err: failed, remove: true, timedOut: true},
	} {
		remove, timedOut, retry := deletionVerdict(req.Add(tc.after), req, time.Minute, tc.err)
		if remove != tc.remove || timedOut != tc.timedOut || retry != tc.retryAfter {
			t.Errorf("%s: got %v %v %v, want %v %v %v", tc.name, remove, timedOut, retry, tc.remove, tc.timedOut, tc.retryAfter)
		}
	}
}
