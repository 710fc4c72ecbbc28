package rotation

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/resources"
	"github.com/redis-operator/redis-operator/controllers/topology"
	"github.com/redis-operator/redis-operator/test/redistest"
)

// rotationCluster starts one shard (master and replica) of real redis-server
// with password and forms it with the topology engine.
func rotationCluster(t *testing.T, password string) (master, replica *redistest.Node, eps []topology.Endpoint) {
	t.Helper()
	nodes := redistest.Start(t, 2, redistest.Options{Password: password, NodeTimeout: 3 * time.Second})
	spec := topology.ShardSpec{Name: "s0"}
	for i, n := range nodes {
		spec.Nodes = append(spec.Nodes, topology.Endpoint{Name: fmt.Sprintf("s0-%d", i), Addr: n.Addr()})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	eng := topology.New(topology.Options{Password: password})
	if _, err := eng.Reconcile(ctx, topology.Desired{Shards: []topology.ShardSpec{spec}, ReplicasPerShard: 1}, nil); err != nil {
		t.Fatal(err)
	}
	master, replica = nodes[0], nodes[1]
	if master.Do("ROLE").([]any)[0] != "master" {
		master, replica = replica, master
	}
	return master, replica, spec.Nodes
}

// secretStore stands for the owned Secret: the state the rotation saves.
// failNext makes the next save fail, as an operator crash before the write.
type secretStore struct {
	mu       sync.Mutex
	st       State
	failNext bool
}

func (s *secretStore) save(st State) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failNext {
		s.failNext = false
		return errors.New("crash before the Secret write")
	}
	s.st = st
	return nil
}

func (s *secretStore) load() State {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st
}

