package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RedisClusterSpec is the desired state of a Redis Cluster: how many shards
// (masters) it has, how many replicas each shard keeps, and how its pods run.
//
// Every default lives in the CRD schema (no mutating webhook), so what Argo CD
// renders from Git and what the API server stores differ only by those
// documented defaults.
type RedisClusterSpec struct {
	// Shards is the number of shards, that is of masters, among which the
	// 16384 hash slots are split. A Redis Cluster needs at least 3 masters to
	// agree on failures (Redis Cluster specification, "Failure detection").
	// This is the field the scale subresource drives.
	// Defaults to 3.
	// +kubebuilder:validation:Minimum=3
	// +kubebuilder:validation:Maximum=256
	// +kubebuilder:default=3
	// +optional
	Shards int32 `json:"shards,omitempty"`

	// ReplicasPerShard is the number of replicas that follow each shard's
	// master. With 0 a lost master loses its slots' data; 1 or more lets Redis
	// promote a replica on failure.
	// Defaults to 1.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=5
	// +kubebuilder:default=1
	// +optional
	ReplicasPerShard int32 `json:"replicasPerShard"`

	// Image is the Redis server container image. Changing it rolls the cluster
	// shard by shard: replicas first, then a planned failover, then the old master.
	// Defaults to redis:7.0.15 (a patch version, so a new pod never pulls a different
	// build than its shard mates; see docs/cluster-configuration.md, Supported Redis versions).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:default="redis:7.0.15"
	// +optional
	Image string `json:"image,omitempty"`

	// ImagePullPolicy is the pull policy of the Redis and exporter containers.
	// Defaults to IfNotPresent.
	// +kubebuilder:validation:Enum=Always;IfNotPresent;Never
	// +kubebuilder:default=IfNotPresent
	// +optional
	ImagePullPolicy corev1.PullPolicy `json:"imagePullPolicy,omitempty"`

	// ImagePullSecrets are the Secrets used to pull the images.
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	// +optional
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`

	// Resources are the compute resources of each Redis container.
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`

	// Config holds redis.conf parameters (name to value, as in redis.conf).
	// Parameters Redis can change at run time are applied with CONFIG SET on
	// every node without a restart; the others roll the pods. Parameters the
	// operator owns (port, cluster-enabled, dir, requirepass, ...) are rejected.
	// +kubebuilder:validation:MaxProperties=128
	// +optional
	Config map[string]string `json:"config,omitempty"`

	// Storage describes each pod's persistent volume.
	// Defaults to {}, so each of its fields takes its own default.
	// +kubebuilder:default={}
	// +optional
	Storage StorageSpec `json:"storage,omitempty"`

	// Auth is where the Redis password comes from. Without it (or with
	// neither secretRef nor vault) the operator generates a random password
	// into the Secret it owns, <name>-auth; auth.disabled turns
	// authentication off. A cluster that ran without a password before
	// this default existed keeps running without one until auth is set.
	// +optional
	Auth *AuthSpec `json:"auth,omitempty"`

	// TLS encrypts client, replication and cluster bus traffic.
	// +optional
	TLS *TLSSpec `json:"tls,omitempty"`

	// Users are declarative ACL users besides the default one (see UserSpec).
	// +kubebuilder:validation:MaxItems=64
	// +listType=map
	// +listMapKey=name
	// +optional
	Users []UserSpec `json:"users,omitempty"`

	// Exporter configures the optional redis_exporter sidecar.
	// Defaults to {}, so each of its fields takes its own default.
	// +kubebuilder:default={}
	// +optional
	Exporter ExporterSpec `json:"exporter,omitempty"`

	// NetworkPolicy, when enabled, makes the operator keep a NetworkPolicy
	// (<name>-redis) that isolates this cluster's pods. Unset or disabled,
	// the operator creates none and deletes the one it made.
	// +optional
	NetworkPolicy *NetworkPolicySpec `json:"networkPolicy,omitempty"`

	// Pod holds placement and metadata for the Redis pods.
	// +optional
	Pod PodSpec `json:"pod,omitempty"`

	// Service sets the type and annotations of the client Service (<name>).
	// +optional
	Service *ClientServiceSpec `json:"service,omitempty"`

	// ExternalAccess gives every Redis pod a Service of its own and makes
	// the pod announce that Service's address, so clients outside the
	// Kubernetes cluster follow MOVED and ASK redirections to the right pod.
	// +optional
	ExternalAccess *ExternalAccessSpec `json:"externalAccess,omitempty"`

	// Paused stops every topology change (slot moves, failovers, joins,
	// rolling restarts) while true. Status is still observed and kept current.
	// Defaults to false.
	// +kubebuilder:default=false
	// +optional
	Paused bool `json:"paused,omitempty"`

	// LostShardPolicy says what to do when a shard's master and all its
	// replicas are gone with their data, so its slots have no owner. Wait (the
	// default) reports it and changes nothing; Reassign gives the orphaned slots
	// to live masters, accepting that their keys are lost.
	// Defaults to Wait.
	// +kubebuilder:validation:Enum=Wait;Reassign
	// +kubebuilder:default=Wait
	// +optional
	LostShardPolicy LostShardPolicy `json:"lostShardPolicy,omitempty"`

	// Bootstrap says where a new cluster's first data comes from (a
	// backup); unset starts empty. Immutable.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="bootstrap is immutable"
	// +optional
	Bootstrap *BootstrapSpec `json:"bootstrap,omitempty"`
}

