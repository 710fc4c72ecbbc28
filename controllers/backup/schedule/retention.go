package schedule

import (
	"slices"
	"strings"
	"time"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
)

// Backup is what retention knows of one RedisClusterBackup of a schedule.
type Backup struct {
	Name  string
	Phase cachev1beta1.BackupPhase
	// Created orders backups (its creation timestamp).
	Created time.Time
	// Ended is its status.endTime; zero while not finished.
	Ended time.Time
}

// Policy is a RetentionPolicy: KeepLast Completed backups (0 keeps any
// number), none older than MaxAge (0: any age).
type Policy struct {
	KeepLast int
	MaxAge   time.Duration
}

// Expired names the backups the policy deletes at now, newest first:
//   - a Completed backup beyond the KeepLast newest Completed ones, or
//     that ended more than MaxAge ago, except the newest Completed backup,
//     which is always kept (the last one a restore can use);
//   - a Failed backup older than the newest Completed one (a later backup
//     succeeded), or that ended more than MaxAge ago;
//   - never a backup that is not finished (Pending, Running, or no phase yet).
//
// Order is by Created, newest first; ties by name.
func Expired(backups []Backup, p Policy, now time.Time) []string {
	sorted := slices.Clone(backups)
	slices.SortFunc(sorted, func(a, b Backup) int {
		if c := b.Created.Compare(a.Created); c != 0 {
			return c
		}
		return strings.Compare(b.Name, a.Name)
	})
	old := func(b Backup) bool {
		end := b.Ended
		if end.IsZero() {
			end = b.Created
		}
		return p.MaxAge > 0 && now.Sub(end) > p.MaxAge
	}
	var out []string
	completed := 0
	for _, b := range sorted {
		switch b.Phase {
		case cachev1beta1.BackupCompleted:
			completed++
			if completed > 1 && ((p.KeepLast > 0 && completed > p.KeepLast) || old(b)) {
				out = append(out, b.Name)
			}
		case cachev1beta1.BackupFailed:
			if completed > 0 || old(b) {
				out = append(out, b.Name)
			}
		}
	}
	return out
}
