package v1alpha1

import (
	"encoding/json"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/conversion"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
)

// ConversionDataAnnotation holds, on a v1alpha1 object, the JSON of what
// v1alpha1 cannot hold of the v1beta1 object it was converted from
// (hubOnlySpec, hubOnlyStatus), so that a v1alpha1 client that reads, edits
// and writes back loses nothing (the approach of Cluster API's
// conversion-data annotation). It never appears on a v1beta1 object.
//
// The status part is needed because the API server handles a v1alpha1 write
// in v1alpha1: it keeps the stored status as v1alpha1 read it and converts
// that back, so without it every v1alpha1 edit would erase what the operator
// cannot recompute from Redis (formedTime, the last known masters of lost
// shards, leavingShards, the rotation step); TestConversionThroughAPIServer
// in webhooks shows it.
const ConversionDataAnnotation = "cache.redis.io/conversion-data"

// conversionData is what ConversionDataAnnotation holds.
type conversionData struct {
	Spec   cachev1beta1.RedisClusterSpec   `json:"spec"`
	Status cachev1beta1.RedisClusterStatus `json:"status,omitzero"`
}

// hubOnlySpec returns spec without what v1alpha1 holds itself: resources,
// config and a non-empty storage class. It keeps shards and replicasPerShard
// (v1alpha1 holds only the pod count they give) and a storage class set to ""
// (which v1alpha1 cannot tell from unset).
func hubOnlySpec(spec *cachev1beta1.RedisClusterSpec) cachev1beta1.RedisClusterSpec {
	out := *spec.DeepCopy()
	out.Resources = corev1.ResourceRequirements{}
	out.Config = nil
	if sc := out.Storage.StorageClassName; sc != nil && *sc != "" {
		out.Storage.StorageClassName = nil
	}
	return out
}

// hubOnlyStatus returns status without what v1alpha1's status holds:
// conditions, masterPod and readyReplicas.
func hubOnlyStatus(status *cachev1beta1.RedisClusterStatus) cachev1beta1.RedisClusterStatus {
	out := *status.DeepCopy()
	out.Conditions = nil
	out.MasterPod = ""
	out.ReadyReplicas = 0
	return out
}

var _ conversion.Convertible = &RedisCluster{}

// ShardsFor maps a v1alpha1 replica count (total pods) to v1beta1 shards and
// replicas per shard when nothing else is known: an even count r gives r/2
// shards of one master and one replica, an odd count r gives r masters with no
// replica. It is the inverse of TotalPods for every int32, so a v1alpha1
// object survives v1alpha1 → v1beta1 → v1alpha1 unchanged.
func ShardsFor(replicas int32) (shards, replicasPerShard int32) {
	if replicas%2 == 0 {
		return replicas / 2, 1
	}
	return replicas, 0
}

// TotalPods is the v1alpha1 replica count of a v1beta1 shape:
// shards × (1 + replicasPerShard), in int32 arithmetic.
func TotalPods(shards, replicasPerShard int32) int32 {
	return shards * (1 + replicasPerShard)
}

