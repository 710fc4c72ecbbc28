package resources

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
)

// TestStartHandsOverAfterKill is field case R18: persistence off, a
// master's redis-server killed with SIGKILL and its container restarted at
// once (same IP, same nodes.conf), faster than cluster-node-timeout, while
// a writer records every write that WAIT 1 acknowledged. Every
// acknowledged key must survive, the restarted node must be a replica and
// its old replica the master of the shard's slots. The kill comes a second
// or two after the cluster formed (repl-diskless-sync-max-replicas starts
// each replica's sync at once), often before the master heard from its
// replica that it is one: its nodes.conf then lists the replica as an
// empty master, and the first election may be refused by a master that
// has not heard either.
func TestStartHandsOverAfterKill(t *testing.T) {
	testKillRestart(t, "kill -9 pw", map[string]string{"appendonly": "no", "save": ""}, killRestart{})
}

// TestStartHandsOverAfterKillAOF is the same kill with AOF on
// (appendfsync everysec): the restarted master would load its AOF, start
// with a new replication ID and make its replica full-sync from it; with
// the handover the replica keeps the shard instead. This cluster has no
// password (the other test's has one).
func TestStartHandsOverAfterKillAOF(t *testing.T) {
	testKillRestart(t, "", map[string]string{"appendonly": "yes", "appendfsync": "everysec", "save": ""}, killRestart{})
}

// TestStartWaitsForSlowReplica: the killed master's replica does not
// answer for the first 4 s of the start script (hung: SIGSTOP, as a
// replica starved on a loaded node), less than the script's patience of
// twice the node timeout: the script asks again instead of starting the
// empty master on its saved nodes.conf, hands the slots over once the
// replica answers, and no acknowledged key is lost. Field case: under CI
// load the script gave up on the first unanswered poll, and 447
// acknowledged keys were lost.
func TestStartWaitsForSlowReplica(t *testing.T) {
	testKillRestart(t, "", map[string]string{"appendonly": "no", "save": ""}, killRestart{stall: 4 * time.Second})
}

// TestStartFindsAnUnlistedReplica: the killed master's nodes.conf does not
// list its replica (a node saves nodes.conf without the peers whose
// handshake is not done, and a replica syncs from its master before that).
// Field case: under CI load, three seconds after the cluster formed, the
// script found no replica to hand over to and 520 acknowledged keys were
// lost. The script asks the nodes without slots in the other masters'
// tables (which may not know yet that the replica is one), hands the slots
// over, and no acknowledged key is lost.
func TestStartFindsAnUnlistedReplica(t *testing.T) {
	testKillRestart(t, "", map[string]string{"appendonly": "no", "save": ""}, killRestart{unlisted: true})
}

// killRestart varies testKillRestart.
type killRestart struct {
	// stall stops the replica (SIGSTOP) from the kill until stall after the
	// restart began.
	stall time.Duration
	// unlisted removes the replica's line from the killed master's
	// nodes.conf before the restart.
	unlisted bool
}

