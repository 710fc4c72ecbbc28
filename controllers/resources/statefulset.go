package resources

import (
	"maps"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
)

const (
	// redisUID is the uid and gid of the redis user in the official redis
	// images (Debian based: `groupadd -r -g 999 redis && useradd -r -g
	// redis -u 999 redis` in their Dockerfile).
	redisUID = 999

	// terminationGracePeriod leaves room for the preStop failover (up to
	// 10 s) and Redis's shutdown-timeout (10 s by default), in which a
	// stopping master waits for its replicas to catch up.
	terminationGracePeriod = 30

	// defaultStorageSize matches the CRD default of spec.storage.size.
	defaultStorageSize = "1Gi"
)

// StatefulSet builds shard's StatefulSet: 1 + replicasPerShard pods named
// <rc>-shard-<shard>-<ordinal>, each with a data claim from spec.storage,
// and an OnDelete update strategy so that the controller alone decides the
// restart order (replicas first, then a planned failover, then the old
// master). The pod template carries TemplateHashAnnotation; p is what the
// controller knows of the nodes (see placement).
//
// Claims are retained both when the StatefulSet is scaled down and when it
// is deleted (whenScaled and whenDeleted: Retain): a `kubectl scale
// --replicas=0` by hand, a routine maintenance step, must not delete the
// data. The controller deletes claims itself, only after their node was
// drained (no slots, no keys) and forgotten by the cluster, or per
// spec.storage.deleteClaimPolicy when the RedisCluster is deleted.
func StatefulSet(rc *cachev1beta1.RedisCluster, shard int, p Placement) *appsv1.StatefulSet {
	template := podTemplate(rc, shard, p)
	template.Annotations[TemplateHashAnnotation] = TemplateHash(rc, shard, p)
	sts := &appsv1.StatefulSet{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
		ObjectMeta: metav1.ObjectMeta{
			Name:            StatefulSetName(rc.Name, shard),
			Namespace:       rc.Namespace,
			Labels:          ShardLabels(rc.Name, shard),
			OwnerReferences: ownerRefs(rc),
		},
		Spec: appsv1.StatefulSetSpec{
			Replicas:            ptr.To(1 + rc.Spec.ReplicasPerShard),
			Selector:            &metav1.LabelSelector{MatchLabels: ShardSelector(rc.Name, shard)},
			ServiceName:         HeadlessServiceName(rc.Name),
			PodManagementPolicy: appsv1.ParallelPodManagement,
			UpdateStrategy:      appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType},
			PersistentVolumeClaimRetentionPolicy: &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
				WhenDeleted: appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
				WhenScaled:  appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
			},
			Template:             template,
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{volumeClaimTemplate(rc, shard)},
		},
	}
	SetAppliedHash(sts)
	return sts
}

// TemplateHash hashes what a pod of the shard needs a restart for: its pod
// template (image, resources, probes, placement, pod labels and
// annotations, ...) and the restart-only part of the config. It leaves out
// the RedisCluster's own labels and annotations and the live config keys,
// so changing those restarts nothing.
func TemplateHash(rc *cachev1beta1.RedisCluster, shard int, p Placement) string {
	return Hash(struct {
		Template corev1.PodTemplateSpec
		Config   map[string]string
	}{podTemplate(rc, shard, p), RestartConfig(rc)})
}

// podTemplate is the shard's pod template without TemplateHashAnnotation.
func podTemplate(rc *cachev1beta1.RedisCluster, shard int, p Placement) corev1.PodTemplateSpec {
	labels := maps.Clone(rc.Spec.Pod.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, ShardLabels(rc.Name, shard))
	annotations := maps.Clone(rc.Spec.Pod.Annotations)
	if annotations == nil {
		annotations = map[string]string{}
	}

	containers := []corev1.Container{redisContainer(rc)}
	if rc.Spec.Exporter.Enabled && p.ExporterSecretUID != "" {
		annotations[ExporterSecretAnnotation] = p.ExporterSecretUID
	}
	if rc.Spec.Exporter.Enabled {
		containers = append(containers, exporterContainer(rc))
	}
	containers = append(containers, extraContainers(rc.Spec.Pod.Sidecars)...)
	affinity, spread := placement(rc, shard, p)
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: annotations},
		Spec: corev1.PodSpec{
			InitContainers:                extraContainers(rc.Spec.Pod.InitContainers),
			Containers:                    containers,
			Volumes:                       podVolumes(rc),
			SecurityContext:               podSecurityContextFor(rc),
			AutomountServiceAccountToken:  ptr.To(false),
			EnableServiceLinks:            ptr.To(false),
			TerminationGracePeriodSeconds: ptr.To[int64](terminationGracePeriod),
			ImagePullSecrets:              rc.Spec.ImagePullSecrets,
			NodeSelector:                  rc.Spec.Pod.NodeSelector,
			Affinity:                      affinity,
			Tolerations:                   rc.Spec.Pod.Tolerations,
			TopologySpreadConstraints:     spread,
			PriorityClassName:             rc.Spec.Pod.PriorityClassName,
		},
	}
}