// LostShardPolicy is what the operator does with the slots of a lost shard.
type LostShardPolicy string

const (
	// LostShardWait reports the lost shard and does nothing destructive.
	LostShardWait LostShardPolicy = "Wait"
	// LostShardReassign assigns the lost shard's slots to live masters.
	LostShardReassign LostShardPolicy = "Reassign"
)

// StorageSpec describes the persistent volume of each Redis pod. nodes.conf,
// the AOF and the RDB file live on it, so a restarted pod keeps its node ID
// and its data.
//
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.storageClassName) || (has(self.storageClassName) && self.storageClassName == oldSelf.storageClassName)",message="storageClassName is immutable once set",fieldPath=".storageClassName"
type StorageSpec struct {
	// StorageClassName is the StorageClass of the PVCs; empty uses the
	// cluster's default class. Immutable once set.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	StorageClassName *string `json:"storageClassName,omitempty"`

	// Size is the requested size of each PVC.
	// Defaults to 1Gi.
	// +kubebuilder:default="1Gi"
	// +optional
	Size *resource.Quantity `json:"size,omitempty"`

	// DeleteClaimPolicy says what happens to the PVCs when the RedisCluster
	// is deleted: Retain keeps them (and the data), Delete removes them.
	// Defaults to Retain.
	// +kubebuilder:validation:Enum=Retain;Delete
	// +kubebuilder:default=Retain
	// +optional
	DeleteClaimPolicy DeleteClaimPolicy `json:"deleteClaimPolicy,omitempty"`
}

// DeleteClaimPolicy is what happens to PVCs when their RedisCluster is deleted.
type DeleteClaimPolicy string

const (
	// DeleteClaimRetain keeps PVCs after the RedisCluster is deleted.
	DeleteClaimRetain DeleteClaimPolicy = "Retain"
	// DeleteClaimDelete deletes PVCs with the RedisCluster.
	DeleteClaimDelete DeleteClaimPolicy = "Delete"
)

// AuthSpec says where the Redis password comes from: a Kubernetes Secret,
// HashiCorp Vault KV v2, or (neither set) a random password the operator
// generates once. The operator copies the password into a Secret it owns
// for the pods and clients; pods never read Vault.
//
// +kubebuilder:validation:XValidation:rule="!(has(self.secretRef) && has(self.vault))",message="at most one of secretRef or vault may be set"
// +kubebuilder:validation:XValidation:rule="!(has(self.disabled) && self.disabled && (has(self.secretRef) || has(self.vault)))",message="disabled excludes secretRef and vault"
type AuthSpec struct {
	// Disabled runs Redis without a password: any client that reaches a
	// pod can read and write every key. Status says so
	// (CredentialsReady reason NoAuth).
	// +optional
	Disabled bool `json:"disabled,omitempty"`

	// SecretRef names a Secret in the RedisCluster's namespace and the key
	// holding the password.
	// +optional
	SecretRef *SecretKeySelector `json:"secretRef,omitempty"`

	// Vault reads the password from a Vault KV v2 secret.
	// +optional
	Vault *VaultSource `json:"vault,omitempty"`

	// RotationGracePeriod is how long both the old and the new password are
	// accepted during a rotation, so clients can re-read the Secret.
	// Defaults to 60s.
	// +kubebuilder:default="60s"
	// +optional
	RotationGracePeriod *metav1.Duration `json:"rotationGracePeriod,omitempty"`
}

// SecretKeySelector selects a key of a Secret in the same namespace.
type SecretKeySelector struct {
	// Name is the Secret's name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`

	// Key is the key in the Secret's data.
	// Defaults to password.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:default=password
	// +optional
	Key string `json:"key,omitempty"`
}

