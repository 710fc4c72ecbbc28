package resources

import (
	"context"
	"crypto/tls"
	"strings"
	"sync"
	"testing"
	"time"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/tlscerts"
)

var (
	testTLSOnce   sync.Once
	testTLSFiles  map[string][]byte
	testTLSClient *tls.Config
	testTLSErr    error
)

// testTLS is one CA and certificate for every TLS pod of the test binary:
// the files of the mounted Secret and the client configuration that trusts
// the CA and presents the certificate.
func testTLS(t *testing.T) (map[string][]byte, *tls.Config) {
	t.Helper()
	testTLSOnce.Do(func() {
		now := time.Now()
		ca, caKey, err := tlscerts.NewCA("scripts", now, tlscerts.DefaultCAValidity)
		if err != nil {
			testTLSErr = err
			return
		}
		cert, key, err := tlscerts.Issue(ca, caKey, []string{"redis"}, nil, now)
		if err != nil {
			testTLSErr = err
			return
		}
		testTLSFiles = map[string][]byte{TLSCertKey: cert, TLSKeyKey: key, TLSCAKey: ca}
		testTLSClient, testTLSErr = tlscerts.ClientConfig(ca, cert, key)
	})
	if testTLSErr != nil {
		t.Fatal(testTLSErr)
	}
	return testTLSFiles, testTLSClient
}

// TestTLSPodScripts: pods rendered with spec.tls (client certificates
// required, no plain-text port) start, form a master and replica over TLS
// replication and bus, pass the readiness probe, and the master's preStop
// hands its slots to the replica with CLUSTER FAILOVER, all through
// redis-cli --tls; a plain-text client is not served.
func TestTLSPodScripts(t *testing.T) {
	requireRedis(t)
	const password = "tls pw"
	rc := cluster(func(rc *cachev1beta1.RedisCluster) {
		rc.Spec.TLS = &cachev1beta1.TLSSpec{Enabled: true, AuthClients: cachev1beta1.TLSAuthClientsRequired}
	})
	m, r := masterReplica(t, rc, password)
	for name, p := range map[string]*pod{"master": m, "replica": r} {
		if err := p.script(readinessScript); err != nil {
			t.Errorf("%s not ready over TLS: %v", name, err)
		}
	}
	plain := *m
	plain.tls = nil
	pc := plain.client(password)
	defer pc.Close()
	if err := pc.Ping(context.Background()).Err(); err == nil {
		t.Error("a plain-text client was served on 6379 with TLS on")
	}

	// A replicated write, so the replica has an offset preStop accepts.
	mc := m.client(password)
	defer mc.Close()
	ctx := context.Background()
	if err := mc.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := mc.Do(ctx, "WAIT", 1, 5000).Int(); err != nil || n != 1 {
		t.Fatalf("WAIT over TLS replication: %d, %v", n, err)
	}
	if err := m.script(preStopScript); err != nil {
		t.Fatalf("preStop: %v", err)
	}
	rcl := r.client(password)
	defer rcl.Close()
	role, err := rcl.Do(ctx, "ROLE").Slice()
	if err != nil || len(role) == 0 || role[0] != "master" {
		t.Fatalf("after the master's preStop the replica's ROLE is %v (%v), want master", role, err)
	}
	eventually(t, "the old master replicating over TLS", func() error {
		return m.script(readinessScript)
	})
	info, err := mc.Info(ctx, "replication").Result()
	if err != nil || !strings.Contains(info, "role:slave") {
		t.Errorf("old master after preStop: %q, %v", info, err)
	}
}
