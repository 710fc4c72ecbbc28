package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/backup"
	"github.com/redis-operator/redis-operator/controllers/credentials"
	"github.com/redis-operator/redis-operator/controllers/resources"
)

// DefaultRestoreImage is the image of a restored pod's init container
// (--restore-image): the operator's own, which runs
// `redis-operator restore-fetch`.
const DefaultRestoreImage = "ghcr.io/redis-operator/redis-operator:v0.1.0"

// restoreRetry is the wait before looking again at a backup that cannot
// be read yet (not Completed, object store unreachable).
const restoreRetry = 15 * time.Second

// reconcileRestore resolves spec.bootstrap.fromBackup of a cluster not
// formed yet into s.restore, which makes every StatefulSet carry the
// restore init container (resources.WithRestore). It reads the backup's
// manifest and stops the pass for good (InvalidSpec) when the backup
// cannot be restored into this spec: another shard count, a Redis version
// newer than the image's, a path outside the cluster's namespace
// (backup.PathIdentity, backup.BackupIdentity), an endpoint the operator's
// policy refuses (checked before any key is read or request sent), or a
// manifest that records another namespace, cluster or backup than expected
// (backup.CheckManifest). A backup that is not Completed yet, or an object
// store that does not answer, waits. Once the cluster is formed
// (status.formedTime) it does nothing, and the init container goes.
func (r *RedisClusterReconciler) reconcileRestore(ctx context.Context, s *scope) (ctrl.Result, bool, error) {
	b := s.rc.Spec.Bootstrap
	if b == nil || b.FromBackup == nil || s.rc.Status.FormedTime != nil {
		// No restore pending (done, or fromBackup removed before it ran).
		return ctrl.Result{}, false, r.deleteRestoreKeys(ctx, s)
	}
	spec, path, want, login, err := r.restoreSource(ctx, s.rc)
	endpoints := r.objectStoreEndpoints()
	if err == nil {
		// Before any Secret or Vault secret is read for it.
		if cerr := endpoints.Check(spec.Endpoint); cerr != nil {
			err = &invalidRestoreError{"spec.bootstrap.fromBackup: " + cerr.Error()}
		}
	}
	ownedKeys := false
	if err == nil && spec.CredentialsVault != nil {
		// The pods' init containers read the keys from a Secret (env).
		spec, err = r.restoreKeysFromVault(ctx, s, spec, login)
		ownedKeys = true
	}
	var store *backup.Store
	if err == nil {
		store, _, err = backup.OpenStore(ctx, r.reader(), endpoints, s.rc.Namespace, spec)
	}
	var invalid *invalidRestoreError
	switch {
	case errors.As(err, &invalid):
		s.obs.SpecErr = err
		return ctrl.Result{}, true, reconcile.TerminalError(err)
	case err != nil:
		s.log.Info("Waiting for the backup to restore", "reason", err.Error())
		s.obs.RestoreWaiting = fmt.Sprintf("Waiting to restore the backup: %v; retried every %s.", err, restoreRetry)
		return ctrl.Result{RequeueAfter: restoreRetry}, true, nil
	}
	m, err := backup.ReadManifest(ctx, store, path)
	if err == nil {
		err = backup.CheckManifest(m, backup.ManifestKey(path), want)
	}
	if errors.Is(err, backup.ErrManifestMismatch) {
		err = &invalidRestoreError{"spec.bootstrap.fromBackup: " + err.Error()}
		s.obs.SpecErr = err
		return ctrl.Result{}, true, reconcile.TerminalError(err)
	}
	if err != nil {
		s.log.Info("Waiting for the backup's manifest", "path", path, "reason", err.Error())
		s.obs.RestoreWaiting = fmt.Sprintf("Waiting to restore the backup: its manifest %s cannot be read: %v; retried every %s.", backup.ManifestKey(path), err, restoreRetry)
		return ctrl.Result{RequeueAfter: restoreRetry}, true, nil
	}
	if err := restorable(m, s.rc); err != nil {
		s.obs.SpecErr = err
		return ctrl.Result{}, true, reconcile.TerminalError(err)
	}
	image := r.RestoreImage
	if image == "" {
		image = DefaultRestoreImage
	}
	s.restore = &resources.Restore{Image: image, ObjectStore: *spec, Path: path, OwnedKeys: ownedKeys}
	return ctrl.Result{}, false, nil
}

