package v1beta1

// Condition types of a RedisCluster. Every one of them is set from the
// controller's first pass (Unknown until known) and carries the generation
// it was computed for.
const (
	// RedisClusterReadyCondition is True when every shard has its master and
	// replicas, all 16384 slots are served, cluster_state is ok and the spec
	// of the current generation is fully applied.
	RedisClusterReadyCondition = "Ready"

	// RedisClusterProgressingCondition is True while the controller is
	// changing something: bootstrapping, scaling, rolling pods or rotating
	// credentials.
	RedisClusterProgressingCondition = "Progressing"

	// RedisClusterDegradedCondition is True when the cluster serves with
	// reduced redundancy or not at all: a shard without its replica, slots
	// without an owner, cluster_state fail, or a step that keeps failing.
	RedisClusterDegradedCondition = "Degraded"

	// RedisClusterSlotsAssignedCondition is True when all 16384 hash slots
	// are assigned to masters of the desired shards with no open slot.
	RedisClusterSlotsAssignedCondition = "SlotsAssigned"

	// RedisClusterCredentialsReadyCondition is True when the password source
	// (Secret or Vault) was read and the password is live on every node.
	RedisClusterCredentialsReadyCondition = "CredentialsReady"

	// RedisClusterPausedCondition is True while spec.paused stops topology changes.
	RedisClusterPausedCondition = "Paused"
)

// Condition reasons. A reason is CamelCase and says in one word why a
// condition has its status; the message says what to do.
const (
	// RedisClusterReadyReason: everything is in place.
	RedisClusterReadyReason = "Ready"
	// RedisClusterPendingReason: pods are not running or ready yet.
	RedisClusterPendingReason = "PodsPending"
	// RedisClusterBootstrappingReason: the cluster is being formed.
	RedisClusterBootstrappingReason = "Bootstrapping"
	// RedisClusterScalingReason: shards are added or removed and slots move.
	RedisClusterScalingReason = "Scaling"
	// RedisClusterUpgradingReason: pods are rolled one at a time.
	RedisClusterUpgradingReason = "Upgrading"
	// RedisClusterRotatingCredentialsReason: a password rotation is under way.
	RedisClusterRotatingCredentialsReason = "RotatingCredentials"
	// RedisClusterSlotsUncoveredReason: some slots have no live owner.
	RedisClusterSlotsUncoveredReason = "SlotsUncovered"
	// RedisClusterOpenSlotsReason: some slots are importing or migrating.
	RedisClusterOpenSlotsReason = "OpenSlots"
	// RedisClusterShardLostReason: a shard lost its master and every replica.
	RedisClusterShardLostReason = "ShardLost"
	// RedisClusterReplicaMissingReason: a shard lacks some of its replicas.
	RedisClusterReplicaMissingReason = "ReplicaMissing"
	// RedisClusterClusterStateFailReason: cluster_state is fail on some node.
	RedisClusterClusterStateFailReason = "ClusterStateFail"
	// RedisClusterNodeFailedReason: Redis flags a node of the cluster as
	// failed (fail: a majority of masters agreed it is unreachable).
	RedisClusterNodeFailedReason = "NodeFailed"
	// RedisClusterRedisUnreachableReason: Redis nodes could not be reached.
	RedisClusterRedisUnreachableReason = "RedisUnreachable"
	// RedisClusterReconcileErrorReason: a reconcile step failed; the message has the error.
	RedisClusterReconcileErrorReason = "ReconcileError"
	// RedisClusterInvalidSpecReason: the spec can never be reconciled as written.
	RedisClusterInvalidSpecReason = "InvalidSpec"
	// RedisClusterPausedReason: spec.paused is true.
	RedisClusterPausedReason = "Paused"
	// RedisClusterNotPausedReason: spec.paused is false.
	RedisClusterNotPausedReason = "NotPaused"
	// RedisClusterCredentialsReadyReason: the password is live on every node.
	RedisClusterCredentialsReadyReason = "CredentialsApplied"
	// RedisClusterNoAuthReason: spec.auth is unset; Redis runs without a password.
	RedisClusterNoAuthReason = "NoAuth"
	// RedisClusterSecretNotFoundReason: the referenced Secret or key does not exist.
	RedisClusterSecretNotFoundReason = "SecretNotFound"
	// RedisClusterVaultUnreachableReason: Vault could not be reached.
	RedisClusterVaultUnreachableReason = "VaultUnreachable"
	// RedisClusterVaultPermissionDeniedReason: Vault refused the login or the read.
	RedisClusterVaultPermissionDeniedReason = "VaultPermissionDenied"
	// RedisClusterUnknownReason: not observed yet.
	RedisClusterUnknownReason = "NotObservedYet"
)

// Health codes, as in github.com/argoproj/gitops-engine/pkg/health.
const (
	HealthUnknown     HealthCode = "Unknown"
	HealthProgressing HealthCode = "Progressing"
	HealthHealthy     HealthCode = "Healthy"
	HealthSuspended   HealthCode = "Suspended"
	HealthDegraded    HealthCode = "Degraded"
	HealthMissing     HealthCode = "Missing"
)

// Annotations the operator reads on a RedisCluster.
const (
	// SkipCleanupAnnotation, set to "true", makes deletion remove the
	// finalizer without waiting for cleanup (PVCs are then left as they are).
	SkipCleanupAnnotation = "cache.redis.io/skip-cleanup"

	// RefreshCredentialsAnnotation: changing its value makes the operator read
	// the credentials source again now, instead of at the next refresh interval.
	RefreshCredentialsAnnotation = "cache.redis.io/refresh-credentials"
)

// Finalizer is the finalizer the controller puts on every RedisCluster.
const Finalizer = "redis.io/finalizer"
