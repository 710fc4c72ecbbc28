// Package rotation is the state machine of a password rotation without downtime. Its state
// is the owned Secret (so the pending password survives an operator crash and never goes to
// status); its step is shown in status.credentials.rotationStep:
//
//	AddingPassword       ACL SETUSER default >new on every node (old kept)
//	SettingMasterAuth    CONFIG SET masterauth new on every node
//	UpdatingSecret       the owned Secret's password and auth.conf become
//	                     the new password, the old one moves to
//	                     PreviousKey, the switch time is recorded
//	GracePeriod          both passwords work while clients re-read the Secret
//	RemovingOldPassword  the new password becomes the only one on every
//	                     node (CONFIG SET requirepass); status.credentials.version
//	                     and lastRotationTime are set
//
// Turning authentication on (spec.auth set on a cluster that ran without it: the owned
// Secret holds no password) is the same rotation from "" to the new password, shortened:
// AddingPassword gives every node its first password, which clears the default user's
// nopass, so clients without a password are refused (NOAUTH) from that moment on — inherent
// in turning authentication on, and why there is no grace period: there is no old password
// to keep accepting. SettingMasterAuth follows, then RemovingOldPassword's CONFIG SET
// requirepass, and last UpdatingSecret. No step writes a password to a node's disk: a node
// restarted mid-rotation starts from the Secret's auth.conf, and the next Advance re-applies
// what it missed.
//
// Every step is idempotent. Each call of Advance re-applies the steps already done (cheap,
// and it heals a node restarted mid-rotation from a config holding only one of the
// passwords) before going on, so a crash at any point resumes safely from what the Secret
// says. Pods are never restarted: the pod template carries no password, and the Secret
// volume is updated in place for the next start.
//
// The package does no I/O of its own: the Redis operations come through PasswordOps
// (*topology.Engine implements it) and the Secret write through Advance's save callback.
package rotation

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/resources"
	"github.com/redis-operator/redis-operator/controllers/topology"
)

// Keys and annotations of the owned Secret during a rotation.
const (
	// NextKey holds the new password before clients get it.
	NextKey = "password-next"
	// PreviousKey holds the old password during the grace period.
	PreviousKey = "password-previous"
	// VersionAnnotation is the source version being rotated to.
	VersionAnnotation = "cache.redis.io/rotation-version"
	// SwitchedAnnotation is when clients got the new password (RFC 3339); the grace period
	// counts from it.
	SwitchedAnnotation = "cache.redis.io/rotation-switched-at"
)

// Rotation steps, as shown in status.credentials.rotationStep.
const (
	AddingPassword      = "AddingPassword"
	SettingMasterAuth   = "SettingMasterAuth"
	UpdatingSecret      = "UpdatingSecret"
	GracePeriod         = "GracePeriod"
	RemovingOldPassword = "RemovingOldPassword"
)

// State is what the owned Secret says about the password.
type State struct {
	// Live is the password clients are given (resources.PasswordKey); "" without one.
	Live string
	// Next is the pending password, not yet given to clients.
	Next string
	// Previous is the old password, accepted until the grace period ends.
	Previous string
	// PendingVersion is the source version of the rotation's target.
	PendingVersion string
	// SwitchedAt is when Live became the new password (zero before).
	SwitchedAt time.Time
}

// Read reads the state from the owned Secret (nil: none, the zero State). A Previous
// password with an unreadable switch time counts its grace period from now.
func Read(sec *corev1.Secret) State {
	if sec == nil {
		return State{}
	}
	st := State{
		Live:           string(sec.Data[resources.PasswordKey]),
		Next:           string(sec.Data[NextKey]),
		Previous:       string(sec.Data[PreviousKey]),
		PendingVersion: sec.Annotations[VersionAnnotation],
	}
	if t, err := time.Parse(time.RFC3339, sec.Annotations[SwitchedAnnotation]); err == nil {
		st.SwitchedAt = t
	}
	if st.Previous != "" && st.SwitchedAt.IsZero() {
		// An unreadable switch time: count the grace period from now on.
		st.SwitchedAt = time.Now()
	}
	return st
}

// InProgress reports whether a rotation is under way.
func (st State) InProgress() bool { return st.Next != "" || st.Previous != "" }