// testKillRestart kills a master of a 3×1 cluster under acknowledged
// writes and restarts it on the same address and data directory, as opts
// says.
func testKillRestart(t *testing.T, password string, config map[string]string, opts killRestart) {
	stall := opts.stall
	requireRedis(t)
	rc := cluster(func(rc *cachev1beta1.RedisCluster) { rc.Spec.Config = config })
	pods := make([]*pod, 6)
	addrs := make([]string, len(pods))
	for i := range pods {
		pods[i] = startPod(t, rc, password)
		addrs[i] = pods[i].ip + ":6379"
	}
	create := exec.Command("redis-cli", append([]string{"--no-auth-warning", "--cluster", "create"}, append(addrs, "--cluster-replicas", "1", "--cluster-yes")...)...)
	create.Env = os.Environ()
	if password != "" {
		create.Env = append(create.Env, "REDISCLI_AUTH="+password)
	}
	if out, err := create.CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	ctx := context.Background()
	within(t, time.Minute, "cluster formed, every replica in sync", func() error {
		for _, p := range pods {
			if err := nodeHealthy(ctx, p); err != nil {
				return err
			}
		}
		return nil
	})

	w := startWriter(t, addrs, password)
	within(t, time.Minute, "1000 acknowledged writes", func() error {
		if n := w.count(); n < 1000 {
			return fmt.Errorf("%d acknowledged", n)
		}
		return nil
	})

	victim, replica := masterWithReplica(t, pods)
	victimID := nodeID(t, victim)
	victim.kill()
	if opts.unlisted {
		unlist(t, filepath.Join(victim.root, "data", "nodes.conf"), replica.ip+":")
	}
	if stall > 0 {
		if err := replica.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		cont := time.AfterFunc(stall, func() { _ = replica.cmd.Process.Signal(syscall.SIGCONT) })
		defer func() {
			cont.Stop()
			_ = replica.cmd.Process.Signal(syscall.SIGCONT)
		}()
	}
	if err := victim.start(t); err != nil {
		log, _ := os.ReadFile(filepath.Join(victim.root, "redis.log"))
		t.Fatalf("restart: %v\n%s", err, log)
	}

	// Whatever the start script did, wait until the shard settled: one of
	// the two is a master owning slots, the other its replica in sync,
	// and the cluster is ok everywhere.
	within(t, 2*time.Minute, "shard settled after the restart", func() error {
		for _, p := range pods {
			if err := nodeHealthy(ctx, p); err != nil {
				return err
			}
		}
		return nil
	})
	before := w.count()
	within(t, time.Minute, "writes acknowledged after the restart", func() error {
		if w.count() < before+200 {
			return errors.New("writer stalled")
		}
		return nil
	})
	acked := w.stop()

	reader := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, Password: password})
	defer reader.Close()
	lost := 0
	for k, v := range acked {
		got, err := reader.Get(ctx, k).Result()
		if err != nil || got != v {
			lost++
		}
	}
	t.Logf("acknowledged %d, lost %d", len(acked), lost)
	log, _ := os.ReadFile(filepath.Join(victim.root, "redis.log"))
	for _, line := range strings.Split(string(log), "\n") {
		if strings.HasPrefix(line, "start: ") || strings.Contains(line, "Reconfiguring myself") || strings.Contains(line, "Full resync") || strings.Contains(line, "Ready to accept") {
			t.Log(line)
		}
	}
	if lost > 0 || t.Failed() {
		for _, p := range pods { // every node's view of the elections
			l, _ := os.ReadFile(filepath.Join(p.root, "redis.log"))
			for _, line := range strings.Split(string(l), "\n") {
				if strings.Contains(line, "ailover") || strings.Contains(line, "lection") {
					t.Logf("%s: %s", p.ip, line)
				}
			}
		}
	}
	if lost > 0 {
		t.Errorf("%d of %d acknowledged keys lost", lost, len(acked))
	}
	if opts.unlisted && !strings.Contains(string(log), "lists no replica of") {
		t.Error("the start script did not say it asked the nodes the other masters know")
	}
	if stall > 0 && !strings.Contains(string(log), "qualifies yet") {
		t.Error("the start script did not say it waits for the replica that did not answer")
	}

	vc, rcl := victim.client(password), replica.client(password)
	defer vc.Close()
	defer rcl.Close()
	if role := roleOf(t, vc); role != "slave" {
		t.Errorf("restarted node %s is a %s, want a replica", victimID, role)
	}
	if role := roleOf(t, rcl); role != "master" {
		t.Errorf("its old replica is a %s, want the shard's master", role)
	}
	if n := ownedSlots(t, rcl); n == 0 {
		t.Error("the shard's new master owns no slots")
	}
}

