package controllers

import (
	"fmt"
	"slices"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/acl"
	"github.com/redis-operator/redis-operator/controllers/resources"
	"github.com/redis-operator/redis-operator/controllers/rollout"
	"github.com/redis-operator/redis-operator/controllers/rotation"
	"github.com/redis-operator/redis-operator/controllers/status"
	"github.com/redis-operator/redis-operator/controllers/topology"
)

// scope is what the phases of one pass share.
type scope struct {
	// rc is the working copy; the phases fill in its status.
	rc *cachev1beta1.RedisCluster
	// original is rc as read, the base of the status patch.
	original *cachev1beta1.RedisCluster
	now      time.Time
	log      logr.Logger

	obs status.Observation

	// password is the live password (from the owned Secret), "" without
	// auth; passwordKnown is false when it could not be determined, and
	// then nothing that needs Redis runs.
	password      string
	passwordKnown bool
	// rotation is the password rotation state read from the owned Secret
	// (package rotation).
	rotation rotation.State
	// usersConf are the redis.conf "user" lines of spec.users (hashed
	// passwords only), appended to the owned Secret's auth.conf.
	usersConf string
	// users are spec.users as prepared this pass (users.go).
	users []*userState
	// exporter is the redis_exporter sidecar's ACL user (exporter.go); nil when
	// spec.exporter is disabled and no pod runs the sidecar any more.
	// exporterSecretUID is the UID of the Secret holding its password, which
	// the pod template carries (resources.Placement.ExporterSecretUID).
	exporter          *acl.User
	exporterSecretUID string

	// tls is the cluster's TLS material (reconcileTLS); nil without spec.tls.
	tls *tlsMaterial
	// noSlots says, by pod name, why a pod must receive no slots yet
	// (reconcileTLSReload: it serves an older certificate;
	// reconcileExternalAccess: its Service has no external address yet);
	// see topology.Endpoint.NoSlots and holdSlots.
	noSlots map[string]string
	// announce maps a pod to the address it announces to clients
	// (spec.externalAccess, once the cluster is formed): a shard receives
	// slots only once every node knows its master under it
	// (topology.Endpoint.Hostname).
	announce map[string]string

	// restore, while a cluster bootstrapping from a backup is not formed,
	// is where its shards fetch their RDB (reconcileRestore).
	restore *resources.Restore

	// placement is, per shard index, what the builders need to know of
	// the nodes (placeShards, nodes.go), decided before the StatefulSets
	// are applied; a shard missing from it has the zero placement.
	placement map[int]resources.Placement

	// statefulSets are the live shard StatefulSets by shard index.
	statefulSets map[int]*appsv1.StatefulSet
	// shards are the desired and leaving shards with their pods.
	shards []*shardPods
	// leaving are the indices of the leaving shards (see leaving.go).
	leaving []int

	// result is the engine's last Result this pass (nil if it did not run).
	result *topology.Result
	view   *topology.ClusterView
	// rollout is what the rolling-update phase knew: masters and replicas
	// in sync as observed this pass.
	rollout rollout.Input
	// acted is set when a phase changed something this pass that the
	// cluster must settle from (a pod deleted, a failover).
	acted bool
	// events are transitions and actions to report once the status is known.
	events []event
}

// event is one Kubernetes event to record on the RedisCluster.
type event struct {
	warning bool
	// action: the pass did this (created, removed, moved, restarted, failed
	// over, or tried and failed); it is recorded even when the status write
	// fails, since the next pass will not do it again. Other events tell a
	// change of status and are recorded only once that status is written.
	action  bool
	reason  string
	message string
}

func newScope(rc *cachev1beta1.RedisCluster, now time.Time, log logr.Logger) *scope {
	s := &scope{rc: rc, original: rc.DeepCopy(), now: now, log: log}
	s.obs.DesiredShards = int(rc.Spec.Shards)
	s.obs.ReplicasPerShard = int(rc.Spec.ReplicasPerShard)
	s.obs.FormedBefore = status.FormedBefore(&rc.Status)
	s.obs.PreviousShards = slices.Clone(rc.Status.Shards)
	if c := meta.FindStatusCondition(rc.Status.Conditions, cachev1beta1.RedisClusterDegradedCondition); c != nil &&
		c.Status == metav1.ConditionTrue && c.Reason == cachev1beta1.RedisClusterShardLostReason {
		s.obs.LostBefore = c.Message
	}
	return s
}

