//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/redis-operator/redis-operator/controllers/resources"
)

// redisPID finds the redis-server process serving ip: Redis sets its
// process title to "redis-server <ip>:6379 [cluster]". Pods are processes
// of this machine, so the test sees them in /proc.
func redisPID(ip string) (int, error) {
	want := []byte("redis-server " + ip + ":" + strconv.Itoa(resources.RedisPort))
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if bytes.HasPrefix(b, want) && (len(b) == len(want) || b[len(want)] == ' ' || b[len(want)] == 0) {
			return pid, nil
		}
	}
	return 0, fmt.Errorf("no redis-server process serves %s", ip)
}

// signalRedis sends sig to the redis-server of the pod at ip.
func signalRedis(t testing.TB, ip string, sig syscall.Signal) {
	t.Helper()
	pid, err := redisPID(ip)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, sig); err != nil {
		t.Fatalf("sending %v to redis-server %d (%s): %v", sig, pid, ip, err)
	}
	t.Logf("sent %v to redis-server pid %d at %s", sig, pid, ip)
}

// podSampler follows the cluster's pods through a watch (so a deletion is
// seen within milliseconds) and asks every pod for its ROLE every 20 ms.
// It records each pod deletion with the role the pod last reported before
// it, and flags any moment a shard had more than one pod down.
type podSampler struct {
	c        *cluster
	perShard int

	mu        sync.Mutex
	pods      map[types.UID]*trackedPod
	deletions []podDeletion
	tooMany   []string

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

type trackedPod struct {
	name, ip string
	shard    int
	ready    bool
	deleting bool
	role     string
	roleAt   time.Time
}

// podDeletion is a pod seen with a deletionTimestamp for the first time.
type podDeletion struct {
	name     string
	uid      types.UID
	at       time.Time
	lastRole string
}

func startPodSampler(t *testing.T, c *cluster, perShard int) *podSampler {
	t.Helper()
	wc, err := client.NewWithWatch(env.cfg, client.Options{Scheme: env.k8s.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &podSampler{c: c, perShard: perShard, pods: map[types.UID]*trackedPod{}, cancel: cancel}
	w, err := wc.Watch(ctx, &corev1.PodList{}, client.InNamespace(c.ns), client.MatchingLabels{resources.LabelCluster: c.name})
	if err != nil {
		cancel()
		t.Fatalf("watching pods: %v", err)
	}
	s.wg.Add(2)
	go s.follow(ctx, w)
	go s.sampleRoles(ctx, c.password())
	t.Cleanup(s.stop)
	return s
}

func (s *podSampler) stop() {
	s.cancel()
	s.wg.Wait()
}

func (s *podSampler) follow(ctx context.Context, w watch.Interface) {
	defer s.wg.Done()
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.ResultChan():
			if !ok {
				return
			}
			p, isPod := ev.Object.(*corev1.Pod)
			if !isPod {
				continue
			}
			s.mu.Lock()
			s.apply(ev.Type, p)
			s.mu.Unlock()
		}
	}
}

// apply records one watch event; s.mu is held.
func (s *podSampler) apply(typ watch.EventType, p *corev1.Pod) {
	if typ == watch.Deleted {
		delete(s.pods, p.UID)
	} else {
		tp, ok := s.pods[p.UID]
		if !ok {
			tp = &trackedPod{name: p.Name, shard: shardOf(s.c.name, p.Name)}
			s.pods[p.UID] = tp
		}
		tp.ip = p.Status.PodIP
		tp.ready = podIsReady(p)
		if p.DeletionTimestamp != nil && !tp.deleting {
			tp.deleting = true
			s.deletions = append(s.deletions, podDeletion{name: p.Name, uid: p.UID, at: time.Now(), lastRole: tp.role})
		}
	}
	up := map[int]int{}
	shards := map[int]bool{}
	for _, tp := range s.pods {
		shards[tp.shard] = true
		if tp.ready {
			up[tp.shard]++
		}
	}
	for shard := range shards {
		if down := s.perShard - up[shard]; down > 1 {
			var states []string
			for _, tp := range s.pods {
				if tp.shard == shard {
					states = append(states, fmt.Sprintf("%s ready=%v deleting=%v", tp.name, tp.ready, tp.deleting))
				}
			}
			s.tooMany = append(s.tooMany, fmt.Sprintf("%s: shard %d had %d pods down (%s)",
				time.Now().Format("15:04:05.000"), shard, down, strings.Join(states, "; ")))
		}
	}
}

func (s *podSampler) sampleRoles(ctx context.Context, password string) {
	defer s.wg.Done()
	// One sampler per pod: a pod that does not answer (restarting, its
	// ROLE timing out) must not leave the others' last role stale, or a
	// master that turned replica just before its deletion would still be
	// recorded as master.
	var pods sync.WaitGroup
	defer pods.Wait()
	sampling := map[types.UID]bool{}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		s.mu.Lock()
		for uid, tp := range s.pods {
			if tp.ip != "" && !tp.deleting && !sampling[uid] {
				sampling[uid] = true
				pods.Add(1)
				go s.sampleRole(ctx, &pods, uid, tp.ip, password)
			}
		}
		s.mu.Unlock()
	}
}

// sampleRole records the ROLE of pod uid at ip every 20 ms until the pod
// is deleting or gone, or ctx ends.
func (s *podSampler) sampleRole(ctx context.Context, wg *sync.WaitGroup, uid types.UID, ip, password string) {
	defer wg.Done()
	cl := redis.NewClient(nodeOptions(ip, password))
	defer func() { _ = cl.Close() }()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		rctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		r, err := role(rctx, cl)
		cancel()
		s.mu.Lock()
		tp, ok := s.pods[uid]
		if !ok || tp.deleting {
			s.mu.Unlock()
			return
		}
		if err == nil {
			tp.role, tp.roleAt = r, time.Now()
		}
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// result stops the sampler and returns the deletions in order and the
// moments a shard had more than one pod down.
func (s *podSampler) result() ([]podDeletion, []string) {
	s.stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]podDeletion(nil), s.deletions...), append([]string(nil), s.tooMany...)
}
