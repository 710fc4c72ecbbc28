package controllers

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/redis-operator/redis-operator/controllers/resources"
)

// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=patch
// +kubebuilder:rbac:groups=storage.k8s.io,resources=storageclasses,verbs=get

// expansionRefusedAnnotation is on a claim that could not be expanded to
// spec.storage.size because its StorageClass does not allow expansion; it
// holds that size, so the warning is emitted once per size asked.
const expansionRefusedAnnotation = "cache.redis.io/expansion-refused"

// reconcileVolumeExpansion grows every data claim of the cluster whose
// request is below spec.storage.size, when the claim's StorageClass has
// allowVolumeExpansion: true: it patches the claim's
// spec.resources.requests.storage and the volume's CSI driver and the
// kubelet do the rest (Kubernetes docs, "Expanding Persistent Volumes
// Claims"). The StatefulSets are left as they are: their
// volumeClaimTemplates are immutable, and recreating a StatefulSet with
// orphaned pods would leave the shard's pods unmanaged while it is gone and
// re-adopted, a window in which a pod that dies is not recreated. So a pod
// the StatefulSet creates later (a replica added) gets a claim of the old
// size, which the next pass expands.
//
// A claim whose class does not allow expansion (or that names no class)
// is left alone, and a Warning event names the class and what to do, once
// per size asked (expansionRefusedAnnotation). Shrinking never reaches
// here: the webhook rejects a smaller spec.storage.size.
func (r *RedisClusterReconciler) reconcileVolumeExpansion(ctx context.Context, s *scope) (ctrl.Result, bool, error) {
	want := resource.MustParse("1Gi")
	if sz := s.rc.Spec.Storage.Size; sz != nil {
		want = *sz
	}
	var list corev1.PersistentVolumeClaimList
	if err := r.Client.List(ctx, &list, client.InNamespace(s.rc.Namespace),
		client.MatchingLabels{resources.LabelCluster: s.rc.Name, resources.LabelManagedBy: resources.ManagedBy}); err != nil {
		return ctrl.Result{}, true, fmt.Errorf("listing claims: %w", err)
	}
	classes := map[string]*storagev1.StorageClass{}
	var expanded []string
	for i := range list.Items {
		pvc := &list.Items[i]
		if _, _, ok := claimOrdinal(s.rc.Name, pvc.Name); !ok || pvc.DeletionTimestamp != nil {
			continue
		}
		cur := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
		if cur.Cmp(want) >= 0 {
			continue
		}
		name := ptrOr(pvc.Spec.StorageClassName, "")
		allowed := false
		if name != "" {
			sc, ok := classes[name]
			if !ok {
				sc = &storagev1.StorageClass{}
				if err := r.reader().Get(ctx, client.ObjectKey{Name: name}, sc); apierrors.IsNotFound(err) {
					sc = nil
				} else if err != nil {
					return ctrl.Result{}, true, fmt.Errorf("reading StorageClass %s: %w", name, err)
				}
				classes[name] = sc
			}
			allowed = sc != nil && ptrOr(sc.AllowVolumeExpansion, false)
		}
		base := pvc.DeepCopy()
		if !allowed {
			if pvc.Annotations[expansionRefusedAnnotation] == want.String() {
				continue
			}
			s.warning("VolumeExpansionNotAllowed", "%s", expansionRefusedMessage(pvc.Name, name, cur, want))
			if pvc.Annotations == nil {
				pvc.Annotations = map[string]string{}
			}
			pvc.Annotations[expansionRefusedAnnotation] = want.String()
		} else {
			s.log.Info("Expanding claim", "claim", pvc.Name, "from", cur.String(), "to", want.String(), "storageClass", name)
			pvc.Spec.Resources.Requests[corev1.ResourceStorage] = want
			delete(pvc.Annotations, expansionRefusedAnnotation)
			expanded = append(expanded, pvc.Name)
		}
		if err := r.Client.Patch(ctx, pvc, client.MergeFrom(base), client.FieldOwner(FieldOwner)); err != nil {
			return ctrl.Result{}, true, fmt.Errorf("patching claim %s: %w", pvc.Name, err)
		}
	}
	if len(expanded) > 0 {
		slices.Sort(expanded)
		s.did("VolumesExpanding", "Requested %s for claims %s", want.String(), strings.Join(expanded, ", "))
	}
	return ctrl.Result{}, false, nil
}

// expansionRefusedMessage says why claim stays at cur and what to do
// (spec.storage.size cannot go back down: the webhook rejects shrinking).
func expansionRefusedMessage(claim, class string, cur, want resource.Quantity) string {
	if class == "" {
		return fmt.Sprintf("Claim %s stays at %s although spec.storage.size is %s: it names no StorageClass, so the operator cannot tell whether it may be expanded; expand it by hand (kubectl patch pvc %s) if its volume supports it",
			claim, cur.String(), want.String(), claim)
	}
	return fmt.Sprintf("Claim %s stays at %s although spec.storage.size is %s: StorageClass %s does not allow volume expansion; set allowVolumeExpansion: true on it if its provisioner can expand volumes, and the operator expands the claims",
		claim, cur.String(), want.String(), class)
}
