package resources

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
)

// These tests run the rendered redis.conf, auth.conf and the pod's shell
// scripts against the real redis-server and redis-cli 7.0 installed on the
// machine (Debian's redis-server and redis-tools), each node on its own
// 127.x.y.z address as on the local control plane.

// pod is a Redis "pod" run from the builders' output: its files live in a
// temporary directory that stands in for the pod's mounts.
type pod struct {
	rc       *cachev1beta1.RedisCluster
	tls      *tls.Config // with spec.tls: the client side of testTLS
	ip       string
	root     string
	password string
	cmd      *exec.Cmd
	exited   chan error
	log      *os.File
}

// localize rewrites the pod's mount paths to directories under root.
func localize(root, s string) string {
	s = strings.ReplaceAll(s, AuthDir, filepath.Join(root, "auth"))
	s = strings.ReplaceAll(s, AnnounceDir, filepath.Join(root, "announce")) // before ConfigDir, its prefix
	s = strings.ReplaceAll(s, TLSDir, filepath.Join(root, "tls"))
	s = strings.ReplaceAll(s, ConfigDir, filepath.Join(root, "config"))
	s = strings.ReplaceAll(s, DataDir, filepath.Join(root, "data"))
	return s
}

// startPod materialises the ConfigMap and Secret built for rc (with
// password) and runs the Redis container's start script with POD_IP set to
// a fresh loopback address, then waits until the node answers.
func startPod(t *testing.T, rc *cachev1beta1.RedisCluster, password string) *pod {
	t.Helper()
	for attempt := 0; attempt < 5; attempt++ {
		p := &pod{rc: rc, ip: fmt.Sprintf("127.%d.%d.%d", 200+rand.IntN(50), rand.IntN(256), 1+rand.IntN(253)), root: t.TempDir(), password: password}
		dirs := map[string]map[string][]byte{
			"config": {ConfigKey: []byte(localize(p.root, ConfigMap(rc).Data[ConfigKey]))},
			"auth":   Secret(rc, password).Data,
			"data":   nil,
		}
		if rc.Spec.ExternalAccessEnabled() {
			dirs["announce"] = map[string][]byte{}
			if a := testAnnounce[rc.Name]; a != "" {
				dirs["announce"][testPodName] = []byte(a + "\n")
			}
		}
		if rc.Spec.TLSEnabled() {
			files, client := testTLS(t)
			dirs["tls"], p.tls = files, client
		}
		for dir, files := range dirs {
			if err := os.MkdirAll(filepath.Join(p.root, dir), 0o755); err != nil {
				t.Fatal(err)
			}
			for name, content := range files {
				if err := os.WriteFile(filepath.Join(p.root, dir, name), content, 0o600); err != nil {
					t.Fatal(err)
				}
			}
		}
		switch err := p.start(t); {
		case err == nil:
			return p
		case !errors.Is(err, errAddrInUse):
			t.Fatal(err)
		}
	}
	t.Fatal("no free loopback address after 5 attempts")
	return nil
}

var errAddrInUse = errors.New("address already in use")

// testPodName is the POD_NAME of every test pod; testAnnounce maps a
// cluster name to the address its announce file holds for it (none when
// absent), with spec.externalAccess.
const testPodName = "pod-0"

var testAnnounce = map[string]string{"announced": "10.96.0.9"}

// start runs the start script as the container would (again after a
// kill: same IP, same data directory) and waits until the node answers
// PING; the script's and the server's output go to redis.log, appended.
func (p *pod) start(t *testing.T) error {
	t.Helper()
	p.cmd = exec.Command("sh", "-c", localize(p.root, forAnnounce(p.rc, forTLS(p.rc, startScript))))
	p.cmd.Env = append(os.Environ(), "POD_IP="+p.ip, "POD_NAME="+testPodName)
	log, err := os.OpenFile(filepath.Join(p.root, "redis.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	p.log = log
	p.cmd.Stdout, p.cmd.Stderr = log, log
	if err := p.cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	p.exited = exited
	go func() { exited <- p.cmd.Wait() }()
	cmd := p.cmd
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-exited
		_ = log.Close()
	})
	c := p.client(p.password)
	defer c.Close()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			exited <- err // for the cleanup
			out, _ := os.ReadFile(log.Name())
			if strings.Contains(string(out), "Address already in use") {
				return errAddrInUse
			}
			return fmt.Errorf("redis-server on %s exited:\n%s", p.ip, out)
		default:
		}
		if c.Ping(context.Background()).Err() == nil {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("redis-server on %s did not answer", p.ip)
}

// kill sends SIGKILL to the pod's redis-server (the start script execs
// it, so it is the process started) and waits until it is gone.
func (p *pod) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	err := <-p.exited
	p.exited <- err // for the cleanup
}

func (p *pod) client(password string) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: p.ip + ":6379", Password: password, MaxRetries: -1, DialTimeout: time.Second, TLSConfig: p.tls})
}

// script runs one of the pod's scripts as the kubelet would (sh -c, with
// the container's POD_IP; speaking TLS as the pod's do with spec.tls) and returns its exit error. A script still
// running after 30 s is killed and reported as hung.
func (p *pod) script(script string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", localize(p.root, forTLS(p.rc, script)))
	cmd.Env = append(os.Environ(), "POD_IP="+p.ip)
	cmd.WaitDelay = time.Second
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		return fmt.Errorf("script hung for 30 s: %s", out)
	}
	if err != nil {
		return fmt.Errorf("%w: %s", err, out)
	}
	return nil
}

func requireRedis(t *testing.T) {
	t.Helper()
	for _, bin := range []string{"redis-server", "redis-cli"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Fatalf("%s is not installed (make deps installs redis-server and redis-tools): %v", bin, err)
		}
	}
}

