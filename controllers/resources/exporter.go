package resources

import (
	corev1 "k8s.io/api/core/v1"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/acl"
)

// ExporterSecretAnnotation is on the pod template with spec.exporter enabled and holds the UID
// of the Secret ExporterSecretName (Placement.ExporterSecretUID).
const ExporterSecretAnnotation = "cache.redis.io/exporter-secret-uid"

// ExporterSecretName is the name of the Secret holding the password of the redis_exporter
// sidecar's ACL user (acl.ExporterUser) in cluster rc: <rc>-exporter.
func ExporterSecretName(rc string) string { return rc + "-exporter" }

// ExporterSecret builds the operator-owned Secret ExporterSecretName: UsernameKey
// (acl.ExporterUser) and PasswordKey, the password the operator generated for the sidecar. The
// sidecar reads PasswordKey into REDIS_PASSWORD when it starts; the Redis container does not
// mount it (its auth.conf has the password's hash only).
func ExporterSecret(rc *cachev1beta1.RedisCluster, password string) *corev1.Secret {
	return ownedSecret(rc, ExporterSecretName(rc.Name), ClusterLabels(rc.Name),
		map[string][]byte{UsernameKey: []byte(acl.ExporterUser), PasswordKey: []byte(password)})
}

// ExporterSettings are the redis_exporter variables of the sidecar that depend neither on the
// pod nor on a Secret: it logs in as acl.ExporterUser, and skips CONFIG GET, which that user
// may not run (REDIS_EXPORTER_CONFIG_COMMAND "-": redis_exporter v1.61.0 and newer then skip
// the config metrics; an older one sends "- GET *", which Redis answers with one
// unknown-command error a scrape, counted in INFO errorstats, and nothing else).
func ExporterSettings() []corev1.EnvVar {
	return []corev1.EnvVar{
		{Name: "REDIS_USER", Value: acl.ExporterUser},
		{Name: "REDIS_EXPORTER_CONFIG_COMMAND", Value: "-"},
	}
}
