package acl

import (
	"context"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/redis-operator/redis-operator/test/redistest"
)

// The exporter's user is valid in spec.users's grammar, may not be declared in spec.users,
// and on a real node runs the monitoring reads but reads no key, writes nothing and cannot
// see the configuration (which holds requirepass and masterauth).
func TestExporterUserMonitorsOnly(t *testing.T) {
	if _, err := ParseRules(strings.Join(ExporterRules, " ")); err != nil {
		t.Fatalf("ExporterRules: %v", err)
	}
	const pw = "exporter-pass"
	conf := ConfLines([]User{{Name: ExporterUser, Rules: ExporterRules, Passwords: []string{pw}}}, quote)
	n := redistest.StartOne(t, redistest.Options{Extra: strings.Split(strings.TrimSpace(conf), "\n")})
	cl := redis.NewClient(&redis.Options{Addr: n.Addr(), Username: ExporterUser, Password: pw, Protocol: 2, DisableIdentity: true})
	defer cl.Close()
	ctx := context.Background()
	for _, cmd := range [][]any{
		{"CLIENT", "SETNAME", "redis_exporter"}, {"INFO", "ALL"}, {"CLUSTER", "INFO"}, {"PING"},
		{"LATENCY", "LATEST"}, {"LATENCY", "HISTOGRAM"}, {"SLOWLOG", "LEN"}, {"SLOWLOG", "GET", "1"},
	} {
		if err := cl.Do(ctx, cmd...).Err(); err != nil {
			t.Errorf("%v as %s: %v", cmd, ExporterUser, err)
		}
	}
	for _, cmd := range [][]any{
		{"GET", "app:1"}, {"SET", "app:2", "x"}, {"KEYS", "*"}, {"SCAN", "0"}, {"CONFIG", "GET", "masterauth"},
		{"CLUSTER", "NODES"}, {"ACL", "LIST"}, {"CLIENT", "LIST"}, {"SUBSCRIBE", "c"}, {"FLUSHALL"},
	} {
		if err := cl.Do(ctx, cmd...).Err(); err == nil || !strings.Contains(err.Error(), "NOPERM") {
			t.Errorf("%v as %s: %v, want NOPERM", cmd, ExporterUser, err)
		}
	}
}
