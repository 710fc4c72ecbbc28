//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/redis-operator/redis-operator/controllers/resources"
)

// The stages of apply→Ready, in order, as BenchmarkApplyToReady breaks it down. Each is the
// first moment, counted from the create call, at which it held for the whole cluster:
const (
	stageScheduled = iota // every pod exists and is bound to a node (spec.nodeName)
	stageRunning          // every container of every pod is running
	stageRedisUp          // every pod's redis-server answers (PING; an error reply counts)
	stageFormed           // every node knows every other, all 16384 slots are assigned, cluster_state:ok
	stageSynced           // every replica replicates, master_link_status:up
	stageReady            // the RedisCluster's Ready condition, for its generation
	readyStageCount
)

var readyStageNames = [readyStageCount]string{"pods scheduled", "pods running", "Redis up", "slots and MEET converged", "replicas synced", "Ready"}

// readyStages holds each stage's time from apply.
type readyStages [readyStageCount]time.Duration

func (r readyStages) String() string {
	var out []string
	for i, d := range r {
		out = append(out, fmt.Sprintf("%s %.1fs", readyStageNames[i], d.Seconds()))
	}
	return strings.Join(out, ", ")
}

// sampleToReady samples c every 100 ms from start until it is Ready (failing the benchmark
// after timeout) and returns when each stage was first seen, and for each pod the time from
// its first sample bound to a node to its first sample with the Ready condition. A stage
// seen before an earlier one (Redis can answer before the kubelet reports the container
// running) takes the earlier one's time, so the stages never go backwards.
func sampleToReady(c *cluster, start time.Time, shards, replicas int, timeout time.Duration) (readyStages, []time.Duration) {
	c.t.Helper()
	want := shards * (1 + replicas)
	clients := map[string]*redis.Client{}
	defer func() {
		for _, cl := range clients {
			_ = cl.Close()
		}
	}()
	var seen [readyStageCount]bool
	var at readyStages
	boundAt, readyAt := map[types.UID]time.Duration{}, map[types.UID]time.Duration{}
	deadline := start.Add(timeout)
	for !seen[stageReady] {
		if time.Now().After(deadline) {
			c.t.Fatalf("%s: not Ready within %s; stages seen %v at %s", c.key(), timeout, seen, at)
		}
		now := time.Since(start)
		pods := c.podsQuiet()
		held := c.readyStagesHeld(clients, pods, want, shards*replicas)
		for _, p := range pods {
			if _, ok := boundAt[p.UID]; !ok && p.Spec.NodeName != "" {
				boundAt[p.UID] = now
			}
			if _, ok := readyAt[p.UID]; !ok && podIsReady(&p) {
				readyAt[p.UID] = now
			}
		}
		for i := range held {
			if held[i] && !seen[i] {
				seen[i], at[i] = true, now
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	for i := readyStageCount - 2; i >= 0; i-- {
		if !seen[i] || at[i] > at[i+1] {
			at[i] = at[i+1]
		}
	}
	var podReady []time.Duration
	for uid, ready := range readyAt {
		if bound, ok := boundAt[uid]; ok {
			podReady = append(podReady, ready-bound)
		}
	}
	return at, podReady
}

// readyStagesHeld says which stages hold now. clients caches one Redis client per pod IP
// and password.
func (c *cluster) readyStagesHeld(clients map[string]*redis.Client, pods []corev1.Pod, want, wantReplicas int) [readyStageCount]bool {
	var held [readyStageCount]bool
	held[stageReady] = isReady(c.get())
	if len(pods) != want {
		return held
	}
	held[stageScheduled], held[stageRunning] = true, true
	for _, p := range pods {
		if p.Spec.NodeName == "" {
			held[stageScheduled] = false
		}
		if !containersRunning(&p) {
			held[stageRunning] = false
		}
	}
	password := c.passwordQuiet()
	held[stageRedisUp], held[stageFormed], held[stageSynced] = true, true, true
	linked := 0
	for _, p := range pods {
		if p.Status.PodIP == "" {
			held[stageRedisUp], held[stageFormed], held[stageSynced] = false, false, false
			break
		}
		key := p.Status.PodIP + "\x00" + password
		cl := clients[key]
		if cl == nil {
			opts := nodeOptions(p.Status.PodIP, password)
			opts.DialTimeout, opts.ReadTimeout, opts.MaxRetries = 200*time.Millisecond, 200*time.Millisecond, -1
			cl = redis.NewClient(opts)
			clients[key] = cl
		}
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		up, formed, link := nodeStages(ctx, cl, want)
		cancel()
		held[stageRedisUp] = held[stageRedisUp] && up
		held[stageFormed] = held[stageFormed] && formed
		if link {
			linked++
		}
	}
	held[stageSynced] = held[stageSynced] && linked == wantReplicas
	return held
}

// nodeStages asks one node whether it answers, whether it sees the whole cluster formed
// (want nodes known, every slot assigned, state ok) and whether it is a replica whose link
// to its master is up.
func nodeStages(ctx context.Context, cl *redis.Client, want int) (up, formed, replicaLinked bool) {
	err := cl.Ping(ctx).Err()
	var reply redis.Error
	if err != nil && !errors.As(err, &reply) {
		return false, false, false
	}
	info, err := cl.ClusterInfo(ctx).Result()
	if err != nil {
		return true, false, false
	}
	ci := infoMap(info)
	known, _ := strconv.Atoi(ci["cluster_known_nodes"])
	formed = known == want && ci["cluster_slots_assigned"] == "16384" && ci["cluster_state"] == "ok"
	repl, err := cl.Info(ctx, "replication").Result()
	if err != nil {
		return true, formed, false
	}
	ri := infoMap(repl)
	return true, formed, ri["role"] == "slave" && ri["master_link_status"] == "up"
}

// containersRunning says whether every container of p has started and runs.
func containersRunning(p *corev1.Pod) bool {
	if len(p.Status.ContainerStatuses) < len(p.Spec.Containers) {
		return false
	}
	for _, s := range p.Status.ContainerStatuses {
		if s.State.Running == nil {
			return false
		}
	}
	return true
}

// passwordQuiet is the password in the operator-owned Secret, "" while there is none.
func (c *cluster) passwordQuiet() string {
	s := &corev1.Secret{}
	if err := env.k8s.Get(context.Background(), client.ObjectKey{Namespace: c.ns, Name: resources.SecretName(c.name)}, s); err != nil {
		return ""
	}
	return string(s.Data[resources.PasswordKey])
}