// startupProbeBudget is how long, in seconds, the Redis container may take
// to listen before the kubelet restarts it: the handover's longest wait
// (handoverMaxWaitMs) and a minute more. startupProbePeriod is the startup
// probe's period in seconds: one, the least the kubelet takes, because the
// readiness probe runs only once the startup probe has passed (the kubelet
// runs it at once then), so a restarted or new pod waits half a period on
// average after redis-server listens; the probe is a TCP connect from the
// kubelet, with no process started in the container, and stops once passed.
const (
	startupProbeBudget = 360
	startupProbePeriod = 1
)

func redisContainer(rc *cachev1beta1.RedisCluster) corev1.Container {
	c := corev1.Container{
		Name:            RedisContainerName,
		Image:           rc.Spec.Image,
		ImagePullPolicy: rc.Spec.ImagePullPolicy,
		Command:         []string{"sh", "-c", forAnnounce(rc, forTLS(rc, startScript))},
		Env:             []corev1.EnvVar{podIPEnv()},
		Ports: []corev1.ContainerPort{
			{Name: "redis", ContainerPort: RedisPort, Protocol: corev1.ProtocolTCP},
			{Name: "cluster-bus", ContainerPort: BusPort, Protocol: corev1.ProtocolTCP},
		},
		Resources: rc.Spec.Resources,
		VolumeMounts: []corev1.VolumeMount{
			{Name: DataVolumeName, MountPath: DataDir},
			{Name: "config", MountPath: ConfigDir, ReadOnly: true},
			{Name: "auth", MountPath: AuthDir, ReadOnly: true},
			{Name: "tmp", MountPath: "/tmp"},
		},
		ReadinessProbe: &corev1.Probe{
			ProbeHandler:     corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"sh", "-c", forTLS(rc, readinessScript)}}},
			PeriodSeconds:    5,
			TimeoutSeconds:   5,
			SuccessThreshold: 1,
			FailureThreshold: 3,
		},
		// TCP checks: Redis accepts connections while it loads a large
		// dataset (it answers LOADING), so a long load is not killed. The
		// startup probe gives the start script's handover its whole wait
		// before redis-server listens; liveness takes over after it.
		StartupProbe: &corev1.Probe{
			ProbeHandler:     corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(RedisPort)}},
			PeriodSeconds:    startupProbePeriod,
			TimeoutSeconds:   5,
			SuccessThreshold: 1,
			FailureThreshold: startupProbeBudget / startupProbePeriod,
		},
		LivenessProbe: &corev1.Probe{
			ProbeHandler:     corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(RedisPort)}},
			PeriodSeconds:    10,
			TimeoutSeconds:   5,
			SuccessThreshold: 1,
			FailureThreshold: 6,
		},
		Lifecycle: &corev1.Lifecycle{
			PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"sh", "-c", forTLS(rc, preStopScript)}}},
		},
		SecurityContext:          redisContainerSecurityContext(rc),
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
	if rc.Spec.ExternalAccessEnabled() {
		c.Env = append(c.Env, podNameEnv())
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: announceVolumeName, MountPath: AnnounceDir, ReadOnly: true})
	}
	if rc.Spec.TLSEnabled() {
		c.VolumeMounts = append(c.VolumeMounts, tlsMount())
		if plainPortOpen(rc) {
			c.Ports = append(c.Ports, corev1.ContainerPort{Name: "redis-plain", ContainerPort: PlainPort, Protocol: corev1.ProtocolTCP})
		}
	}
	c.VolumeMounts = append(c.VolumeMounts, rc.Spec.Pod.VolumeMounts...)
	return c
}

