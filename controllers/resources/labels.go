// Package resources builds the Kubernetes objects a RedisCluster owns: the
// redis.conf ConfigMap, the headless and client Services, one StatefulSet and
// one PodDisruptionBudget per shard, the operator-owned auth Secret and,
// with spec.networkPolicy, a NetworkPolicy.
//
// Every builder is a pure function of the RedisCluster (and, for the Secret,
// the password): no client, no clock, no randomness, so the same input always
// gives the same object and the same hash. The controller applies the
// objects with server-side apply and skips the write when the hash recorded
// on the live object matches (see AppliedHashAnnotation).
package resources

// Label keys put on every child object. The app.kubernetes.io keys are the
// Kubernetes recommended labels
// (https://kubernetes.io/docs/concepts/overview/working-with-objects/common-labels/).
const (
	LabelName      = "app.kubernetes.io/name"
	LabelInstance  = "app.kubernetes.io/instance"
	LabelComponent = "app.kubernetes.io/component"
	LabelManagedBy = "app.kubernetes.io/managed-by"

	// LabelCluster holds the RedisCluster's name.
	LabelCluster = "cache.redis.io/cluster"
	// LabelShard holds the shard index ("0", "1", ...).
	LabelShard = "cache.redis.io/shard"
)

// Label values.
const (
	NameRedis      = "redis"
	ComponentRedis = "redis"
	ManagedBy      = "redis-operator"
)

// Annotation keys the operator writes on its children.
const (
	// TemplateHashAnnotation is on each StatefulSet's pod template (and so on
	// every pod): a hash of the fields that need a restart to take effect. A
	// pod whose value differs from its StatefulSet's is rolled.
	TemplateHashAnnotation = "cache.redis.io/template-hash"

	// AppliedHashAnnotation is on every child: a hash of the object as the
	// operator last built it. When it equals the hash of the newly built
	// object the controller sends no write.
	AppliedHashAnnotation = "cache.redis.io/applied-hash"
)

// ClusterLabels are the labels every child of the cluster named rc carries.
func ClusterLabels(rc string) map[string]string {
	return map[string]string{
		LabelName:      NameRedis,
		LabelInstance:  rc,
		LabelComponent: ComponentRedis,
		LabelManagedBy: ManagedBy,
		LabelCluster:   rc,
	}
}

// ClusterSelector selects every Redis pod of the cluster named rc. It is
// also the scale subresource's selector (status.selector).
func ClusterSelector(rc string) map[string]string {
	return map[string]string{
		LabelName:     NameRedis,
		LabelInstance: rc,
		LabelCluster:  rc,
	}
}

// ShardLabels are ClusterLabels plus the shard index.
func ShardLabels(rc string, shard int) map[string]string {
	l := ClusterLabels(rc)
	l[LabelShard] = itoa(shard)
	return l
}

// ShardSelector selects the pods (and PVCs) of one shard. It is the
// StatefulSet's selector and so can never change.
func ShardSelector(rc string, shard int) map[string]string {
	l := ClusterSelector(rc)
	l[LabelShard] = itoa(shard)
	return l
}