// TestLiveConfigAgainstRedis: every key of LiveConfigDefaults is accepted
// by CONFIG SET on a running redis-server 7.0 and its default is what the
// server reports; keys that need a restart are refused by CONFIG SET.
func TestLiveConfigAgainstRedis(t *testing.T) {
	requireRedis(t)
	// A cluster with an empty spec.config still renders the operator's
	// defaults (EffectiveConfig); the server's value is Redis's own
	// default only for the keys it does not render.
	rc := cluster()
	p := startPod(t, rc, "")
	c := p.client("")
	ctx := context.Background()
	rendered := EffectiveConfig(rc)
	for key, def := range LiveConfigDefaults {
		got, err := c.ConfigGet(ctx, key).Result()
		if err != nil {
			t.Fatalf("CONFIG GET %s: %v", key, err)
		}
		if _, own := rendered[key]; !own && got[key] != def {
			t.Errorf("%s: Redis default %q, table says %q", key, got[key], def)
		}
		if err := c.ConfigSet(ctx, key, def).Err(); err != nil {
			t.Errorf("CONFIG SET %s %q: %v", key, def, err)
		}
	}
	for _, key := range []string{"databases", "io-threads", "appenddirname", "rdbchecksum", "daemonize", "cluster-enabled"} {
		if IsLiveConfigKey(key) {
			t.Errorf("%s is listed as live", key)
		}
		cur, err := c.ConfigGet(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		if err := c.ConfigSet(ctx, key, cur[key]).Err(); err == nil {
			t.Errorf("CONFIG SET %s succeeded; the key is live and belongs in LiveConfigDefaults", key)
		}
	}
}

// TestRenderedConfigAndAuth: redis-server 7.0 loads the rendered redis.conf
// with spec.config and the included auth.conf; a password with quotes,
// backslashes, spaces and non-ASCII bytes works for clients and nothing
// else gets in.
func TestRenderedConfigAndAuth(t *testing.T) {
	requireRedis(t)
	const password = `s3cr"et \pass 'wörd'` + "\t#x"
	rc := cluster(func(rc *cachev1beta1.RedisCluster) {
		rc.Spec.Config = map[string]string{"maxmemory": "64mb", "maxmemory-policy": "allkeys-lru", "save": "900 1 300 10", "notify-keyspace-events": ""}
	})
	p := startPod(t, rc, password)
	ctx := context.Background()
	c := p.client(password)
	for key, want := range map[string]string{
		"cluster-enabled": "yes", "maxmemory": "67108864", "maxmemory-policy": "allkeys-lru", "save": "900 1 300 10",
		"appendonly": "yes", "cluster-node-timeout": "5000", "cluster-allow-replica-migration": "no",
		"cluster-announce-ip": p.ip, "masterauth": password, "requirepass": password,
	} {
		got, err := c.ConfigGet(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		if got[key] != want {
			t.Errorf("%s = %q, want %q", key, got[key], want)
		}
	}
	if err := p.client("wrong").Ping(ctx).Err(); err == nil || !strings.Contains(err.Error(), "WRONGPASS") {
		t.Errorf("wrong password: %v", err)
	}
	if err := p.client("").Set(ctx, "k", "v", 0).Err(); err == nil || !strings.Contains(err.Error(), "NOAUTH") {
		t.Errorf("no password: %v", err)
	}
	if err := p.script(readinessScript); err != nil {
		t.Errorf("readiness probe fails on a healthy node: %v", err)
	}
	// The probe fails without the password file (NOAUTH is not PONG).
	if err := os.Remove(filepath.Join(p.root, "auth", PasswordKey)); err != nil {
		t.Fatal(err)
	}
	if err := p.script(readinessScript); err == nil {
		t.Error("readiness probe passes without the password")
	}
}

// TestPreStopFailsOverMaster builds a two-node cluster (a master with all
// 16384 slots and its replica) from the rendered config with a password,
// runs the preStop hook on the master and checks the roles swapped and the
// data is still there; on the (new) replica the hook does nothing.
func TestPreStopFailsOverMaster(t *testing.T) {
	requireRedis(t)
	const password = "pre stop\"pw"
	rc := cluster()
	m, r := masterReplica(t, rc, password)
	ctx := context.Background()
	mc, rcl := m.client(password), r.client(password)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(mc.Set(ctx, "{k}1", "v1", 0).Err())
	must(mc.Do(ctx, "WAIT", 1, 5000).Err())

	must(m.script(preStopScript))

	if role := roleOf(t, mc); role != "slave" {
		t.Fatalf("old master's role after preStop: %s", role)
	}
	if role := roleOf(t, rcl); role != "master" {
		t.Fatalf("replica's role after preStop: %s", role)
	}
	if v, err := rcl.Get(ctx, "{k}1").Result(); err != nil || v != "v1" {
		t.Errorf("key after failover: %q, %v", v, err)
	}
	// On a replica the hook is a no-op that succeeds.
	must(m.script(preStopScript))
	if role := roleOf(t, mc); role != "slave" {
		t.Errorf("preStop on a replica changed its role to %s", role)
	}
}

func roleOf(t *testing.T, c *redis.Client) string {
	t.Helper()
	v, err := c.Do(context.Background(), "ROLE").Slice()
	if err != nil || len(v) == 0 {
		t.Fatalf("ROLE: %v %v", v, err)
	}
	return fmt.Sprint(v[0])
}

// eventually retries f until it succeeds or 15 s pass.
func eventually(t *testing.T, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	var err error
	for time.Now().Before(deadline) {
		if err = f(); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s: %v", what, err)
}