// TestAdvanceRotation runs the rotation state machine against a real master
// and replica while a client that follows the Secret writes: the new
// password is live on every node before the Secret changes, a crash before
// the Secret write and a node restarted from a config with only the old
// password are both resumed, the old password is refused only after the
// grace period, replication stays up, and the writer sees no failed
// authentication.
func TestAdvanceRotation(t *testing.T) {
	const oldPw, newPw = "old-rotation-pw", "new rotation pw 2"
	master, replica, eps := rotationCluster(t, oldPw)
	store := &secretStore{st: State{Live: oldPw, Next: newPw, PendingVersion: "v2"}}
	ops := func(live string) PasswordOps {
		return topology.New(topology.Options{Password: live, Logger: testr.New(t)})
	}
	ctx := context.Background()
	const grace = time.Hour // the test moves the clock, not the wall time
	t0 := time.Now()

	// A client that re-reads the Secret before every write.
	var writes, authFailures, otherFailures atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			cl := redis.NewClient(&redis.Options{Addr: master.Addr(), Password: store.load().Live, Protocol: 2, DisableIdentity: true, MaxRetries: -1})
			err := cl.Set(ctx, fmt.Sprintf("{k}%d", i), i, 0).Err()
			_ = cl.Close()
			switch {
			case err == nil:
				writes.Add(1)
			case strings.Contains(err.Error(), "WRONGPASS") || strings.Contains(err.Error(), "NOAUTH"):
				authFailures.Add(1)
			default:
				otherFailures.Add(1)
			}
		}
	}()
	stopWriter := sync.OnceFunc(func() { close(stop); wg.Wait() })
	t.Cleanup(stopWriter)

	// Crash at UpdatingSecret: nothing saved, the pending password is kept.
	store.failNext = true
	st := store.load()
	out, err := Advance(ctx, ops(st.Live), eps, &st, grace, t0, store.save)
	if err == nil || out.Step != UpdatingSecret {
		t.Fatalf("crash at the Secret write: %+v, %v", out, err)
	}
	if got := store.load(); got.Live != oldPw || got.Next != newPw {
		t.Fatal("the state moved although the Secret write failed")
	}
	for _, ep := range eps {
		for _, pw := range []string{oldPw, newPw} {
			if err := redistest.Accepts(ep.Addr, pw); err != nil {
				t.Fatalf("%s before the Secret changes: %v", ep.Name, err)
			}
		}
	}

	// Resumed: switch, then the grace period.
	st = store.load()
	out, err = Advance(ctx, ops(st.Live), eps, &st, grace, t0, store.save)
	if err != nil || out.Step != GracePeriod || out.Wait != grace || out.Done {
		t.Fatalf("after the switch: %+v, %v", out, err)
	}
	if got := store.load(); got.Live != newPw || got.Previous != oldPw || got.Next != "" || !got.SwitchedAt.Equal(t0) {
		t.Fatal("the Secret does not hold the new password with the old one as previous")
	}
	if replica.Do("CONFIG", "GET", "masterauth").([]any)[1] != newPw {
		t.Fatal("masterauth not switched on the replica")
	}

	// The replica restarts from a config with only the old password.
	replica.Stop()
	replica.Restart()
	st = store.load()
	out, err = Advance(ctx, ops(st.Live), eps, &st, grace, t0.Add(grace/2), store.save)
	if err != nil || out.Step != GracePeriod || out.Wait != grace/2 {
		t.Fatalf("in the grace period: %+v, %v", out, err)
	}
	for _, ep := range eps {
		for _, pw := range []string{oldPw, newPw} {
			if err := redistest.Accepts(ep.Addr, pw); err != nil {
				t.Fatalf("%s in the grace period: %v", ep.Name, err)
			}
		}
	}
	redistest.WaitLinkUp(t, replica.Addr(), newPw)

	// Grace period over.
	out, err = Advance(ctx, ops(st.Live), eps, &st, grace, t0.Add(grace), store.save)
	if err != nil || !out.Done || out.Step != "" {
		t.Fatalf("end: %+v, %v", out, err)
	}
	if got := store.load(); got != (State{Live: newPw}) {
		t.Fatal("the finished state keeps rotation keys")
	}
	for _, ep := range eps {
		if err := redistest.Accepts(ep.Addr, newPw); err != nil {
			t.Fatalf("%s refuses the new password: %v", ep.Name, err)
		}
		if err := redistest.Accepts(ep.Addr, oldPw); err == nil || !strings.Contains(err.Error(), "WRONGPASS") {
			t.Fatalf("%s after the grace period, old password: %v", ep.Name, err)
		}
	}
	mcl := redis.NewClient(&redis.Options{Addr: master.Addr(), Password: newPw, Protocol: 2, DisableIdentity: true})
	defer mcl.Close()
	if err := mcl.Do(ctx, "CLIENT", "KILL", "TYPE", "replica").Err(); err != nil {
		t.Fatal(err)
	}
	redistest.WaitLinkUp(t, replica.Addr(), newPw)

	// Done is done: another call changes nothing.
	out, err = Advance(ctx, ops(st.Live), eps, &st, grace, t0.Add(2*grace), store.save)
	if err != nil || out != (Outcome{}) {
		t.Fatalf("after the end: %+v, %v", out, err)
	}

	stopWriter()
	if authFailures.Load() != 0 || writes.Load() == 0 {
		t.Fatalf("writer following the Secret: %d writes, %d failed authentications, %d other errors",
			writes.Load(), authFailures.Load(), otherFailures.Load())
	}
}

// TestAdvanceRotationTurnsAuthOn runs the rotation from no password (a
// cluster created without spec.auth) against a real master and replica:
// it ends in one call, without a grace period, with every node refusing a
// client without a password (NOAUTH) and accepting the new one, masterauth
// set, no password written to disk, and replication re-authenticating;
// a crash before the Secret write is resumed.
func TestAdvanceRotationTurnsAuthOn(t *testing.T) {
	const newPw = "first pw \"1\""
	master, replica, eps := rotationCluster(t, "")
	store := &secretStore{st: State{Live: "", Next: newPw, PendingVersion: "v1"}}
	ops := func(live string) PasswordOps {
		return topology.New(topology.Options{Password: live, Logger: testr.New(t)})
	}
	ctx := context.Background()
	t0 := time.Now()

	store.failNext = true
	st := store.load()
	out, err := Advance(ctx, ops(st.Live), eps, &st, time.Hour, t0, store.save)
	if err == nil || out.Step != UpdatingSecret {
		t.Fatalf("crash at the Secret write: %+v, %v", out, err)
	}
	if got := store.load(); got.Live != "" || got.Next != newPw {
		t.Fatal("the state moved although the Secret write failed")
	}

	st = store.load()
	out, err = Advance(ctx, ops(st.Live), eps, &st, time.Hour, t0, store.save)
	if err != nil || !out.Done || out.Step != "" || out.Wait != 0 {
		t.Fatalf("resumed: %+v, %v", out, err)
	}
	if got := store.load(); got != (State{Live: newPw}) || st != got {
		t.Fatal("the finished state is not the new password alone")
	}
	redistest.CheckAuthOn(t, newPw, master, replica)
}

