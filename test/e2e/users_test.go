//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/acl"
)

// usersRules are the e2e user's ACL rules: its keys, reads and writes, WAIT and PING
// (@connection), and the CLUSTER subcommands a cluster client discovers slots with.
const usersRules = "~e2e:* +@read +@write +@connection +cluster|slots +cluster|shards +cluster|nodes"

// TestUsers (label users): an ACL user of spec.users whose password is in Vault KV v2, read
// with the Kubernetes auth method. The user is created on every node (its Secret gets the
// password only once every node has it); a client logs in as the user and writes with WAIT 1;
// a new KV version is rotated under those writes while the client follows the documented
// switch (re-read <cluster>-user-<name>, use its password for new connections): no failed
// authentication, both passwords during the grace period, then only the new one; no
// acknowledged write lost; no password on the data volumes. A pod deleted and recreated has
// the user again. Its rules are changed: a connection it opened before stays and may no
// longer write. Then the user is removed from spec.users: it can no longer log in anywhere.
// No password or hash shows in status, events or the operator's log.
func TestUsers(t *testing.T) {
	tier(t, tierCI)
	sideBySide(t) // see doc.go
	scenario(t, "users/vault-user-created-rotated-removed")
	const name = "users"
	ctx := context.Background()
	ns := "e2e-" + name
	if err := ensureNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	vault, _, _ := startVaultForNamespace(t, ns, "secret/data/users/*")
	pw1, pw2 := "user1-"+randomToken(), "user2-"+randomToken()
	put := func(pw string) int {
		s, err := vault.KVv2("secret").Put(ctx, "users/app", map[string]any{"password": pw})
		if err != nil {
			t.Fatal(err)
		}
		return s.VersionMetadata.Version
	}
	put(pw1)

	const grace = 20 * time.Second
	c := newCluster(t, name, func(rc *cachev1beta1.RedisCluster) {
		rc.Spec.Users = []cachev1beta1.UserSpec{{
			Name: "app", Rules: usersRules,
			RotationGracePeriod: &metav1.Duration{Duration: grace},
			PasswordFrom: cachev1beta1.UserPasswordSource{Vault: &cachev1beta1.VaultSource{
				Address: vault.Address(), CASecretRef: vaultCARef(), Mount: "secret", Path: "users/app", Key: "password",
				Role: vaultRole, AuthMount: "kubernetes", Audience: vaultAudience, ServiceAccountName: vaultLoginSA,
				RefreshInterval: &metav1.Duration{Duration: 5 * time.Second},
			}},
		}}
	})
	c.waitReady(5 * time.Minute)
	waitUser(c, "#v1")
	if got := userPassword(c); got != pw1 {
		t.Fatal("the user's Secret does not hold KV version 1")
	}
	for _, p := range c.pods() {
		if err := userPing(p.Status.PodIP, pw1); err != nil {
			t.Fatalf("%s: the user cannot log in: %v", p.Name, err)
		}
	}

	// The client: follows the user's Secret; a checker opens new connections all along.
	f := followUserSecret(t, c)
	cl := userClusterClient(c, f.current)
	w := startWriter(t, cl, "e2e:users", writerOptions{Wait: true})
	w.waitWrites(50, time.Minute)

	if v := put(pw2); v != 2 {
		t.Fatalf("KV version %d", v)
	}
	c.poll("the user's Secret switched to KV version 2", 2*time.Minute, func() (bool, string) {
		return userPassword(c) == pw2, "still the first password"
	})
	for _, p := range c.pods() {
		for _, pw := range []string{pw1, pw2} {
			if err := userPing(p.Status.PodIP, pw); err != nil {
				t.Fatalf("%s in the grace period refuses a password: %v", p.Name, err)
			}
		}
	}
	waitUser(c, "#v2")
	if u := c.get().Status.Users[0]; u.LastRotationTime == nil {
		t.Fatalf("status.users %+v", u)
	}
	for _, p := range c.pods() {
		if err := userPing(p.Status.PodIP, pw1); err == nil || !strings.Contains(err.Error(), "WRONGPASS") {
			t.Fatalf("%s after the grace period, old password: %v", p.Name, err)
		}
	}
	w.waitWrites(50, time.Minute)
	res := w.verify(c.clusterClient())
	for _, fl := range res.Failed {
		if strings.Contains(fl.err, "WRONGPASS") || strings.Contains(fl.err, "NOAUTH") {
			t.Fatalf("the writer failed to authenticate: %s", fl.err)
		}
	}
	logins, failed, last := f.stop()
	if failed != 0 || logins == 0 {
		t.Fatalf("new connections following the Secret: %d, %d failed (%s)", logins, failed, last)
	}
	t.Logf("users: %s; %d new connections following the Secret, 0 failed", res, logins)

	// A restarted pod has the user, with the new password only, from auth.conf.
	victim := c.pods()[len(c.pods())-1]
	if err := env.k8s.Delete(ctx, &victim); err != nil {
		t.Fatal(err)
	}
	c.poll("the deleted pod back", 3*time.Minute, func() (bool, string) {
		p := &corev1.Pod{}
		// NotFound until its StatefulSet has made it again.
		if err := env.k8s.Get(ctx, client.ObjectKeyFromObject(&victim), p); err != nil || p.UID == victim.UID || p.Status.PodIP == "" {
			return false, fmt.Sprintf("not back: %v", err)
		}
		err := userPing(p.Status.PodIP, pw2)
		return err == nil, fmt.Sprint(err)
	})

	checkNoSecretOnDisk(t, ns, pw1, pw2)

	// Rules changed in place: writes refused, reads still allowed, on a connection opened before.
	conn := redis.NewClient(func() *redis.Options {
		o := nodeOptions(c.pods()[0].Status.PodIP, pw2)
		o.Username = "app"
		return o
	}())
	defer conn.Close()
	if err := conn.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	c.update(func(rc *cachev1beta1.RedisCluster) {
		rc.Spec.Users[0].Rules = "~e2e:* +@read +@connection +cluster|slots +cluster|shards +cluster|nodes"
	})
	c.poll("the user's new rules on an open connection", time.Minute, func() (bool, string) {
		rctx, cancel := redisCtx()
		defer cancel()
		err := conn.Do(rctx, "SET", "e2e:ro", "x").Err()
		return err != nil && strings.Contains(err.Error(), "NOPERM"), fmt.Sprint(err)
	})
	if err := conn.Ping(ctx).Err(); err != nil {
		t.Fatalf("the open connection after the rules changed: %v", err)
	}

	// Removed: the user can no longer log in anywhere, and its Secret is gone.
	c.update(func(rc *cachev1beta1.RedisCluster) { rc.Spec.Users = nil })
	c.poll("the user deleted on every node", 2*time.Minute, func() (bool, string) {
		for _, p := range c.pods() {
			if err := userPing(p.Status.PodIP, pw2); err == nil || !strings.Contains(err.Error(), "WRONGPASS") {
				return false, fmt.Sprintf("%s: %v", p.Name, err)
			}
		}
		if err := env.k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-user-app"}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
			return false, fmt.Sprintf("user Secret: %v", err)
		}
		return len(c.get().Status.Users) == 0, "status.users not empty"
	})
	c.waitReady(2 * time.Minute)

	logText := c.checkSecretsHidden([]string{pw1, pw2, acl.Hash(pw1), acl.Hash(pw2)})
	if !strings.Contains(logText, "ACL user password rotation finished") {
		t.Fatal("the operator's log has no user rotation line: was the right log searched?")
	}
}

