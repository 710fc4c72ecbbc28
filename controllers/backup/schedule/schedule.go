// Package schedule is the pure logic of RedisClusterScheduledBackup: when
// the next backup is due (cron schedules, missed times, the starting
// deadline) and which backups the retention policy deletes. It knows no
// Kubernetes client; every function takes the time as an argument.
package schedule

import (
	"fmt"
	"time"

	"github.com/robfig/cron/v3"
)

// Parse parses a schedule with robfig/cron v3's ParseStandard: five fields
// (minute hour day-of-month month day-of-week), a descriptor (@hourly,
// @daily, ...) or "@every <duration>". Times are in UTC (the location of
// the times given to Decide). Errors: the parser's, prefixed with the
// schedule.
func Parse(spec string) (cron.Schedule, error) {
	s, err := cron.ParseStandard(spec)
	if err != nil {
		return nil, fmt.Errorf("schedule %q: %w", spec, err)
	}
	return s, nil
}

// Decision is what to do at one moment.
type Decision struct {
	// Run is the scheduled time to take a backup for now; zero when none is due.
	Run time.Time
	// Skipped is the most recent missed time not taken because it is older
	// than the starting deadline; zero when none. At most one of Run and
	// Skipped is set.
	Skipped time.Time
	// Next is the first scheduled time after now; zero when the schedule
	// has none (a day that never comes, such as February 30).
	Next time.Time
}

// Decide looks at the scheduled times after last (the last time taken or
// skipped, or the schedule's creation) up to now. As a CronJob's
// controller does, only the most recent of them counts: older ones are
// missed for good (the operator was down, or the schedule suspended). The
// most recent is Run when deadline is zero or it is at most deadline old,
// else Skipped.
//
// An "@every <d>" schedule runs at last + k·d (k = 1, 2, ...): its times
// keep the phase of the first one, as they would with no gap.
func Decide(s cron.Schedule, last, now time.Time, deadline time.Duration) Decision {
	var d Decision
	var latest time.Time
	if every, ok := s.(cron.ConstantDelaySchedule); ok {
		latest, d.Next = periodic(every.Delay, last, now)
	} else {
		latest, d.Next = mostRecent(s, last, now), next(s, now)
	}
	switch {
	case latest.IsZero():
	case deadline > 0 && now.Sub(latest) > deadline:
		d.Skipped = latest
	default:
		d.Run = latest
	}
	return d
}

// periodic is the latest time of last + k·delay (k ≥ 1) at most now (zero
// when none) and the first after now. last is truncated to the second, as
// robfig's ConstantDelaySchedule does; delay is at least a second (robfig
// rounds shorter ones up).
func periodic(delay time.Duration, last, now time.Time) (latest, after time.Time) {
	delay = max(delay, time.Second)
	base := last.Truncate(time.Second)
	k := now.Sub(base) / delay
	if k >= 1 {
		latest = base.Add(k * delay)
	}
	return latest, base.Add((max(k, 0) + 1) * delay)
}

// next is s.Next(t), with robfig's "no time in five years" zero kept zero.
func next(s cron.Schedule, t time.Time) time.Time {
	n := s.Next(t)
	if n.IsZero() || !n.After(t) {
		return time.Time{}
	}
	return n
}

// mostRecent is the latest scheduled time in (last, now], zero when none.
// It looks back from now over windows that double (1 s, 2 s, 4 s, ...)
// until one holds a scheduled time, then walks forward in it, so that a
// long gap of a frequent schedule (an @every 1s schedule down for a day)
// costs a few dozen steps, not one per missed time.
func mostRecent(s cron.Schedule, last, now time.Time) time.Time {
	if n := next(s, last); n.IsZero() || n.After(now) {
		return time.Time{}
	}
	for w := time.Second; ; w *= 2 {
		start := now.Add(-w)
		if start.Before(last) {
			start = last
		}
		t := next(s, start)
		if t.IsZero() || t.After(now) {
			continue // start > last here: a wider window is tried
		}
		for {
			n := next(s, t)
			if n.IsZero() || n.After(now) {
				return t
			}
			t = n
		}
	}
}
