package rotation

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/acl"
	"github.com/redis-operator/redis-operator/controllers/resources"
	"github.com/redis-operator/redis-operator/controllers/topology"
)

func userPing(addr, user, pw string) error {
	cl := redis.NewClient(&redis.Options{Addr: addr, Username: user, Password: pw, Protocol: 2, DisableIdentity: true, MaxRetries: -1})
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return cl.Ping(ctx).Err()
}

// TestAdvanceUser runs an ACL user's life through Advance with UserOps on a real master and
// replica: created from no password (its Secret gets the password only once both nodes have
// the user), rotated while a client that follows the Secret logs in again and again (no
// failed authentication; both passwords work in the grace period, then only the new one),
// and the default user is never touched.
func TestAdvanceUser(t *testing.T) {
	const admin, pw1, pw2 = "admin-pw", "user pw 1", "user-pw-2"
	_, _, eps := rotationCluster(t, admin)
	eng := topology.New(topology.Options{Password: admin})
	ops := UserOps{Name: "app", Rules: []string{"~app:*", "+@read", "+ping"}, Apply: eng.ApplyUsers}
	ctx := context.Background()
	store := &secretStore{}
	published := func() string { return store.load().Live }

	// Created: the pending password becomes the live one, on every node first.
	st := State{Next: pw1, PendingVersion: "v1"}
	store.st = st
	saved := 0
	save := func(next State) error {
		for _, ep := range eps {
			if next.Live != "" {
				if err := userPing(ep.Addr, "app", next.Live); err != nil {
					t.Fatalf("Secret saved with a password %s does not accept: %v", ep.Name, err)
				}
			}
		}
		saved++
		return store.save(next)
	}
	out, err := Advance(ctx, ops, eps, &st, time.Minute, time.Now(), save)
	if err != nil || !out.Done || published() != pw1 || st.InProgress() {
		t.Fatalf("creation: %+v %v, state %+v", out, err, st.Step())
	}

	// A client that follows the Secret: it logs in with what the Secret says, each time.
	var failures, logins atomic.Int64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			for _, ep := range eps {
				if err := userPing(ep.Addr, "app", published()); err != nil {
					failures.Add(1)
				}
				logins.Add(1)
			}
		}
	}()

	st = State{Live: pw1, Next: pw2, PendingVersion: "v2"}
	store.st = st
	start := time.Now()
	out, err = Advance(ctx, ops, eps, &st, time.Minute, start, save)
	if err != nil || out.Step != GracePeriod || published() != pw2 {
		t.Fatalf("rotation to the grace period: %+v %v", out, err)
	}
	for _, ep := range eps {
		for _, pw := range []string{pw1, pw2} {
			if err := userPing(ep.Addr, "app", pw); err != nil {
				t.Fatalf("%s in the grace period: %v", ep.Name, err)
			}
		}
	}
	time.Sleep(200 * time.Millisecond)
	out, err = Advance(ctx, ops, eps, &st, time.Minute, start.Add(time.Minute), save)
	if err != nil || !out.Done || st.InProgress() {
		t.Fatalf("end of the grace period: %+v %v", out, err)
	}
	time.Sleep(200 * time.Millisecond)
	close(stop)
	<-done
	for _, ep := range eps {
		if err := userPing(ep.Addr, "app", pw1); err == nil || !strings.Contains(err.Error(), "WRONGPASS") {
			t.Fatalf("%s after the grace period, old password: %v", ep.Name, err)
		}
		if err := userPing(ep.Addr, "app", pw2); err != nil {
			t.Fatal(err)
		}
		if err := userPing(ep.Addr, "default", admin); err != nil {
			t.Fatalf("default user: %v", err)
		}
	}
	if failures.Load() != 0 || logins.Load() == 0 {
		t.Fatalf("client following the Secret: %d logins, %d failed", logins.Load(), failures.Load())
	}

	// A rule Redis refuses fails the step and publishes nothing.
	bad := UserOps{Name: "app", Rules: []string{"+nosuch"}, Apply: eng.ApplyUsers}
	st = State{Live: pw2, Next: "pw-3", PendingVersion: "v3"}
	store.st = st
	out, err = Advance(ctx, bad, eps, &st, time.Minute, time.Now(), save)
	if err == nil || out.Step != AddingPassword || published() != pw2 || errors.Is(err, topology.ErrAuth) {
		t.Fatalf("bad rule: %+v %v", out, err)
	}
}

// TestUserSecret: the user Secret carries the username, the live password once there is
// one, the rotation keys while one runs, and reads back to the same state.
func TestUserSecret(t *testing.T) {
	rc := &cachev1beta1.RedisCluster{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "ns", UID: "u"}}
	for _, st := range []State{
		{Next: "pw-aaaa", PendingVersion: "v1"},
		{Live: "pw-aaaa"},
		{Live: "pw-bbbb", Previous: "pw-aaaa", PendingVersion: "v2", SwitchedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)},
	} {
		sec := UserSecret(rc, "app", st)
		if got := Read(sec); got != st {
			t.Errorf("round trip of %q: %q", st.Step(), got.Step())
		}
		if sec.Name != "demo-user-app" || string(sec.Data[resources.UsernameKey]) != "app" || sec.Labels[resources.LabelUser] != "app" {
			t.Errorf("Secret %s %v %v", sec.Name, sec.Labels, sec.Data[resources.UsernameKey])
		}
		if _, ok := sec.Data[resources.AuthConfKey]; ok {
			t.Error("a user Secret holds auth.conf")
		}
		if got := len(st.Passwords()); got == 0 || strings.Contains(acl.ConfLines([]acl.User{{Name: "app", Passwords: st.Passwords()}}, resources.QuoteConfigValue), "pw-") {
			t.Errorf("passwords %d, or in plain text in the conf lines", got)
		}
	}
}