// ConvertTo converts this v1alpha1 RedisCluster to the v1beta1 hub.
//
// Replicas maps to shards and replicas per shard as follows. If the object
// carries ConversionDataAnnotation (it was read from v1beta1) and the
// replica count still equals that shape's total, the shape is kept as it was.
// If the count changed and is a multiple of (1 + the previous replicas per
// shard), the replicas per shard are kept and the shard count follows.
// Otherwise ShardsFor decides. Resources, config and storageClass map
// directly; every other v1beta1 field, of spec and status, comes back from
// the annotation, which the hub object never keeps.
func (src *RedisCluster) ConvertTo(dstRaw conversion.Hub) error {
	dst, ok := dstRaw.(*cachev1beta1.RedisCluster)
	if !ok {
		return fmt.Errorf("converting v1alpha1 RedisCluster: unexpected hub type %T", dstRaw)
	}
	restored, err := popConversionData(src)
	if err != nil {
		return err
	}

	dst.ObjectMeta = *src.ObjectMeta.DeepCopy()
	delete(dst.Annotations, ConversionDataAnnotation)
	if len(dst.Annotations) == 0 {
		dst.Annotations = nil
	}

	dst.Spec = cachev1beta1.RedisClusterSpec{}
	dst.Status = cachev1beta1.RedisClusterStatus{}
	if restored != nil {
		dst.Spec = restored.Spec
		dst.Status = restored.Status
	}

	switch {
	case restored != nil && TotalPods(restored.Spec.Shards, restored.Spec.ReplicasPerShard) == src.Spec.Replicas:
		// Shape unchanged.
	case restored != nil && restored.Spec.ReplicasPerShard >= 0 && src.Spec.Replicas%(1+restored.Spec.ReplicasPerShard) == 0:
		dst.Spec.Shards = src.Spec.Replicas / (1 + restored.Spec.ReplicasPerShard)
	default:
		dst.Spec.Shards, dst.Spec.ReplicasPerShard = ShardsFor(src.Spec.Replicas)
	}

	dst.Spec.Resources = *src.Spec.Resources.DeepCopy()
	dst.Spec.Config = maps.Clone(src.Spec.Config)
	if restored == nil || stringValue(restored.Spec.Storage.StorageClassName) != src.Spec.StorageClass {
		dst.Spec.Storage.StorageClassName = nil
		if src.Spec.StorageClass != "" {
			sc := src.Spec.StorageClass
			dst.Spec.Storage.StorageClassName = &sc
		}
	}

	// v1alpha1's conditions replace any in the annotation (an older operator
	// wrote the whole status there).
	dst.Status.Conditions = nil
	for i := range src.Status.Conditions {
		dst.Status.Conditions = append(dst.Status.Conditions, *src.Status.Conditions[i].DeepCopy())
	}
	dst.Status.MasterPod = src.Status.MasterPod
	dst.Status.ReadyReplicas = src.Status.ReadyReplicas
	return nil
}

// ConvertFrom converts the v1beta1 hub to this v1alpha1 version, keeping in
// ConversionDataAnnotation the spec and status fields v1alpha1 cannot hold
// (hubOnlySpec, hubOnlyStatus).
func (dst *RedisCluster) ConvertFrom(srcRaw conversion.Hub) error {
	src, ok := srcRaw.(*cachev1beta1.RedisCluster)
	if !ok {
		return fmt.Errorf("converting to v1alpha1 RedisCluster: unexpected hub type %T", srcRaw)
	}
	dst.ObjectMeta = *src.ObjectMeta.DeepCopy()

	dst.Spec = RedisClusterSpec{
		Replicas:     TotalPods(src.Spec.Shards, src.Spec.ReplicasPerShard),
		Resources:    *src.Spec.Resources.DeepCopy(),
		Config:       maps.Clone(src.Spec.Config),
		StorageClass: stringValue(src.Spec.Storage.StorageClassName),
	}
	dst.Status = RedisClusterStatus{
		MasterPod:     src.Status.MasterPod,
		ReadyReplicas: src.Status.ReadyReplicas,
	}
	for i := range src.Status.Conditions {
		dst.Status.Conditions = append(dst.Status.Conditions, *src.Status.Conditions[i].DeepCopy())
	}

	data, err := json.Marshal(conversionData{Spec: hubOnlySpec(&src.Spec), Status: hubOnlyStatus(&src.Status)})
	if err != nil {
		return fmt.Errorf("converting to v1alpha1 RedisCluster %s/%s: marshalling conversion data: %w", src.Namespace, src.Name, err)
	}
	if dst.Annotations == nil {
		dst.Annotations = map[string]string{}
	}
	dst.Annotations[ConversionDataAnnotation] = string(data)
	return nil
}

// popConversionData reads ConversionDataAnnotation, if present. A malformed
// annotation is an error naming the annotation, so a hand-edited value is
// reported rather than silently dropped.
func popConversionData(src *RedisCluster) (*conversionData, error) {
	raw, ok := src.Annotations[ConversionDataAnnotation]
	if !ok {
		return nil, nil
	}
	data := &conversionData{}
	if err := json.Unmarshal([]byte(raw), data); err != nil {
		return nil, fmt.Errorf("converting v1alpha1 RedisCluster %s/%s: annotation %s is not valid conversion data: %w",
			src.Namespace, src.Name, ConversionDataAnnotation, err)
	}
	return data, nil
}

func stringValue(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
