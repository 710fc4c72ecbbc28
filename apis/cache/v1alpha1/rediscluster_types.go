package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RedisClusterSpec is the original, small schema of a Redis Cluster.
//
// Replicas is the total number of Redis pods, masters and replicas together.
// An odd number means that many masters with no replicas; an even number means
// half as many shards of one master and one replica each. See the package's
// conversion.go for the exact mapping to v1beta1.
//
// +kubebuilder:validation:XValidation:rule="self.replicas % 2 == 1 ? self.replicas >= 3 : self.replicas >= 6",fieldPath=".replicas",message="spec.replicas must be an odd number of at least 3 (masters only) or an even number of at least 6 (masters with one replica each)"
type RedisClusterSpec struct {
	// Replicas is the total number of Redis pods (masters plus replicas).
	// +kubebuilder:validation:Maximum=1536
	// +required
	Replicas int32 `json:"replicas"`

	// Resources are the compute resources of each Redis container.
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`

	// Config holds redis.conf parameters (name to value).
	// +optional
	Config map[string]string `json:"config,omitempty"`

	// StorageClass is the StorageClass of the Redis PVCs; empty uses the default.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	StorageClass string `json:"storageClass,omitempty"`
}

// RedisClusterStatus is the original, small status.
type RedisClusterStatus struct {
	// Conditions of the cluster (Ready, Progressing, Degraded, ...).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// MasterPod is the master pod of the first shard.
	// +optional
	MasterPod string `json:"masterPod,omitempty"`

	// ReadyReplicas is the number of ready Redis pods.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`
}

// RedisCluster is a Redis Cluster in the original v1alpha1 schema. Prefer
// v1beta1, which can express shards, replicas per shard, auth and placement.
//
// +kubebuilder:object:root=true
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 42",message="metadata.name must be at most 42 characters: the StatefulSet <name>-shard-<n> and its pods' controller-revision-hash label must fit in 63"
// +kubebuilder:resource:shortName=rc;rcl,categories=redis
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.spec.replicas`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyReplicas`
// +kubebuilder:printcolumn:name="Master",type=string,JSONPath=`.status.masterPod`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type RedisCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired state.
	// +required
	Spec RedisClusterSpec `json:"spec"`

	// Status is the observed state.
	// +optional
	Status RedisClusterStatus `json:"status,omitempty"`
}

// RedisClusterList is a list of RedisCluster.
//
// +kubebuilder:object:root=true
type RedisClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []RedisCluster `json:"items"`
}

func init() {
	SchemeBuilder.Register(&RedisCluster{}, &RedisClusterList{})
}
