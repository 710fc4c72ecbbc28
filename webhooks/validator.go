package webhooks

import (
	"context"
	"fmt"
	"strings"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	cachev1alpha1 "github.com/redis-operator/redis-operator/apis/cache/v1alpha1"
	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/credentials"
)

// Validator validates RedisCluster objects beyond what the CRD's schema and
// CEL rules can express. Its checks are pure (no clock), except that with
// Access set it asks the API server what the requesting user may do.
//
// Every rejection is an apierrors.NewInvalid error whose causes name the
// field path; risky but allowed changes come back as admission warnings.
type Validator struct {
	// ScaleInWarningFraction is the share of shards (0 < f ≤ 1) that, removed
	// in one update, draws a warning. Zero means DefaultScaleInWarningFraction.
	ScaleInWarningFraction float64
	// VaultAddresses is where spec.auth.vault.address may point; the same
	// policy the controller applies. The zero value allows any https address.
	VaultAddresses credentials.AddressPolicy
	// Access checks that the requesting user may read the Secrets and mint
	// the service-account token the spec makes the operator use (see
	// accessChecks). Nil skips these checks (unit tests of the pure rules);
	// Setup always sets it.
	Access AccessReviewer
	// Backups reads the RedisClusterBackup a new cluster restores from
	// (checkRestore). Nil skips that check.
	Backups client.Reader
	// Claims lists the claims a new cluster would take over from a deleted
	// one of its name (checkClaims). Nil skips that check.
	Claims client.Reader
	// ObjectStores is where object-store endpoints (a backup's, a
	// restore's) may point; the same policy the backup controller applies.
	// Nil allows every endpoint the schema allows.
	ObjectStores ObjectStorePolicy
}

// V1beta1 returns the admission validator of v1beta1 RedisClusters.
func (v *Validator) V1beta1() admission.CustomValidator { return hubValidator{v} }

// V1alpha1 returns the admission validator of v1alpha1 RedisClusters: it
// converts the object to v1beta1, validates that, and reports the errors
// with v1alpha1's field names.
func (v *Validator) V1alpha1() admission.CustomValidator { return spokeValidator{v} }

var groupKind = schema.GroupKind{Group: cachev1beta1.GroupVersion.Group, Kind: "RedisCluster"}

// ValidateV1beta1 validates a v1beta1 RedisCluster being created (old nil)
// or updated by the user of the admission request in ctx.
func (v *Validator) ValidateV1beta1(ctx context.Context, old, obj *cachev1beta1.RedisCluster) (admission.Warnings, error) {
	r, err := v.validateHub(ctx, old, obj, fromHub)
	if err != nil {
		return nil, err
	}
	return r.admission(obj.Name)
}

// validateHub runs the spec checks, the update checks when old is set, and
// the checks of what the request introduces: the Vault address policy and
// the requesting user's access to the Secrets and service account the spec
// names. An error means the access could not be checked.
//
// Updates ratchet: when the spec did not change (a label, a finalizer, the
// deletion of the object) nothing is checked, so an object stored before a
// rule existed can still be relabelled and deleted.
func (v *Validator) validateHub(ctx context.Context, old, obj *cachev1beta1.RedisCluster, origin specOrigin) (result, error) {
	if old != nil && apiequality.Semantic.DeepEqual(old.Spec, obj.Spec) {
		return result{}, nil
	}
	if old != nil && obj.DeletionTimestamp != nil {
		// Being deleted: only spec.storage.deleteClaimPolicy may still
		// change (to keep the data of a cluster deleted by mistake, or not);
		// anything else written now would never be checked or applied.
		r := result{}
		kept := obj.Spec.DeepCopy()
		kept.Storage.DeleteClaimPolicy = old.Spec.Storage.DeleteClaimPolicy
		if !apiequality.Semantic.DeepEqual(old.Spec, *kept) {
			r.add(field.Forbidden(field.NewPath("spec"), "the RedisCluster is being deleted: only spec.storage.deleteClaimPolicy can still change"))
		}
		return r, nil
	}
	r := v.validateSpec(&obj.Spec, origin)
	if old != nil {
		u := v.validateUpdate(&old.Spec, &obj.Spec)
		r.errs = append(r.errs, u.errs...)
		r.warnings = append(r.warnings, u.warnings...)
	}
	v.checkVaultAddress(old, obj, &r)
	v.checkRestoreEndpoint(old, obj, &r)
	if err := v.checkRestore(ctx, old, obj, &r); err != nil {
		return result{}, err
	}
	if err := v.checkClaims(ctx, old, obj, &r); err != nil {
		return result{}, err
	}
	denied, err := v.authorize(ctx, old, obj)
	if err != nil {
		return result{}, err
	}
	r.add(denied...)
	return r, nil
}