// busy reports whether the pass left work that no Kubernetes event will
// announce, so the next pass should come soon. A lost shard or a failing
// step is not busy: it waits for a person (reconcileTopology backs off, or
// the error's retries do).
func (s *scope) busy() bool {
	if s.acted {
		return true
	}
	if s.obs.LostMessage() != "" || s.obs.ReconcileErr != nil {
		return false
	}
	t := s.obs.Topology
	return len(s.obs.Pods.NotReady) > 0 || (t != nil && !t.Converged) || len(s.obs.StalePods) > 0 || len(s.obs.Leaving) > 0 || len(s.obs.Removed) > 0 ||
		s.obs.AnnouncePending != ""
}

// desired is the engine's target: spec.shards shards, leaving shards to
// drain. Formed comes from status (status.FormedBefore), never from the nodes: a
// cluster whose every node came back empty is still formed.
func (s *scope) desired() topology.Desired {
	d := topology.Desired{
		ReplicasPerShard: int(s.rc.Spec.ReplicasPerShard),
		AllowDataLoss:    s.rc.Spec.LostShardPolicy == cachev1beta1.LostShardReassign,
		Formed:           s.obs.FormedBefore,
		Fresh:            s.obs.Fresh,
	}
	for _, sh := range s.shards {
		spec := sh.spec()
		for i := range spec.Nodes {
			spec.Nodes[i].NoSlots = s.noSlots[spec.Nodes[i].Name]
			spec.Nodes[i].Hostname = s.announce[spec.Nodes[i].Name]
		}
		if sh.Desired {
			d.Shards = append(d.Shards, spec)
		} else {
			d.Leaving = append(d.Leaving, spec)
		}
	}
	// The pods' placement always reaches the engine, which chooses the
	// masters of new shards by it (a new cluster's masters start spread);
	// only its planned failovers that spread masters wait.
	d.HoldSpread = s.movingMasters() || s.settleLeft() > 0
	return d
}

// spreadSettle is how long a cluster must have been Ready before the
// engine may move masters to spread them: a node or pod that just came
// back may fail again, and a failover just done is left alone for a while
// (its result is what people and tests look at first).
const spreadSettle = time.Minute

// settleLeft is how long until the cluster has been Ready for
// spreadSettle (by its Ready condition as read this pass): 0 once it has,
// spreadSettle while it is not Ready.
func (s *scope) settleLeft() time.Duration {
	read := s.original
	if read == nil {
		read = s.rc
	}
	c := meta.FindStatusCondition(read.Status.Conditions, cachev1beta1.RedisClusterReadyCondition)
	if c == nil || c.Status != metav1.ConditionTrue {
		return spreadSettle
	}
	return max(c.LastTransitionTime.Add(spreadSettle).Sub(s.now), 0)
}

// movingMasters reports whether a rolling update (stale pods) or a replica
// scale-down (a shard running more pods than spec) is under way: both move
// masters off the pods they replace or remove, and the engine's spreading
// of masters could move one back each pass, so it is held
// (Desired.HoldSpread) until they are done.
func (s *scope) movingMasters() bool {
	if len(s.obs.StalePods) > 0 {
		return true
	}
	for _, sh := range s.shards {
		if sh.Desired && sh.Expected > 1+int(s.rc.Spec.ReplicasPerShard) {
			return true
		}
	}
	return false
}

func (s *scope) normal(reason, format string, a ...any) {
	s.events = append(s.events, event{reason: reason, message: fmt.Sprintf(format, a...)})
}

func (s *scope) warning(reason, format string, a ...any) {
	s.events = append(s.events, event{warning: true, reason: reason, message: fmt.Sprintf(format, a...)})
}

// holdSlots records in s.noSlots that pod must receive no slots yet, and
// why; a reason recorded before for it stays.
func (s *scope) holdSlots(pod, why string) {
	if s.noSlots == nil {
		s.noSlots = map[string]string{}
	}
	if s.noSlots[pod] == "" {
		s.noSlots[pod] = why
	}
}

// did records an action of the pass (a Normal event).
func (s *scope) did(reason, format string, a ...any) {
	s.events = append(s.events, event{action: true, reason: reason, message: fmt.Sprintf(format, a...)})
}

// failed records an action of the pass that failed (a Warning event).
func (s *scope) failed(reason, format string, a ...any) {
	s.events = append(s.events, event{action: true, warning: true, reason: reason, message: fmt.Sprintf(format, a...)})
}
