package controllers

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/redis-operator/redis-operator/controllers/resources"
)

// ownedSelector selects what the operator creates: every child carries
// resources.LabelManagedBy=resources.ManagedBy (resources.ClusterLabels).
func ownedSelector() labels.Selector {
	return labels.SelectorFromSet(labels.Set{resources.LabelManagedBy: resources.ManagedBy})
}

// CacheOptions is the manager cache the controller needs: the kinds of the
// children (Secrets, ConfigMaps, Services, StatefulSets, PDBs,
// NetworkPolicies) and the pods and claims are cached only when they carry
// the operator's label (ownedSelector), so unrelated objects of the
// cluster, Secrets above all, never enter the operator's memory. The
// controller reads a child's name that is absent from this cache once
// more from the API server before it applies (getChild), so an object of
// that name without the label (someone else's) is still seen and never
// taken over. Managed fields are stripped from every cached object: the
// controller never reads them. A cached Pod keeps only what the
// controllers read of it (slimPod).
//
// watchNamespaces restricts every namespaced kind to those namespaces; nil
// or empty watches all (cluster-scoped kinds are never restricted).
func CacheOptions(watchNamespaces []string) cache.Options {
	owned := cache.ByObject{Label: ownedSelector()}
	opts := cache.Options{
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}:                   {Label: ownedSelector(), Transform: slimPod},
			&corev1.PersistentVolumeClaim{}: owned,
			&corev1.Secret{}:                owned,
			&corev1.ConfigMap{}:             owned,
			&corev1.Service{}:               owned,
			&appsv1.StatefulSet{}:           owned,
			&policyv1.PodDisruptionBudget{}: owned,
			&networkingv1.NetworkPolicy{}:   owned,
		},
	}
	if len(watchNamespaces) > 0 {
		opts.DefaultNamespaces = make(map[string]cache.Config, len(watchNamespaces))
		for _, ns := range watchNamespaces {
			opts.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	return opts
}

// slimPod is the transform of the Pod cache. A cached Pod keeps its
// metadata (managed fields stripped), its status, spec.nodeName and each
// container's name, image, ports and memory limit: all that the
// controllers read of a pod (pods.go, nodes.go, tls.go, oomkills.go, the
// backup sources).
// The rest of the spec (probes with their scripts, environment, volumes,
// affinity) is about half of a Redis pod's decoded size; at 100 clusters
// of 3 pods it would be a few MiB of the operator's heap that nothing
// reads. A controller that needs more of a pod reads it from the API
// server. in is returned unchanged when it is not a *corev1.Pod (a
// cache.DeletedFinalStateUnknown tombstone, for one).
func slimPod(in any) (any, error) {
	p, ok := in.(*corev1.Pod)
	if !ok {
		return in, nil
	}
	p.ManagedFields = nil
	containers := make([]corev1.Container, len(p.Spec.Containers))
	for i, c := range p.Spec.Containers {
		containers[i] = corev1.Container{Name: c.Name, Image: c.Image, Ports: c.Ports}
		if m, ok := c.Resources.Limits[corev1.ResourceMemory]; ok {
			containers[i].Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: m}
		}
	}
	p.Spec = corev1.PodSpec{NodeName: p.Spec.NodeName, Containers: containers}
	return p, nil
}

// getChild reads the child key into obj from the cache and, when the cache
// has no such object, from the API server (APIReader): the cache holds
// only labelled objects (CacheOptions), and an object of a child's name
// without the label, someone else's or one whose labels were edited away,
// must be seen before the controller applies over it. A child that
// exists and is cached costs no request; a missing one costs one GET.
func (r *RedisClusterReconciler) getChild(ctx context.Context, key client.ObjectKey, obj client.Object) error {
	err := r.Client.Get(ctx, key, obj)
	if !apierrors.IsNotFound(err) {
		return err
	}
	return r.reader().Get(ctx, key, obj)
}

// secretMetadata is the PartialObjectMetadata of a Secret, for the
// metadata-only watch of the Secrets a spec references.
func secretMetadata() *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	return m
}

// keepSecretName is the transform of the referenced-Secret cache: it keeps
// a Secret's namespace, name, UID and resourceVersion, all that mapping a
// change to the RedisClusters naming it takes, and drops labels,
// annotations (kubectl's last-applied-configuration annotation holds a
// Secret's data), owner references and managed fields.
func keepSecretName(in any) (any, error) {
	m, ok := in.(*metav1.PartialObjectMetadata)
	if !ok {
		return in, nil
	}
	return &metav1.PartialObjectMetadata{TypeMeta: m.TypeMeta, ObjectMeta: metav1.ObjectMeta{
		Namespace: m.Namespace, Name: m.Name, UID: m.UID, ResourceVersion: m.ResourceVersion,
		DeletionTimestamp: m.DeletionTimestamp,
	}}, nil
}

// referencedSecretSource watches the metadata of every Secret (in
// r.WatchNamespaces, or all) through a cache of its own, added to mgr, so
// that a change of a Secret that spec.auth.secretRef names wakes the
// RedisClusters naming it (secretToClusters). The manager's cache cannot
// serve this watch: it keys its restrictions by kind, so its Secret label
// selector would hide those Secrets from a metadata watch as well. Only
// names are kept (keepSecretName); the content of a referenced Secret is
// read from the API server when needed (getSecret), never cached.
func (r *RedisClusterReconciler) referencedSecretSource(mgr ctrl.Manager) (source.Source, error) {
	opts := cache.Options{
		Scheme:           mgr.GetScheme(),
		Mapper:           mgr.GetRESTMapper(),
		DefaultTransform: keepSecretName,
	}
	if len(r.WatchNamespaces) > 0 {
		opts.DefaultNamespaces = make(map[string]cache.Config, len(r.WatchNamespaces))
		for _, ns := range r.WatchNamespaces {
			opts.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	c, err := cache.New(mgr.GetConfig(), opts)
	if err != nil {
		return nil, fmt.Errorf("creating the referenced-Secret cache: %w", err)
	}
	if err := mgr.Add(c); err != nil {
		return nil, fmt.Errorf("adding the referenced-Secret cache: %w", err)
	}
	return source.Kind(c, secretMetadata(), handler.TypedEnqueueRequestsFromMapFunc(
		func(ctx context.Context, m *metav1.PartialObjectMetadata) []ctrl.Request {
			return r.secretToClusters(ctx, m)
		})), nil
}
