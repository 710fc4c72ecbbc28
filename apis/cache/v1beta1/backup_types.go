package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RedisClusterBackupSpec is one backup of one RedisCluster of the same
// namespace. The spec is immutable: a new backup is a new object.
type RedisClusterBackupSpec struct {
	// ClusterName is the RedisCluster to back up, in the backup's namespace:
	// a DNS-1123 label, since it is a part of the backup's path in the
	// bucket (<prefix>/<namespace>/<cluster>/<backup name>).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +required
	ClusterName string `json:"clusterName"`

	// ObjectStore is where the backup is written.
	// +required
	ObjectStore ObjectStoreSpec `json:"objectStore"`
}

// BackupPhase is a one-word summary of a backup's lifecycle.
// +kubebuilder:validation:Enum=Pending;Running;Completed;Failed
type BackupPhase string

// The phases of a RedisClusterBackup. Completed and Failed are final.
const (
	// BackupPending: no attempt is running: none started yet (the cluster
	// is not ready, or the object store cannot be reached yet), or the last
	// one failed and the next waits (the Complete condition says why).
	BackupPending BackupPhase = "Pending"
	// BackupRunning: the shards' RDBs are being streamed to the object store.
	BackupRunning BackupPhase = "Running"
	// BackupCompleted: every shard's RDB and then the manifest are written.
	BackupCompleted BackupPhase = "Completed"
	// BackupFailed: the backup cannot complete; the Complete condition says why.
	BackupFailed BackupPhase = "Failed"
)

// RedisClusterBackupStatus is the observed state of a backup.
type RedisClusterBackupStatus struct {
	// ObservedGeneration is the metadata.generation last reconciled.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Phase summarises the lifecycle.
	// +optional
	Phase BackupPhase `json:"phase,omitempty"`

	// Conditions: Complete (True once the manifest is written, False with
	// the reason when failed or not yet done), ObjectStoreReady.
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// StartTime is when the current attempt started streaming. Every key
	// acknowledged by the cluster before it is in the backup.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`

	// EndTime is when the manifest was written (Completed) or the backup failed.
	// +optional
	EndTime *metav1.Time `json:"endTime,omitempty"`

	// Attempts counts the attempts started; an attempt cut short (the
	// operator restarted) is started again from the beginning, at most 3 times.
	// +optional
	Attempts int32 `json:"attempts,omitempty"`

	// Path is the backup's key prefix in the bucket
	// (<prefix>/<namespace>/<cluster>/<backup name>); the manifest is
	// <path>/manifest.json and shard i's RDB <path>/shard-<i>.rdb.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Path string `json:"path,omitempty"`

	// RedisVersion is the redis_version (INFO server) of the nodes the RDBs came from.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	RedisVersion string `json:"redisVersion,omitempty"`

	// Shards lists each shard's RDB once written.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=256
	// +optional
	Shards []BackupShardStatus `json:"shards,omitempty"`

	// Size is the total size of the shards' RDBs, in bytes.
	// +optional
	Size int64 `json:"size,omitempty"`

	// Progress is how far each shard's stream has got in the running
	// attempt, written every few seconds (not per chunk) while it streams;
	// cleared when the backup completes (shards[].size then has the sizes).
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=256
	// +optional
	Progress []BackupShardProgress `json:"progress,omitempty"`

	// ProgressTime is when progress was last written.
	// +optional
	ProgressTime *metav1.Time `json:"progressTime,omitempty"`
}

// BackupShardProgress is the bytes read so far of one shard's RDB.
type BackupShardProgress struct {
	// Name is the shard's name.
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`

	// BytesRead is how many bytes of the RDB were read from the node and
	// handed to the upload so far.
	// +optional
	BytesRead int64 `json:"bytesRead"`
}

// BackupShardStatus is one shard's RDB in a backup.
type BackupShardStatus struct {
	// Name is the shard's name (its StatefulSet's).
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`

	// Pod is the pod the RDB was read from.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	Pod string `json:"pod,omitempty"`

	// NodeID is that pod's Redis Cluster node ID.
	// +kubebuilder:validation:MaxLength=40
	// +optional
	NodeID string `json:"nodeID,omitempty"`

	// Role is the pod's role when read: replica, or master for a shard
	// without a replica (a Warning event says so).
	// +kubebuilder:validation:Enum=master;replica
	// +optional
	Role string `json:"role,omitempty"`

	// Slots are the shard's slot ranges when read, for example ["0-5460"].
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16384
	// +optional
	Slots []string `json:"slots,omitempty"`

	// ObjectKey is the RDB's key in the bucket.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	ObjectKey string `json:"objectKey,omitempty"`

	// Size is the RDB's size in bytes.
	// +optional
	Size int64 `json:"size,omitempty"`

	// SHA256 is the RDB's SHA-256, 64 lowercase hex characters.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	SHA256 string `json:"sha256,omitempty"`
}

