package controllers

import (
	"context"
	"fmt"
	"slices"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/acl"
	"github.com/redis-operator/redis-operator/controllers/resources"
	"github.com/redis-operator/redis-operator/controllers/rotation"
	"github.com/redis-operator/redis-operator/controllers/topology"
)

// upEndpoints are the pods that run, ready or not: the nodes a user is applied on. One that
// does not run starts from auth.conf, which holds the users, and the next pass re-applies
// them there anyway.
func upEndpoints(s *scope) []topology.Endpoint {
	var eps []topology.Endpoint
	for _, sh := range s.shards {
		for _, p := range sh.Pods {
			if p.Up {
				eps = append(eps, p.endpoint())
			}
		}
	}
	return eps
}

// The Secret of a user removed from spec.users is deleted.
// +kubebuilder:rbac:groups="",resources=secrets,verbs=delete

// reconcileUsers applies spec.users on every running node, advances their rotations, deletes
// the removed users and writes status.users (see users.go).
func (r *RedisClusterReconciler) reconcileUsers(ctx context.Context, s *scope) (ctrl.Result, bool, error) {
	rc := s.rc
	managed, err := r.managedUserSecrets(ctx, rc)
	if err != nil {
		return ctrl.Result{}, false, err
	}
	eps := upEndpoints(s)
	actx, cancel := context.WithTimeout(ctx, 4*r.RedisTimeout)
	defer cancel()
	eng := r.engine(s, s.password)
	res, err := r.reconcileExporterUser(actx, s, eng, eps)
	if err != nil {
		return ctrl.Result{}, false, err
	}
	if len(s.users) == 0 && len(managed) == 0 {
		rc.Status.Users = nil
		return res, false, nil
	}
	requeue := func(d ctrl.Result) {
		if d.RequeueAfter > 0 && (res.RequeueAfter == 0 || d.RequeueAfter < res.RequeueAfter) {
			res = d
		}
	}
	var out []cachev1beta1.UserStatus
	for _, us := range s.users {
		if us.ruleErr == nil && us.usable {
			if len(eps) == 0 {
				us.status.Applied = false
				requeue(ctrl.Result{RequeueAfter: busyRequeue})
			} else {
				requeue(r.applyUser(actx, s, eng, eps, us))
			}
		}
		out = append(out, us.status)
	}

	var gone []string
	for _, sec := range managed {
		name := sec.Labels[resources.LabelUser]
		if !slices.ContainsFunc(s.users, func(us *userState) bool { return us.spec.Name == name }) {
			gone = append(gone, name)
		}
	}
	slices.Sort(gone)
	if len(gone) > 0 {
		err := error(nil)
		if len(eps) > 0 {
			s.log.Info("Deleting ACL users removed from spec.users", "users", gone)
			err = eng.DeleteUsers(actx, eps, gone)
		}
		for _, name := range gone {
			st := previousUserStatus(rc, name)
			// With no node running, every node starts from auth.conf, which no longer
			// holds the user.
			switch {
			case err != nil:
				st.Applied, st.Message = true, "deleting: "+err.Error()
				requeue(ctrl.Result{RequeueAfter: busyRequeue})
			default:
				if derr := r.Client.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: rc.Namespace, Name: resources.UserSecretName(rc.Name, name)}}); derr != nil && !apierrors.IsNotFound(derr) {
					return ctrl.Result{}, false, fmt.Errorf("deleting Secret %s: %w", resources.UserSecretName(rc.Name, name), derr)
				}
				r.creds.forgetKey(userCacheKey(rc, name))
				s.did("UserDeleted", "ACL user %s deleted from %d nodes", name, len(eps))
				continue
			}
			out = append(out, st)
		}
	}
	for i := range out {
		out[i].Message = clip(out[i].Message, maxUserMessage)
	}
	rc.Status.Users = out
	return res, false, nil
}

// maxUserMessage is status.users[].message's MaxLength in the CRD.
const maxUserMessage = 1024

// clip shortens s to at most n bytes, ending in "…" when cut, without splitting a UTF-8
// sequence: an error naming many nodes must not make the status write fail.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const ellipsis = "…"
	cut := n - len(ellipsis)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + ellipsis
}

// applyUser runs one user's rotation step, or re-applies it as it is, on eps.
func (r *RedisClusterReconciler) applyUser(ctx context.Context, s *scope, eng *topology.Engine, eps []topology.Endpoint, us *userState) ctrl.Result {
	name := us.spec.Name
	st := us.st
	if !st.InProgress() {
		err := eng.ApplyUsers(ctx, eps, []acl.User{{Name: name, Rules: us.rules, Passwords: st.Passwords()}})
		us.status.RotationStep = ""
		if err != nil {
			us.status.Applied, us.status.Message = false, err.Error()
			s.log.Info("Applying an ACL user failed; retrying", "user", name, "error", err.Error())
			return ctrl.Result{RequeueAfter: busyRequeue}
		}
		if !us.status.Applied {
			s.did("UserApplied", "ACL user %s set on %d nodes", name, len(eps))
		}
		us.status.Applied, us.status.Message = true, ""
		return ctrl.Result{}
	}
	grace := defaultGracePeriod
	if g := us.spec.RotationGracePeriod; g != nil {
		grace = g.Duration
	}
	ops := rotation.UserOps{Name: name, Rules: us.rules, Apply: eng.ApplyUsers}
	save := func(next rotation.State) error { return r.applyUserSecret(ctx, s, name, next) }
	target, created := st.PendingVersion, st.Live == ""
	out, err := rotation.Advance(ctx, ops, eps, &st, grace, s.now, save)
	us.st = st
	us.status.RotationStep = out.Step
	if err != nil {
		us.status.Applied, us.status.Message = false, err.Error()
		s.log.Info("ACL user rotation step failed; retrying", "user", name, "step", out.Step, "error", err.Error())
		return ctrl.Result{RequeueAfter: busyRequeue}
	}
	us.status.Applied, us.status.Message = true, ""
	if !out.Done {
		return ctrl.Result{RequeueAfter: out.Wait}
	}
	us.status.Version = target
	if created {
		s.log.Info("ACL user created", "user", name, "version", target)
		s.did("UserCreated", "ACL user %s set on %d nodes; its password (version %s) is in Secret %s",
			name, len(eps), target, resources.UserSecretName(s.rc.Name, name))
		return ctrl.Result{}
	}
	us.status.LastRotationTime = &metav1.Time{Time: s.now}
	s.log.Info("ACL user password rotation finished", "user", name, "version", target)
	s.did("UserRotationCompleted", "The password of version %s is the only one ACL user %s has on %d nodes", target, name, len(eps))
	return ctrl.Result{}
}

// managedUserSecrets lists the Secrets of the users the operator manages for rc.
func (r *RedisClusterReconciler) managedUserSecrets(ctx context.Context, rc *cachev1beta1.RedisCluster) ([]corev1.Secret, error) {
	var list corev1.SecretList
	if err := r.Client.List(ctx, &list, client.InNamespace(rc.Namespace),
		client.MatchingLabels(resources.ClusterSelector(rc.Name)), client.HasLabels{resources.LabelUser}); err != nil {
		return nil, fmt.Errorf("listing the Secrets of ACL users: %w", err)
	}
	var out []corev1.Secret
	for _, sec := range list.Items {
		if metav1.IsControlledBy(&sec, rc) {
			out = append(out, sec)
		}
	}
	return out, nil
}
