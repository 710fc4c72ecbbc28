package resources

import (
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
)

const (
	// AnnounceDir is where the announce ConfigMap is mounted in the redis
	// container with spec.externalAccess: one file per pod, named after the
	// pod, holding the address it announces.
	AnnounceDir = "/etc/redis-announce"
	// announceVolumeName is the pod volume of the announce ConfigMap.
	announceVolumeName = "announce"
	// ComponentExternal is the component label of the per-pod Services.
	ComponentExternal = "external"
	// podNameLabel is the label the StatefulSet controller puts on each
	// pod with its name.
	podNameLabel = "statefulset.kubernetes.io/pod-name"
)

// AnnounceConfigMapName is the ConfigMap mapping each pod name to the
// address it announces, with spec.externalAccess.
func AnnounceConfigMapName(rc string) string { return rc + "-announce" }

// ExternalServiceName is the per-pod Service of pod with spec.externalAccess:
// <pod>-external (at most 63 characters for a 42-character cluster name,
// shard 255 and ordinal 5).
func ExternalServiceName(pod string) string { return pod + "-external" }

// ExternalLabels are the labels of the per-pod Services: ClusterLabels
// with component external, so the client Service's selector and the
// controller's pod listing never match them.
func ExternalLabels(rc string) map[string]string {
	l := ClusterLabels(rc)
	l[LabelComponent] = ComponentExternal
	return l
}

// ExternalService builds the per-pod Service of pod (a name made by
// PodName): spec.externalAccess.type, selecting only that pod by the label
// the StatefulSet controller sets, exposing the client port as 6379 (the
// port the pod announces, so MOVED carries the Service's address and the
// pod's own port), and published before the pod is ready, as the cluster
// routes by its own view and not by readiness.
func ExternalService(rc *cachev1beta1.RedisCluster, pod string) *corev1.Service {
	ea := rc.Spec.ExternalAccess
	typ := corev1.ServiceTypeLoadBalancer
	if ea != nil && ea.Type != "" {
		typ = ea.Type
	}
	var ann map[string]string
	if ea != nil && len(ea.Annotations) > 0 {
		ann = maps.Clone(ea.Annotations)
	}
	svc := &corev1.Service{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{
			Name:            ExternalServiceName(pod),
			Namespace:       rc.Namespace,
			Labels:          ExternalLabels(rc.Name),
			Annotations:     ann,
			OwnerReferences: ownerRefs(rc),
		},
		Spec: corev1.ServiceSpec{
			Type:                     typ,
			Selector:                 map[string]string{podNameLabel: pod},
			PublishNotReadyAddresses: true,
			Ports: []corev1.ServicePort{
				{Name: "redis", Port: RedisPort, TargetPort: intstr.FromString("redis"), Protocol: corev1.ProtocolTCP},
			},
		},
	}
	SetAppliedHash(svc)
	return svc
}

// ExternalAddress is the address a per-pod Service gives clients outside:
// for LoadBalancer its first ingress IP, else its first ingress hostname
// (status.loadBalancer.ingress; empty until the load balancer is
// provisioned), for ClusterIP its cluster IP. "" while it has none.
func ExternalAddress(svc *corev1.Service) string {
	if svc.Spec.Type == corev1.ServiceTypeLoadBalancer {
		for _, in := range svc.Status.LoadBalancer.Ingress {
			if in.IP != "" {
				return in.IP
			}
			if in.Hostname != "" {
				return in.Hostname
			}
		}
		return ""
	}
	if ip := svc.Spec.ClusterIP; ip != corev1.ClusterIPNone {
		return ip
	}
	return ""
}

// AnnounceConfigMap builds AnnounceConfigMapName(rc) with one key per pod
// (pod name → announced address) from addrs; pods without an address yet
// have no key and start announcing none.
func AnnounceConfigMap(rc *cachev1beta1.RedisCluster, addrs map[string]string) *corev1.ConfigMap {
	data := map[string]string{}
	for pod, a := range addrs {
		if a != "" {
			data[pod] = a
		}
	}
	cm := &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{
			Name:            AnnounceConfigMapName(rc.Name),
			Namespace:       rc.Namespace,
			Labels:          ClusterLabels(rc.Name),
			OwnerReferences: ownerRefs(rc),
		},
		Data: data,
	}
	SetAppliedHash(cm)
	return cm
}

// announceVolume mounts the announce ConfigMap, optional: the controller
// creates it just after the StatefulSets, and a pod that starts before it
// (or before its Service has an address) announces none until the
// operator's CONFIG SET.
func announceVolume(rc *cachev1beta1.RedisCluster) corev1.Volume {
	return corev1.Volume{Name: announceVolumeName, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: AnnounceConfigMapName(rc.Name)},
		Optional:             ptr.To(true),
	}}}
}

func podNameEnv() corev1.EnvVar {
	return corev1.EnvVar{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{
		FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"},
	}}
}

// announcePrelude reads the pod's announced address from the announce
// ConfigMap (one line, the file named after the pod), if it has one yet.
const announcePrelude = `announce=""
[ -s ` + AnnounceDir + `/"$POD_NAME" ] && announce=$(head -n 1 ` + AnnounceDir + `/"$POD_NAME")
`

// forAnnounce makes the start script announce the pod's external address
// as cluster-announce-hostname with spec.externalAccess (the operator sets
// it live with CONFIG SET as soon as the Service has one; this covers a
// restart). Without it the script is unchanged.
func forAnnounce(rc *cachev1beta1.RedisCluster, script string) string {
	if !rc.Spec.ExternalAccessEnabled() {
		return script
	}
	script = strings.Replace(script, "exec redis-server ", announcePrelude+"exec redis-server ", 1)
	return strings.Replace(script, `--replica-announce-ip "$POD_IP"`,
		`--replica-announce-ip "$POD_IP" ${announce:+--cluster-announce-hostname "$announce"}`, 1)
}