// unlist removes from a nodes.conf the lines whose address starts with
// addrPrefix ("ip:"), and fails the test if there was none.
func unlist(t *testing.T, path, addrPrefix string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var kept []string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 1 && strings.HasPrefix(f[1], addrPrefix) {
			continue
		}
		kept = append(kept, line)
	}
	if len(kept) == len(strings.Split(string(b), "\n")) {
		t.Fatalf("%s lists no node at %s", path, addrPrefix)
	}
	if err := os.WriteFile(path, []byte(strings.Join(kept, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
}

// nodeHealthy: cluster_state ok, and a replica has its master link up.
func nodeHealthy(ctx context.Context, p *pod) error {
	c := p.client(p.password)
	defer c.Close()
	ci, err := c.ClusterInfo(ctx).Result()
	if err != nil {
		return err
	}
	if !strings.Contains(ci, "cluster_state:ok") {
		return fmt.Errorf("%s: cluster_state not ok", p.ip)
	}
	info, err := c.Info(ctx, "replication").Result()
	if err != nil {
		return err
	}
	if strings.Contains(info, "role:slave") && !strings.Contains(info, "master_link_status:up") {
		return fmt.Errorf("%s: replica link down", p.ip)
	}
	return nil
}

// masterWithReplica returns a pod that is a master owning slots and the
// pod that replicates it.
func masterWithReplica(t *testing.T, pods []*pod) (master, replica *pod) {
	t.Helper()
	byIP := map[string]*pod{}
	for _, p := range pods {
		byIP[p.ip] = p
	}
	c := pods[0].client(pods[0].password)
	defer c.Close()
	// A node learns that another became a replica from that node's own
	// packets, up to half a node timeout after CLUSTER REPLICATE.
	within(t, time.Minute, "a replica in the first node's view", func() error {
		nodes, err := c.ClusterNodes(context.Background()).Result()
		if err != nil {
			return err
		}
		ipOf := map[string]string{}
		masterOf := map[string]string{}
		for _, line := range strings.Split(strings.TrimSpace(nodes), "\n") {
			f := strings.Fields(line)
			ipOf[f[0]] = strings.Split(f[1], ":")[0]
			if strings.Contains(f[2], "slave") {
				masterOf[f[0]] = f[3]
			}
		}
		for r, m := range masterOf {
			master, replica = byIP[ipOf[m]], byIP[ipOf[r]]
			return nil
		}
		return fmt.Errorf("no replica in:\n%s", nodes)
	})
	return master, replica
}

func nodeID(t *testing.T, p *pod) string {
	t.Helper()
	c := p.client(p.password)
	defer c.Close()
	id, err := c.Do(context.Background(), "CLUSTER", "MYID").Text()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// ownedSlots counts the slots the node's own CLUSTER NODES line claims.
func ownedSlots(t *testing.T, c *redis.Client) int {
	t.Helper()
	nodes, err := c.ClusterNodes(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(nodes, "\n") {
		f := strings.Fields(line)
		if len(f) < 8 || !strings.Contains(f[2], "myself") {
			continue
		}
		for _, r := range f[8:] {
			var lo, hi int
			if _, err := fmt.Sscanf(r, "%d-%d", &lo, &hi); err == nil {
				n += hi - lo + 1
			} else if _, err := fmt.Sscanf(r, "%d", &lo); err == nil {
				n++
			}
		}
	}
	return n
}

// writer writes k<i> = v<i> through a cluster client, each SET followed
// by WAIT 1 on the same connection of the key's master, and records the
// keys that at least one replica acknowledged.
type writer struct {
	mu    sync.Mutex
	acked map[string]string
	done  chan struct{}
	wg    sync.WaitGroup
}

func startWriter(t *testing.T, addrs []string, password string) *writer {
	cc := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs: addrs, Password: password, MaxRetries: -1,
		DialTimeout: 500 * time.Millisecond, ReadTimeout: time.Second, WriteTimeout: time.Second,
	})
	w := &writer{acked: map[string]string{}, done: make(chan struct{})}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		defer cc.Close()
		ctx := context.Background()
		for i := 0; ; i++ {
			select {
			case <-w.done:
				return
			default:
			}
			k, v := fmt.Sprintf("k%d", i), fmt.Sprintf("v%d", i)
			m, err := cc.MasterForKey(ctx, k)
			if err != nil {
				time.Sleep(20 * time.Millisecond)
				continue
			}
			pipe := m.Pipeline()
			set := pipe.Set(ctx, k, v, 0)
			wait := pipe.Do(ctx, "WAIT", 1, 500)
			_, _ = pipe.Exec(ctx)
			if n, err := wait.Int(); set.Err() == nil && err == nil && n >= 1 {
				w.mu.Lock()
				w.acked[k] = v
				w.mu.Unlock()
				continue
			}
			cc.ReloadState(ctx)
			time.Sleep(20 * time.Millisecond)
		}
	}()
	t.Cleanup(func() { w.stop() })
	return w
}

func (w *writer) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.acked)
}

