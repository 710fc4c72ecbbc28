package controllers

import (
	"maps"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
)

// The engine always gets each pod's node and zone, by which it chooses the
// masters of new shards (a new cluster's masters start spread); its
// planned failovers that spread masters are held (Desired.HoldSpread)
// until the cluster has been Ready for spreadSettle, and while a rolling
// update or a replica scale-down moves masters off pods. Before, the
// placement itself was withheld until then, so a new cluster's masters
// were chosen in pod order and could start two in one zone.
func TestDesiredHoldsSpreadWhileMastersMove(t *testing.T) {
	shard := func(expected int) *shardPods {
		return &shardPods{Name: "c-shard-0", Desired: true, Expected: expected, Pods: []podInfo{
			{Name: "c-shard-0-0", Ordinal: 0, IP: "10.0.0.1", Up: true, Ready: true, Node: "n1", Zone: "za"},
			{Name: "c-shard-0-1", Ordinal: 1, IP: "10.0.0.2", Up: true, Ready: true, Node: "n2", Zone: "zb"},
		}}
	}
	cases := []struct {
		name     string
		expected int
		stale    []string
		ready    metav1.ConditionStatus
		since    time.Duration
		hold     bool
	}{
		{name: "Ready for 2 min: spread", expected: 2, ready: metav1.ConditionTrue, since: 2 * time.Minute},
		{name: "Ready for 10 s: held", expected: 2, ready: metav1.ConditionTrue, since: 10 * time.Second, hold: true},
		{name: "not Ready (a new cluster): held", expected: 2, ready: metav1.ConditionFalse, since: 2 * time.Minute, hold: true},
		{name: "rolling update: held", expected: 2, ready: metav1.ConditionTrue, since: 2 * time.Minute, stale: []string{"c-shard-0-1"}, hold: true},
		{name: "replica scale-down: held", expected: 3, ready: metav1.ConditionTrue, since: 2 * time.Minute, hold: true},
	}
	now := time.Now()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rc := &cachev1beta1.RedisCluster{}
			rc.Spec.Shards, rc.Spec.ReplicasPerShard = 1, 1
			rc.Status.Conditions = []metav1.Condition{{Type: cachev1beta1.RedisClusterReadyCondition, Status: tc.ready,
				LastTransitionTime: metav1.NewTime(now.Add(-tc.since))}}
			s := &scope{rc: rc, original: rc, now: now, shards: []*shardPods{shard(tc.expected)}}
			s.obs.StalePods = tc.stale
			d := s.desired()
			if d.HoldSpread != tc.hold {
				t.Errorf("HoldSpread %v, want %v", d.HoldSpread, tc.hold)
			}
			want := map[string][2]string{"c-shard-0-0": {"n1", "za"}, "c-shard-0-1": {"n2", "zb"}}
			for _, ep := range d.Shards[0].Nodes {
				if got := [2]string{ep.Node, ep.Zone}; got != want[ep.Name] {
					t.Errorf("%s: node and zone %q, want %q", ep.Name, got, want[ep.Name])
				}
			}
		})
	}
}

// A pod that serves an older TLS certificate than the one issued (noSlots,
// from reconcileTLSReload) is an endpoint the engine sends no slots to;
// the others are not held.
func TestDesiredHoldsSlotsOffPodsWithAnOlderCertificate(t *testing.T) {
	rc := &cachev1beta1.RedisCluster{}
	rc.Spec.Shards, rc.Spec.ReplicasPerShard = 2, 1
	s := &scope{rc: rc, original: rc, now: time.Now(), shards: []*shardPods{
		{Name: "c-shard-0", Desired: true, Expected: 2, Pods: []podInfo{
			{Name: "c-shard-0-0", Ordinal: 0, IP: "10.0.0.1", Up: true, Ready: true},
			{Name: "c-shard-0-1", Ordinal: 1, IP: "10.0.0.2", Up: true, Ready: true}}},
		{Name: "c-shard-1", Index: 1, Desired: true, Expected: 2, Pods: []podInfo{
			{Name: "c-shard-1-0", Ordinal: 0, IP: "10.0.0.3", Up: true, Ready: true},
			{Name: "c-shard-1-1", Ordinal: 1, IP: "10.0.0.4", Up: true, Ready: true}}},
	}}
	const why = "it does not serve TLS certificate 2B yet"
	s.noSlots = map[string]string{"c-shard-1-0": why}
	for _, sh := range s.desired().Shards {
		for _, ep := range sh.Nodes {
			want := ""
			if ep.Name == "c-shard-1-0" {
				want = why
			}
			if ep.NoSlots != want {
				t.Errorf("%s: NoSlots %q, want %q", ep.Name, ep.NoSlots, want)
			}
		}
	}
}

// A replica in sync may take over its master's slots in a rolling
// update, unless it serves an older TLS certificate (noSlots).
func TestReplicasInSyncLeaveOutOlderCertificates(t *testing.T) {
	view, _ := faultView()
	for _, n := range view.Nodes {
		n.Replication.MasterLinkUp = true
	}
	got := replicasInSync(view, map[string]string{"c-shard-1-1": "it does not serve TLS certificate 2B yet"})
	want := map[string]bool{"c-shard-0-1": true, "c-shard-2-1": true}
	if !maps.Equal(got, want) {
		t.Errorf("in sync %v, want %v", got, want)
	}
}
