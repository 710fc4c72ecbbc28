package webhooks

import (
	"context"
	"fmt"

	authorizationv1 "k8s.io/api/authorization/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/resources"
)

// The backup kinds' webhooks. A RedisClusterBackup makes the operator read
// every key of a cluster and write it, signed with credentials the spec
// names, to an endpoint the spec names; a RedisClusterScheduledBackup makes
// it do so on a schedule. So whoever writes one must be allowed what the
// operator then does for them (backupAccessChecks), and its object store
// must be one the operator's policies allow.

// ObjectStorePolicy says to which object-store endpoints the operator may
// send signed requests (backup.EndpointPolicy implements it).
type ObjectStorePolicy interface {
	// Check returns nil when endpoint is allowed, or an error that says
	// which rule refused it and which operator flag would change that.
	Check(endpoint string) error
}

var (
	backupKind          = schema.GroupKind{Group: cachev1beta1.GroupVersion.Group, Kind: "RedisClusterBackup"}
	scheduledBackupKind = schema.GroupKind{Group: cachev1beta1.GroupVersion.Group, Kind: "RedisClusterScheduledBackup"}
)

// ValidateBackup validates a RedisClusterBackup being created (old nil) or
// updated by the user of the admission request in ctx. The spec is
// immutable (a CEL rule), so an update that leaves it alone (status,
// labels, finalizers, deletion) is not checked again; one that changes it
// while the object is being deleted is refused.
func (v *Validator) ValidateBackup(ctx context.Context, old, obj *cachev1beta1.RedisClusterBackup) (admission.Warnings, error) {
	var oldSpec *cachev1beta1.RedisClusterBackupSpec
	if old != nil {
		if claimsSchedule(old, obj) {
			// Retention deletes, from the store, what a schedule owns: that
			// is decided when the backup is made, never later.
			return nil, apierrors.NewInvalid(backupKind, obj.Name, field.ErrorList{field.Forbidden(field.NewPath("metadata"),
				fmt.Sprintf("which schedule owns a backup (its label %s and its controller owner reference) is set when the backup is created and cannot change: a schedule's retention deletes what it owns", cachev1beta1.ScheduledBackupLabel))})
		}
		if apiequality.Semantic.DeepEqual(old.Spec, obj.Spec) {
			return nil, nil
		}
		if obj.DeletionTimestamp != nil {
			return nil, terminatingSpecChange(backupKind, obj.Name)
		}
		oldSpec = &old.Spec
	}
	r, err := v.validateBackupSpec(ctx, obj.Namespace, field.NewPath("spec"), oldSpec, &obj.Spec)
	if err != nil {
		return nil, err
	}
	return r.admissionOf(backupKind, obj.Name)
}

// terminatingSpecChange refuses a spec change of an object being deleted:
// only its metadata (finalizers) may change now, and a spec written then
// would never be checked or used.
func terminatingSpecChange(gk schema.GroupKind, name string) error {
	return apierrors.NewInvalid(gk, name, field.ErrorList{field.Forbidden(field.NewPath("spec"),
		"the object is being deleted: its spec can no longer change")})
}

// ValidateScheduledBackup validates a RedisClusterScheduledBackup being
// created (old nil) or updated by the user of the admission request in
// ctx: its template as a backup's spec.
func (v *Validator) ValidateScheduledBackup(ctx context.Context, old, obj *cachev1beta1.RedisClusterScheduledBackup) (admission.Warnings, error) {
	var oldSpec *cachev1beta1.RedisClusterBackupSpec
	if old != nil {
		if apiequality.Semantic.DeepEqual(old.Spec, obj.Spec) {
			return nil, nil
		}
		if obj.DeletionTimestamp != nil {
			return nil, terminatingSpecChange(scheduledBackupKind, obj.Name)
		}
		oldSpec = &old.Spec.Template
	}
	r, err := v.validateBackupSpec(ctx, obj.Namespace, field.NewPath("spec", "template"), oldSpec, &obj.Spec.Template)
	if err != nil {
		return nil, err
	}
	if old != nil && v.Access != nil && !apiequality.Semantic.DeepEqual(old.Spec.Retention, obj.Spec.Retention) {
		// Retention deletes the schedule's backups from the store, signed
		// with its credentials: as much as writing there.
		t := &obj.Spec.Template
		checks := objectStoreAccessChecks(obj.Namespace, field.NewPath("spec", "retention"), nil, "", &t.ObjectStore, t.ClusterName)
		for i := range checks {
			checks[i].path = field.NewPath("spec", "retention")
			checks[i].consequence = "retention deletes the schedule's backups from the object store with its credentials: " + checks[i].consequence
		}
		denied, err := reviewAccess(ctx, v.Access, checks)
		if err != nil {
			return nil, err
		}
		r.add(denied...)
	}
	return r.admissionOf(scheduledBackupKind, obj.Name)
}