// stop ends the writer (once) and returns the acknowledged keys.
func (w *writer) stop() map[string]string {
	select {
	case <-w.done:
	default:
		close(w.done)
	}
	w.wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.acked
}

// within retries f until it succeeds or d passes.
func within(t *testing.T, d time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	var err error
	for time.Now().Before(deadline) {
		if err = f(); err == nil {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("%s: %v", what, err)
}

// TestStartWithoutHandover: the start script hands nothing over when the
// restarting node is a replica, and starts the master as before, saying
// why, when its only replica does not answer (hung: SIGSTOP) until its
// wait is over.
func TestStartWithoutHandover(t *testing.T) {
	requireRedis(t)
	const password = "no handover"
	rc := cluster(func(rc *cachev1beta1.RedisCluster) {
		rc.Spec.Config = map[string]string{"appendonly": "no", "save": ""}
	})
	m, r := masterReplica(t, rc, password)
	ctx := context.Background()
	logOf := func(p *pod) string {
		b, _ := os.ReadFile(filepath.Join(p.root, "redis.log"))
		return string(b)
	}

	r.kill()
	if err := r.start(t); err != nil {
		t.Fatal(err)
	}
	if log := logOf(r); strings.Contains(log, "start: ") {
		t.Errorf("a restarting replica tried a handover:\n%s", log)
	}
	within(t, time.Minute, "restarted replica back in sync", func() error { return nodeHealthy(ctx, r) })
	rcl := r.client(password)
	defer rcl.Close()
	if role := roleOf(t, rcl); role != "slave" {
		t.Errorf("restarted replica is a %s", role)
	}

	if err := r.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.cmd.Process.Signal(syscall.SIGCONT) }()
	// A wait of 4 s: the script asks again at 3 s (the unanswered call's
	// timeout) and its wait runs out during that round; it must start
	// redis-server, not refuse as if a replica had been picked.
	t.Setenv("HANDOVER_WAIT_MS", "4000")
	m.kill()
	if err := m.start(t); err != nil {
		t.Fatal(err)
	}
	log := logOf(m)
	for _, want := range []string{"start: replica " + r.ip + ":6379 of ", " does not answer", "start: no replica of "} {
		if !strings.Contains(log, want) {
			t.Errorf("start script's output lacks %q:\n%s", want, log)
		}
	}
	mc := m.client(password)
	defer mc.Close()
	if role := roleOf(t, mc); role != "master" || ownedSlots(t, mc) != 16384 {
		t.Errorf("master restarted without a handover: role %s, %d slots", role, ownedSlots(t, mc))
	}
}

// TestStartElectionBounded: a one-master cluster cannot elect its replica
// while the master is down (no other master votes), as a cluster cannot
// when a majority of its masters restart at once, so the handover's
// CLUSTER FAILOVER FORCE never wins. After its wait (shortened here) the
// start script says so and exits without starting redis-server: an empty
// master would make the replica, which holds the acknowledged key,
// full-sync its empty dataset. The documented way out, CLUSTER FAILOVER
// TAKEOVER on the replica, then lets the next start hand over: the key
// survives and the old master comes back as the replica.
func TestStartElectionBounded(t *testing.T) {
	requireRedis(t)
	rc := cluster(func(rc *cachev1beta1.RedisCluster) {
		rc.Spec.Config = map[string]string{"appendonly": "no", "save": "", "cluster-node-timeout": "1000"}
	})
	m, r := masterReplica(t, rc, "")
	ctx := context.Background()
	mc := m.client("")
	defer mc.Close()
	setAcked(t, mc, "{k}1", "v1")
	t.Setenv("HANDOVER_WAIT_MS", "3000")
	m.kill()
	err := m.start(t)
	if err == nil {
		t.Fatal("redis-server started although its replica was not elected")
	}
	for _, want := range []string{"handing them to its replica " + r.ip + ":6379", "no replica of ", "was elected within 3000 ms", "not starting redis-server"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("start script's output lacks %q:\n%v", want, err)
		}
	}

	rcl := r.client("")
	defer rcl.Close()
	if err := rcl.Do(ctx, "CLUSTER", "FAILOVER", "TAKEOVER").Err(); err != nil {
		t.Fatal(err)
	}
	within(t, 30*time.Second, "the replica to take over", func() error {
		if role := roleOf(t, rcl); role != "master" {
			return fmt.Errorf("role %s", role)
		}
		return nil
	})
	if err := m.start(t); err != nil {
		t.Fatalf("start after the takeover: %v", err)
	}
	within(t, time.Minute, "the old master back as a replica in sync", func() error { return nodeHealthy(ctx, m) })
	if role := roleOf(t, mc); role != "slave" {
		t.Errorf("the restarted node is a %s, want a replica", role)
	}
	within(t, 30*time.Second, "the acknowledged key read from the new master", func() error {
		if v, err := rcl.Get(ctx, "{k}1").Result(); err != nil || v != "v1" {
			return fmt.Errorf("%q, %v", v, err)
		}
		return nil
	})
}

