package controllers

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/resources"
	"github.com/redis-operator/redis-operator/controllers/topology"
)

// A password rotation without downtime, as a state machine whose state is
// the owned Secret (so the pending password survives an operator crash and
// never goes to status) and whose step is shown in
// status.credentials.rotationStep:
//
//	AddingPassword       ACL SETUSER default >new on every node (old kept)
//	SettingMasterAuth    CONFIG SET masterauth new on every node
//	UpdatingSecret       the owned Secret's password and auth.conf become
//	                     the new password, the old one moves to
//	                     rotationPreviousKey, the switch time is recorded
//	GracePeriod          both passwords work while clients re-read the Secret
//	RemovingOldPassword  the new password becomes the only one on every
//	                     node, CONFIG REWRITE; status.credentials.version
//	                     and lastRotationTime are set
//
// Turning authentication on (spec.auth set on a cluster that ran without
// it: the owned Secret holds no password) is the same rotation from "" to
// the new password, shortened: AddingPassword gives every node its first
// password, which clears the default user's nopass, so clients without a
// password are refused (NOAUTH) from that moment on — inherent in turning
// authentication on, and why there is no grace period: there is no old
// password to keep accepting. SettingMasterAuth follows, then
// RemovingOldPassword's CONFIG SET requirepass and CONFIG REWRITE (the
// password persists across a restart), and last UpdatingSecret.
//
// Every step is idempotent. Each pass re-applies the steps already done
// (cheap, and it heals a node restarted mid-rotation from a config holding
// only one of the passwords) before going on, so a crash at any point
// resumes safely from what the Secret says. Pods are never restarted: the
// pod template carries no password, and the Secret volume is updated in
// place for the next start.

// Keys and annotations of the owned Secret during a rotation.
const (
	// rotationNextKey holds the new password before clients get it.
	rotationNextKey = "password-next"
	// rotationPreviousKey holds the old password during the grace period.
	rotationPreviousKey = "password-previous"
	// rotationVersionAnnotation is the source version being rotated to.
	rotationVersionAnnotation = "cache.redis.io/rotation-version"
	// rotationSwitchedAnnotation is when clients got the new password
	// (RFC 3339); the grace period counts from it.
	rotationSwitchedAnnotation = "cache.redis.io/rotation-switched-at"
)

// Rotation steps, as shown in status.credentials.rotationStep.
const (
	rotationAddingPassword    = "AddingPassword"
	rotationSettingMasterAuth = "SettingMasterAuth"
	rotationUpdatingSecret    = "UpdatingSecret"
	rotationGracePeriod       = "GracePeriod"
	rotationRemovingOld       = "RemovingOldPassword"
)