// TestRotationSecret: the owned Secret carries the pending or previous
// password and the rotation annotations only while a rotation runs, and
// reads back to the same state.
func TestRotationSecret(t *testing.T) {
	rc := &cachev1beta1.RedisCluster{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "ns", UID: "u"}}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, st := range []State{
		{Live: "pw-aaaa"},
		{Live: "pw-aaaa", Next: "pw-bbbb", PendingVersion: "v2"},
		{Live: "pw-bbbb", Previous: "pw-aaaa", PendingVersion: "v2", SwitchedAt: at},
	} {
		sec := Secret(rc, st)
		if got := Read(sec); got != st {
			t.Errorf("round trip of %+v: %+v", st.Step(), got.Step())
		}
		if !strings.Contains(string(sec.Data[resources.AuthConfKey]), `requirepass "`+st.Live+`"`) {
			t.Errorf("auth.conf does not hold the live password (step %q)", st.Step())
		}
		if !st.InProgress() && len(sec.Annotations) != 0 {
			t.Errorf("annotations without a rotation: %v", sec.Annotations)
		}
		for k, v := range sec.Annotations {
			if strings.Contains(v, "pw-") {
				t.Errorf("annotation %s holds a password", k)
			}
		}
	}
}

// TestStateFromSecret: the step a resumed rotation starts from, read from
// the owned Secret as a crash left it at each point of the rotation.
func TestStateFromSecret(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	secret := func(data map[string]string, ann map[string]string) *corev1.Secret {
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Annotations: ann}, Data: map[string][]byte{}}
		for k, v := range data {
			sec.Data[k] = []byte(v)
		}
		return sec
	}
	for _, tc := range []struct {
		name       string
		sec        *corev1.Secret
		want       State
		step       string
		inProgress bool
		// switchedNow: SwitchedAt is unreadable, so it is the time of Read.
		switchedNow bool
	}{
		{name: "no Secret yet", sec: nil, want: State{}},
		{name: "no password (auth off)", sec: secret(nil, nil), want: State{}},
		{name: "settled", sec: secret(map[string]string{resources.PasswordKey: "a"}, nil), want: State{Live: "a"}},
		{
			name:       "pending: before the switch",
			sec:        secret(map[string]string{resources.PasswordKey: "a", NextKey: "b"}, map[string]string{VersionAnnotation: "v2"}),
			want:       State{Live: "a", Next: "b", PendingVersion: "v2"},
			step:       AddingPassword,
			inProgress: true,
		},
		{
			name:       "turning auth on: pending, no live password",
			sec:        secret(map[string]string{NextKey: "b"}, map[string]string{VersionAnnotation: "v1"}),
			want:       State{Next: "b", PendingVersion: "v1"},
			step:       AddingPassword,
			inProgress: true,
		},
		{
			name: "switched: in the grace period",
			sec: secret(map[string]string{resources.PasswordKey: "b", PreviousKey: "a"},
				map[string]string{VersionAnnotation: "v2", SwitchedAnnotation: at.Format(time.RFC3339)}),
			want:       State{Live: "b", Previous: "a", PendingVersion: "v2", SwitchedAt: at},
			step:       GracePeriod,
			inProgress: true,
		},
		{
			name: "switched, switch time unreadable",
			sec: secret(map[string]string{resources.PasswordKey: "b", PreviousKey: "a"},
				map[string]string{VersionAnnotation: "v2", SwitchedAnnotation: "yesterday"}),
			want:        State{Live: "b", Previous: "a", PendingVersion: "v2"},
			step:        GracePeriod,
			inProgress:  true,
			switchedNow: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := time.Now()
			got := Read(tc.sec)
			if tc.switchedNow {
				if got.SwitchedAt.Before(before) || got.SwitchedAt.After(time.Now()) {
					t.Errorf("SwitchedAt %v, want the time of Read", got.SwitchedAt)
				}
				got.SwitchedAt = time.Time{}
			}
			if got != tc.want {
				t.Errorf("Read = %+v, want %+v", got, tc.want)
			}
			if s := got.Step(); s != tc.step {
				t.Errorf("Step = %q, want %q", s, tc.step)
			}
			if p := got.InProgress(); p != tc.inProgress {
				t.Errorf("InProgress = %v, want %v", p, tc.inProgress)
			}
		})
	}
}
