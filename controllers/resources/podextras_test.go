package resources

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
	"k8s.io/utils/ptr"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
)

func containerNames(cs []corev1.Container) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return out
}

func TestPodExtras(t *testing.T) {
	rc := cluster(func(rc *cachev1beta1.RedisCluster) {
		rc.Spec.Exporter.Enabled = true
		rc.Spec.Pod.Sidecars = []corev1.Container{
			{Name: "log-shipper", Image: "fluent-bit:3"},
			{Name: "own-sc", Image: "x", SecurityContext: &corev1.SecurityContext{ReadOnlyRootFilesystem: ptr.To(false)}},
		}
		rc.Spec.Pod.InitContainers = []corev1.Container{{Name: "sysctl-check", Image: "busybox"}}
		rc.Spec.Pod.Volumes = []corev1.Volume{{Name: "modules", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
		rc.Spec.Pod.VolumeMounts = []corev1.VolumeMount{{Name: "modules", MountPath: "/modules", ReadOnly: true}}
	})
	spec := StatefulSet(rc, 0, Placement{}).Spec.Template.Spec
	if got, want := containerNames(spec.Containers), []string{"redis", "redis-exporter", "log-shipper", "own-sc"}; !slices.Equal(got, want) {
		t.Errorf("containers %v, want %v", got, want)
	}
	if got := containerNames(spec.InitContainers); !slices.Equal(got, []string{"sysctl-check"}) {
		t.Errorf("init containers %v", got)
	}
	if v := spec.Volumes[len(spec.Volumes)-1]; v.Name != "modules" || v.EmptyDir == nil {
		t.Errorf("last volume %+v, want the user's modules", v)
	}
	redis := spec.Containers[0]
	if m := redis.VolumeMounts[len(redis.VolumeMounts)-1]; m.Name != "modules" || m.MountPath != "/modules" {
		t.Errorf("last redis mount %+v", m)
	}
	if len(spec.Containers[1].VolumeMounts) != 0 {
		t.Errorf("exporter got mounts %+v", spec.Containers[1].VolumeMounts)
	}
	// A sidecar or init container without a security context gets the
	// restricted default; one with its own overrides only what it sets.
	if sc := spec.Containers[2].SecurityContext; sc == nil || !*sc.RunAsNonRoot || sc.Capabilities.Drop[0] != "ALL" {
		t.Errorf("sidecar security context %+v", sc)
	}
	if sc := spec.InitContainers[0].SecurityContext; sc == nil || *sc.AllowPrivilegeEscalation {
		t.Errorf("init container security context %+v", sc)
	}
	if sc := spec.Containers[3].SecurityContext; *sc.ReadOnlyRootFilesystem || !*sc.RunAsNonRoot || *sc.AllowPrivilegeEscalation {
		t.Errorf("own security context not merged over the default: %+v", sc)
	}
	// The input is not aliased.
	spec.Containers[2].Name = "changed"
	if rc.Spec.Pod.Sidecars[0].Name != "log-shipper" {
		t.Error("builder aliases spec.pod.sidecars")
	}
}

func TestSecurityContextOverrides(t *testing.T) {
	eval, err := policy.NewEvaluator(policy.DefaultChecks())
	if err != nil {
		t.Fatal(err)
	}
	lv := api.LevelVersion{Level: api.LevelRestricted, Version: api.LatestVersion()}
	rc := cluster(func(rc *cachev1beta1.RedisCluster) {
		rc.Spec.Exporter.Enabled = true
		rc.Spec.Pod.SecurityContext = &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](1000), FSGroup: ptr.To[int64](2000),
			SupplementalGroups: []int64{3000}}
		rc.Spec.Pod.ContainerSecurityContext = &corev1.SecurityContext{
			Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: []corev1.Capability{"NET_BIND_SERVICE"}},
		}
	})
	tpl := StatefulSet(rc, 1, Placement{}).Spec.Template
	psc := tpl.Spec.SecurityContext
	if *psc.RunAsUser != 1000 || *psc.FSGroup != 2000 || *psc.RunAsGroup != 999 || !*psc.RunAsNonRoot ||
		psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault || !slices.Equal(psc.SupplementalGroups, []int64{3000}) {
		t.Errorf("pod security context %+v", psc)
	}
	for _, c := range tpl.Spec.Containers {
		sc := c.SecurityContext
		if !slices.Equal(sc.Capabilities.Add, []corev1.Capability{"NET_BIND_SERVICE"}) || !*sc.ReadOnlyRootFilesystem || *sc.Privileged {
			t.Errorf("container %s security context %+v", c.Name, sc)
		}
	}
	if res := policy.AggregateCheckResults(eval.EvaluatePod(lv, &tpl.ObjectMeta, &tpl.Spec)); !res.Allowed {
		t.Errorf("restricted forbids the overridden pod: %s: %s", res.ForbiddenReason(), res.ForbiddenDetail())
	}
	// Without overrides the security contexts are exactly the defaults.
	plain := StatefulSet(cluster(), 1, Placement{}).Spec.Template.Spec
	if *plain.SecurityContext.RunAsUser != redisUID || plain.Containers[0].SecurityContext.Capabilities.Add != nil {
		t.Errorf("defaults changed: %+v %+v", plain.SecurityContext, plain.Containers[0].SecurityContext)
	}
}

