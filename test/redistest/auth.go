package redistest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Accepts PINGs the node at addr with password ("" sends no AUTH) and returns the reply's
// error: nil when the password is accepted, NOAUTH or WRONGPASS otherwise.
func Accepts(addr, password string) error {
	cl := redis.NewClient(&redis.Options{Addr: addr, Password: password, Protocol: 2, DisableIdentity: true, MaxRetries: -1})
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return cl.Ping(ctx).Err()
}

// WaitLinkUp waits up to 30 s until the replica at addr reports master_link_status:up
// (INFO replication), failing t otherwise.
func WaitLinkUp(t testing.TB, addr, password string) {
	t.Helper()
	cl := redis.NewClient(&redis.Options{Addr: addr, Password: password, Protocol: 2, DisableIdentity: true})
	defer cl.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		info, err := cl.Info(context.Background(), "replication").Result()
		if err == nil && strings.Contains(info, "master_link_status:up") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("redistest: %s: replication link not up: %v\n%s", addr, err, info)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// CheckAuthOn checks that password is the one password of a master and its replica: each
// accepts it and refuses a client without one (NOAUTH), has it as masterauth, and holds it
// in no file of its directory; and that replication re-authenticates with it (the master
// drops its replica links, the replica's link comes back up).
func CheckAuthOn(t testing.TB, password string, master, replica *Node) {
	t.Helper()
	ctx := context.Background()
	for _, n := range []*Node{master, replica} {
		if err := Accepts(n.Addr(), password); err != nil {
			t.Fatalf("redistest: %s refuses the password: %v", n.Addr(), err)
		}
		if err := Accepts(n.Addr(), ""); err == nil || !strings.HasPrefix(err.Error(), "NOAUTH") {
			t.Fatalf("redistest: %s, a client without a password: %v", n.Addr(), err)
		}
		cl := redis.NewClient(&redis.Options{Addr: n.Addr(), Password: password, Protocol: 2, DisableIdentity: true})
		got, err := cl.ConfigGet(ctx, "masterauth").Result()
		_ = cl.Close()
		if err != nil || got["masterauth"] != password {
			t.Fatalf("redistest: %s: masterauth not set: %v", n.Addr(), err)
		}
		if files := n.FilesHolding(password); len(files) > 0 {
			t.Fatalf("redistest: %s: the password is on disk in %v", n.Addr(), files)
		}
	}
	mcl := redis.NewClient(&redis.Options{Addr: master.Addr(), Password: password, Protocol: 2, DisableIdentity: true})
	defer mcl.Close()
	if err := mcl.Do(ctx, "CLIENT", "KILL", "TYPE", "replica").Err(); err != nil {
		t.Fatal(err)
	}
	WaitLinkUp(t, replica.Addr(), password)
}
