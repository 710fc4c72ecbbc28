package topology

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/redis-operator/redis-operator/controllers/acl"
	"github.com/redis-operator/redis-operator/test/redistest"
)

func userClient(addr, user, password string) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: addr, Username: user, Password: password, Protocol: 2, DisableIdentity: true, MaxRetries: -1})
}

// ApplyUsers sets a user on every node; re-applying changes its rules and passwords in place
// without closing its open connection; DeleteUsers makes it fail to log in everywhere and
// closes its connection. Errors never carry a password or its hash.
func TestApplyAndDeleteUsers(t *testing.T) {
	const admin, pw1, pw2 = "admin-pw", "user pw \"1\"", "user-pw-2"
	c := newTestCluster(t, redistest.Options{Password: admin}, Options{Password: admin})
	all := c.addShards(1, 2)
	d := c.desired(1, all)
	c.reconcile(d, nil)
	eps := d.endpoints()
	ctx := context.Background()

	u := acl.User{Name: "app", Rules: []string{"~app:*", "+@read", "+ping", "+client|id"}, Passwords: []string{pw1}}
	for range 2 {
		if err := c.engine.ApplyUsers(ctx, eps, []acl.User{u}); err != nil {
			t.Fatal(err)
		}
	}
	var open *redis.Client
	for _, ep := range eps {
		cl := userClient(ep.Addr, "app", pw1)
		defer cl.Close()
		if err := cl.Ping(ctx).Err(); err != nil {
			t.Fatalf("%s: app cannot log in: %v", ep.Name, err)
		}
		if err := cl.Do(ctx, "SET", "app:1", "x").Err(); err == nil || !strings.Contains(err.Error(), "NOPERM") {
			t.Fatalf("%s: app may write with +@read only: %v", ep.Name, err)
		}
		open = cl
	}
	id := open.ClientID(ctx).Val()
	if id == 0 {
		t.Fatal("no client id")
	}

	// Rules changed in place, a second password added: the open connection stays and gets
	// the new permission at once.
	u.Rules = []string{"~app:*", "+@read", "+@write", "+ping", "+client|id"}
	u.Passwords = []string{pw1, pw2}
	if err := c.engine.ApplyUsers(ctx, eps, []acl.User{u}); err != nil {
		t.Fatal(err)
	}
	if got := open.ClientID(ctx).Val(); got != id {
		t.Fatalf("connection replaced (%d, was %d)", got, id)
	}
	if err := open.Do(ctx, "SET", "app:2", "v").Err(); err != nil && !errors.Is(err, redis.Nil) && !strings.Contains(err.Error(), "MOVED") {
		t.Fatalf("app cannot write after its rules changed: %v", err)
	}
	for _, ep := range eps {
		for _, pw := range []string{pw1, pw2} {
			cl := userClient(ep.Addr, "app", pw)
			if err := cl.Ping(ctx).Err(); err != nil {
				t.Fatalf("%s: app refused with one of its passwords: %v", ep.Name, err)
			}
			_ = cl.Close()
		}
	}
	// Only pw2 left: pw1 refused.
	u.Passwords = []string{pw2}
	if err := c.engine.ApplyUsers(ctx, eps, []acl.User{u}); err != nil {
		t.Fatal(err)
	}
	for _, ep := range eps {
		cl := userClient(ep.Addr, "app", pw1)
		if err := cl.Ping(ctx).Err(); err == nil || !strings.Contains(err.Error(), "WRONGPASS") {
			t.Fatalf("%s: removed password still accepted: %v", ep.Name, err)
		}
		_ = cl.Close()
	}

	// A rule Redis refuses: the error names the user, not the password or its hash.
	bad := acl.User{Name: "app", Rules: []string{"+nosuch"}, Passwords: []string{pw1}}
	err := c.engine.ApplyUsers(ctx, eps, []acl.User{bad})
	if err == nil || !strings.Contains(err.Error(), "app") {
		t.Fatalf("bad rule: %v", err)
	}
	if strings.Contains(err.Error(), pw1) || strings.Contains(err.Error(), acl.Hash(pw1)) {
		t.Fatalf("error carries a secret: %v", err)
	}
	if err := c.engine.ApplyUsers(ctx, eps, []acl.User{{Name: "default", Passwords: []string{"x"}}}); !errors.Is(err, ErrInvalidDesired) {
		t.Fatalf("default user applied: %v", err)
	}

	for range 2 {
		if err := c.engine.DeleteUsers(ctx, eps, []string{"app"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := open.Ping(ctx).Err(); err == nil {
		t.Fatal("the deleted user's connection still works")
	}
	for _, ep := range eps {
		cl := userClient(ep.Addr, "app", pw2)
		if err := cl.Ping(ctx).Err(); err == nil || !strings.Contains(err.Error(), "WRONGPASS") {
			t.Fatalf("%s: deleted user logs in: %v", ep.Name, err)
		}
		_ = cl.Close()
		if err := redistest.Accepts(ep.Addr, admin); err != nil {
			t.Fatalf("%s: default user refused: %v", ep.Name, err)
		}
	}
}
