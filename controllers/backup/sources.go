package backup

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/credentials"
	"github.com/redis-operator/redis-operator/controllers/resources"
)

// Secret keys read when a selector names none.
const (
	defaultCAKey = "ca.crt"
)

// OpenStore checks spec's endpoint against endpoints, then reads spec's
// credentials and CA Secrets in namespace (through reader, uncached) and
// returns the Store. On an error reason is the ObjectStoreReady reason
// (EndpointNotAllowed, before anything is read; SecretNotFound for a
// missing Secret or key). A spec with credentialsVault needs OpenStoreVault.
func OpenStore(ctx context.Context, reader client.Reader, endpoints EndpointPolicy, namespace string,
	spec *cachev1beta1.ObjectStoreSpec) (*Store, string, error) {
	return OpenStoreVault(ctx, reader, endpoints, nil, namespace, "", spec)
}

// OpenStoreVault is OpenStore reading credentialsVault with vault, for a
// backup of cluster (the Vault login's default service account). With a
// nil vault such a spec is an error (reason InvalidConfig). On a Vault
// error reason is credentials.Reason's (AuthenticationFailed,
// PermissionDenied, KeyMissing, ...).
func OpenStoreVault(ctx context.Context, reader client.Reader, endpoints EndpointPolicy, vault *VaultKeys, namespace, cluster string,
	spec *cachev1beta1.ObjectStoreSpec) (*Store, string, error) {
	// Before any Secret or Vault secret is read: the keys would sign
	// requests to the endpoint.
	if err := endpoints.Check(spec.Endpoint); err != nil {
		return nil, cachev1beta1.BackupEndpointNotAllowedReason, err
	}
	var keys Keys
	if c := spec.CredentialsVault; c != nil {
		if vault == nil {
			return nil, credentials.ReasonInvalidConfig, errors.New("credentialsVault is not read here: give credentialsSecretRef")
		}
		var err error
		if keys, err = vault.Keys(ctx, namespace, cluster, c); err != nil {
			return nil, credentials.Reason(err), err
		}
	}
	if ref := spec.CredentialsSecretRef; ref != nil {
		var err error
		if keys.AccessKeyID, err = secretValue(ctx, reader, namespace, ref.Name, or(ref.AccessKeyIDKey, "accessKeyID")); err != nil {
			return nil, cachev1beta1.BackupCredentialsSecretReason, err
		}
		if keys.SecretAccessKey, err = secretValue(ctx, reader, namespace, ref.Name, or(ref.SecretAccessKeyKey, "secretAccessKey")); err != nil {
			return nil, cachev1beta1.BackupCredentialsSecretReason, err
		}
	}
	var ca []byte
	if ref := spec.CASecretRef; ref != nil {
		v, err := secretValue(ctx, reader, namespace, ref.Name, or(ref.Key, defaultCAKey))
		if err != nil {
			return nil, cachev1beta1.BackupCredentialsSecretReason, err
		}
		ca = []byte(v)
	}
	s, err := NewStore(spec, keys, ca)
	if err != nil {
		return nil, cachev1beta1.BackupObjectStoreUnreachableReason, err
	}
	return s, "", nil
}

func secretValue(ctx context.Context, reader client.Reader, namespace, name, key string) (string, error) {
	var s corev1.Secret
	if err := reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &s); err != nil {
		if kerrors.IsNotFound(err) {
			return "", fmt.Errorf("secret %s/%s not found", namespace, name)
		}
		return "", fmt.Errorf("reading secret %s/%s: %w", namespace, name, err)
	}
	v, ok := s.Data[key]
	if !ok || len(v) == 0 {
		return "", fmt.Errorf("secret %s/%s has no key %s", namespace, name, key)
	}
	return string(v), nil
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// clusterPassword is the password the cluster's nodes run with: key
// password of the operator-owned Secret <name>-auth, empty when that key
// is absent (a cluster without a password).
func clusterPassword(ctx context.Context, reader client.Reader, rc *cachev1beta1.RedisCluster) (string, error) {
	var s corev1.Secret
	if err := reader.Get(ctx, client.ObjectKey{Namespace: rc.Namespace, Name: resources.SecretName(rc.Name)}, &s); err != nil {
		if kerrors.IsNotFound(err) && rc.Spec.Auth != nil && rc.Spec.Auth.Disabled {
			return "", nil
		}
		return "", fmt.Errorf("reading the cluster's password Secret %s: %w", resources.SecretName(rc.Name), err)
	}
	return string(s.Data[resources.PasswordKey]), nil
}

