//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
)

// rotationGrace is the cluster's spec.auth.rotationGracePeriod here.
const rotationGrace = 20 * time.Second

// TestRotation (label rotation): R12. A 3×1 cluster with the exporter
// sidecar takes its password from a Secret that is rotated twice in place
// under writes. For each rotation: the new password is accepted by every
// node before the operator's Secret hands it to clients; the old one keeps
// working until the grace period ended and is refused afterwards;
// replication stays up everywhere; no pod restarts; every exporter still
// scrapes its node (it logs in as its own user); a client that follows the
// operator's Secret sees no failed authentication; status shows the new
// version, never the password; no
// password shows in the operator's log or in events. Then the source moves
// to a Vault that cannot be reached: CredentialsReady=False/VaultUnreachable
// with one event, and Redis keeps serving with the last password.
func TestRotation(t *testing.T) {
	tier(t, tierCI)
	sideBySide(t) // see doc.go
	scenario(t, "rotation/secret-twice-then-vault-down")
	const name = "rotation"
	ctx := context.Background()
	ns := "e2e-" + name
	if err := ensureNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	passwords := []string{"rot0-" + randomToken(), "rot1-" + randomToken(), "rot2-" + randomToken()}
	src := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "rotation-source"},
		StringData: map[string]string{"password": passwords[0]},
	}
	if err := env.k8s.Create(ctx, src); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.k8s.Delete(context.Background(), src) })
	c := newCluster(t, name, func(rc *cachev1beta1.RedisCluster) {
		rc.Spec.Auth = &cachev1beta1.AuthSpec{
			SecretRef:           &cachev1beta1.SecretKeySelector{Name: src.Name, Key: "password"},
			RotationGracePeriod: &metav1.Duration{Duration: rotationGrace},
		}
		rc.Spec.Exporter.Enabled = true
		// The default, oliver006/redis_exporter:v1.67.0, is not in the
		// plane's registry: `make images` builds redis_exporter from
		// Debian bookworm's package, 1.45.0, tagged as oliver006 tags it.
		rc.Spec.Exporter.Image = "oliver006/redis_exporter:v1.45.0"
	})
	rc := c.waitReady(5 * time.Minute)
	checkExportersUp(t, c, "before the rotations")
	if c.password() != passwords[0] {
		t.Fatal("the operator's Secret does not hold the source password")
	}
	checkNoSecretOnDisk(t, c.ns, passwords[0])
	pods := map[string]podRun{}
	for _, p := range c.pods() {
		pods[p.Name] = runOf(p)
	}
	fw := startFollowingWriter(t, c)
	fw.waitWrites(50, time.Minute)

	for round := 1; round <= 2; round++ {
		old, next := passwords[round-1], passwords[round]
		before := rc.Status.Credentials.Version
		if err := env.k8s.Get(ctx, client.ObjectKeyFromObject(src), src); err != nil {
			t.Fatal(err)
		}
		src.Data = map[string][]byte{"password": []byte(next)}
		if err := env.k8s.Update(ctx, src); err != nil {
			t.Fatal(err)
		}

		// The moment clients get the new password, every node takes it.
		c.poll(fmt.Sprintf("round %d: Secret switched", round), 2*time.Minute, func() (bool, string) {
			return c.password() == next, "the operator's Secret still holds the old password"
		})
		switchedAt := time.Now()
		for _, p := range c.pods() {
			for _, pw := range []string{next, old} {
				if err := pingWith(p.Status.PodIP, pw); err != nil {
					t.Fatalf("round %d: %s in the grace period refuses a password: %v", round, p.Name, err)
				}
			}
		}
		if got := c.get(); got.Status.Credentials == nil || got.Status.Credentials.RotationStep == "" {
			t.Logf("round %d: rotation step not seen in the grace period (status %+v)", round, got.Status.Credentials)
		}

		// Done: version moved, the old password is refused, only after the grace period.
		c.poll(fmt.Sprintf("round %d: rotation finished", round), 3*time.Minute, func() (bool, string) {
			got := c.get()
			cr := got.Status.Credentials
			return cr != nil && cr.RotationStep == "" && cr.Version != before && cr.LastRotationTime != nil,
				fmt.Sprintf("credentials %+v", cr)
		})
		if elapsed := time.Since(switchedAt); elapsed < rotationGrace-2*time.Second {
			t.Fatalf("round %d: old password removed %s after the switch, before the grace period", round, elapsed)
		}
		for _, p := range c.pods() {
			if err := pingWith(p.Status.PodIP, next); err != nil {
				t.Fatalf("round %d: %s refuses the new password: %v", round, p.Name, err)
			}
			if err := pingWith(p.Status.PodIP, old); err == nil || !strings.Contains(err.Error(), "WRONGPASS") {
				t.Fatalf("round %d: %s after the grace period, old password: %v", round, p.Name, err)
			}
		}
		rc = c.waitReady(2 * time.Minute)
		c.checkConverged(rc)
		checkLinksUp(t, c, next)
		// The sidecars, which read their password when they started, still scrape.
		checkExportersUp(t, c, fmt.Sprintf("round %d", round))
		if cr := rc.Status.Credentials; strings.Contains(fmt.Sprintf("%+v", cr), next) {
			t.Fatal("status.credentials shows the password")
		}
	}

	checkNoSecretOnDisk(t, c.ns, passwords...)

	for _, p := range c.pods() {
		if was, ok := pods[p.Name]; !ok || was != runOf(p) {
			t.Fatalf("pod %s restarted during the rotations (%+v, now %+v)", p.Name, was, runOf(p))
		}
	}
	res := fw.stop()
	if res.authFailures != 0 || res.writes == 0 {
		t.Fatalf("client following the Secret: %d writes, %d failed authentications (%s)", res.writes, res.authFailures, res.lastAuthErr)
	}
	t.Logf("client following the Secret: %d writes, 0 failed authentications, %d other errors", res.writes, res.otherFailures)

	// Vault down: the last good password keeps serving.
	vaultToken := "tok-" + randomToken()
	tok := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "vault-token"}, StringData: map[string]string{"token": vaultToken}}
	if err := env.k8s.Create(ctx, tok); err != nil {
		t.Fatal(err)
	}
	c.update(func(rc *cachev1beta1.RedisCluster) {
		rc.Spec.Auth.SecretRef = nil
		rc.Spec.Auth.Vault = &cachev1beta1.VaultSource{
			Address:        "https://127.0.0.1:1", // nothing listens on port 1; https, as the operator refuses plain http
			Path:           "redis/rotation",
			TokenSecretRef: &cachev1beta1.SecretKeySelector{Name: tok.Name, Key: "token"},
		}
	})
	c.poll("CredentialsReady=False/VaultUnreachable", 2*time.Minute, func() (bool, string) {
		cond := meta.FindStatusCondition(c.get().Status.Conditions, cachev1beta1.RedisClusterCredentialsReadyCondition)
		return cond != nil && cond.Status == metav1.ConditionFalse && cond.Reason == cachev1beta1.RedisClusterVaultUnreachableReason, fmt.Sprintf("%+v", cond)
	})
	live := passwords[2]
	cl := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs: []string{addr(c.pods()[0].Status.PodIP)}, Password: live, Protocol: 2, DisableIdentity: true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	})
	defer cl.Close()
	// Several passes later Redis still serves with the last good password.
	time.Sleep(15 * time.Second)
	for i := range 100 {
		rctx, cancel := redisCtx()
		err := cl.Set(rctx, fmt.Sprintf("vault-down:%d", i), i, 0).Err()
		cancel()
		if err != nil {
			t.Fatalf("write with the last good password while Vault is down: %v", err)
		}
	}
	if c.password() != live {
		t.Fatal("the operator's Secret changed while Vault is down")
	}
	warnings := 0
	for _, e := range c.events() {
		if e.Reason == cachev1beta1.RedisClusterVaultUnreachableReason {
			warnings += eventCount(e)
		}
	}
	if warnings != 1 {
		t.Fatalf("%d VaultUnreachable events, want one for the transition", warnings)
	}

	// Nothing secret in events or in the operator's log.
	secrets := append(passwords, vaultToken)
	for _, e := range c.events() {
		for _, s := range secrets {
			if strings.Contains(e.Message, s) {
				t.Fatalf("event %s shows a secret: %s", e.Reason, e.Message)
			}
		}
	}
	env.opLogs.flush()
	logText, err := os.ReadFile(env.opLog)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range secrets {
		if strings.Contains(string(logText), s) {
			t.Fatalf("the operator's log shows secret #%d", i)
		}
	}
	if !strings.Contains(string(logText), "Password rotation finished") {
		t.Fatal("the operator's log has no rotation line: was the right log searched?")
	}
}

