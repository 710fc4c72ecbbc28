package resources

import (
	corev1 "k8s.io/api/core/v1"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
)

// ReservedContainerNames are the containers the operator puts in every
// Redis pod; spec.pod.sidecars and initContainers may not use them.
var ReservedContainerNames = []string{RedisContainerName, ExporterContainerName, RestoreContainerName}

// ReservedVolumeNames are the pod volumes the operator defines (the data
// claim, redis.conf, the auth Secret, /tmp, the TLS Secret and the
// external-access announce ConfigMap, the restore's CA); spec.pod.volumes
// may not use them.
var ReservedVolumeNames = []string{DataVolumeName, "config", "auth", "tmp", tlsVolumeName, announceVolumeName, "restore-ca"}

// ReservedMountPaths are the redis container's own mount paths;
// spec.pod.volumeMounts may not mount at them or below them.
var ReservedMountPaths = []string{DataDir, ConfigDir, AuthDir, "/tmp", TLSDir, AnnounceDir}

// extraContainers returns spec.pod.sidecars (or initContainers): deep
// copies whose securityContext is the operator's restricted one with the
// fields the container sets taken from it, so a sidecar added with no
// thought for it (or setting only runAsUser) still passes Pod Security
// "restricted".
func extraContainers(cs []corev1.Container) []corev1.Container {
	var out []corev1.Container
	for i := range cs {
		c := *cs[i].DeepCopy()
		c.SecurityContext = containerSecurityContext(c.SecurityContext)
		out = append(out, c)
	}
	return out
}

// podSecurityContextFor is the operator's pod security context with the
// fields spec.pod.securityContext sets taken from it.
func podSecurityContextFor(rc *cachev1beta1.RedisCluster) *corev1.PodSecurityContext {
	sc := podSecurityContext()
	o := rc.Spec.Pod.SecurityContext
	if o == nil {
		return sc
	}
	o = o.DeepCopy()
	setIf(&sc.RunAsNonRoot, o.RunAsNonRoot)
	setIf(&sc.RunAsUser, o.RunAsUser)
	setIf(&sc.RunAsGroup, o.RunAsGroup)
	setIf(&sc.FSGroup, o.FSGroup)
	setIf(&sc.FSGroupChangePolicy, o.FSGroupChangePolicy)
	setIf(&sc.SeccompProfile, o.SeccompProfile)
	setIf(&sc.SELinuxOptions, o.SELinuxOptions)
	setIf(&sc.WindowsOptions, o.WindowsOptions)
	setIf(&sc.AppArmorProfile, o.AppArmorProfile)
	setIf(&sc.SELinuxChangePolicy, o.SELinuxChangePolicy)
	setIf(&sc.SupplementalGroupsPolicy, o.SupplementalGroupsPolicy)
	if o.SupplementalGroups != nil {
		sc.SupplementalGroups = o.SupplementalGroups
	}
	if o.Sysctls != nil {
		sc.Sysctls = o.Sysctls
	}
	return sc
}

// containerSecurityContext is the operator's container security context
// (Pod Security "restricted") with the fields of override, when not nil,
// taken from it.
func containerSecurityContext(override *corev1.SecurityContext) *corev1.SecurityContext {
	sc := defaultContainerSecurityContext()
	if override == nil {
		return sc
	}
	o := override.DeepCopy()
	setIf(&sc.AllowPrivilegeEscalation, o.AllowPrivilegeEscalation)
	setIf(&sc.Privileged, o.Privileged)
	setIf(&sc.ReadOnlyRootFilesystem, o.ReadOnlyRootFilesystem)
	setIf(&sc.RunAsNonRoot, o.RunAsNonRoot)
	setIf(&sc.RunAsUser, o.RunAsUser)
	setIf(&sc.RunAsGroup, o.RunAsGroup)
	setIf(&sc.Capabilities, o.Capabilities)
	setIf(&sc.SeccompProfile, o.SeccompProfile)
	setIf(&sc.SELinuxOptions, o.SELinuxOptions)
	setIf(&sc.WindowsOptions, o.WindowsOptions)
	setIf(&sc.AppArmorProfile, o.AppArmorProfile)
	setIf(&sc.ProcMount, o.ProcMount)
	return sc
}

// setIf sets *dst to v when v is not nil.
func setIf[T any](dst **T, v *T) {
	if v != nil {
		*dst = v
	}
}

// redisContainerSecurityContext is the security context of the operator's
// containers: the default overridden by spec.pod.containerSecurityContext.
func redisContainerSecurityContext(rc *cachev1beta1.RedisCluster) *corev1.SecurityContext {
	return containerSecurityContext(rc.Spec.Pod.ContainerSecurityContext)
}
