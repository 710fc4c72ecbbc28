package resources

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
)

// ConfigMap builds ConfigMapName(rc) holding RenderConfig(rc) as ConfigKey.
func ConfigMap(rc *cachev1beta1.RedisCluster) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{
			Name:            ConfigMapName(rc.Name),
			Namespace:       rc.Namespace,
			Labels:          ClusterLabels(rc.Name),
			OwnerReferences: ownerRefs(rc),
		},
		Data: map[string]string{ConfigKey: RenderConfig(rc)},
	}
	SetAppliedHash(cm)
	return cm
}

// HeadlessService builds the StatefulSets' governing Service: stable DNS
// names <pod>.<rc>-headless.<namespace>.svc for every Redis pod, published
// before the pods are ready (the cluster forms before it serves). It also
// exposes the exporter's port when the sidecar is enabled, for scraping.
func HeadlessService(rc *cachev1beta1.RedisCluster) *corev1.Service {
	ports := []corev1.ServicePort{
		{Name: "redis", Port: RedisPort, TargetPort: intstr.FromString("redis"), Protocol: corev1.ProtocolTCP},
		{Name: "cluster-bus", Port: BusPort, TargetPort: intstr.FromString("cluster-bus"), Protocol: corev1.ProtocolTCP},
	}
	if rc.Spec.Exporter.Enabled {
		ports = append(ports, corev1.ServicePort{Name: "metrics", Port: ExporterPort, TargetPort: intstr.FromString("metrics"), Protocol: corev1.ProtocolTCP})
	}
	svc := &corev1.Service{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{
			Name:            HeadlessServiceName(rc.Name),
			Namespace:       rc.Namespace,
			Labels:          ClusterLabels(rc.Name),
			OwnerReferences: ownerRefs(rc),
		},
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			PublishNotReadyAddresses: true,
			Selector:                 ClusterSelector(rc.Name),
			Ports:                    ports,
		},
	}
	SetAppliedHash(svc)
	return svc
}

// ClientService builds the Service clients use as their seed address
// (type and annotations from spec.service, ClusterIP by default); a
// cluster-aware client then follows the cluster's own topology. Applied
// with server-side apply, it owns only the annotations it sets: those of
// other controllers stay, and node ports or a load balancer's status that
// the API server or a cloud controller fill in are never reverted.
func ClientService(rc *cachev1beta1.RedisCluster) *corev1.Service {
	typ := corev1.ServiceTypeClusterIP
	var ann map[string]string
	if s := rc.Spec.Service; s != nil {
		if s.Type != "" {
			typ = s.Type
		}
		if len(s.Annotations) > 0 {
			ann = maps.Clone(s.Annotations)
		}
	}
	svc := &corev1.Service{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{
			Name:            ClientServiceName(rc.Name),
			Namespace:       rc.Namespace,
			Labels:          ClusterLabels(rc.Name),
			Annotations:     ann,
			OwnerReferences: ownerRefs(rc),
		},
		Spec: corev1.ServiceSpec{
			Type:     typ,
			Selector: ClusterSelector(rc.Name),
			Ports: []corev1.ServicePort{
				{Name: "redis", Port: RedisPort, TargetPort: intstr.FromString("redis"), Protocol: corev1.ProtocolTCP},
			},
		},
	}
	if plainPortOpen(rc) {
		svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: "redis-plain", Port: PlainPort,
			TargetPort: intstr.FromString("redis-plain"), Protocol: corev1.ProtocolTCP})
	}
	SetAppliedHash(svc)
	return svc
}

// PodDisruptionBudget builds shard's PDB. With replicas (replicasPerShard
// ≥ 1) it is maxUnavailable 1: a node drain evicts at most one pod of a
// shard at a time, so it cannot take a master and its replica together;
// with the readiness probe (a replica is Ready only with its master link
// up and not syncing) a drain also waits while a replica is catching up.
// Without replicas it is minAvailable 1: the master is the shard's only
// copy, so a drain never evicts it (it waits until the operator or an
// administrator moves the slots, or deletes the pod by hand).
func PodDisruptionBudget(rc *cachev1beta1.RedisCluster, shard int) *policyv1.PodDisruptionBudget {
	one := intstr.FromInt32(1)
	spec := policyv1.PodDisruptionBudgetSpec{
		MaxUnavailable: &one,
		Selector:       &metav1.LabelSelector{MatchLabels: ShardSelector(rc.Name, shard)},
	}
	if rc.Spec.ReplicasPerShard == 0 {
		spec.MaxUnavailable, spec.MinAvailable = nil, &one
	}
	pdb := &policyv1.PodDisruptionBudget{
		TypeMeta: metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"},
		ObjectMeta: metav1.ObjectMeta{
			Name:            PDBName(rc.Name, shard),
			Namespace:       rc.Namespace,
			Labels:          ShardLabels(rc.Name, shard),
			OwnerReferences: ownerRefs(rc),
		},
		Spec: spec,
	}
	SetAppliedHash(pdb)
	return pdb
}