// checkExportersUp scrapes the redis_exporter sidecar of every pod (pod IP, port 9121) and
// fails unless each reports redis_up 1: it logged in to its node.
func checkExportersUp(t *testing.T, c *cluster, when string) {
	t.Helper()
	c.poll(when+": every exporter reports redis_up 1", time.Minute, func() (bool, string) {
		for _, p := range c.pods() {
			resp, err := http.Get("http://" + net.JoinHostPort(p.Status.PodIP, "9121") + "/metrics")
			if err != nil {
				return false, fmt.Sprintf("%s: %v", p.Name, err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				return false, fmt.Sprintf("%s: %v", p.Name, err)
			}
			if !slices.Contains(strings.Split(string(body), "\n"), "redis_up 1") {
				return false, fmt.Sprintf("%s: no redis_up 1 in the scrape", p.Name)
			}
		}
		return true, ""
	})
}

// podRun identifies one run of a pod: a restart or a recreation changes it.
type podRun struct {
	uid      string
	restarts int32
}

func runOf(p corev1.Pod) podRun {
	r := podRun{uid: string(p.UID)}
	for _, cs := range p.Status.ContainerStatuses {
		r.restarts += cs.RestartCount
	}
	return r
}

func pingWith(ip, password string) error {
	cl := redis.NewClient(nodeOptions(ip, password))
	defer cl.Close()
	ctx, cancel := redisCtx()
	defer cancel()
	return cl.Ping(ctx).Err()
}

// checkLinksUp checks master_link_status:up on every replica.
func checkLinksUp(t *testing.T, c *cluster, password string) {
	t.Helper()
	c.poll("master_link_status:up on every replica", time.Minute, func() (bool, string) {
		for _, p := range c.pods() {
			cl := redis.NewClient(nodeOptions(p.Status.PodIP, password))
			ctx, cancel := redisCtx()
			out, err := cl.Info(ctx, "replication").Result()
			cancel()
			_ = cl.Close()
			if err != nil {
				return false, fmt.Sprintf("%s: %v", p.Name, err)
			}
			info := infoMap(out)
			if info["role"] == "slave" && info["master_link_status"] != "up" {
				return false, fmt.Sprintf("%s: master_link_status:%s", p.Name, info["master_link_status"])
			}
		}
		return true, ""
	})
}

// followingWriter writes under a client that re-reads the operator's Secret
// every 500 ms and switches to a new password as soon as it appears, as a
// client that follows the grace period does.
type followingWriter struct {
	c             *cluster
	writes        atomic.Int64
	authFailures  atomic.Int64
	otherFailures atomic.Int64
	mu            sync.Mutex
	lastAuthErr   string
	stopCh        chan struct{}
	done          chan struct{}
}

type followingResult struct {
	writes, authFailures, otherFailures int64
	lastAuthErr                         string
}

func startFollowingWriter(t *testing.T, c *cluster) *followingWriter {
	w := &followingWriter{c: c, stopCh: make(chan struct{}), done: make(chan struct{})}
	addrs := []string{}
	for _, p := range c.pods() {
		addrs = append(addrs, addr(p.Status.PodIP))
	}
	password := c.password()
	go func() {
		defer close(w.done)
		newClient := func(pw string) *redis.ClusterClient {
			return redis.NewClusterClient(&redis.ClusterOptions{
				Addrs: addrs, Password: pw, Protocol: 2, DisableIdentity: true, MaxRedirects: 16,
				DialTimeout: 2 * time.Second, ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second,
				MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
			})
		}
		cl := newClient(password)
		defer func() { _ = cl.Close() }()
		lastRead := time.Now()
		for i := 0; ; i++ {
			select {
			case <-w.stopCh:
				return
			default:
			}
			if time.Since(lastRead) > 500*time.Millisecond {
				lastRead = time.Now()
				s := &corev1.Secret{}
				if err := env.k8s.Get(context.Background(), client.ObjectKey{Namespace: c.ns, Name: c.name + "-auth"}, s); err == nil {
					if pw := string(s.Data["password"]); pw != "" && pw != password {
						password = pw
						_ = cl.Close()
						cl = newClient(password)
					}
				}
			}
			ctx, cancel := redisCtx()
			err := cl.Set(ctx, fmt.Sprintf("follow:%d", i), i, 0).Err()
			cancel()
			switch {
			case err == nil:
				w.writes.Add(1)
			case strings.Contains(err.Error(), "WRONGPASS") || strings.Contains(err.Error(), "NOAUTH"):
				w.authFailures.Add(1)
				w.mu.Lock()
				w.lastAuthErr = err.Error()
				w.mu.Unlock()
			default:
				w.otherFailures.Add(1)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	t.Cleanup(func() { w.stop() })
	return w
}

func (w *followingWriter) waitWrites(n int64, timeout time.Duration) {
	w.c.poll(fmt.Sprintf("%d writes", n), timeout, func() (bool, string) {
		return w.writes.Load() >= n, fmt.Sprintf("%d writes", w.writes.Load())
	})
}

func (w *followingWriter) stop() followingResult {
	select {
	case <-w.stopCh:
	default:
		close(w.stopCh)
	}
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return followingResult{w.writes.Load(), w.authFailures.Load(), w.otherFailures.Load(), w.lastAuthErr}
}
