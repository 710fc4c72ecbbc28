package resources

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
)

// Hash is the first 16 hex digits of the SHA-256 of v's JSON encoding.
// JSON encodes maps with sorted keys, so equal values hash equally.
func Hash(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		// Only values with channels, funcs or cyclic pointers fail to
		// encode; the builders never pass one.
		panic(fmt.Sprintf("resources: hashing %T: %v", v, err))
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])[:16]
}

// SetAppliedHash records on obj the Hash of obj itself (without the
// annotation), so the controller can tell whether the live object was
// built from the same input.
func SetAppliedHash(obj metav1.Object) {
	ann := obj.GetAnnotations()
	delete(ann, AppliedHashAnnotation)
	h := Hash(obj)
	if ann == nil {
		ann = map[string]string{}
	}
	ann[AppliedHashAnnotation] = h
	obj.SetAnnotations(ann)
}

// ownerRefs makes rc the controlling owner, so garbage collection deletes
// the child with it and the controller is woken by the child's changes.
func ownerRefs(rc *cachev1beta1.RedisCluster) []metav1.OwnerReference {
	return []metav1.OwnerReference{*metav1.NewControllerRef(rc, cachev1beta1.GroupVersion.WithKind("RedisCluster"))}
}
