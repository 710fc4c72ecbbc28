package webhooks

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
)

// TestPodExtrasRejected: names that collide with the operator's, and
// security contexts outside Pod Security "restricted", are rejected with
// one cause naming the field.
func TestPodExtrasRejected(t *testing.T) {
	emptyDir := corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}
	for _, tc := range []struct {
		name string
		hub  func(*cachev1beta1.RedisCluster)
		want string
	}{
		{"sidecar named redis", func(rc *cachev1beta1.RedisCluster) {
			rc.Spec.Pod.Sidecars = []corev1.Container{{Name: "redis", Image: "x"}}
		}, `spec.pod.sidecars[0].name: Invalid value: "redis": is a container the operator runs (redis, redis-exporter, restore)`},
		{"init container named like a sidecar", func(rc *cachev1beta1.RedisCluster) {
			rc.Spec.Pod.Sidecars = []corev1.Container{{Name: "a", Image: "x"}}
			rc.Spec.Pod.InitContainers = []corev1.Container{{Name: "a", Image: "x"}}
		}, `spec.pod.initContainers[0].name: Duplicate value: "a"`},
		{"sidecar without image", func(rc *cachev1beta1.RedisCluster) {
			rc.Spec.Pod.Sidecars = []corev1.Container{{Name: "a"}}
		}, `spec.pod.sidecars[0].image: Required value: a container image`},
		{"volume named data", func(rc *cachev1beta1.RedisCluster) {
			rc.Spec.Pod.Volumes = []corev1.Volume{{Name: "data", VolumeSource: emptyDir}}
		}, `spec.pod.volumes[0].name: Invalid value: "data": is a volume the operator defines (data, config, auth, tmp, tls, announce, restore-ca)`},
		{"mount of a missing volume", func(rc *cachev1beta1.RedisCluster) {
			rc.Spec.Pod.VolumeMounts = []corev1.VolumeMount{{Name: "nope", MountPath: "/x"}}
		}, `spec.pod.volumeMounts[0].name: Not found: "nope"`},
		{"mount under /data", func(rc *cachev1beta1.RedisCluster) {
			rc.Spec.Pod.Volumes = []corev1.Volume{{Name: "v", VolumeSource: emptyDir}}
			rc.Spec.Pod.VolumeMounts = []corev1.VolumeMount{{Name: "v", MountPath: "/data/x"}}
		}, `spec.pod.volumeMounts[0].mountPath: Invalid value: "/data/x": overlaps /data, which the redis container mounts itself`},
		{"privileged", func(rc *cachev1beta1.RedisCluster) {
			rc.Spec.Pod.ContainerSecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
		}, `spec.pod.containerSecurityContext.privileged: Forbidden: may not be true: Pod Security baseline forbids privileged containers`},
		{"pod runAsNonRoot false", func(rc *cachev1beta1.RedisCluster) {
			rc.Spec.Pod.SecurityContext = &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(false)}
		}, `spec.pod.securityContext.runAsNonRoot: Forbidden: may not be false: Pod Security restricted requires non-root containers`},
		{"added capability", func(rc *cachev1beta1.RedisCluster) {
			rc.Spec.Pod.ContainerSecurityContext = &corev1.SecurityContext{Capabilities: &corev1.Capabilities{
				Drop: []corev1.Capability{"ALL"}, Add: []corev1.Capability{"NET_BIND_SERVICE", "SYS_ADMIN"}}}
		}, `spec.pod.containerSecurityContext.capabilities.add[1]: Forbidden: SYS_ADMIN: Pod Security restricted allows adding only NET_BIND_SERVICE`},
		{"sidecar escalation", func(rc *cachev1beta1.RedisCluster) {
			rc.Spec.Pod.Sidecars = []corev1.Container{{Name: "a", Image: "x", SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(true)}}}
		}, `spec.pod.sidecars[0].securityContext.allowPrivilegeEscalation: Forbidden: may not be true: Pod Security restricted`},
		{"unconfined seccomp", func(rc *cachev1beta1.RedisCluster) {
			rc.Spec.Pod.SecurityContext = &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}}
		}, `spec.pod.securityContext.seccompProfile.type: Forbidden: Unconfined: Pod Security restricted allows only RuntimeDefault or Localhost`},
		{"sidecar host port (caught by the evaluator)", func(rc *cachev1beta1.RedisCluster) {
			rc.Spec.Pod.Sidecars = []corev1.Container{{Name: "a", Image: "x", Ports: []corev1.ContainerPort{{ContainerPort: 80, HostPort: 80}}}}
		}, `spec.pod: Forbidden: the Redis pod would not meet Pod Security "restricted": hostPort (container "a" uses hostPort 80)`},
		{"external access by node port", func(rc *cachev1beta1.RedisCluster) {
			rc.Spec.ExternalAccess = &cachev1beta1.ExternalAccessSpec{Enabled: true, Type: corev1.ServiceTypeNodePort}
		}, `spec.externalAccess.type: Invalid value: "NodePort": NodePort is not supported: a node port differs from 6379, and Redis 7.0 announces one port for clients, replicas and the cluster bus alike; use LoadBalancer or ClusterIP`},
		{"client Service type", func(rc *cachev1beta1.RedisCluster) {
			rc.Spec.Service = &cachev1beta1.ClientServiceSpec{Type: "ExternalName"}
		}, `spec.service.type: Unsupported value: "ExternalName": supported values: "ClusterIP", "NodePort", "LoadBalancer"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := validHub()
			tc.hub(rc)
			_, err := (&Validator{}).ValidateV1beta1(context.Background(), nil, rc)
			if err == nil {
				t.Fatalf("accepted; want %s", tc.want)
			}
			got := causes(t, err)
			if len(got) != 1 || got[0] != tc.want {
				t.Fatalf("causes:\n  %s\nwant exactly:\n  %s", strings.Join(got, "\n  "), tc.want)
			}
		})
	}
}

// TestPodExtrasAccepted: extras and overrides within "restricted" pass.
func TestPodExtrasAccepted(t *testing.T) {
	rc := validHub()
	rc.Spec.Pod.Sidecars = []corev1.Container{{Name: "log-shipper", Image: "fluent-bit:3"}}
	rc.Spec.Pod.InitContainers = []corev1.Container{{Name: "prepare", Image: "busybox"}}
	rc.Spec.Pod.Volumes = []corev1.Volume{{Name: "modules", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	rc.Spec.Pod.VolumeMounts = []corev1.VolumeMount{{Name: "modules", MountPath: "/modules"}}
	rc.Spec.Pod.SecurityContext = &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](1000), FSGroup: ptr.To[int64](1000)}
	rc.Spec.Pod.ContainerSecurityContext = &corev1.SecurityContext{Capabilities: &corev1.Capabilities{
		Drop: []corev1.Capability{"ALL"}, Add: []corev1.Capability{"NET_BIND_SERVICE"}}}
	rc.Spec.Service = &cachev1beta1.ClientServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Annotations: map[string]string{"example.com/lb": "internal"}}
	rc.Spec.ExternalAccess = &cachev1beta1.ExternalAccessSpec{Enabled: true, Type: corev1.ServiceTypeClusterIP}
	if w, err := (&Validator{}).ValidateV1beta1(context.Background(), nil, rc); err != nil || len(w) > 0 {
		t.Fatalf("rejected: %v (warnings %q)", err, w)
	}
}