// admission turns a result into what a RedisCluster's CustomValidator returns.
func (r result) admission(name string) (admission.Warnings, error) {
	return r.admissionOf(groupKind, name)
}

// admissionOf turns a result into what a CustomValidator of kind gk returns.
func (r result) admissionOf(gk schema.GroupKind, name string) (admission.Warnings, error) {
	var warnings admission.Warnings
	for _, w := range r.warnings {
		warnings = append(warnings, w.String())
	}
	if len(warnings) > maxWarnings {
		warnings = append(warnings[:maxWarnings], fmt.Sprintf("%d more warnings not shown", len(warnings)-maxWarnings))
	}
	if len(r.errs) == 0 {
		return warnings, nil
	}
	errs := r.errs
	if len(errs) > maxErrors {
		errs = append(errs[:maxErrors:maxErrors], field.Forbidden(field.NewPath("spec"), fmt.Sprintf("%d more errors not shown; fix the ones above first", len(r.errs)-maxErrors)))
	}
	return warnings, apierrors.NewInvalid(gk, name, errs)
}

// maxErrors and maxWarnings bound what one response lists: the message of
// an Invalid error grows with the square of the number of causes, and a
// spec of thousands of bad labels would otherwise cost the webhook seconds.
const (
	maxErrors   = 50
	maxWarnings = 20
)

// ValidateV1alpha1 validates a v1alpha1 RedisCluster being created (old
// nil) or updated by the user of the admission request in ctx, through its
// v1beta1 form.
func (v *Validator) ValidateV1alpha1(ctx context.Context, old, obj *cachev1alpha1.RedisCluster) (admission.Warnings, error) {
	hub, fresh, errs := toHub(obj)
	if len(errs) > 0 {
		return nil, apierrors.NewInvalid(groupKind, obj.Name, errs)
	}
	var oldHub *cachev1beta1.RedisCluster
	if old != nil {
		var oldErrs field.ErrorList
		if oldHub, _, oldErrs = toHub(old); len(oldErrs) > 0 {
			// The stored object's conversion data is unreadable; judge the
			// new object on its own.
			oldHub = nil
		}
	}
	origin := fromHub
	if fresh {
		origin = fromFreshSpoke
	}
	r, err := v.validateHub(ctx, oldHub, hub, origin)
	if err != nil {
		return nil, err
	}
	if e := checkCarriedStatus(old != nil, oldHub, hub); e != nil {
		r.errs = append(r.errs, e)
	}
	mapped := result{}
	for _, e := range r.errs {
		mapped.errs = append(mapped.errs, toV1alpha1Error(e, obj, hub))
	}
	for _, w := range r.warnings {
		mapped.warnings = append(mapped.warnings, toV1alpha1Warning(w))
	}
	if old != nil && fresh {
		if _, had := old.Annotations[cachev1alpha1.ConversionDataAnnotation]; had {
			mapped.warnings = append(mapped.warnings, warning{
				field:   annotationPath.String(),
				message: "this update removes the annotation that keeps the v1beta1 fields v1alpha1 cannot express (auth, exporter, storage size, pod placement, image, ...): they return to their defaults; update through v1beta1, or keep the annotation, to keep them",
			})
		}
	}
	return mapped.admission(obj.Name)
}