// TestStartHandoverBudgetIsTime: the handover's wait is measured by the
// clock, not by counting polls. Its replica hangs (SIGSTOP) right after
// the handover picked it, so every later call to it takes rcli's 3 s: the
// start script still ends (starting on the saved nodes.conf once the
// replica does not answer, or refusing once its wait is over) within a few
// seconds of its 3 s wait, where counting polls of 0.5 s made it wait
// seven times as long. Field case: every pod of a cluster deleted at once;
// a restarting master picked its replica's old incarnation, which was
// stopping, and held its shard down for minutes.
func TestStartHandoverBudgetIsTime(t *testing.T) {
	requireRedis(t)
	rc := cluster(func(rc *cachev1beta1.RedisCluster) {
		rc.Spec.Config = map[string]string{"appendonly": "no", "save": "", "cluster-node-timeout": "1000"}
	})
	m, r := masterReplica(t, rc, "")
	mc := m.client("")
	defer mc.Close()
	setAcked(t, mc, "{k}1", "v1")
	t.Setenv("HANDOVER_WAIT_MS", "3000")
	m.kill()
	logPath := filepath.Join(m.root, "redis.log")
	done := make(chan error, 1)
	go func() { done <- m.start(t) }()
	within(t, 30*time.Second, "the handover to pick the replica", func() error {
		b, _ := os.ReadFile(logPath)
		if !strings.Contains(string(b), "handing them to its replica "+r.ip+":6379") {
			return fmt.Errorf("not yet:\n%s", b)
		}
		return nil
	})
	if err := r.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.cmd.Process.Signal(syscall.SIGCONT) }()
	stopped := time.Now()
	select {
	case err := <-done:
		b, _ := os.ReadFile(logPath)
		if !strings.Contains(string(b), "not starting redis-server") && !strings.Contains(string(b), "start: no replica of ") {
			t.Errorf("the start script ended (%v) without saying why:\n%s", err, b)
		}
		t.Logf("the start script ended %.1fs after the replica hung", time.Since(stopped).Seconds())
	case <-time.After(15 * time.Second):
		b, _ := os.ReadFile(logPath)
		t.Fatalf("the start script still waits 15 s after the replica hung, with a 3 s handover wait:\n%s", b)
	}
}
