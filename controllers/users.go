package controllers

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/acl"
	"github.com/redis-operator/redis-operator/controllers/credentials"
	"github.com/redis-operator/redis-operator/controllers/resources"
	"github.com/redis-operator/redis-operator/controllers/rotation"
)

// spec.users: declarative ACL users (see cachev1beta1.UserSpec). Two phases:
//
//   - prepareUsers, before reconcileCredentials: reads each user's password source (cached as
//     spec.auth's is, fetchFrom) and its owned Secret <cluster>-user-<name> (the rotation
//     state, package rotation), starts a rotation when the source changed (a new user is the
//     rotation from no password), and renders the users' redis.conf lines (hashed passwords
//     only) that reconcileCredentials appends to auth.conf, so that every node that starts
//     has them.
//   - reconcileUsers, last: on every node that runs, advances each user's rotation
//     (rotation.Advance with rotation.UserOps) or re-applies the user as it is (ACL SETUSER
//     is idempotent: this also heals a node that started from an older auth.conf), deletes
//     the users removed from spec.users (ACL DELUSER, then their Secret), and writes
//     status.users.
//
// A user's password is published in its Secret only once every running node accepts it;
// the old one is accepted for the user's rotationGracePeriod after that. Passwords go only to
// Redis and to the owned Secrets: never to logs, events or status.

// userState is one spec.users entry during a pass.
type userState struct {
	spec *cachev1beta1.UserSpec
	// rules are the parsed rules; ruleErr is set when they do not parse or the name is
	// reserved (acl.ReservedNames), and the user is then neither applied nor written to
	// auth.conf.
	rules   []string
	ruleErr error
	// st is the rotation state from the user's Secret; usable is false when it holds no
	// password yet (the source was never read).
	st     rotation.State
	usable bool
	status cachev1beta1.UserStatus
}

// userCacheKey keys a user's source in the credential cache: no RedisCluster name holds "/".
func userCacheKey(rc *cachev1beta1.RedisCluster, user string) types.NamespacedName {
	return types.NamespacedName{Namespace: rc.Namespace, Name: rc.Name + "/users/" + user}
}

// userSecretRefs are the Secrets spec.users reads passwords from.
func userSecretRefs(rc *cachev1beta1.RedisCluster) []string {
	var out []string
	for _, u := range rc.Spec.Users {
		if ref := u.PasswordFrom.SecretRef; ref != nil && !slices.Contains(out, ref.Name) {
			out = append(out, ref.Name)
		}
	}
	return out
}

func previousUserStatus(rc *cachev1beta1.RedisCluster, name string) cachev1beta1.UserStatus {
	for _, u := range rc.Status.Users {
		if u.Name == name {
			return *u.DeepCopy()
		}
	}
	return cachev1beta1.UserStatus{Name: name}
}

