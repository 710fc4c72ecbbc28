package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
)

// PodExtras are what a Redis pod may carry besides what the operator puts
// in it: more containers and volumes, and security context overrides. Names
// the operator uses itself (containers redis and redis-exporter; volumes
// data, config, auth, tmp, tls, announce; the redis container's mount
// paths) are rejected at admission, and so is a security context that
// leaves the Pod Security Standards' "restricted" level
// (https://kubernetes.io/docs/concepts/security/pod-security-standards/).
type PodExtras struct {
	// Sidecars are containers added to every Redis pod after the operator's
	// own (redis, then redis-exporter when enabled). A sidecar's
	// securityContext overrides fields of the operator's restricted one
	// (as containerSecurityContext does), within the same bounds.
	// +kubebuilder:validation:MaxItems=8
	// +listType=map
	// +listMapKey=name
	// +optional
	Sidecars []corev1.Container `json:"sidecars,omitempty"`

	// InitContainers run, in order, before the Redis container starts. An
	// init container's securityContext overrides fields of the operator's
	// restricted one, within the same bounds.
	// +kubebuilder:validation:MaxItems=8
	// +listType=map
	// +listMapKey=name
	// +optional
	InitContainers []corev1.Container `json:"initContainers,omitempty"`

	// Volumes are added to every Redis pod, for the sidecars, the init
	// containers and VolumeMounts.
	// +kubebuilder:validation:MaxItems=16
	// +listType=map
	// +listMapKey=name
	// +optional
	Volumes []corev1.Volume `json:"volumes,omitempty"`

	// VolumeMounts are added to the redis container, after its own
	// (/data, /etc/redis, /etc/redis-auth, /tmp and, with TLS, the TLS
	// directory, which may not be mounted over).
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	// +optional
	VolumeMounts []corev1.VolumeMount `json:"volumeMounts,omitempty"`

	// SecurityContext overrides fields of the pods' security context; the
	// fields it leaves unset keep the operator's (runAsNonRoot, uid and gid
	// 999 as in the official redis image, fsGroup 999, seccomp
	// RuntimeDefault). The result must stay within Pod Security
	// "restricted": runAsNonRoot may not be false, runAsUser not 0, and the
	// seccomp profile RuntimeDefault or Localhost.
	// +optional
	SecurityContext *corev1.PodSecurityContext `json:"securityContext,omitempty"`

	// ContainerSecurityContext overrides fields of the security context of
	// the operator's containers (redis, redis-exporter); unset fields keep
	// the operator's (no privilege escalation, not privileged, read-only
	// root filesystem, runAsNonRoot, all capabilities dropped, seccomp
	// RuntimeDefault). Within "restricted": privileged and
	// allowPrivilegeEscalation may not be true, runAsNonRoot not false,
	// capabilities.drop must keep ALL and capabilities.add may hold only
	// NET_BIND_SERVICE.
	// +optional
	ContainerSecurityContext *corev1.SecurityContext `json:"containerSecurityContext,omitempty"`
}

// ClientServiceSpec is the type and metadata of the client Service.
type ClientServiceSpec struct {
	// Type of the client Service. With NodePort or LoadBalancer a client
	// outside the cluster reaches one node through it, but a cluster-aware
	// client then follows the pods' own addresses: use externalAccess for
	// those to be reachable from outside too.
	// Defaults to ClusterIP.
	// +kubebuilder:validation:Enum=ClusterIP;NodePort;LoadBalancer
	// +kubebuilder:default=ClusterIP
	// +optional
	Type corev1.ServiceType `json:"type,omitempty"`

	// Annotations are set on the client Service (for example a cloud load
	// balancer's settings). Annotations other controllers add are kept;
	// one removed from this map is removed from the Service.
	// +kubebuilder:validation:MaxProperties=64
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// ExternalAccessSpec makes every Redis pod reachable on an address of its
// own from outside the Kubernetes cluster: a Service per pod,
// <pod>-external, selecting only that pod and exposing its client port
// (6379, also the Service's port). Once the Service has an address (a
// load balancer's ingress IP or hostname; the cluster IP for ClusterIP),
// the operator sets it as the pod's cluster-announce-hostname with CONFIG
// SET and in the ConfigMap <name>-announce that a restarting pod reads,
// and renders cluster-preferred-endpoint-type hostname: Redis then
// answers MOVED, ASK, CLUSTER SHARDS and CLUSTER SLOTS with that address
// (Redis 7.0 redis.conf, "cluster-announce-hostname" and
// "cluster-preferred-endpoint-type"). The cluster bus and replication keep
// using the pods' own IPs, so nothing else changes.
//
// Clients inside the cluster follow the same external addresses. NodePort
// is not offered: its port differs from 6379, and Redis 7.0 announces one
// port for clients, replicas and the cluster bus alike
// (cluster-announce-port), so replicas and the operator would have to go
// through the node ports too.
type ExternalAccessSpec struct {
	// Enabled creates the per-pod Services and announces their addresses.
	// Disabling it deletes the Services and stops announcing (the pods roll).
	// Defaults to false.
	// +kubebuilder:default=false
	// +optional
	Enabled bool `json:"enabled,omitempty"`

	// Type of the per-pod Services: LoadBalancer (each pod gets a load
	// balancer address) or ClusterIP (for clients that reach cluster IPs,
	// for example through a routed service CIDR).
	// Defaults to LoadBalancer.
	// +kubebuilder:validation:Enum=LoadBalancer;ClusterIP
	// +kubebuilder:default=LoadBalancer
	// +optional
	Type corev1.ServiceType `json:"type,omitempty"`

	// Annotations are set on every per-pod Service.
	// +kubebuilder:validation:MaxProperties=64
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// ExternalAccessEnabled reports whether spec.externalAccess is enabled.
func (s *RedisClusterSpec) ExternalAccessEnabled() bool {
	return s.ExternalAccess != nil && s.ExternalAccess.Enabled
}