// RedisClusterBackup is one backup of one RedisCluster: every shard's RDB,
// read from a replica over the replication protocol and streamed to an
// S3-compatible object store, then a manifest (written last) with the slot
// map and every shard's object, size and checksum.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=rcb,categories=redis
// +kubebuilder:validation:XValidation:rule="self.spec == oldSelf.spec",message="spec is immutable: create a new RedisClusterBackup"
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.spec.clusterName`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Size",type=integer,JSONPath=`.status.size`,description="Bytes"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type RedisClusterBackup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired backup.
	// +required
	Spec RedisClusterBackupSpec `json:"spec"`

	// Status is the observed state.
	// +optional
	Status RedisClusterBackupStatus `json:"status,omitempty"`
}

// RedisClusterBackupList is a list of RedisClusterBackup.
//
// +kubebuilder:object:root=true
type RedisClusterBackupList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []RedisClusterBackup `json:"items"`
}

// Condition types of a RedisClusterBackup.
const (
	// BackupCompleteCondition is True once the manifest is written; False
	// with a reason while running or when failed.
	BackupCompleteCondition = "Complete"
	// BackupObjectStoreReadyCondition is True when the bucket was reached
	// with the credentials; False names what is wrong (credentials, bucket,
	// endpoint).
	BackupObjectStoreReadyCondition = "ObjectStoreReady"
)

// Condition reasons of a RedisClusterBackup.
const (
	// BackupCompletedReason: the manifest is written.
	BackupCompletedReason = "Completed"
	// BackupRunningReason: shards are being streamed.
	BackupRunningReason = "Running"
	// BackupWaitingForClusterReason: the cluster is missing or not every slot is served.
	BackupWaitingForClusterReason = "WaitingForCluster"
	// BackupFailedReason: a step failed and attempts are exhausted; the message has the error.
	BackupFailedReason = "Failed"
	// BackupObjectStoreReachableReason: the bucket answered.
	BackupObjectStoreReachableReason = "Reachable"
	// BackupAccessDeniedReason: the object store refused the credentials.
	BackupAccessDeniedReason = "AccessDenied"
	// BackupNoSuchBucketReason: the bucket does not exist.
	BackupNoSuchBucketReason = "NoSuchBucket"
	// BackupCredentialsSecretReason: the credentials or CA Secret or key is missing.
	BackupCredentialsSecretReason = "SecretNotFound"
	// BackupObjectStoreUnreachableReason: the endpoint did not answer.
	BackupObjectStoreUnreachableReason = "Unreachable"
	// BackupEndpointNotAllowedReason: the endpoint is outside the operator's
	// object store endpoint policy (--object-store-endpoint-allowlist,
	// --object-store-allow-insecure-http); nothing was sent to it and no
	// credential was read. The backup fails.
	BackupEndpointNotAllowedReason = "EndpointNotAllowed"
	// BackupInvalidPathReason: a part of the backup's path (prefix,
	// namespace, cluster, backup name) could reach outside
	// <prefix>/<namespace>/<cluster>/<backup>. The backup fails.
	BackupInvalidPathReason = "InvalidPath"
	// BackupManifestMismatchReason: a manifest at the backup's path was
	// written for another backup (another namespace, cluster or
	// RedisClusterBackup); it is not taken as this one's. The backup fails.
	BackupManifestMismatchReason = "ManifestMismatch"
)

func init() {
	SchemeBuilder.Register(&RedisClusterBackup{}, &RedisClusterBackupList{})
}
