package resources

import (
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
)

// RestoreContainerName is the init container that fetches a shard's RDB.
const RestoreContainerName = "restore"

// restoreCADir is where the object store's CA bundle is mounted in it.
const restoreCADir = "/etc/redis-operator/restore-ca"

// Restore is where the shards of a cluster bootstrapping from a backup
// get their RDB: the backup's object store and path (status.path of its
// RedisClusterBackup), read by Image (the operator's image) running
// `redis-operator restore-fetch`.
type Restore struct {
	Image       string
	ObjectStore cachev1beta1.ObjectStoreSpec
	Path        string
	// OwnedKeys says ObjectStore's credentialsSecretRef is RestoreKeysSecretName, which the
	// operator writes from the backup's credentialsVault and deletes once the cluster is
	// formed: the init container then reads it as optional, so that a pod started again
	// after that (its data volume already holds the node, nothing to fetch) is not held up.
	OwnedKeys bool
}

// RestoreKeysSecretName is the name of the Secret holding, while cluster rc is restored, the
// object store's access key pair the operator read from Vault: <rc>-restore-keys.
func RestoreKeysSecretName(rc string) string { return rc + "-restore-keys" }

// RestoreKeysSecret builds the operator-owned Secret RestoreKeysSecretName with the access
// key pair under the default keys of an object store's credentialsSecretRef (accessKeyID,
// secretAccessKey), for the restore init containers.
func RestoreKeysSecret(rc *cachev1beta1.RedisCluster, accessKeyID, secretAccessKey string) *corev1.Secret {
	return ownedSecret(rc, RestoreKeysSecretName(rc.Name), ClusterLabels(rc.Name),
		map[string][]byte{"accessKeyID": []byte(accessKeyID), "secretAccessKey": []byte(secretAccessKey)})
}

// WithRestore adds to shard's StatefulSet the init container that places
// the shard's RDB in the data volume before redis-server starts (only on
// ordinal 0 with an empty volume; see cmd/redis-operator restore-fetch),
// and stamps the applied hash again. The pod template hash
// (TemplateHashAnnotation) is left as it was: the init container matters
// only for a pod's first start before the cluster is formed, and the
// controller drops it from the StatefulSet once the cluster is formed
// without restarting any pod.
func WithRestore(sts *appsv1.StatefulSet, shard int, r *Restore) {
	store := &r.ObjectStore
	args := []string{"restore-fetch",
		"--endpoint=" + store.Endpoint, "--bucket=" + store.Bucket, "--region=" + store.Region,
		"--path=" + r.Path, "--shard=" + strconv.Itoa(shard), "--data-dir=" + DataDir,
	}
	if store.ForcePathStyle {
		args = append(args, "--path-style")
	}
	env := []corev1.EnvVar{{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{
		FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"},
	}}}
	if ref := store.CredentialsSecretRef; ref != nil {
		for _, kv := range [][2]string{{"AWS_ACCESS_KEY_ID", or(ref.AccessKeyIDKey, "accessKeyID")}, {"AWS_SECRET_ACCESS_KEY", or(ref.SecretAccessKeyKey, "secretAccessKey")}} {
			env = append(env, corev1.EnvVar{Name: kv[0], ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: ref.Name}, Key: kv[1], Optional: optional(r.OwnedKeys),
			}}})
		}
	}
	mounts := []corev1.VolumeMount{{Name: DataVolumeName, MountPath: DataDir}}
	spec := &sts.Spec.Template.Spec
	if ref := store.CASecretRef; ref != nil {
		key := or(ref.Key, "ca.crt")
		spec.Volumes = append(spec.Volumes, corev1.Volume{Name: "restore-ca", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: ref.Name, Items: []corev1.KeyToPath{{Key: key, Path: "ca.crt"}}, DefaultMode: ptr.To[int32](0o440),
		}}})
		mounts = append(mounts, corev1.VolumeMount{Name: "restore-ca", MountPath: restoreCADir, ReadOnly: true})
		args = append(args, "--ca-file="+restoreCADir+"/ca.crt")
	}
	sc := defaultContainerSecurityContext()
	// The files it writes are redis-server's: the redis user's, whatever
	// the operator image's USER is.
	sc.RunAsUser, sc.RunAsGroup = ptr.To[int64](redisUID), ptr.To[int64](redisUID)
	spec.InitContainers = append(spec.InitContainers, corev1.Container{
		Name:                     RestoreContainerName,
		Image:                    r.Image,
		Command:                  []string{"/redis-operator"},
		Args:                     args,
		Env:                      env,
		VolumeMounts:             mounts,
		SecurityContext:          sc,
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	})
	SetAppliedHash(sts)
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// optional is nil (the API's default, false) or true.
func optional(b bool) *bool {
	if !b {
		return nil
	}
	return ptr.To(true)
}