// TestPlacementReachesEveryPod checks that priority class, tolerations and
// node selector are on the pod template of every shard's StatefulSet, the
// template every pod of it is made from.
func TestPlacementReachesEveryPod(t *testing.T) {
	tol := []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "redis", Effect: corev1.TaintEffectNoSchedule}}
	rc := cluster(func(rc *cachev1beta1.RedisCluster) {
		rc.Spec.Shards = 4
		rc.Spec.ReplicasPerShard = 2
		rc.Spec.Pod.PriorityClassName = "redis-critical"
		rc.Spec.Pod.Tolerations = tol
		rc.Spec.Pod.NodeSelector = map[string]string{"pool": "redis"}
	})
	for shard := range int(rc.Spec.Shards) {
		spec := StatefulSet(rc, shard, Placement{}).Spec.Template.Spec
		if spec.PriorityClassName != "redis-critical" || !slices.Equal(spec.Tolerations, tol) || spec.NodeSelector["pool"] != "redis" {
			t.Errorf("shard %d: priority %q, tolerations %+v, node selector %v", shard, spec.PriorityClassName, spec.Tolerations, spec.NodeSelector)
		}
	}
}

func TestClientServiceTypeAndAnnotations(t *testing.T) {
	if svc := ClientService(cluster()); svc.Spec.Type != corev1.ServiceTypeClusterIP || len(svc.Annotations) != 1 {
		t.Errorf("default client Service: type %s, annotations %v", svc.Spec.Type, svc.Annotations)
	}
	rc := cluster(func(rc *cachev1beta1.RedisCluster) {
		rc.Spec.Service = &cachev1beta1.ClientServiceSpec{Type: corev1.ServiceTypeLoadBalancer,
			Annotations: map[string]string{"service.beta.kubernetes.io/aws-load-balancer-internal": "true"}}
	})
	svc := ClientService(rc)
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer || svc.Annotations["service.beta.kubernetes.io/aws-load-balancer-internal"] != "true" ||
		svc.Annotations[AppliedHashAnnotation] == "" {
		t.Errorf("client Service: type %s, annotations %v", svc.Spec.Type, svc.Annotations)
	}
	if ClientService(rc).Annotations[AppliedHashAnnotation] == ClientService(cluster()).Annotations[AppliedHashAnnotation] {
		t.Error("applied hash ignores type and annotations")
	}
}

func TestExternalAccess(t *testing.T) {
	rc := cluster(func(rc *cachev1beta1.RedisCluster) {
		rc.Name = strings.Repeat("a", 42)
		rc.Spec.ExternalAccess = &cachev1beta1.ExternalAccessSpec{Enabled: true, Type: corev1.ServiceTypeClusterIP,
			Annotations: map[string]string{"a": "b"}}
	})
	pod := PodName(rc.Name, 255, 5)
	svc := ExternalService(rc, pod)
	if len(svc.Name) > 63 {
		t.Errorf("Service name %q is %d characters", svc.Name, len(svc.Name))
	}
	if svc.Spec.Type != corev1.ServiceTypeClusterIP || svc.Spec.Selector[podNameLabel] != pod || len(svc.Spec.Selector) != 1 ||
		svc.Spec.Ports[0].Port != RedisPort || svc.Annotations["a"] != "b" || svc.Labels[LabelComponent] != ComponentExternal {
		t.Errorf("per-pod Service %+v", svc)
	}
	if !metav1.IsControlledBy(svc, rc) {
		t.Error("per-pod Service has no controller reference")
	}

	svc.Spec.ClusterIP = "10.96.0.7"
	if a := ExternalAddress(svc); a != "10.96.0.7" {
		t.Errorf("ClusterIP address %q", a)
	}
	lb := ExternalService(cluster(func(rc *cachev1beta1.RedisCluster) {
		rc.Spec.ExternalAccess = &cachev1beta1.ExternalAccessSpec{Enabled: true}
	}), "cache-shard-0-0")
	lb.Spec.ClusterIP = "10.96.0.8"
	if lb.Spec.Type != corev1.ServiceTypeLoadBalancer || ExternalAddress(lb) != "" {
		t.Errorf("LoadBalancer without ingress: type %s, address %q", lb.Spec.Type, ExternalAddress(lb))
	}
	lb.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{Hostname: "a.elb.example.com"}}
	if a := ExternalAddress(lb); a != "a.elb.example.com" {
		t.Errorf("LoadBalancer hostname address %q", a)
	}

	cm := AnnounceConfigMap(rc, map[string]string{"p0": "10.96.0.7", "p1": ""})
	if len(cm.Data) != 1 || cm.Data["p0"] != "10.96.0.7" {
		t.Errorf("announce ConfigMap data %v", cm.Data)
	}

	tpl := StatefulSet(rc, 0, Placement{}).Spec.Template.Spec
	script := tpl.Containers[0].Command[2]
	if !strings.Contains(script, `--cluster-announce-hostname "$announce"`) || !strings.Contains(script, AnnounceDir+`/"$POD_NAME"`) {
		t.Errorf("start script does not announce the hostname:\n%s", script)
	}
	if !slices.ContainsFunc(tpl.Volumes, func(v corev1.Volume) bool {
		return v.Name == announceVolumeName && v.ConfigMap.Name == AnnounceConfigMapName(rc.Name)
	}) {
		t.Errorf("no announce volume in %+v", tpl.Volumes)
	}
	if !strings.Contains(RenderConfig(rc), "\ncluster-preferred-endpoint-type hostname\n") {
		t.Error("redis.conf does not prefer the hostname endpoint")
	}
	// Without external access nothing of it is in the pod or the config.
	off := cluster()
	if s := StatefulSet(off, 0, Placement{}).Spec.Template.Spec.Containers[0].Command[2]; strings.Contains(s, "announce=") ||
		strings.Contains(RenderConfig(off), "preferred-endpoint") {
		t.Error("announce pieces without spec.externalAccess")
	}
}