// restoreKeysFromVault reads the access key pair of spec's credentialsVault with
// r.BackupVault (the login and address policy of the backups; an empty serviceAccountName
// logs in as the service account named login, restoreSource's) into the owned Secret
// resources.RestoreKeysSecretName, and returns a copy of spec that names that Secret as its
// credentialsSecretRef instead: the restore init containers read keys from a Secret, never
// from Vault. When Vault does not answer or refuses after it gave a pair, the restore goes on
// with that pair (the init containers may already be using it). The Secret is deleted once
// the cluster is formed or fromBackup is removed (deleteRestoreKeys).
func (r *RedisClusterReconciler) restoreKeysFromVault(ctx context.Context, s *scope, spec *cachev1beta1.ObjectStoreSpec, login string) (*cachev1beta1.ObjectStoreSpec, error) {
	name := resources.RestoreKeysSecretName(s.rc.Name)
	live := &corev1.Secret{}
	// getChild asks the API server when the cache does not show it: a Secret of that name
	// that is not this cluster's is never overwritten.
	err := r.getChild(ctx, client.ObjectKey{Namespace: s.rc.Namespace, Name: name}, live)
	switch {
	case apierrors.IsNotFound(err):
		live = nil
	case err != nil:
		return nil, fmt.Errorf("reading Secret %s: %w", name, err)
	default:
		if err := checkControlled(s.rc, live); err != nil {
			return nil, err
		}
	}
	var keys backup.Keys
	if r.BackupVault == nil {
		err = errors.New("this operator has no Vault client for object stores")
	} else if keys, err = r.BackupVault.Keys(ctx, s.rc.Namespace, login, spec.CredentialsVault); err != nil {
		err = fmt.Errorf("reading the object store's keys from Vault (%s): %w", credentials.Reason(err), err)
	}
	switch {
	case err != nil && live == nil:
		return nil, err
	case err != nil:
		// The pods have the pair Vault gave before: the restore goes on with it.
		s.log.Info("Vault did not give the object store's keys; the restore goes on with those it gave before", "secret", name, "reason", err.Error())
	default:
		desired := resources.RestoreKeysSecret(s.rc, keys.AccessKeyID, keys.SecretAccessKey)
		if live == nil || !secretUpToDate(live, desired) {
			s.log.Info("Applying Secret", "secret", name, "for", "restore")
			if err := r.Client.Patch(ctx, desired, client.Apply, client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
				return nil, fmt.Errorf("applying Secret %s: %w", name, err)
			}
		}
	}
	out := spec.DeepCopy()
	out.CredentialsVault = nil
	out.CredentialsSecretRef = &cachev1beta1.ObjectStoreCredentials{Name: name}
	return out, nil
}

// deleteRestoreKeys deletes the Secret restoreKeysFromVault wrote, once no restore is pending
// (the cluster is formed, or fromBackup was removed before it ran). It reads the cache only,
// so a cluster costs no API call per pass for it.
func (r *RedisClusterReconciler) deleteRestoreKeys(ctx context.Context, s *scope) error {
	sec := &corev1.Secret{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: s.rc.Namespace, Name: resources.RestoreKeysSecretName(s.rc.Name)}, sec)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("reading Secret %s: %w", resources.RestoreKeysSecretName(s.rc.Name), err)
	case !metav1.IsControlledBy(sec, s.rc):
		return nil
	}
	if err := r.Client.Delete(ctx, sec); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting Secret %s: %w", sec.Name, err)
	}
	s.log.Info("Deleted the restore's object store keys", "secret", sec.Name)
	return nil
}

