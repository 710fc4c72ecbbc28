package resources

import (
	corev1 "k8s.io/api/core/v1"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
)

// LabelUser is on each operator-owned Secret of a spec.users entry (UserSecret) and holds the
// ACL user's name; the controller finds the users it manages, and those to delete, by it.
const LabelUser = "cache.redis.io/acl-user"

// UsernameKey is the key of a user Secret holding the ACL user name, beside PasswordKey.
const UsernameKey = "username"

// UserSecretName is the name of the Secret publishing the password of user of cluster rc:
// <rc>-user-<user>.
func UserSecretName(rc, user string) string { return rc + "-user-" + user }

// UserSecret builds the operator-owned Secret UserSecretName(rc, user): UsernameKey and, once
// every node accepts one, PasswordKey, the password clients use. Clients read it there as
// they read the default user's from SecretName. It is not mounted in the pods.
func UserSecret(rc *cachev1beta1.RedisCluster, user, password string) *corev1.Secret {
	labels := ClusterLabels(rc.Name)
	labels[LabelUser] = user
	data := map[string][]byte{UsernameKey: []byte(user)}
	if password != "" {
		data[PasswordKey] = []byte(password)
	}
	return ownedSecret(rc, UserSecretName(rc.Name, user), labels, data)
}

// WithUsersConf appends conf, the redis.conf "user" lines of spec.users (acl.ConfLines, with
// password hashes only), to sec's AuthConfKey (Secret's auth.conf, which redis.conf includes
// last), so that a node starting, or restarting, has those users before anyone reaches it.
// Empty conf leaves sec unchanged. It returns sec.
func WithUsersConf(sec *corev1.Secret, conf string) *corev1.Secret {
	if conf != "" {
		sec.Data[AuthConfKey] = append(sec.Data[AuthConfKey], []byte(conf)...)
	}
	return sec
}