// prepareUsers reads the users' sources and rotation states and renders s.usersConf.
func (r *RedisClusterReconciler) prepareUsers(ctx context.Context, s *scope) (ctrl.Result, bool, error) {
	rc := s.rc
	var (
		res  ctrl.Result
		conf []acl.User
	)
	s.users = nil
	for i := range rc.Spec.Users {
		u := &rc.Spec.Users[i]
		us := &userState{spec: u, status: previousUserStatus(rc, u.Name)}
		s.users = append(s.users, us)
		us.status.Source = "Secret"
		if u.PasswordFrom.Vault != nil {
			us.status.Source = "Vault"
		}
		if slices.Contains(acl.ReservedNames, u.Name) {
			// The webhook and the schema refuse it; one that got past them is not applied,
			// so that it and the operator's own user do not overwrite each other.
			us.ruleErr = fmt.Errorf("the name %q is reserved for the operator's own user", u.Name)
			us.status.Applied, us.status.Message = false, us.ruleErr.Error()
			continue
		}
		us.rules, us.ruleErr = acl.ParseRules(u.Rules)
		if us.ruleErr != nil {
			us.status.Applied, us.status.Message = false, "rules: "+us.ruleErr.Error()
			continue
		}
		sec := &corev1.Secret{}
		err := r.getChild(ctx, client.ObjectKey{Namespace: rc.Namespace, Name: resources.UserSecretName(rc.Name, u.Name)}, sec)
		switch {
		case apierrors.IsNotFound(err):
			sec = nil
		case err != nil:
			return ctrl.Result{}, true, fmt.Errorf("reading Secret %s: %w", resources.UserSecretName(rc.Name, u.Name), err)
		default:
			if err := checkControlled(rc, sec); err != nil {
				return ctrl.Result{}, true, err
			}
		}
		us.st = rotation.Read(sec)
		src := &cachev1beta1.AuthSpec{SecretRef: u.PasswordFrom.SecretRef, Vault: u.PasswordFrom.Vault}
		cred, ures, err := r.fetchFrom(ctx, s, r.creds.entryFor(userCacheKey(rc, u.Name)), src)
		if ures.RequeueAfter > 0 && (res.RequeueAfter == 0 || ures.RequeueAfter < res.RequeueAfter) {
			res = ures
		}
		if err != nil {
			// Redis keeps the user's last good passwords.
			us.status.Message = fmt.Sprintf("cannot read the password (%s): %v", credentialsReason(err), err)
		} else if err := r.startUserRotation(ctx, s, us, sec, cred); err != nil {
			return ctrl.Result{}, true, err
		}
		if pws := us.st.Passwords(); len(pws) > 0 {
			us.usable = true
			conf = append(conf, acl.User{Name: u.Name, Rules: us.rules, Passwords: pws})
		}
	}
	exp, uid, err := r.exporterUser(ctx, s)
	if err != nil {
		return ctrl.Result{}, true, err
	}
	if s.exporter, s.exporterSecretUID = exp, uid; exp != nil {
		conf = append(conf, *exp)
	}
	s.usersConf = acl.ConfLines(conf, resources.QuoteConfigValue)
	return res, false, nil
}

// startUserRotation compares the source's password with the user's state and saves a new
// pending password when it differs (a new user: its first one); otherwise it keeps the
// user's Secret as it should be.
func (r *RedisClusterReconciler) startUserRotation(ctx context.Context, s *scope, us *userState, sec *corev1.Secret, cred credentials.Credential) error {
	st := us.st
	name := us.spec.Name
	switch {
	case st.Next != "" && !cred.Password.Equal(credentials.NewPassword(st.Next)):
		// The source changed again before clients got the pending password: aim at the
		// newest (nodes still accept the live one throughout).
		st.Next, st.PendingVersion = cred.Password.Reveal(), cred.Version
	case st.InProgress():
		return nil
	case st.Live == "":
		st.Next, st.PendingVersion = cred.Password.Reveal(), cred.Version
		s.log.Info("Creating ACL user", "user", name, "toVersion", cred.Version)
	case !cred.Password.Equal(credentials.NewPassword(st.Live)):
		st.Next, st.PendingVersion = cred.Password.Reveal(), cred.Version
		s.log.Info("Starting a password rotation of an ACL user", "user", name, "fromVersion", us.status.Version, "toVersion", cred.Version)
		s.normal("UserRotationStarted", "The password source of ACL user %s changed (version %s); rotating without restarts", name, cred.Version)
	default:
		us.status.Version = cred.Version
		if sec != nil && secretUpToDate(sec, rotation.UserSecret(s.rc, name, st)) {
			return nil
		}
		return r.applyUserSecret(ctx, s, name, st)
	}
	if err := r.applyUserSecret(ctx, s, name, st); err != nil {
		return err
	}
	us.st = st
	us.status.RotationStep = st.Step()
	return nil
}

// applyUserSecret writes the Secret of user for st (server-side apply).
func (r *RedisClusterReconciler) applyUserSecret(ctx context.Context, s *scope, user string, st rotation.State) error {
	desired := rotation.UserSecret(s.rc, user, st)
	s.log.Info("Applying Secret", "secret", desired.Name, "user", user, "rotationVersion", st.PendingVersion)
	if err := r.Client.Patch(ctx, desired, client.Apply, client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("applying Secret %s: %w", desired.Name, err)
	}
	return nil
}
