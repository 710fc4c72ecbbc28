package controllers

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/resources"
	"github.com/redis-operator/redis-operator/controllers/rotation"
	"github.com/redis-operator/redis-operator/controllers/topology"
)

// The I/O of a password rotation: the owned Secret's writes, the pods it
// waits for, and the step in status. The state machine is package rotation.

// applyRotationSecret writes the owned Secret for st (server-side apply:
// keys and annotations st no longer has are removed).
func (r *RedisClusterReconciler) applyRotationSecret(ctx context.Context, s *scope, st rotation.State) error {
	desired := resources.WithUsersConf(rotation.Secret(s.rc, st), s.usersConf)
	s.log.Info("Applying Secret", "secret", desired.Name, "rotationVersion", st.PendingVersion)
	if err := r.Client.Patch(ctx, desired, client.Apply, client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("applying Secret %s: %w", desired.Name, err)
	}
	return nil
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

// rotationEndpoints are the pods a rotation step st runs on, and whether
// it may run now. Between two passwords the pods that are up take part
// (ready or not: one that does not answer fails the step, which is
// retried): one that does not run starts from the Secret's auth.conf,
// which holds a password every node accepts from the switch on, and a
// later step heals one that started before it, once it is up; so one sick
// pod does not hold the rotation. Turning authentication on (st.Live is
// "") waits for every expected pod to exist with an address and not be
// terminating, and runs on all of them: a pod that started without a
// password after the last step would never get one, and a node given the
// password fails its readiness probe (which sends the owned Secret's
// password, none until the Secret switches), so readiness cannot be the
// test.
func rotationEndpoints(s *scope, st rotation.State) ([]topology.Endpoint, bool) {
	var eps []topology.Endpoint
	if st.Live != "" || st.Next == "" {
		for _, sh := range s.shards {
			for _, p := range sh.Pods {
				if p.Up {
					eps = append(eps, p.endpoint())
				}
			}
		}
		return eps, len(eps) > 0
	}
	for _, sh := range s.shards {
		if len(sh.Pods) != sh.Expected {
			return nil, false
		}
		for _, p := range sh.Pods {
			if p.IP == "" || p.Terminating {
				return nil, false
			}
			eps = append(eps, p.endpoint())
		}
	}
	return eps, true
}

// reconcileRotation runs the rotation reconcileCredentials found under
// way on the pods rotationEndpoints picks: no node that runs is left
// behind, and none that does not run holds the rotation. Redis keeps
// serving with the current password while it waits.
func (r *RedisClusterReconciler) reconcileRotation(ctx context.Context, s *scope) (ctrl.Result, bool, error) {
	st := s.rotation
	if !st.InProgress() || s.rc.Spec.Auth == nil {
		return ctrl.Result{}, false, nil
	}
	c := &s.obs.Creds
	eps, ok := rotationEndpoints(s, st)
	if s.rc.Spec.Paused || s.obs.Pods.Expected == 0 || !ok {
		return ctrl.Result{RequeueAfter: busyRequeue}, false, nil
	}
	grace := defaultGracePeriod
	if g := s.rc.Spec.Auth.RotationGracePeriod; g != nil {
		grace = g.Duration
	}
	actx, cancel := context.WithTimeout(ctx, 4*r.RedisTimeout)
	defer cancel()
	save := func(next rotation.State) error { return r.applyRotationSecret(actx, s, next) }
	target := st.PendingVersion
	out, err := rotation.Advance(actx, r.engine(s, st.Live), eps, &st, grace, s.now, save)
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