var annotationPath = field.NewPath("metadata", "annotations").Key(cachev1alpha1.ConversionDataAnnotation)

// checkCarriedStatus refuses a v1alpha1 write whose conversion data
// carries another status than the stored object's (on update, oldHub: the
// stored object as v1alpha1, converted back; on create it must carry
// none): the API server keeps a
// RedisCluster's status from its writers except through the status
// subresource, but the v1beta1 status fields v1alpha1 cannot hold travel in
// an annotation, which any editor may write. Reads fill it afresh and
// patches keep it, so only a hand-made value differs.
func checkCarriedStatus(update bool, oldHub, hub *cachev1beta1.RedisCluster) *field.Error {
	want := cachev1beta1.RedisClusterStatus{}
	if update {
		if oldHub == nil {
			return nil // unreadable stored data: toHub judged it already
		}
		want = carriedStatus(oldHub)
	}
	if apiequality.Semantic.DeepEqual(carriedStatus(hub), want) {
		return nil
	}
	return field.Forbidden(annotationPath, "its status part is the operator's (written through the status subresource, copied here by every read): "+
		"a write of the object may not change it; read the object again and keep the annotation as read")
}

// carriedStatus is hub's status without the fields v1alpha1's own status
// holds (conditions, masterPod, readyReplicas): what the conversion data
// carries.
func carriedStatus(hub *cachev1beta1.RedisCluster) cachev1beta1.RedisClusterStatus {
	st := *hub.Status.DeepCopy()
	st.Conditions, st.MasterPod, st.ReadyReplicas = nil, "", 0
	return st
}

// toHub converts a v1alpha1 object to v1beta1. fresh is true when the
// object carries no conversion data, so the v1beta1-only fields are empty
// and will take the schema defaults.
func toHub(obj *cachev1alpha1.RedisCluster) (hub *cachev1beta1.RedisCluster, fresh bool, errs field.ErrorList) {
	_, hasData := obj.Annotations[cachev1alpha1.ConversionDataAnnotation]
	hub = &cachev1beta1.RedisCluster{}
	if err := obj.DeepCopy().ConvertTo(hub); err != nil {
		value := obj.Annotations[cachev1alpha1.ConversionDataAnnotation]
		if len(value) > 64 {
			value = value[:64] + "..."
		}
		return nil, false, field.ErrorList{field.Invalid(annotationPath, value,
			"is not the JSON of a v1beta1 spec and status; the conversion writes it: remove it (the v1beta1-only fields then take their defaults) or restore it from the object read through v1beta1")}
	}
	return hub, !hasData, nil
}

// toV1alpha1Error maps an error found on the v1beta1 form of a v1alpha1
// object back to the v1alpha1 field it comes from: spec.shards and
// spec.replicasPerShard to spec.replicas, spec.storage.storageClassName to
// spec.storageClass. Resources, config and metadata have the same paths in
// both versions. Other v1beta1 fields can only come from the conversion-data
// annotation, so their errors name the annotation and the v1beta1 field.
func toV1alpha1Error(e *field.Error, obj *cachev1alpha1.RedisCluster, hub *cachev1beta1.RedisCluster) *field.Error {
	out := *e
	switch {
	case e.Field == "spec.shards" || e.Field == "spec.replicasPerShard":
		out.Field = "spec.replicas"
		out.BadValue = obj.Spec.Replicas
		out.Detail = fmt.Sprintf("gives %d shards of 1 master and %d replicas; %s %s", hub.Spec.Shards, hub.Spec.ReplicasPerShard, strings.TrimPrefix(e.Field, "spec."), e.Detail)
	case e.Field == "spec.storage.storageClassName":
		out.Field = "spec.storageClass"
	case hasPathPrefix(e.Field, "spec.resources"), hasPathPrefix(e.Field, "spec.config"), hasPathPrefix(e.Field, "metadata"):
	default:
		out.Field = annotationPath.String()
		out.Detail = fmt.Sprintf("v1beta1 field %s: %s", e.Field, e.ErrorBody())
		out.Type = field.ErrorTypeInvalid
		out.BadValue = field.OmitValueType{}
	}
	return &out
}

