package topology

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/redis-operator/redis-operator/test/redistest"
)

// A rotation through the three operations on a master and its replica: the new password
// works on every node from AddPassword on while the old one keeps working, replication
// re-authenticates with the new masterauth, and only RemoveOtherPasswords refuses the old one,
// writing no password to disk. Every operation can be repeated (a resumed
// rotation), and errors never carry a password.
func TestPasswordRotation(t *testing.T) {
	const oldPw, newPw = "old-secret-1", "new secret \"2\""
	c := newTestCluster(t, redistest.Options{Password: oldPw}, Options{})
	all := c.addShards(1, 2)
	d := c.desired(1, all)
	c.reconcile(d, nil)
	master, replica := c.nodes[all[0]][0], c.nodes[all[0]][1]
	if role := master.Do("ROLE").([]any)[0]; role != "master" {
		master, replica = replica, master
	}
	eps := d.endpoints()
	ctx := context.Background()
	cl := c.client(d)
	if err := cl.Set(ctx, "k", "v1", 0).Err(); err != nil {
		t.Fatal(err)
	}

	for range 2 {
		if err := c.engine.AddPassword(ctx, eps, newPw); err != nil {
			t.Fatal(err)
		}
	}
	for _, ep := range eps {
		for _, pw := range []string{oldPw, newPw} {
			if err := redistest.Accepts(ep.Addr, pw); err != nil {
				t.Fatalf("%s after AddPassword: %v", ep.Name, err)
			}
		}
	}

	for range 2 {
		if err := c.engine.SetMasterAuth(ctx, eps, newPw); err != nil {
			t.Fatal(err)
		}
	}
	if got := replica.Do("CONFIG", "GET", "masterauth").([]any)[1]; got != newPw {
		t.Fatal("masterauth not set on the replica")
	}
	// Make the replica reconnect: it must authenticate with the new masterauth.
	master.Do("CLIENT", "KILL", "TYPE", "replica")
	redistest.WaitLinkUp(t, replica.Addr(), newPw)

	// An engine that already uses the new password (the Secret was updated) finishes.
	after := New(Options{Password: newPw})
	for range 2 {
		if err := after.RemoveOtherPasswords(ctx, eps, newPw, oldPw); err != nil {
			t.Fatal(err)
		}
	}
	for _, ep := range eps {
		if err := redistest.Accepts(ep.Addr, newPw); err != nil {
			t.Fatalf("%s: new password refused: %v", ep.Name, err)
		}
		if err := redistest.Accepts(ep.Addr, oldPw); err == nil || !errors.Is(classify(err), ErrAuth) {
			t.Fatalf("%s: old password still accepted or wrong error: %v", ep.Name, err)
		}
	}
	mcl := redis.NewClient(&redis.Options{Addr: master.Addr(), Password: newPw, Protocol: 2, DisableIdentity: true})
	defer mcl.Close()
	if err := mcl.Do(ctx, "CLIENT", "KILL", "TYPE", "replica").Err(); err != nil {
		t.Fatal(err)
	}
	redistest.WaitLinkUp(t, replica.Addr(), newPw)
	for _, n := range []*redistest.Node{master, replica} {
		if files := n.FilesHolding(newPw); len(files) > 0 {
			t.Fatalf("%s: the new password is on disk in %v", n.Addr(), files)
		}
	}
	newCl := redistest.ClusterClient(t, newPw, master.Addr(), replica.Addr())
	if got, err := newCl.Get(ctx, "k").Result(); err != nil || got != "v1" {
		t.Fatalf("GET k with the new password = %q, %v", got, err)
	}

	// A wrong login: ErrAuth, and neither the tried nor the set password shows.
	bad := New(Options{Password: "nope-guess"})
	err := bad.AddPassword(ctx, eps, "third-secret", "other-guess")
	if !errors.Is(err, ErrAuth) {
		t.Fatalf("wrong login: %v", err)
	}
	for _, s := range []string{"nope-guess", "third-secret", "other-guess"} {
		if strings.Contains(err.Error(), s) {
			t.Fatalf("error shows a password: %v", err)
		}
	}
	if err := c.engine.AddPassword(ctx, eps, ""); !errors.Is(err, ErrInvalidDesired) {
		t.Fatalf("empty password: %v", err)
	}
}

// Turning authentication on: the three operations run by an engine without a password on nodes
// without one (a nopass node accepts the login with the new password) leave every node
// requiring the new password (a client without one gets NOAUTH), with masterauth set and
// persisted, and replication re-authenticating. Once the nodes have a password, a wrong login
// is refused with ErrAuth and changes nothing.
func TestPasswordTurnedOn(t *testing.T) {
	const newPw = "first password"
	c := newTestCluster(t, redistest.Options{}, Options{})
	all := c.addShards(1, 2)
	d := c.desired(1, all)
	c.reconcile(d, nil)
	master, replica := c.nodes[all[0]][0], c.nodes[all[0]][1]
	if role := master.Do("ROLE").([]any)[0]; role != "master" {
		master, replica = replica, master
	}
	eps := d.endpoints()
	ctx := context.Background()
	for range 2 {
		if err := c.engine.AddPassword(ctx, eps, newPw, ""); err != nil {
			t.Fatal(err)
		}
		if err := c.engine.SetMasterAuth(ctx, eps, newPw, ""); err != nil {
			t.Fatal(err)
		}
		if err := c.engine.RemoveOtherPasswords(ctx, eps, newPw, ""); err != nil {
			t.Fatal(err)
		}
	}
	redistest.CheckAuthOn(t, newPw, master, replica)

	bad := New(Options{Password: "nope-guess"})
	if err := bad.SetMasterAuth(ctx, eps, "other-guess"); !errors.Is(err, ErrAuth) {
		t.Fatalf("wrong login on nodes with a password: %v", err)
	}
	mcl := redis.NewClient(&redis.Options{Addr: master.Addr(), Password: newPw, Protocol: 2, DisableIdentity: true})
	defer mcl.Close()
	if got, err := mcl.ConfigGet(ctx, "masterauth").Result(); err != nil || got["masterauth"] != newPw {
		t.Fatalf("masterauth changed by a refused login: %v", err)
	}
}
