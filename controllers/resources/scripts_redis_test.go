package resources

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/redis/go-redis/v9"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
)

// masterReplica forms a two-node cluster from rc: m owns all 16384 slots
// and r is its replica, in sync (master_link_status:up), cluster_state ok.
// setAcked writes key on the master c and waits until WAIT 1 says a
// replica has it: the acknowledged write a scenario must keep.
func setAcked(t *testing.T, c *redis.Client, key, value string) {
	t.Helper()
	ctx := context.Background()
	if err := c.Set(ctx, key, value, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Do(ctx, "WAIT", 1, 5000).Int(); err != nil || n != 1 {
		t.Fatalf("WAIT: %d, %v", n, err)
	}
}

func masterReplica(t *testing.T, rc *cachev1beta1.RedisCluster, password string) (m, r *pod) {
	t.Helper()
	m, r = startPod(t, rc, password), startPod(t, rc, password)
	ctx := context.Background()
	mc, rcl := m.client(password), r.client(password)
	t.Cleanup(func() { _, _ = mc.Close(), rcl.Close() })
	if err := mc.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", 0, 16383).Err(); err != nil {
		t.Fatal(err)
	}
	if err := mc.ClusterMeet(ctx, r.ip, "6379").Err(); err != nil {
		t.Fatal(err)
	}
	masterID, err := mc.Do(ctx, "CLUSTER", "MYID").Text()
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "replica learns the master", func() error {
		return rcl.Do(ctx, "CLUSTER", "REPLICATE", masterID).Err()
	})
	eventually(t, "cluster ok and replica in sync", func() error {
		info, err := rcl.Info(ctx, "replication").Result()
		if err != nil {
			return err
		}
		if !strings.Contains(info, "master_link_status:up") {
			return errors.New("link down")
		}
		ci, err := mc.ClusterInfo(ctx).Result()
		if err != nil {
			return err
		}
		if !strings.Contains(ci, "cluster_state:ok") {
			return errors.New(ci)
		}
		return nil
	})
	return m, r
}

