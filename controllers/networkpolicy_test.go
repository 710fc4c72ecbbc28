package controllers

import (
	"fmt"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/resources"
)

// ingressPorts maps each port of np's ingress rules to the peers allowed
// to reach it.
func ingressPorts(np *networkingv1.NetworkPolicy) map[int32][]networkingv1.NetworkPolicyPeer {
	out := map[int32][]networkingv1.NetworkPolicyPeer{}
	for _, rule := range np.Spec.Ingress {
		for _, p := range rule.Ports {
			out[p.Port.IntVal] = append(out[p.Port.IntVal], rule.From...)
		}
	}
	return out
}

// checkNetworkPolicy says what is wrong with np for the cluster "iso":
// who may reach which port.
func checkNetworkPolicy(np *networkingv1.NetworkPolicy, uid string) error {
	if refs := np.OwnerReferences; len(refs) != 1 || string(refs[0].UID) != uid || refs[0].Controller == nil || !*refs[0].Controller {
		return fmt.Errorf("owner references %+v, want the RedisCluster as controller", refs)
	}
	sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
	if err != nil {
		return err
	}
	if !sel.Matches(labels.Set(resources.ShardLabels("iso", 2))) || sel.Matches(labels.Set(resources.ShardLabels("other", 0))) {
		return fmt.Errorf("podSelector %s does not select exactly the cluster's pods", sel)
	}
	if len(np.Spec.PolicyTypes) != 1 || np.Spec.PolicyTypes[0] != networkingv1.PolicyTypeIngress {
		return fmt.Errorf("policyTypes %v, want [Ingress]", np.Spec.PolicyTypes)
	}
	ports := ingressPorts(np)
	if len(ports) != 3 || len(np.Spec.Ingress) != 3 {
		return fmt.Errorf("%d rules for ports %v, want one rule each for 6379, 16379 and 9121", len(np.Spec.Ingress), ports)
	}
	client := ports[resources.RedisPort]
	if len(client) != 3 ||
		client[0].NamespaceSelector.MatchLabels[resources.NamespaceNameLabel] != reconciler.OperatorNamespace ||
		client[1].PodSelector.MatchLabels[resources.LabelCluster] != "iso" ||
		client[2].PodSelector.MatchLabels["app"] != "web" {
		return fmt.Errorf("client port peers %+v, want the operator, the cluster's pods and app=web", client)
	}
	bus := ports[resources.BusPort]
	if len(bus) != 1 || bus[0].NamespaceSelector != nil || bus[0].PodSelector.MatchLabels[resources.LabelCluster] != "iso" {
		return fmt.Errorf("bus port peers %+v, want the cluster's pods only", bus)
	}
	mon := ports[resources.ExporterPort]
	if len(mon) != 1 || mon[0].NamespaceSelector.MatchLabels[resources.NamespaceNameLabel] != "monitoring" {
		return fmt.Errorf("exporter port peers %+v, want namespace monitoring only", mon)
	}
	return nil
}

// TestNetworkPolicyChild: spec.networkPolicy.enabled creates the
// NetworkPolicy with the cluster's rules; a rule added by hand and a
// narrowed podSelector are reverted; disabling deletes it.
func TestNetworkPolicyChild(t *testing.T) {
	ns := newNamespace(t)
	rc := newCluster(t, ns, "iso", func(rc *cachev1beta1.RedisCluster) {
		rc.Spec.Exporter.Enabled = true
		rc.Spec.NetworkPolicy = &cachev1beta1.NetworkPolicySpec{
			Enabled: true,
			Clients: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}},
			Monitoring: []networkingv1.NetworkPolicyPeer{{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{resources.NamespaceNameLabel: "monitoring"}},
			}},
		}
	})
	got := waitSettled(t, rc)
	uid := string(got.UID)
	key := client.ObjectKey{Namespace: ns, Name: "iso-redis"}
	np := &networkingv1.NetworkPolicy{}
	eventually(t, "the NetworkPolicy", func() error {
		if err := k8s.Get(testCtx, key, np); err != nil {
			return err
		}
		return checkNetworkPolicy(np, uid)
	})
	reconcileUntilQuiet(t, rc)

	// A hand edit that opens access: an allow-all rule, and a podSelector
	// narrowed to one shard (the other shards' pods fall out of the policy).
	np.Spec.Ingress = append(np.Spec.Ingress, networkingv1.NetworkPolicyIngressRule{})
	np.Spec.PodSelector.MatchLabels[resources.LabelShard] = "0"
	if err := k8s.Update(testCtx, np); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the edited NetworkPolicy reverted", func() error {
		if err := k8s.Get(testCtx, key, np); err != nil {
			return err
		}
		return checkNetworkPolicy(np, uid)
	})
	reconcileUntilQuiet(t, rc)
	mark := writes.mark()
	if _, err := reconciler.Reconcile(testCtx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(rc)}); err != nil {
		t.Fatal(err)
	}
	if w := writes.in(ns, mark); len(w) > 0 {
		t.Errorf("a settled cluster with a NetworkPolicy wrote: %s", strings.Join(w, "; "))
	}

	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		latest := getCluster(t, rc)
		latest.Spec.NetworkPolicy.Enabled = false
		return k8s.Update(testCtx, latest)
	}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the NetworkPolicy deleted", func() error {
		err := k8s.Get(testCtx, key, &networkingv1.NetworkPolicy{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("NetworkPolicy still there (err %v)", err)
	})
}

// TestNetworkPolicyNotTaken: a NetworkPolicy of the same name that the
// RedisCluster does not control is left alone: not deleted while
// spec.networkPolicy is off, not taken over once it is on (the cluster
// reports it, as for every child).
func TestNetworkPolicyNotTaken(t *testing.T) {
	ns := newNamespace(t)
	theirs := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "mine-redis", Namespace: ns},
		Spec:       networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}},
	}
	if err := k8s.Create(testCtx, theirs); err != nil {
		t.Fatal(err)
	}
	rc := newCluster(t, ns, "mine")
	waitSettled(t, rc)
	reconcileUntilQuiet(t, rc)
	if err := k8s.Get(testCtx, client.ObjectKeyFromObject(theirs), theirs); err != nil {
		t.Fatalf("a NetworkPolicy the cluster does not control: %v", err)
	}

	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		latest := getCluster(t, rc)
		latest.Spec.NetworkPolicy = &cachev1beta1.NetworkPolicySpec{Enabled: true}
		return k8s.Update(testCtx, latest)
	}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "ReconcileError naming the NetworkPolicy", func() error {
		c := meta.FindStatusCondition(getCluster(t, rc).Status.Conditions, cachev1beta1.RedisClusterDegradedCondition)
		if c == nil || c.Reason != cachev1beta1.RedisClusterReconcileErrorReason || !strings.Contains(c.Message, "NetworkPolicy mine-redis exists and is not controlled") {
			return fmt.Errorf("degraded %+v", c)
		}
		return nil
	})
	if err := k8s.Get(testCtx, client.ObjectKeyFromObject(theirs), theirs); err != nil {
		t.Fatal(err)
	}
	if len(theirs.OwnerReferences) != 0 || len(theirs.Spec.Ingress) != 0 {
		t.Errorf("foreign NetworkPolicy changed: %+v", theirs)
	}
}