// VaultSource reads the password from a HashiCorp Vault KV v2 secret with the
// Kubernetes auth method (or, for development, a token kept in a Secret).
//
// +kubebuilder:validation:XValidation:rule="has(self.role) != has(self.tokenSecretRef)",message="exactly one of role (Kubernetes auth) or tokenSecretRef must be set"
type VaultSource struct {
	// Address is Vault's URL, for example https://vault.vault.svc:8200.
	// +kubebuilder:validation:Pattern=`^https?://`
	// +kubebuilder:validation:MaxLength=512
	// +required
	Address string `json:"address"`

	// Namespace is sent as X-Vault-Namespace (Vault Enterprise).
	// +kubebuilder:validation:MaxLength=253
	// +optional
	Namespace string `json:"namespace,omitempty"`

	// Mount is the KV v2 secrets engine's mount path.
	// Defaults to secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:default=secret
	// +optional
	Mount string `json:"mount,omitempty"`

	// Path is the secret's path inside the mount, for example redis/prod.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +required
	Path string `json:"path"`

	// Key is the field of the secret's data holding the password.
	// Defaults to password.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:default=password
	// +optional
	Key string `json:"key,omitempty"`

	// Version pins a KV v2 version; unset follows the latest.
	// +kubebuilder:validation:Minimum=1
	// +optional
	Version *int32 `json:"version,omitempty"`

	// Role is the Vault role of the Kubernetes auth method.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	Role string `json:"role,omitempty"`

	// AuthMount is the Kubernetes auth method's mount path.
	// Defaults to kubernetes.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:default=kubernetes
	// +optional
	AuthMount string `json:"authMount,omitempty"`

	// Audience of the service-account token the operator requests (TokenRequest
	// API) to log in; it must match the role's audience.
	// Defaults to vault.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:default=vault
	// +optional
	Audience string `json:"audience,omitempty"`

	// ServiceAccountName is the service account whose token logs in; it lives
	// in the RedisCluster's namespace. Empty uses the cluster's own service
	// account (named after the RedisCluster).
	// +kubebuilder:validation:MaxLength=253
	// +optional
	ServiceAccountName string `json:"serviceAccountName,omitempty"`

	// TokenSecretRef names a Secret holding a Vault token, for development
	// setups without Kubernetes auth.
	// +optional
	TokenSecretRef *SecretKeySelector `json:"tokenSecretRef,omitempty"`

	// CASecretRef names a Secret key holding the PEM CA bundle for TLS to Vault.
	// +optional
	CASecretRef *SecretKeySelector `json:"caSecretRef,omitempty"`

	// RefreshInterval is how often the operator polls Vault for a new version.
	// Defaults to 5m.
	// +kubebuilder:default="5m"
	// +optional
	RefreshInterval *metav1.Duration `json:"refreshInterval,omitempty"`
}