// rotationState is what the owned Secret says about the password.
type rotationState struct {
	// Live is the password clients are given ("password"); "" without one.
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

// readRotationState reads the state from the owned Secret (nil: none).
func readRotationState(sec *corev1.Secret) rotationState {
	if sec == nil {
		return rotationState{}
	}
	st := rotationState{
		Live:           string(sec.Data[resources.PasswordKey]),
		Next:           string(sec.Data[rotationNextKey]),
		Previous:       string(sec.Data[rotationPreviousKey]),
		PendingVersion: sec.Annotations[rotationVersionAnnotation],
	}
	if t, err := time.Parse(time.RFC3339, sec.Annotations[rotationSwitchedAnnotation]); err == nil {
		st.SwitchedAt = t
	}
	if st.Previous != "" && st.SwitchedAt.IsZero() {
		// An unreadable switch time: count the grace period from now on.
		st.SwitchedAt = time.Now()
	}
	return st
}

// inProgress reports whether a rotation is under way.
func (st rotationState) inProgress() bool { return st.Next != "" || st.Previous != "" }

// step is the first step a resumed rotation runs.
func (st rotationState) step() string {
	switch {
	case st.Next != "":
		return rotationAddingPassword
	case st.Previous != "":
		return rotationGracePeriod
	}
	return ""
}

// rotationSecret renders the owned Secret for st: resources.Secret for the
// live password plus the rotation's keys and annotations.
func rotationSecret(rc *cachev1beta1.RedisCluster, st rotationState) *corev1.Secret {
	sec := resources.Secret(rc, st.Live)
	if st.Next != "" {
		sec.Data[rotationNextKey] = []byte(st.Next)
	}
	if st.Previous != "" {
		sec.Data[rotationPreviousKey] = []byte(st.Previous)
	}
	if st.inProgress() {
		sec.Annotations = map[string]string{rotationVersionAnnotation: st.PendingVersion}
		if !st.SwitchedAt.IsZero() {
			sec.Annotations[rotationSwitchedAnnotation] = st.SwitchedAt.UTC().Format(time.RFC3339)
		}
	}
	return sec
}

// applyRotationSecret writes the owned Secret for st (server-side apply:
// keys and annotations st no longer has are removed).
func (r *RedisClusterReconciler) applyRotationSecret(ctx context.Context, s *scope, st rotationState) error {
	desired := rotationSecret(s.rc, st)
	s.log.Info("Applying Secret", "secret", desired.Name, "rotationVersion", st.PendingVersion)
	if err := r.Client.Patch(ctx, desired, client.Apply, client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("applying Secret %s: %w", desired.Name, err)
	}
	return nil
}

// passwordOps are the Redis operations of a rotation (*topology.Engine).
type passwordOps interface {
	AddPassword(ctx context.Context, eps []topology.Endpoint, password string, login ...string) error
	SetMasterAuth(ctx context.Context, eps []topology.Endpoint, password string, login ...string) error
	RemoveOtherPasswords(ctx context.Context, eps []topology.Endpoint, keep string, login ...string) error
}

// rotationOutcome is where one call of advanceRotation left the rotation.
type rotationOutcome struct {
	// Step is the step reached (failed, waiting, or "" when done).
	Step string
	// Wait is the time left in the grace period.
	Wait time.Duration
	// Done: the rotation finished this call.
	Done bool
}

// advanceRotation runs the rotation as far as it can go now on eps (every
// Redis node of the cluster): the steps already done again, then the next
// ones, up to the end of the grace period. save persists a new state (the
// owned Secret) before the call relies on it. st is updated to the state
// saved last. An error leaves the rotation at outcome.Step, to resume on
// the next call.
func advanceRotation(ctx context.Context, ops passwordOps, eps []topology.Endpoint, st *rotationState,
	grace time.Duration, now time.Time, save func(rotationState) error) (rotationOutcome, error) {
	if st.Next != "" {
		if err := ops.AddPassword(ctx, eps, st.Next, st.Live); err != nil {
			return rotationOutcome{Step: rotationAddingPassword}, err
		}
		if err := ops.SetMasterAuth(ctx, eps, st.Next, st.Live); err != nil {
			return rotationOutcome{Step: rotationSettingMasterAuth}, err
		}
		if st.Live == "" {
			// Turning authentication on: nothing to keep accepting, so no
			// grace period; persist before the Secret says it is done.
			if err := ops.RemoveOtherPasswords(ctx, eps, st.Next, st.Live); err != nil {
				return rotationOutcome{Step: rotationRemovingOld}, err
			}
			final := rotationState{Live: st.Next}
			if err := save(final); err != nil {
				return rotationOutcome{Step: rotationUpdatingSecret}, err
			}
			*st = final
			return rotationOutcome{Done: true}, nil
		}
		switched := rotationState{Live: st.Next, Previous: st.Live, PendingVersion: st.PendingVersion, SwitchedAt: now}
		if err := save(switched); err != nil {
			return rotationOutcome{Step: rotationUpdatingSecret}, err
		}
		*st = switched
	}
	if st.Previous == "" {
		return rotationOutcome{}, nil
	}
	// Heal a node restarted since the switch with only one of the two.
	if err := ops.AddPassword(ctx, eps, st.Live, st.Previous); err != nil {
		return rotationOutcome{Step: rotationGracePeriod}, err
	}
	if err := ops.SetMasterAuth(ctx, eps, st.Live, st.Previous); err != nil {
		return rotationOutcome{Step: rotationGracePeriod}, err
	}
	if left := st.SwitchedAt.Add(grace).Sub(now); left > 0 {
		return rotationOutcome{Step: rotationGracePeriod, Wait: left}, nil
	}
	if err := ops.RemoveOtherPasswords(ctx, eps, st.Live, st.Previous); err != nil {
		return rotationOutcome{Step: rotationRemovingOld}, err
	}
	final := rotationState{Live: st.Live}
	if err := save(final); err != nil {
		return rotationOutcome{Step: rotationRemovingOld}, err
	}
	*st = final
	return rotationOutcome{Done: true}, nil
}

// setRotationStep records step in the observation and in
// status.credentials.rotationStep.
func setRotationStep(s *scope, step string) {
	s.obs.Creds.RotationStep = step
	if s.rc.Status.Credentials == nil {
		s.rc.Status.Credentials = &cachev1beta1.CredentialsStatus{}
	}
	s.rc.Status.Credentials.RotationStep = step
}

// podsCanRotate reports whether every expected pod can take part in the
// rotation st: every one ready. Turning authentication on (st.Live is "")
// waits only for every expected pod to exist with an address and not be
// terminating: a node given the password fails its readiness probe (which
// sends the owned Secret's password, none until the Secret switches), so
// after an interrupted first step readiness would never come back. A pod
// that does not answer fails the step, which is retried.
func podsCanRotate(s *scope, st rotationState) bool {
	if st.Live != "" || st.Next == "" {
		return len(s.obs.Pods.NotReady) == 0
	}
	for _, sh := range s.shards {
		if len(sh.Pods) != sh.Expected {
			return false
		}
		for _, p := range sh.Pods {
			if p.IP == "" || p.Terminating {
				return false
			}
		}
	}
	return true
}

// reconcileRotation runs the rotation reconcileCredentials found under
// way, once every expected pod is ready and answering: a node that cannot
// get the new password must not be left behind. Redis keeps serving with
// the current password while it waits.
func (r *RedisClusterReconciler) reconcileRotation(ctx context.Context, s *scope) (ctrl.Result, bool, error) {
	st := s.rotation
	if !st.inProgress() || s.rc.Spec.Auth == nil {
		return ctrl.Result{}, false, nil
	}
	c := &s.obs.Creds
	if s.rc.Spec.Paused || s.obs.Pods.Expected == 0 || !podsCanRotate(s, st) {
		return ctrl.Result{RequeueAfter: busyRequeue}, false, nil
	}
	var eps []topology.Endpoint
	for _, sh := range s.shards {
		for _, p := range sh.Pods {
			eps = append(eps, p.endpoint())
		}
	}
	grace := defaultGracePeriod
	if g := s.rc.Spec.Auth.RotationGracePeriod; g != nil {
		grace = g.Duration
	}
	actx, cancel := context.WithTimeout(ctx, 4*r.RedisTimeout)
	defer cancel()
	save := func(next rotationState) error { return r.applyRotationSecret(actx, s, next) }
	target := st.PendingVersion
	out, err := advanceRotation(actx, r.engine(st.Live, s.log), eps, &st, grace, s.now, save)
	s.rotation = st
	s.password = st.Live
	setRotationStep(s, out.Step)
	if err != nil {
		s.log.Info("Password rotation step failed; retrying", "step", out.Step, "error", err.Error())
		return ctrl.Result{RequeueAfter: busyRequeue}, false, nil
	}
	if out.Done {
		c.Version, c.RotationTarget = target, ""
		s.rc.Status.Credentials.LastRotationTime = &metav1.Time{Time: s.now}
		s.log.Info("Password rotation finished", "version", c.Version)
		s.did("RotationCompleted", "The password of version %s is the only one accepted on %d nodes", c.Version, len(eps))
		return ctrl.Result{}, false, nil
	}
	return ctrl.Result{RequeueAfter: out.Wait}, false, nil
}