// invalidRestoreError is a fromBackup that can never be restored as written.
type invalidRestoreError struct{ msg string }

func (e *invalidRestoreError) Error() string { return e.msg }

// restorable checks a manifest against the cluster's spec.
func restorable(m *backup.Manifest, rc *cachev1beta1.RedisCluster) error {
	if err := backup.CheckRestorable(len(m.Shards), m.RedisVersion, rc.Spec.Shards, rc.Spec.Image); err != nil {
		return &invalidRestoreError{"spec.bootstrap.fromBackup: " + err.Error()}
	}
	return nil
}

// objectStoreEndpoints is the operator's object store endpoint policy
// for restores. The RedisClusterReconciler has no field of its own for it:
// it is the one the backup controllers' shared VaultKeys carries
// (BackupVault.Endpoints); without BackupVault every endpoint is allowed.
func (r *RedisClusterReconciler) objectStoreEndpoints() backup.EndpointPolicy {
	if r.BackupVault == nil {
		return backup.EndpointPolicy{}
	}
	return r.BackupVault.Endpoints
}

// restoreSource is the object store and path fromBackup names, and what
// the manifest there must record: those of a Completed RedisClusterBackup
// of the namespace (its spec.objectStore and status.path, which must be the
// path its spec gives; the manifest its namespace, cluster, name and UID),
// or the object store and path given (whose namespace part must be the
// cluster's; the manifest the path's namespace, cluster and backup).
// login is the service account an empty serviceAccountName of the store's
// credentialsVault means: the backed-up cluster's name for a
// RedisClusterBackup (what its own login used, and what the webhook asked
// the user to be allowed to mint), the restored cluster's for a store given
// in the spec.
func (r *RedisClusterReconciler) restoreSource(ctx context.Context, rc *cachev1beta1.RedisCluster) (spec *cachev1beta1.ObjectStoreSpec, path string, want backup.ManifestIdentity, login string, err error) {
	fb := rc.Spec.Bootstrap.FromBackup
	if fb.BackupName == "" {
		want, err := backup.PathIdentity(rc.Namespace, fb.Path)
		if err != nil {
			return nil, "", want, "", &invalidRestoreError{"spec.bootstrap.fromBackup.path: " + err.Error()}
		}
		return fb.ObjectStore, fb.Path, want, rc.Name, nil
	}
	var b cachev1beta1.RedisClusterBackup
	if err := r.reader().Get(ctx, client.ObjectKey{Namespace: rc.Namespace, Name: fb.BackupName}, &b); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, "", backup.ManifestIdentity{}, "", &invalidRestoreError{fmt.Sprintf("spec.bootstrap.fromBackup.backupName: RedisClusterBackup %s not found", fb.BackupName)}
		}
		return nil, "", backup.ManifestIdentity{}, "", err
	}
	switch b.Status.Phase {
	case cachev1beta1.BackupCompleted:
		path, want, err := backup.BackupIdentity(&b)
		if err != nil {
			return nil, "", want, "", &invalidRestoreError{fmt.Sprintf("spec.bootstrap.fromBackup.backupName: RedisClusterBackup %s: %v", fb.BackupName, err)}
		}
		return &b.Spec.ObjectStore, path, want, b.Spec.ClusterName, nil
	case cachev1beta1.BackupFailed:
		return nil, "", backup.ManifestIdentity{}, "", &invalidRestoreError{fmt.Sprintf("spec.bootstrap.fromBackup.backupName: RedisClusterBackup %s failed", fb.BackupName)}
	default:
		return nil, "", backup.ManifestIdentity{}, "", fmt.Errorf("RedisClusterBackup %s is %s, not Completed yet", fb.BackupName, b.Status.Phase)
	}
}