// exporterContainer is the redis_exporter sidecar
// (github.com/oliver006/redis_exporter, configured through its documented
// REDIS_ADDR, REDIS_USER, REDIS_PASSWORD, REDIS_EXPORTER_CONFIG_COMMAND and
// REDIS_EXPORTER_WEB_LISTEN_ADDRESS variables). It scrapes its own pod's
// node as acl.ExporterUser, with the password of ExporterSecretName, and
// listens on the pod IP. That password never rotates, so the sidecar, which
// reads it once when it starts, keeps scraping through every rotation of
// spec.auth.
func exporterContainer(rc *cachev1beta1.RedisCluster) corev1.Container {
	env := []corev1.EnvVar{
		podIPEnv(),
		{Name: "REDIS_ADDR", Value: "redis://$(POD_IP):6379"},
		{Name: "REDIS_EXPORTER_WEB_LISTEN_ADDRESS", Value: "$(POD_IP):9121"},
		// Optional: without it (a foreign Secret of that name) the sidecar
		// starts, reports Redis down, and the pod stays Ready.
		{Name: "REDIS_PASSWORD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: ExporterSecretName(rc.Name)},
			Key:                  PasswordKey,
			Optional:             ptr.To(true),
		}}},
	}
	c := corev1.Container{
		Name:            ExporterContainerName,
		Image:           rc.Spec.Exporter.Image,
		ImagePullPolicy: rc.Spec.ImagePullPolicy,
		Env:             append(env, ExporterSettings()...),
		Ports:           []corev1.ContainerPort{{Name: "metrics", ContainerPort: ExporterPort, Protocol: corev1.ProtocolTCP}},
		Resources:       rc.Spec.Exporter.Resources,
		ReadinessProbe: &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(ExporterPort)}},
			PeriodSeconds: 10,
		},
		SecurityContext:          redisContainerSecurityContext(rc),
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
	if rc.Spec.TLSEnabled() {
		// POD_IP, then POD_NAME and REDIS_ADDR (replacing the plain one),
		// the other variables, and the TLS files.
		tlsEnv := exporterTLSEnv(rc)
		env := []corev1.EnvVar{c.Env[0]}
		env = append(env, tlsEnv[:2]...)
		env = append(env, c.Env[2:]...)
		c.Env = append(env, tlsEnv[2:]...)
		c.VolumeMounts = append(c.VolumeMounts, tlsMount())
	}
	return c
}

func podIPEnv() corev1.EnvVar {
	return corev1.EnvVar{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{
		FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "status.podIP"},
	}}
}

func podVolumes(rc *cachev1beta1.RedisCluster) []corev1.Volume {
	vols := []corev1.Volume{
		{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: ConfigMapName(rc.Name)},
			Items:                []corev1.KeyToPath{{Key: ConfigKey, Path: ConfigKey}},
		}}},
		// 0440 with the pod's fsGroup as group: readable by redis, not by others.
		{Name: "auth", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName:  SecretName(rc.Name),
			DefaultMode: ptr.To[int32](0o440),
		}}},
		// The root filesystem is read-only; sh and redis-cli may want /tmp.
		{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	}
	if rc.Spec.TLSEnabled() {
		vols = append(vols, tlsVolume(rc))
	}
	if rc.Spec.ExternalAccessEnabled() {
		vols = append(vols, announceVolume(rc))
	}
	return append(vols, rc.Spec.Pod.Volumes...)
}

// podSecurityContext and containerSecurityContext satisfy the Pod Security
// Standards' "restricted" level
// (https://kubernetes.io/docs/concepts/security/pod-security-standards/).
func podSecurityContext() *corev1.PodSecurityContext {
	return &corev1.PodSecurityContext{
		RunAsNonRoot:        ptr.To(true),
		RunAsUser:           ptr.To[int64](redisUID),
		RunAsGroup:          ptr.To[int64](redisUID),
		FSGroup:             ptr.To[int64](redisUID),
		FSGroupChangePolicy: ptr.To(corev1.FSGroupChangeOnRootMismatch),
		SeccompProfile:      &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

func defaultContainerSecurityContext() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		Privileged:               ptr.To(false),
		ReadOnlyRootFilesystem:   ptr.To(true),
		RunAsNonRoot:             ptr.To(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

func volumeClaimTemplate(rc *cachev1beta1.RedisCluster, shard int) corev1.PersistentVolumeClaim {
	size := resource.MustParse(defaultStorageSize)
	if rc.Spec.Storage.Size != nil {
		size = *rc.Spec.Storage.Size
	}
	return corev1.PersistentVolumeClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
		ObjectMeta: metav1.ObjectMeta{Name: DataVolumeName, Labels: ShardLabels(rc.Name, shard)},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: rc.Spec.Storage.StorageClassName,
			Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: size},
			},
		},
	}
}