// claimsSchedule reports whether obj, over old, newly names a schedule as
// its owner: a ScheduledBackupLabel value or a controller owner reference
// of that kind that old did not have. Removing them (the garbage
// collector orphaning a deleted schedule's backups) is no claim.
func claimsSchedule(old, obj *cachev1beta1.RedisClusterBackup) bool {
	if l := obj.Labels[cachev1beta1.ScheduledBackupLabel]; l != "" && l != old.Labels[cachev1beta1.ScheduledBackupLabel] {
		return true
	}
	ref, oldRef := metav1.GetControllerOf(obj), metav1.GetControllerOf(old)
	return ref != nil && ref.Kind == "RedisClusterScheduledBackup" && (oldRef == nil || oldRef.UID != ref.UID)
}

// validateBackupSpec checks a backup's spec at p, over old (nil when new):
// the object store's fields, its endpoint and Vault login against the
// operator's policies when new or changed, and the requesting user's
// access (backupAccessChecks).
func (v *Validator) validateBackupSpec(ctx context.Context, ns string, p *field.Path, old, spec *cachev1beta1.RedisClusterBackupSpec) (result, error) {
	var r result
	validateObjectStore(&spec.ObjectStore, p.Child("objectStore"), &r)
	var oldStore *cachev1beta1.ObjectStoreSpec
	if old != nil {
		oldStore = &old.ObjectStore
	}
	v.checkObjectStorePolicies(oldStore, &spec.ObjectStore, p.Child("objectStore"), &r)
	if len(r.errs) > 0 || v.Access == nil {
		return r, nil
	}
	denied, err := reviewAccess(ctx, v.Access, backupAccessChecks(ns, p, old, spec))
	if err != nil {
		return result{}, err
	}
	r.add(denied...)
	return r, nil
}

// validateObjectStore checks what the CRD schema cannot: the Secret names
// and keys it references and its Vault login's fields.
func validateObjectStore(s *cachev1beta1.ObjectStoreSpec, p *field.Path, r *result) {
	if ref := s.CredentialsSecretRef; ref != nil {
		r.add(validateObjectName(ref.Name, p.Child("credentialsSecretRef", "name"), "the name of the Secret holding the access key pair")...)
	}
	if ref := s.CASecretRef; ref != nil {
		validateSecretKeySelector(ref, p.Child("caSecretRef"), "the Secret holding the object store's CA bundle", r)
	}
	if cv := s.CredentialsVault; cv != nil {
		validateVault(&cv.Vault, p.Child("credentialsVault", "vault"), r)
	}
}

// checkObjectStorePolicies applies the operator's endpoint policy to s's
// endpoint and its Vault address policy to s's Vault login, each when new
// or changed over old (nil when new).
func (v *Validator) checkObjectStorePolicies(old, s *cachev1beta1.ObjectStoreSpec, p *field.Path, r *result) {
	if v.ObjectStores != nil && (old == nil || old.Endpoint != s.Endpoint) {
		if err := v.ObjectStores.Check(s.Endpoint); err != nil {
			r.add(field.Forbidden(p.Child("endpoint"), err.Error()))
		}
	}
	if cv := s.CredentialsVault; cv != nil {
		var ov *cachev1beta1.VaultSource
		if old != nil && old.CredentialsVault != nil {
			ov = &old.CredentialsVault.Vault
		}
		checkVaultPolicy(v.VaultAddresses, ov, &cv.Vault, p.Child("credentialsVault", "vault"), r)
	}
}

