package rotation

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/acl"
	"github.com/redis-operator/redis-operator/controllers/resources"
	"github.com/redis-operator/redis-operator/controllers/topology"
)

// A spec.users entry rotates through the same Advance as the default user, its state kept in
// its own Secret (resources.UserSecret, read back with Read): AddingPassword adds the new
// password's hash to the user on every node, UpdatingSecret publishes it to clients,
// GracePeriod keeps both, RemovingOldPassword leaves the new one only. A new user is the
// rotation from "" (no password published yet): it is set on every node before its Secret
// gives clients the password. SettingMasterAuth is a no-op: replication logs in as the
// default user.

// UserSecret renders the Secret of user for st: resources.UserSecret with st's live password
// plus the rotation's keys and annotations while one runs.
func UserSecret(rc *cachev1beta1.RedisCluster, user string, st State) *corev1.Secret {
	return withState(resources.UserSecret(rc, user, st.Live), st)
}

// UserOps implements PasswordOps for one ACL user: each operation re-applies the user (its
// rules from Rules) with the passwords the step needs, through Apply
// (*topology.Engine.ApplyUsers).
type UserOps struct {
	Name  string
	Rules []string
	Apply func(ctx context.Context, eps []topology.Endpoint, users []acl.User) error
}

// AddPassword sets the user with password and the passwords in login (those it accepts now).
func (o UserOps) AddPassword(ctx context.Context, eps []topology.Endpoint, password string, login ...string) error {
	return o.Apply(ctx, eps, []acl.User{{Name: o.Name, Rules: o.Rules, Passwords: append([]string{password}, login...)}})
}

// SetMasterAuth does nothing: replicas authenticate to their master as the default user.
func (UserOps) SetMasterAuth(context.Context, []topology.Endpoint, string, ...string) error {
	return nil
}

// RemoveOtherPasswords sets the user with keep as its only password.
func (o UserOps) RemoveOtherPasswords(ctx context.Context, eps []topology.Endpoint, keep string, _ ...string) error {
	return o.Apply(ctx, eps, []acl.User{{Name: o.Name, Rules: o.Rules, Passwords: []string{keep}}})
}

// Passwords are the passwords a node must accept for st: the live, pending and previous ones
// (a node may start with the pending one before it is published: nobody uses it yet).
func (st State) Passwords() []string {
	var out []string
	for _, p := range []string{st.Live, st.Next, st.Previous} {
		if p != "" {
			out = append(out, p)
		}
	}
	return out
}
