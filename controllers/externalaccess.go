package controllers

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/redis-operator/redis-operator/controllers/resources"
	"github.com/redis-operator/redis-operator/controllers/topology"
)

// +kubebuilder:rbac:groups="",resources=services;configmaps,verbs=delete

// announceHostnameKey is the Redis 7.0 parameter a pod's external address
// is set with (CONFIG SET-able in 7.0, redis.conf "cluster-announce-hostname").
const announceHostnameKey = "cluster-announce-hostname"

// reconcileExternalAccess keeps, with spec.externalAccess, one Service
// per pod of every shard StatefulSet (its replica count, so the pods of a
// leaving shard keep theirs while they may still hold slots) and the
// announce ConfigMap holding each Service's address; it deletes the
// Services of pods no StatefulSet runs. Disabled, it deletes every
// per-pod Service and the announce ConfigMap. Once the cluster is formed,
// a pod whose Service has no address yet (a load balancer not provisioned:
// the pod of a scale-out) is held out of receiving slots (s.holdSlots):
// clients could not follow a redirection to it; so is one that not every
// node knows under its address yet (s.announce, topology.Endpoint.Hostname). The cluster's first
// slots are assigned without waiting: until every node is reachable from
// outside, status says AnnouncingAddresses.
func (r *RedisClusterReconciler) reconcileExternalAccess(ctx context.Context, s *scope) (ctrl.Result, bool, error) {
	rc := s.rc
	var list corev1.ServiceList
	if err := r.Client.List(ctx, &list, client.InNamespace(rc.Namespace),
		client.MatchingLabels{resources.LabelCluster: rc.Name, resources.LabelComponent: resources.ComponentExternal}); err != nil {
		return ctrl.Result{}, true, fmt.Errorf("listing per-pod Services: %w", err)
	}
	want := map[string]bool{}
	addrs := map[string]string{}
	if rc.Spec.ExternalAccessEnabled() {
		for _, idx := range slices.Sorted(maps.Keys(s.statefulSets)) {
			for ord := range int(ptrOr(s.statefulSets[idx].Spec.Replicas, 1)) {
				pod := resources.PodName(rc.Name, idx, ord)
				desired, live := resources.ExternalService(rc, pod), &corev1.Service{}
				wrote, err := r.apply(ctx, s, desired, live)
				if err != nil {
					return ctrl.Result{}, true, err
				}
				if wrote {
					live = desired // the patch response, with what the API server assigned
				}
				want[desired.Name] = true
				addrs[pod] = resources.ExternalAddress(live)
				switch {
				case rc.Status.FormedTime == nil:
				case addrs[pod] == "":
					s.holdSlots(pod, fmt.Sprintf("its Service %s has no external address yet, so clients would be redirected to ?", desired.Name))
				default:
					if s.announce == nil {
						s.announce = map[string]string{}
					}
					s.announce[pod] = addrs[pod]
				}
			}
		}
	}
	var deleted []string
	for i := range list.Items {
		svc := &list.Items[i]
		if want[svc.Name] || !metav1.IsControlledBy(svc, rc) || svc.DeletionTimestamp != nil {
			continue
		}
		if err := r.Client.Delete(ctx, svc); err != nil && !apierrors.IsNotFound(err) {
			return ctrl.Result{}, true, fmt.Errorf("deleting Service %s: %w", svc.Name, err)
		}
		deleted = append(deleted, svc.Name)
	}
	if len(deleted) > 0 {
		s.did("ExternalServicesDeleted", "Deleted per-pod Services %s", strings.Join(deleted, ", "))
	}
	if rc.Spec.ExternalAccessEnabled() {
		_, err := r.apply(ctx, s, resources.AnnounceConfigMap(rc, addrs), &corev1.ConfigMap{})
		return ctrl.Result{}, false, err
	}
	// Only the operator's own announce ConfigMap is deleted, and the
	// operator's children carry its label, so the cache tells: a settled
	// cluster without external access costs no API request here.
	cm := &corev1.ConfigMap{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: rc.Namespace, Name: resources.AnnounceConfigMapName(rc.Name)}, cm)
	switch {
	case apierrors.IsNotFound(err):
		return ctrl.Result{}, false, nil
	case err != nil:
		return ctrl.Result{}, true, fmt.Errorf("reading announce ConfigMap: %w", err)
	case !metav1.IsControlledBy(cm, rc):
		return ctrl.Result{}, false, nil
	}
	if err := r.Client.Delete(ctx, cm); err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, true, fmt.Errorf("deleting announce ConfigMap: %w", err)
	}
	return ctrl.Result{}, false, nil
}