// backupAccessChecks lists what the user writing a backup's spec at p (over
// old, nil when new) must be allowed to do:
//
//   - get the backed-up cluster's Secret <cluster>-auth, when clusterName is
//     new or changed: a backup copies every key of the cluster into a store
//     of the writer's choosing, which is reading the cluster's data, and
//     that Secret's password is what reading it takes;
//   - what the object store's references use (objectStoreAccessChecks; an
//     empty serviceAccountName of its Vault login means the cluster's own
//     service account, named after it).
func backupAccessChecks(ns string, p *field.Path, old, spec *cachev1beta1.RedisClusterBackupSpec) []accessCheck {
	var checks []accessCheck
	if old == nil || old.ClusterName != spec.ClusterName {
		auth := resources.SecretName(spec.ClusterName)
		checks = append(checks, accessCheck{path: p.Child("clusterName"),
			consequence: fmt.Sprintf("a backup copies every key of RedisCluster %q into the object store, which reading its password (Secret %s) would allow too", spec.ClusterName, auth),
			attrs:       authorizationv1.ResourceAttributes{Namespace: ns, Verb: "get", Resource: "secrets", Name: auth}})
	}
	var oldStore *cachev1beta1.ObjectStoreSpec
	oldSA := ""
	if old != nil {
		oldStore, oldSA = &old.ObjectStore, old.ClusterName
	}
	return append(checks, objectStoreAccessChecks(ns, p.Child("objectStore"), oldStore, oldSA, &spec.ObjectStore, spec.ClusterName)...)
}

// backupValidator adapts ValidateBackup to admission.CustomValidator.
type backupValidator struct{ v *Validator }

func (b backupValidator) ValidateCreate(ctx context.Context, obj runtime.Object) (admission.Warnings, error) {
	o, err := asKind[*cachev1beta1.RedisClusterBackup](obj)
	if err != nil {
		return nil, err
	}
	return b.v.ValidateBackup(ctx, nil, o)
}

func (b backupValidator) ValidateUpdate(ctx context.Context, oldObj, newObj runtime.Object) (admission.Warnings, error) {
	old, err := asKind[*cachev1beta1.RedisClusterBackup](oldObj)
	if err != nil {
		return nil, err
	}
	o, err := asKind[*cachev1beta1.RedisClusterBackup](newObj)
	if err != nil {
		return nil, err
	}
	return b.v.ValidateBackup(ctx, old, o)
}

func (backupValidator) ValidateDelete(context.Context, runtime.Object) (admission.Warnings, error) {
	return nil, nil
}

// scheduledBackupValidator adapts ValidateScheduledBackup to admission.CustomValidator.
type scheduledBackupValidator struct{ v *Validator }

func (s scheduledBackupValidator) ValidateCreate(ctx context.Context, obj runtime.Object) (admission.Warnings, error) {
	o, err := asKind[*cachev1beta1.RedisClusterScheduledBackup](obj)
	if err != nil {
		return nil, err
	}
	return s.v.ValidateScheduledBackup(ctx, nil, o)
}

func (s scheduledBackupValidator) ValidateUpdate(ctx context.Context, oldObj, newObj runtime.Object) (admission.Warnings, error) {
	old, err := asKind[*cachev1beta1.RedisClusterScheduledBackup](oldObj)
	if err != nil {
		return nil, err
	}
	o, err := asKind[*cachev1beta1.RedisClusterScheduledBackup](newObj)
	if err != nil {
		return nil, err
	}
	return s.v.ValidateScheduledBackup(ctx, old, o)
}

func (scheduledBackupValidator) ValidateDelete(context.Context, runtime.Object) (admission.Warnings, error) {
	return nil, nil
}

// asKind returns obj as T, or a BadRequest error naming what came instead.
func asKind[T runtime.Object](obj runtime.Object) (T, error) {
	o, ok := obj.(T)
	if !ok {
		var zero T
		return zero, apierrors.NewBadRequest(fmt.Sprintf("expected a %T, got a %T", zero, obj))
	}
	return o, nil
}