// ExporterSpec configures the redis_exporter sidecar.
type ExporterSpec struct {
	// Enabled adds a redis_exporter container to every Redis pod.
	// Defaults to false.
	// +kubebuilder:default=false
	// +optional
	Enabled bool `json:"enabled,omitempty"`

	// Image is the exporter's container image.
	// Defaults to oliver006/redis_exporter:v1.67.0.
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:default="oliver006/redis_exporter:v1.67.0"
	// +optional
	Image string `json:"image,omitempty"`

	// Resources are the exporter container's compute resources.
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`
}

// NetworkPolicySpec is the ingress the operator allows to this cluster's
// pods through a NetworkPolicy it owns (policyTypes Ingress; egress is not
// restricted). Whatever the lists say, the client port (6379) is open to
// the operator's own pods and to this cluster's pods (replication and
// MIGRATE use it), and the cluster bus (16379) is open to this cluster's
// pods only. Every other port is closed. NetworkPolicies add up: another
// policy selecting the same pods can open more, never less. Only a network
// plugin that enforces NetworkPolicies makes any of this take effect.
type NetworkPolicySpec struct {
	// Enabled makes the operator create and keep the NetworkPolicy.
	// Defaults to false.
	// +kubebuilder:default=false
	// +optional
	Enabled bool `json:"enabled,omitempty"`

	// Clients may reach the client port (6379). Empty means the pods of the
	// RedisCluster's namespace labelled cache.redis.io/client: "true". A
	// peer with only a podSelector selects pods of the RedisCluster's
	// namespace; add a namespaceSelector for other namespaces.
	// +kubebuilder:validation:MaxItems=32
	// +listType=atomic
	// +optional
	Clients []networkingv1.NetworkPolicyPeer `json:"clients,omitempty"`

	// Monitoring may reach redis_exporter's port (9121) when
	// spec.exporter.enabled. Empty closes it to everyone, for example a
	// Prometheus in namespace monitoring:
	// [{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: monitoring}},
	//   podSelector: {matchLabels: {app.kubernetes.io/name: prometheus}}}].
	// +kubebuilder:validation:MaxItems=32
	// +listType=atomic
	// +optional
	Monitoring []networkingv1.NetworkPolicyPeer `json:"monitoring,omitempty"`
}

// PodSpec holds placement and metadata of the Redis pods. By default (all
// preferred, never blocking) the pods of one shard go to different nodes and
// zones, and the shards' first pods (the masters a new cluster starts with)
// spread evenly over zones and nodes; Affinity and TopologySpreadConstraints
// add to that default.
type PodSpec struct {
	// Annotations are added to every Redis pod.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`

	// Labels are added to every Redis pod.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`

	// NodeSelector constrains the pods to nodes with these labels.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// Affinity adds to the default placement: its node and pod affinity and
	// its required pod anti-affinity as given, its preferred pod
	// anti-affinity terms after the default ones (which keep the pods of a
	// shard on different nodes, weight 100, and zones, weight 50).
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`

	// Tolerations of the pods.
	// +kubebuilder:validation:MaxItems=32
	// +listType=atomic
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// TopologySpreadConstraints of the pods, after the default ones (the
	// shards' first pods spread over topology.kubernetes.io/zone and
	// kubernetes.io/hostname, maxSkew 1, ScheduleAnyway); a constraint with
	// the topologyKey and whenUnsatisfiable of a default one replaces it.
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	// +optional
	TopologySpreadConstraints []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints,omitempty"`

	// PriorityClassName of the pods.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	PriorityClassName string `json:"priorityClassName,omitempty"`

	// Extra containers, volumes and security context overrides
	// (podknobs_types.go).
	PodExtras `json:",inline"`
}

// Phase is a one-word summary of the cluster's lifecycle; conditions carry
// the detail.
// +kubebuilder:validation:Enum=Pending;Bootstrapping;Ready;Scaling;Upgrading;Degraded;Failed
type Phase string

// The phases of a RedisCluster.
const (
	PhasePending       Phase = "Pending"
	PhaseBootstrapping Phase = "Bootstrapping"
	PhaseReady         Phase = "Ready"
	PhaseScaling       Phase = "Scaling"
	PhaseUpgrading     Phase = "Upgrading"
	PhaseDegraded      Phase = "Degraded"
	PhaseFailed        Phase = "Failed"
)

// RedisClusterStatus is the observed state of a RedisCluster.
type RedisClusterStatus struct {
	// ObservedGeneration is the metadata.generation the controller last
	// reconciled successfully.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Phase summarises the lifecycle.
	// +optional
	Phase Phase `json:"phase,omitempty"`

	// Conditions: Ready, Progressing, Degraded, SlotsAssigned,
	// CredentialsReady, Paused. Each carries observedGeneration.
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=16
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Shards lists each shard's master, replicas and slot ranges as last observed.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=256
	// +optional
	Shards []ShardStatus `json:"shards,omitempty"`

	// CurrentShards is the number of shards that own slots (the scale
	// subresource's status replicas).
	// +optional
	CurrentShards int32 `json:"currentShards,omitempty"`

	// Selector is the label selector of the Redis pods, in string form (for
	// the scale subresource).
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Selector string `json:"selector,omitempty"`

	// ReadyReplicas is the number of Redis pods that are ready, masters and
	// replicas together.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`

	// MasterPod is the name of the master pod of the first shard. Kept for
	// v1alpha1 readers; Shards has the full picture.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	MasterPod string `json:"masterPod,omitempty"`

	// Health is the controller's verdict in Argo CD's health vocabulary.
	// +optional
	Health *HealthStatus `json:"health,omitempty"`

	// Credentials tells which password version is live. Never the secret.
	// +optional
	Credentials *CredentialsStatus `json:"credentials,omitempty"`

	// TLS tells which certificate the nodes serve, with spec.tls enabled.
	// +optional
	TLS *TLSStatus `json:"tls,omitempty"`

	// Users lists each ACL user of spec.users, and of a removed one until it
	// is deleted from every node, with its password's source version and
	// rotation step. Never a password.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	// +optional
	Users []UserStatus `json:"users,omitempty"`

	// Migration reports slot migration progress while scaling.
	// +optional
	Migration *MigrationStatus `json:"migration,omitempty"`

	// FormedTime is when the controller first saw all 16384 slots assigned.
	// It is set once and never cleared: from then on slots without an owner
	// held data, so the controller reports them lost (Degraded, reason
	// ShardLost) and never assigns them as on a new cluster, even when every
	// node came back empty, unless spec.lostShardPolicy is Reassign.
	// +optional
	FormedTime *metav1.Time `json:"formedTime,omitempty"`

	// LeavingShards names the shards (StatefulSets) being removed by a
	// scale-in that still hold, or may hold, slots or keys. The controller
	// recreates a leaving shard's StatefulSet (with its claims) if it is
	// deleted, and deletes its StatefulSet, PodDisruptionBudget and claims
	// only once the shard owns no slot, holds no key and every other node
	// has forgotten it; then the name leaves this list.
	// +listType=set
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=253
	// +optional
	LeavingShards []string `json:"leavingShards,omitempty"`
}

