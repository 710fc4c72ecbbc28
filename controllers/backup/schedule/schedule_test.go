package schedule

import (
	"testing"
	"time"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
)

// at is 2026-12-02 hh:mm:ss UTC, the tests' injected clock.
func at(hh, mm, ss int) time.Time { return time.Date(2026, 12, 2, hh, mm, ss, 0, time.UTC) }

func TestParse(t *testing.T) {
	for _, spec := range []string{"0 3 * * *", "*/5 * * * *", "@daily", "@every 20s", "0 0 1 JAN *", "30 2 * * MON-FRI"} {
		if _, err := Parse(spec); err != nil {
			t.Errorf("%q: %v", spec, err)
		}
	}
	for _, spec := range []string{"", "* * * *", "61 * * * *", "@sometimes", "@every 3 days", "* * * * * *"} {
		if _, err := Parse(spec); err == nil {
			t.Errorf("%q parsed", spec)
		}
	}
}

func TestDecide(t *testing.T) {
	for _, tc := range []struct {
		name     string
		spec     string
		last     time.Time
		now      time.Time
		deadline time.Duration
		run      time.Time
		skipped  time.Time
		next     time.Time
	}{
		{name: "not due yet", spec: "0 3 * * *", last: at(2, 0, 0), now: at(2, 59, 59), next: at(3, 0, 0)},
		{name: "due on the second", spec: "0 3 * * *", last: at(2, 0, 0), now: at(3, 0, 0),
			run: at(3, 0, 0), next: at(3, 0, 0).Add(24 * time.Hour)},
		{name: "taken already", spec: "0 3 * * *", last: at(3, 0, 0), now: at(3, 0, 5), next: at(3, 0, 0).Add(24 * time.Hour)},
		{name: "a little late", spec: "*/5 * * * *", last: at(3, 0, 0), now: at(3, 5, 30),
			run: at(3, 5, 0), next: at(3, 10, 0)},
		{name: "many missed: only the most recent", spec: "*/5 * * * *", last: at(0, 0, 0), now: at(3, 7, 0),
			run: at(3, 5, 0), next: at(3, 10, 0)},
		{name: "within the deadline", spec: "*/5 * * * *", last: at(3, 0, 0), now: at(3, 5, 50), deadline: time.Minute,
			run: at(3, 5, 0), next: at(3, 10, 0)},
		{name: "past the deadline", spec: "*/5 * * * *", last: at(3, 0, 0), now: at(3, 7, 0), deadline: time.Minute,
			skipped: at(3, 5, 0), next: at(3, 10, 0)},
		{name: "every 20s from creation", spec: "@every 20s", last: at(3, 0, 0), now: at(3, 0, 45),
			run: at(3, 0, 40), next: at(3, 1, 0)},
		{name: "every 20s: the phase kept over a gap", spec: "@every 20s", last: at(3, 0, 0), now: at(3, 10, 15),
			run: at(3, 10, 0), next: at(3, 10, 20)},
		{name: "every 20s past the deadline", spec: "@every 20s", last: at(3, 0, 0), now: at(3, 0, 59), deadline: 10 * time.Second,
			skipped: at(3, 0, 40), next: at(3, 1, 0)},
		{name: "every second, down for a day", spec: "@every 1s", last: at(0, 0, 0).Add(-24 * time.Hour), now: at(0, 0, 0),
			run: at(0, 0, 0), next: at(0, 0, 1)},
		{name: "a day that never comes", spec: "0 0 30 2 *", last: at(0, 0, 0), now: at(5, 0, 0)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Parse(tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			d := Decide(s, tc.last, tc.now, tc.deadline)
			if !d.Run.Equal(tc.run) || !d.Skipped.Equal(tc.skipped) || !d.Next.Equal(tc.next) {
				t.Errorf("got run %v skipped %v next %v; want run %v skipped %v next %v",
					d.Run, d.Skipped, d.Next, tc.run, tc.skipped, tc.next)
			}
		})
	}
}

func TestExpired(t *testing.T) {
	now := at(12, 0, 0)
	b := func(name string, phase cachev1beta1.BackupPhase, hoursAgo int) Backup {
		created := now.Add(-time.Duration(hoursAgo) * time.Hour)
		out := Backup{Name: name, Phase: phase, Created: created}
		if phase == cachev1beta1.BackupCompleted || phase == cachev1beta1.BackupFailed {
			out.Ended = created.Add(10 * time.Minute)
		}
		return out
	}
	const (
		done    = cachev1beta1.BackupCompleted
		failed  = cachev1beta1.BackupFailed
		running = cachev1beta1.BackupRunning
		pending = cachev1beta1.BackupPending
	)
	for _, tc := range []struct {
		name    string
		backups []Backup
		policy  Policy
		want    []string
	}{
		{name: "nothing yet", policy: Policy{KeepLast: 2}},
		{name: "keep the last two", policy: Policy{KeepLast: 2},
			backups: []Backup{b("a", done, 4), b("b", done, 3), b("c", done, 2), b("d", done, 1)},
			want:    []string{"b", "a"}},
		{name: "running and pending never count nor go", policy: Policy{KeepLast: 1},
			backups: []Backup{b("a", done, 5), b("b", running, 4), b("c", done, 3), b("d", pending, 1)},
			want:    []string{"a"}},
		{name: "the newest completed survives its age", policy: Policy{KeepLast: 5, MaxAge: time.Hour},
			backups: []Backup{b("a", done, 30), b("b", done, 20), b("c", failed, 2)},
			want:    []string{"c", "a"}},
		{name: "age deletes beyond the newest", policy: Policy{KeepLast: 10, MaxAge: 3 * time.Hour},
			backups: []Backup{b("a", done, 5), b("b", done, 4), b("c", done, 2), b("d", done, 1)},
			want:    []string{"b", "a"}},
		{name: "a failure before a success goes, after it stays", policy: Policy{KeepLast: 3},
			backups: []Backup{b("a", failed, 4), b("b", done, 3), b("c", failed, 1)},
			want:    []string{"a"}},
		{name: "failures only: kept until their age", policy: Policy{KeepLast: 1, MaxAge: 2 * time.Hour},
			backups: []Backup{b("a", failed, 4), b("b", failed, 1)},
			want:    []string{"a"}},
		{name: "keep one with a running one newest", policy: Policy{KeepLast: 1},
			backups: []Backup{b("a", done, 3), b("b", done, 2), b("c", running, 0)},
			want:    []string{"a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Expired(tc.backups, tc.policy, now)
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("got %v, want %v", got, tc.want)
				}
			}
		})
	}
}