// sources picks the node of every shard of rc's status: a ready replica,
// else the master (with a warning for the event). why is not empty when
// the backup cannot start yet: slots not all assigned, or a shard with
// no ready pod. Shards are in the order of their StatefulSet ordinal.
func (r *Reconciler) sources(ctx context.Context, rc *cachev1beta1.RedisCluster) (out []Source, warnings []string, why string, err error) {
	if !meta.IsStatusConditionTrue(rc.Status.Conditions, cachev1beta1.RedisClusterSlotsAssignedCondition) {
		return nil, nil, "RedisCluster " + rc.Name + " does not serve all 16384 slots yet", nil
	}
	shards := slices.Clone(rc.Status.Shards)
	slices.SortFunc(shards, func(a, b cachev1beta1.ShardStatus) int { return shardOrdinal(a.Name) - shardOrdinal(b.Name) })
	for _, sh := range shards {
		if len(sh.Slots) == 0 {
			continue // a shard being drained: its keys are elsewhere
		}
		var picked *corev1.Pod
		role := "replica"
		for _, name := range sh.ReplicaPods {
			p, err := r.readyPod(ctx, rc.Namespace, name)
			if err != nil {
				return nil, nil, "", err
			}
			if p != nil {
				picked = p
				break
			}
		}
		if picked == nil {
			role = "master"
			if picked, err = r.readyPod(ctx, rc.Namespace, sh.MasterPod); err != nil {
				return nil, nil, "", err
			}
			if picked == nil {
				return nil, nil, fmt.Sprintf("shard %s has no ready pod", sh.Name), nil
			}
			warnings = append(warnings, fmt.Sprintf("Shard %s has no ready replica: its RDB is read from master %s (the fork costs the master memory and latency)", sh.Name, picked.Name))
		}
		out = append(out, Source{Shard: sh.Name, Pod: picked.Name, Role: role, Slots: slices.Clone(sh.Slots),
			Addr: net.JoinHostPort(picked.Status.PodIP, strconv.Itoa(redisPort(picked)))})
	}
	if len(out) == 0 {
		return nil, nil, "RedisCluster " + rc.Name + " reports no shard", nil
	}
	return out, warnings, "", nil
}

// redisPort is the pod's container port named "redis" (the Redis
// container's client port, resources.RedisPort in the operator's pods).
func redisPort(p *corev1.Pod) int {
	for _, c := range p.Spec.Containers {
		for _, port := range c.Ports {
			if port.Name == "redis" {
				return int(port.ContainerPort)
			}
		}
	}
	return resources.RedisPort
}

// readyPod is the pod when it is Ready with an IP, nil otherwise.
func (r *Reconciler) readyPod(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
	if name == "" {
		return nil, nil
	}
	var p corev1.Pod
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &p); err != nil {
		if kerrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	if p.DeletionTimestamp != nil || p.Status.PodIP == "" {
		return nil, nil
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return &p, nil
		}
	}
	return nil, nil
}

// shardOrdinal is n of a shard named <cluster>-shard-<n>, or -1.
func shardOrdinal(name string) int {
	i := strings.LastIndex(name, "-")
	n, err := strconv.Atoi(name[i+1:])
	if i < 0 || err != nil {
		return -1
	}
	return n
}

// WriteManifest writes m as the backup's manifest: the last object of a backup.
func WriteManifest(ctx context.Context, store *Store, backupPath string, m *Manifest) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return store.Put(ctx, ManifestKey(backupPath), b, "application/json")
}

func equalStatus(a, b *cachev1beta1.RedisClusterBackupStatus) bool {
	return equality.Semantic.DeepEqual(a, b)
}