// ShardStatus is one shard as last observed.
type ShardStatus struct {
	// Name is the shard's name, also its StatefulSet's name.
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`

	// MasterPod is the pod currently serving as the shard's master.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	MasterPod string `json:"masterPod,omitempty"`

	// MasterNodeID is the master's Redis Cluster node ID (40 hex characters).
	// +kubebuilder:validation:MaxLength=40
	// +optional
	MasterNodeID string `json:"masterNodeID,omitempty"`

	// ReplicaPods are the pods replicating from the master.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	// +optional
	ReplicaPods []string `json:"replicaPods,omitempty"`

	// MasterNode is the Kubernetes node the master pod runs on (its
	// spec.nodeName); empty while the pod is not scheduled.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	MasterNode string `json:"masterNode,omitempty"`

	// ReplicaNodes are the Kubernetes nodes of ReplicaPods, in the same
	// order ("" for a replica pod not scheduled).
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	// +optional
	ReplicaNodes []string `json:"replicaNodes,omitempty"`

	// Slots are the master's slot ranges, for example ["0-5460"].
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16384
	// +optional
	Slots []string `json:"slots,omitempty"`
}

// HealthCode is one of Argo CD's health status codes
// (github.com/argoproj/gitops-engine/pkg/health).
// +kubebuilder:validation:Enum=Unknown;Progressing;Healthy;Suspended;Degraded;Missing
type HealthCode string

// HealthStatus is a health verdict with one sentence saying why.
type HealthStatus struct {
	// Status is the Argo CD health code.
	// +required
	Status HealthCode `json:"status"`

	// Message says why, in one sentence.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Message string `json:"message,omitempty"`
}

// CredentialsStatus tells where the live password came from and which
// version it is. It never holds the password.
type CredentialsStatus struct {
	// Source is Secret, Vault, or Generated (a random password the operator
	// made).
	// +kubebuilder:validation:Enum=Secret;Vault;Generated
	// +optional
	Source string `json:"source,omitempty"`

	// Version identifies the live password: the Vault KV version, or a hash
	// of the Secret's content.
	// +kubebuilder:validation:MaxLength=256
	// +optional
	Version string `json:"version,omitempty"`

	// RotationStep is the step of a rotation in progress (empty when none).
	// +kubebuilder:validation:MaxLength=64
	// +optional
	RotationStep string `json:"rotationStep,omitempty"`

	// LastRotationTime is when the last rotation finished.
	// +optional
	LastRotationTime *metav1.Time `json:"lastRotationTime,omitempty"`
}

// MigrationStatus reports slot migration progress.
type MigrationStatus struct {
	// SlotsMoved is the number of slots moved so far in this rebalance.
	// +optional
	SlotsMoved int32 `json:"slotsMoved,omitempty"`

	// SlotsTotal is the number of slots this rebalance moves.
	// +optional
	SlotsTotal int32 `json:"slotsTotal,omitempty"`

	// KeysMoved is the number of keys moved so far.
	// +optional
	KeysMoved int64 `json:"keysMoved,omitempty"`
}

// RedisCluster is a Redis Cluster: shards of one master and its replicas
// sharing the 16384 hash slots, run as one StatefulSet per shard.
//
// +kubebuilder:object:root=true
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 42",message="metadata.name must be at most 42 characters: the StatefulSet <name>-shard-<n> and its pods' controller-revision-hash label must fit in 63"
// +kubebuilder:storageversion
// +kubebuilder:resource:shortName=rc;rcl,categories=redis
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.shards,statuspath=.status.currentShards,selectorpath=.status.selector
// +kubebuilder:printcolumn:name="Shards",type=integer,JSONPath=`.spec.shards`
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.spec.replicasPerShard`,description="Replicas per shard"
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyReplicas`,description="Ready Redis pods"
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Health",type=string,JSONPath=`.status.health.status`
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