// waitUser waits until status.users shows the user applied at a version ending in version
// with no rotation under way.
func waitUser(c *cluster, version string) {
	c.poll("status.users at "+version, 3*time.Minute, func() (bool, string) {
		us := c.get().Status.Users
		ok := len(us) == 1 && us[0].Name == "app" && us[0].Applied && us[0].RotationStep == "" &&
			strings.HasSuffix(us[0].Version, version) && us[0].Source == "Vault"
		return ok, fmt.Sprintf("status.users %+v", us)
	})
}

func userPassword(c *cluster) string {
	s := &corev1.Secret{}
	if err := env.k8s.Get(context.Background(), client.ObjectKey{Namespace: c.ns, Name: c.name + "-user-app"}, s); err != nil {
		return ""
	}
	return string(s.Data["password"])
}

func userPing(ip, password string) error {
	o := nodeOptions(ip, password)
	o.Username = "app"
	cl := redis.NewClient(o)
	defer cl.Close()
	ctx, cancel := redisCtx()
	defer cancel()
	return cl.Ping(ctx).Err()
}

// userClusterClient logs in as the user with the password pw gives at each new connection.
func userClusterClient(c *cluster, pw func() string) *redis.ClusterClient {
	var addrs []string
	for _, p := range c.pods() {
		addrs = append(addrs, addr(p.Status.PodIP))
	}
	cl := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:               addrs,
		CredentialsProvider: func() (string, string) { return "app", pw() },
		Protocol:            2, DisableIdentity: true, MaxRedirects: 16,
		DialTimeout: 2 * time.Second, ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	})
	c.t.Cleanup(func() { _ = cl.Close() })
	return cl
}

// userFollower re-reads the user's Secret every 500 ms, as docs/tls-and-users.md tells clients to, and
// meanwhile logs in on a new connection to every pod with the password it holds.
type userFollower struct {
	mu       sync.Mutex
	password string
	lastErr  string
	logins   atomic.Int64
	failed   atomic.Int64
	stopCh   chan struct{}
	done     chan struct{}
}

func followUserSecret(t *testing.T, c *cluster) *userFollower {
	f := &userFollower{password: userPassword(c), stopCh: make(chan struct{}), done: make(chan struct{})}
	var ips []string
	for _, p := range c.pods() {
		ips = append(ips, p.Status.PodIP)
	}
	go func() {
		defer close(f.done)
		last := time.Now()
		for {
			select {
			case <-f.stopCh:
				return
			case <-time.After(100 * time.Millisecond):
			}
			if time.Since(last) > 500*time.Millisecond {
				last = time.Now()
				if pw := userPassword(c); pw != "" {
					f.mu.Lock()
					f.password = pw
					f.mu.Unlock()
				}
			}
			pw := f.current()
			for _, ip := range ips {
				f.logins.Add(1)
				if err := userPing(ip, pw); err != nil && (strings.Contains(err.Error(), "WRONGPASS") || strings.Contains(err.Error(), "NOAUTH")) {
					f.failed.Add(1)
					f.mu.Lock()
					f.lastErr = err.Error()
					f.mu.Unlock()
				}
			}
		}
	}()
	t.Cleanup(func() { f.stop() })
	return f
}

func (f *userFollower) current() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.password
}

func (f *userFollower) stop() (logins, failed int64, last string) {
	select {
	case <-f.stopCh:
	default:
		close(f.stopCh)
	}
	<-f.done
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.logins.Load(), f.failed.Load(), f.lastErr
}
