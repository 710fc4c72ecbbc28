package topology

import (
	"context"
	"testing"

	"github.com/redis-operator/redis-operator/controllers/acl"
)

// Through a Pool, re-applying an unchanged user sends no ACL command to a node observed
// since; a changed user, a deleted and re-added user, and a node that restarted get ACL
// SETUSER again. Counted by the nodes themselves (INFO commandstats).
func TestApplyUsersSkipsNodesThatHaveThem(t *testing.T) {
	c, d, pooled := pooledCluster(t, 2, 1)
	ctx := context.Background()
	eps := d.endpoints()
	observeWith(t, pooled, d)
	setuserCalls := func() map[string]int {
		out := map[string]int{}
		for _, ep := range eps {
			out[ep.Name] = commandCalls(t, c.node(ep.Name).Client())["acl|setuser"]
		}
		return out
	}
	apply := func(u acl.User) map[string]int {
		t.Helper()
		before := setuserCalls()
		if err := pooled.ApplyUsers(ctx, eps, []acl.User{u}); err != nil {
			t.Fatal(err)
		}
		after := setuserCalls()
		for name := range after {
			after[name] -= before[name]
		}
		return after
	}
	want := func(what string, got map[string]int, calls int) {
		t.Helper()
		for name, n := range got {
			if n != calls {
				t.Errorf("%s: %s got %d ACL SETUSER, want %d", what, name, n, calls)
			}
		}
	}

	u := acl.User{Name: "app", Rules: []string{"~app:*", "+@read", "+ping"}, Passwords: []string{"app-pw-1"}}
	want("first apply", apply(u), 1)
	want("unchanged", apply(u), 0)
	u.Rules = append(u.Rules, "+@write")
	want("rules changed", apply(u), 1)
	u.Passwords = []string{"app-pw-1", "app-pw-2"}
	want("password added", apply(u), 1)
	want("unchanged again", apply(u), 0)

	if err := pooled.DeleteUsers(ctx, eps, []string{"app"}); err != nil {
		t.Fatal(err)
	}
	want("re-added after a delete", apply(u), 1)

	restarted := eps[0].Name
	c.node(restarted).Stop()
	c.node(restarted).Restart()
	observeWith(t, pooled, d) // sees the new run_id
	got := apply(u)
	for name, n := range got {
		wantN := 0
		if name == restarted {
			wantN = 1
		}
		if n != wantN {
			t.Errorf("after %s restarted: %s got %d ACL SETUSER, want %d", restarted, name, n, wantN)
		}
	}
	cl := userClient(c.node(restarted).Addr(), "app", "app-pw-2")
	defer cl.Close()
	if err := cl.Ping(ctx).Err(); err != nil {
		t.Fatalf("app cannot log in on %s after its restart: %v", restarted, err)
	}
}