// reconcileAnnounce sets cluster-announce-hostname with CONFIG SET on
// every reachable node whose own CLUSTER NODES entry (observed by the
// engine this pass) does not carry the address the announce ConfigMap
// holds for its pod, so MOVED and ASK name the per-pod Service as soon as
// it has an address, without a restart. A pod that restarts reads the same
// address from the ConfigMap (see resources.AnnounceDir). Nothing is
// written to the node's disk. Until every node knows every other node's
// address (Redis spreads it by gossip), status says AnnouncingAddresses
// (s.obs.AnnouncePending) and the pass looks again soon (scope.busy).
func (r *RedisClusterReconciler) reconcileAnnounce(ctx context.Context, s *scope) (ctrl.Result, bool, error) {
	if !s.rc.Spec.ExternalAccessEnabled() || s.result == nil || s.result.View == nil {
		return ctrl.Result{}, false, nil
	}
	cm := &corev1.ConfigMap{}
	if err := r.getChild(ctx, client.ObjectKey{Namespace: s.rc.Namespace, Name: resources.AnnounceConfigMapName(s.rc.Name)}, cm); err != nil {
		return ctrl.Result{}, true, fmt.Errorf("reading announce ConfigMap: %w", err)
	}
	var set []string
	var errs []error
	for _, n := range s.result.View.Nodes {
		addr := cm.Data[n.Endpoint.Name]
		if n.Err != nil || addr == "" || announcedHostname(n) == addr {
			continue
		}
		s.log.Info("Announcing the external address", "pod", n.Endpoint.Name, "address", addr)
		actx, cancel := context.WithTimeout(ctx, 2*r.RedisTimeout)
		err := r.engine(s, s.password).ApplyConfig(actx, []topology.Endpoint{n.Endpoint}, map[string]string{announceHostnameKey: addr})
		cancel()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		set = append(set, n.Endpoint.Name+"="+addr)
	}
	if len(set) > 0 {
		s.did("ExternalAddressAnnounced", "Announced external addresses %s", strings.Join(set, ", "))
		s.obs.AnnouncePending = fmt.Sprintf("announced %s just now", strings.Join(set, ", "))
	} else {
		s.obs.AnnouncePending = addressesPending(s.result.View, cm.Data)
	}
	if len(errs) > 0 {
		s.failed("AnnounceFailed", "CONFIG SET %s failed: %v", announceHostnameKey, errs)
		return ctrl.Result{RequeueAfter: busyRequeue}, false, nil
	}
	return ctrl.Result{}, false, nil
}

// addressesPending names a reachable node whose CLUSTER NODES shows
// another node (of this cluster, not failed, past its handshake) without
// the address addrs (pod -> address, the announce ConfigMap) holds for its
// pod: "pod a does not know pod b's address 10.96.0.7 yet". "" when every
// node knows every address. Until then a MOVED or ASK reply of that node
// names the other as "?" (cluster-preferred-endpoint-type hostname; see
// the Redis cluster specification, "Redirection and resharding").
func addressesPending(view *topology.ClusterView, addrs map[string]string) string {
	podOf := map[string]string{} // node ID -> pod
	for _, n := range view.Nodes {
		if n.Err == nil && n.ID != "" {
			podOf[n.ID] = n.Endpoint.Name
		}
	}
	for _, n := range view.Nodes {
		if n.Err != nil {
			continue
		}
		for _, k := range n.Known {
			pod, ok := podOf[k.ID]
			if !ok || k.Flags.Fail || k.Flags.Handshake || k.Flags.NoAddr {
				continue
			}
			if want := addrs[pod]; want != "" && k.Hostname != want {
				return fmt.Sprintf("pod %s does not know pod %s's address %s yet", n.Endpoint.Name, pod, want)
			}
		}
	}
	return ""
}

// announcedHostname is the hostname in the node's own CLUSTER NODES entry.
func announcedHostname(n *topology.NodeView) string {
	for _, k := range n.Known {
		if k.ID == n.ID {
			return k.Hostname
		}
	}
	return ""
}