// Step is the first step a resumed rotation runs: AddingPassword while a password is
// pending, GracePeriod while the old one is still accepted, "" when none is under way.
func (st State) Step() string {
	switch {
	case st.Next != "":
		return AddingPassword
	case st.Previous != "":
		return GracePeriod
	}
	return ""
}

// Secret renders the owned Secret for st: resources.Secret for the live password plus the
// rotation's keys and annotations (none when no rotation is under way).
func Secret(rc *cachev1beta1.RedisCluster, st State) *corev1.Secret {
	return withState(resources.Secret(rc, st.Live), st)
}

// withState adds st's rotation keys and annotations to sec and returns it.
func withState(sec *corev1.Secret, st State) *corev1.Secret {
	if st.Next != "" {
		sec.Data[NextKey] = []byte(st.Next)
	}
	if st.Previous != "" {
		sec.Data[PreviousKey] = []byte(st.Previous)
	}
	if st.InProgress() {
		sec.Annotations = map[string]string{VersionAnnotation: st.PendingVersion}
		if !st.SwitchedAt.IsZero() {
			sec.Annotations[SwitchedAnnotation] = st.SwitchedAt.UTC().Format(time.RFC3339)
		}
	}
	return sec
}

// PasswordOps are the Redis operations of a rotation (*topology.Engine), each on every
// endpoint, logging in with the first of login the node accepts.
type PasswordOps interface {
	AddPassword(ctx context.Context, eps []topology.Endpoint, password string, login ...string) error
	SetMasterAuth(ctx context.Context, eps []topology.Endpoint, password string, login ...string) error
	RemoveOtherPasswords(ctx context.Context, eps []topology.Endpoint, keep string, login ...string) error
}

// Outcome is where one call of Advance left the rotation.
type Outcome struct {
	// Step is the step reached (failed, waiting, or "" when done).
	Step string
	// Wait is the time left in the grace period.
	Wait time.Duration
	// Done: the rotation finished this call.
	Done bool
}

// Advance runs the rotation as far as it can go now on eps (every
// Redis node of the cluster): the steps already done again, then the next
// ones, up to the end of the grace period. save persists a new state (the
// owned Secret) before the call relies on it. st is updated to the state
// saved last. An error leaves the rotation at outcome.Step, to resume on
// the next call.
func Advance(ctx context.Context, ops PasswordOps, eps []topology.Endpoint, st *State,
	grace time.Duration, now time.Time, save func(State) error) (Outcome, error) {
	if st.Next != "" {
		if err := ops.AddPassword(ctx, eps, st.Next, st.Live); err != nil {
			return Outcome{Step: AddingPassword}, err
		}
		if err := ops.SetMasterAuth(ctx, eps, st.Next, st.Live); err != nil {
			return Outcome{Step: SettingMasterAuth}, err
		}
		if st.Live == "" {
			// Turning authentication on: nothing to keep accepting, so no
			// grace period; persist before the Secret says it is done.
			if err := ops.RemoveOtherPasswords(ctx, eps, st.Next, st.Live); err != nil {
				return Outcome{Step: RemovingOldPassword}, err
			}
			final := State{Live: st.Next}
			if err := save(final); err != nil {
				return Outcome{Step: UpdatingSecret}, err
			}
			*st = final
			return Outcome{Done: true}, nil
		}
		switched := State{Live: st.Next, Previous: st.Live, PendingVersion: st.PendingVersion, SwitchedAt: now}
		if err := save(switched); err != nil {
			return Outcome{Step: UpdatingSecret}, err
		}
		*st = switched
	}
	if st.Previous == "" {
		return Outcome{}, nil
	}
	// Heal a node restarted since the switch with only one of the two.
	if err := ops.AddPassword(ctx, eps, st.Live, st.Previous); err != nil {
		return Outcome{Step: GracePeriod}, err
	}
	if err := ops.SetMasterAuth(ctx, eps, st.Live, st.Previous); err != nil {
		return Outcome{Step: GracePeriod}, err
	}
	if left := st.SwitchedAt.Add(grace).Sub(now); left > 0 {
		return Outcome{Step: GracePeriod, Wait: left}, nil
	}
	if err := ops.RemoveOtherPasswords(ctx, eps, st.Live, st.Previous); err != nil {
		return Outcome{Step: RemovingOldPassword}, err
	}
	final := State{Live: st.Live}
	if err := save(final); err != nil {
		return Outcome{Step: RemovingOldPassword}, err
	}
	*st = final
	return Outcome{Done: true}, nil
}
