package controllers

import (
	"testing"
	"time"
)

// Resyncs land within ±10% of the period and average out to it.
func TestResyncAfterJitter(t *testing.T) {
	const period = 30 * time.Second
	var sum time.Duration
	const n = 2000
	lo, hi := period, period
	for range n {
		d := resyncAfter(period)
		if d < 27*time.Second || d > 33*time.Second {
			t.Fatalf("resync after %s, want 27s..33s", d)
		}
		lo, hi = min(lo, d), max(hi, d)
		sum += d
	}
	if mean := sum / n; mean < 29*time.Second || mean > 31*time.Second {
		t.Fatalf("mean resync %s, want about %s", mean, period)
	}
	if hi-lo < 4*time.Second {
		t.Fatalf("resyncs between %s and %s: hardly spread", lo, hi)
	}
}