// TestReadiness: a master is Ready; a replica is Ready when in sync, not
// while a full sync is in progress and not once its master is gone.
func TestReadiness(t *testing.T) {
	requireRedis(t)
	const password = "ready pw"
	rc := cluster()
	m, r := masterReplica(t, rc, password)
	ctx := context.Background()
	mc := m.client(password)
	defer mc.Close()
	if err := m.script(readinessScript); err != nil {
		t.Errorf("master not ready: %v", err)
	}
	if err := r.script(readinessScript); err != nil {
		t.Errorf("synced replica not ready: %v", err)
	}

	// A new replica in its full sync: the master's fork writes the RDB at
	// one key a second (rdb-key-save-delay, in microseconds, a testing
	// parameter of Redis), so with 5 keys the transfer is in progress
	// while the probe runs; INFO before and after the probe shows it.
	for _, kv := range [][2]string{{"repl-diskless-sync-delay", "0"}, {"rdb-key-save-delay", "1000000"}} {
		if err := mc.ConfigSet(ctx, kv[0], kv[1]).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 5 {
		if err := mc.Set(ctx, fmt.Sprintf("{k}%d", i), "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	n := startPod(t, rc, password)
	nc := n.client(password)
	defer nc.Close()
	if err := nc.ClusterMeet(ctx, m.ip, "6379").Err(); err != nil {
		t.Fatal(err)
	}
	masterID, err := mc.Do(ctx, "CLUSTER", "MYID").Text()
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "new replica replicates", func() error { return nc.Do(ctx, "CLUSTER", "REPLICATE", masterID).Err() })
	syncing := func() bool {
		info, err := nc.Info(ctx, "replication").Result()
		return err == nil && strings.Contains(info, "master_sync_in_progress:1")
	}
	notReadyWhile(t, n, "in a full sync", syncing)
	eventually(t, "full sync ends", func() error {
		if syncing() {
			return errors.New("still syncing")
		}
		return n.script(readinessScript)
	})

	// The master dies: its replicas' links go down, they are not ready.
	_ = m.cmd.Process.Signal(syscall.SIGKILL)
	eventually(t, "replica with its master gone is not ready", func() error {
		if r.script(readinessScript) == nil {
			return errors.New("still ready")
		}
		return nil
	})
}

// notReadyWhile waits until in reports node p in state, runs the
// readiness probe there and fails the test if it passed. in must still
// hold after the probe, or the test cannot judge it.
func notReadyWhile(t *testing.T, p *pod, state string, in func() bool) {
	t.Helper()
	eventually(t, "the node is "+state, func() error {
		if !in() {
			return fmt.Errorf("not %s", state)
		}
		return nil
	})
	probe := p.script(readinessScript)
	if !in() {
		t.Fatalf("the node stopped being %s during the probe; cannot judge it", state)
	}
	if probe == nil {
		t.Errorf("ready while %s", state)
	}
}

// TestPreStopSkipsLaggingReplica: a master whose only replica answers
// but lags (CLIENT PAUSE WRITE on the replica holds back its master link's
// writes while other commands run; the master still lists it as
// state=online, its offset behind by more than preStopMaxLag) is not
// failed over: the hook asks nothing of the replica, exits 0 and the node
// stays master with its data; the replica, unpaused, catches up.
func TestPreStopSkipsLaggingReplica(t *testing.T) {
	requireRedis(t)
	const password = "lag pw"
	rc := cluster()
	m, r := masterReplica(t, rc, password)
	ctx := context.Background()
	mc, rcl := m.client(password), r.client(password)
	defer mc.Close()
	defer rcl.Close()

	// In sync first (offset > 0), then lagging while the master moves on.
	if err := mc.Set(ctx, "{k}small", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := mc.Do(ctx, "WAIT", 1, 5000).Int(); err != nil || n != 1 {
		t.Fatalf("WAIT: %d, %v", n, err)
	}
	if err := rcl.Do(ctx, "CLIENT", "PAUSE", 60000, "WRITE").Err(); err != nil {
		t.Fatal(err)
	}
	defer rcl.Do(ctx, "CLIENT", "UNPAUSE")
	if err := mc.Set(ctx, "{k}big", strings.Repeat("x", 2<<20), 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := m.script(preStopScript); err != nil {
		t.Fatalf("preStop: %v", err)
	}
	if role := roleOf(t, mc); role != "master" {
		t.Fatalf("master failed over to a lagging replica: role %s", role)
	}
	if log, _ := os.ReadFile(filepath.Join(r.root, "redis.log")); strings.Contains(string(log), "Manual failover user request accepted") {
		t.Errorf("preStop asked the lagging replica for a failover:\n%s", log)
	}
	if err := rcl.Do(ctx, "CLIENT", "UNPAUSE").Err(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "replica catches up", func() error {
		n, err := rcl.Do(ctx, "DBSIZE").Int()
		if err != nil || n != 2 {
			return errors.New("not caught up")
		}
		return nil
	})
	if role := roleOf(t, rcl); role != "slave" {
		t.Errorf("replica's role: %s", role)
	}
}

// TestPreStopBoundedOnHungReplica: the in-sync replica that preStop picks
// hangs (SIGSTOP) before it answers CLUSTER FAILOVER; the hook still
// returns within its bound, so the kubelet's SIGTERM and Redis's own
// shutdown (shutdown-timeout) still run within the grace period.
func TestPreStopBoundedOnHungReplica(t *testing.T) {
	requireRedis(t)
	m, r := masterReplica(t, cluster(), "")
	mc := m.client("")
	defer mc.Close()
	setAcked(t, mc, "{k}1", "v1")
	if err := r.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.cmd.Process.Signal(syscall.SIGCONT) }()
	if err := m.script(preStopScript); err != nil {
		t.Fatalf("preStop: %v", err)
	}
}

// TestReadinessWhileLoading: a master that restarts and loads its dataset
// is not Ready until the load ends. INFO answers during the load with
// loading:1 next to async_loading:0, which the probe must not read as
// loading:0. The load is slowed by Redis's testing parameters
// key-load-delay (microseconds per key of an RDB) and
// loading-process-events-interval-bytes (so INFO is answered meanwhile),
// with the keys in the AOF's RDB base after BGREWRITEAOF.
func TestReadinessWhileLoading(t *testing.T) {
	requireRedis(t)
	const password = "loading pw"
	rc := cluster()
	p := startPod(t, rc, password)
	ctx := context.Background()
	c := p.client(password)
	defer c.Close()
	if err := c.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", 0, 16383).Err(); err != nil {
		t.Fatal(err)
	}
	// Random values of 1 KiB, which the RDB cannot compress, so the load
	// processes events at every key.
	value := func() string {
		var b strings.Builder
		for b.Len() < 1024 {
			b.WriteString(rand.Text())
		}
		return b.String()
	}
	eventually(t, "the node takes writes", func() error { return c.Set(ctx, "k0", value(), 0).Err() })
	const keys = 20
	for i := 1; i < keys; i++ {
		if err := c.Set(ctx, fmt.Sprintf("k%d", i), value(), 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.BgRewriteAOF(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the AOF rewrite ends", func() error {
		info, err := c.Info(ctx, "persistence").Result()
		if err != nil {
			return err
		}
		if !strings.Contains(info, "aof_rewrite_in_progress:0") || !strings.Contains(info, "aof_rewrite_scheduled:0") {
			return errors.New("rewrite running")
		}
		return nil
	})
	if err := p.script(readinessScript); err != nil {
		t.Fatalf("master not ready before the restart: %v", err)
	}
	p.kill()
	conf, err := os.OpenFile(filepath.Join(p.root, "config", ConfigKey), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	// 0.5 s a key: about 10 s of loading.
	if _, err := conf.WriteString("key-load-delay 500000\nloading-process-events-interval-bytes 1024\n"); err != nil {
		t.Fatal(err)
	}
	_ = conf.Close()
	started := make(chan error, 1)
	go func() { started <- p.start(t) }()
	loading := func() bool {
		info, err := c.Info(ctx, "persistence").Result()
		return err == nil && strings.Contains(info, "\nloading:1") && strings.Contains(info, "\nasync_loading:0")
	}
	notReadyWhile(t, p, "loading its dataset", loading)
	if err := <-started; err != nil {
		t.Fatal(err)
	}
	if n, err := c.DBSize(ctx).Result(); err != nil || n != keys {
		t.Fatalf("after the load: %d keys, %v; want %d", n, err, keys)
	}
	if err := p.script(readinessScript); err != nil {
		t.Errorf("master not ready after the load: %v", err)
	}
}