func toV1alpha1Warning(w warning) warning {
	switch {
	case w.field == "spec.shards" || w.field == "spec.replicasPerShard":
		w.field = "spec.replicas"
	case w.field == "spec.storage.storageClassName":
		w.field = "spec.storageClass"
	case hasPathPrefix(w.field, "spec.resources"), hasPathPrefix(w.field, "spec.config"), hasPathPrefix(w.field, "metadata"):
	default:
		w.message = fmt.Sprintf("v1beta1 field %s: %s", w.field, w.message)
		w.field = annotationPath.String()
	}
	return w
}

// hasPathPrefix reports whether path is prefix or a field, key or index below it.
func hasPathPrefix(path, prefix string) bool {
	rest, ok := strings.CutPrefix(path, prefix)
	return ok && (rest == "" || rest[0] == '.' || rest[0] == '[')
}

// hubValidator adapts Validator to controller-runtime's CustomValidator for v1beta1.
type hubValidator struct{ v *Validator }

func (h hubValidator) ValidateCreate(ctx context.Context, obj runtime.Object) (admission.Warnings, error) {
	rc, err := asHub(obj)
	if err != nil {
		return nil, err
	}
	return h.v.ValidateV1beta1(ctx, nil, rc)
}

func (h hubValidator) ValidateUpdate(ctx context.Context, oldObj, newObj runtime.Object) (admission.Warnings, error) {
	old, err := asHub(oldObj)
	if err != nil {
		return nil, err
	}
	rc, err := asHub(newObj)
	if err != nil {
		return nil, err
	}
	return h.v.ValidateV1beta1(ctx, old, rc)
}

// ValidateDelete allows every deletion: what happens to the volumes is
// spec.storage.deleteClaimPolicy's business.
func (hubValidator) ValidateDelete(context.Context, runtime.Object) (admission.Warnings, error) {
	return nil, nil
}

// spokeValidator adapts Validator to controller-runtime's CustomValidator for v1alpha1.
type spokeValidator struct{ v *Validator }

func (s spokeValidator) ValidateCreate(ctx context.Context, obj runtime.Object) (admission.Warnings, error) {
	rc, err := asSpoke(obj)
	if err != nil {
		return nil, err
	}
	return s.v.ValidateV1alpha1(ctx, nil, rc)
}

func (s spokeValidator) ValidateUpdate(ctx context.Context, oldObj, newObj runtime.Object) (admission.Warnings, error) {
	old, err := asSpoke(oldObj)
	if err != nil {
		return nil, err
	}
	rc, err := asSpoke(newObj)
	if err != nil {
		return nil, err
	}
	return s.v.ValidateV1alpha1(ctx, old, rc)
}

// ValidateDelete allows every deletion.
func (spokeValidator) ValidateDelete(context.Context, runtime.Object) (admission.Warnings, error) {
	return nil, nil
}

func asHub(obj runtime.Object) (*cachev1beta1.RedisCluster, error) {
	rc, ok := obj.(*cachev1beta1.RedisCluster)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("expected a v1beta1 RedisCluster, got %T", obj))
	}
	return rc, nil
}

func asSpoke(obj runtime.Object) (*cachev1alpha1.RedisCluster, error) {
	rc, ok := obj.(*cachev1alpha1.RedisCluster)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("expected a v1alpha1 RedisCluster, got %T", obj))
	}
	return rc, nil
}
