package webhooks

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redis-operator/redis-operator/test/redistest"
)

// stricterThanRedis are values redis-server 7.0 accepts that the validator
// rejects on purpose; each is explained where the grammar is declared.
var stricterThanRedis = map[string]bool{
	"cluster-node-timeout=0": true, // marks every node failing at once
	// Above 2^64-1: redis-server 7.0's memtoull saturates instead of failing.
	"maxmemory=18446744073709551616":                  true,
	"cluster-link-sendbuf-limit=18446744073709551616": true,
	// Above 2^63-1 the value wraps to a negative number, which Redis 7.0
	// stores as a percentage: 2^64-1 silently becomes 1%.
	"maxmemory-clients=18446744073709551615": true,
	"maxmemory-clients=18446744073709551616": true,
}

// skipAgainstRedis are parameters whose CONFIG SET answer depends on the
// build or the machine rather than on the value's grammar.
var skipAgainstRedis = map[string]string{
	"activedefrag":  "needs a Redis built with Redis's own jemalloc; Debian's is not",
	"oom-score-adj": "needs permission to write /proc/self/oom_score_adj",
}

// TestGrammarAgainstRedis replays the validator's grammar against a real
// redis-server 7.0: for every typed parameter Redis lets CONFIG SET change,
// a set of valid and invalid values must be accepted by the validator
// exactly when redis-server accepts them.
func TestGrammarAgainstRedis(t *testing.T) {
	node := redistest.StartOne(t, redistest.Options{})
	opts := node.ClientOptions()
	opts.PoolSize = 1
	client := redis.NewClient(opts)
	t.Cleanup(func() { _ = client.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	checked, immutable := 0, 0
	for _, name := range slices.Sorted(maps.Keys(redisParams)) {
		prm := redisParams[name]
		if prm.alias != "" || prm.kind == kindOwned || prm.kind == kindRefused || prm.kind == kindLockedOff || prm.kind == kindString || prm.kind == kindRenameCommand {
			continue
		}
		if _, skip := skipAgainstRedis[name]; skip {
			continue
		}
		original, err := client.ConfigGet(ctx, name).Result()
		if err != nil || len(original) != 1 {
			t.Fatalf("CONFIG GET %s: %v %v", name, original, err)
		}
		for _, value := range candidates(prm) {
			ours := checkParam(name, prm, value) == ""
			err := client.ConfigSet(ctx, name, value).Err()
			if err != nil && strings.Contains(err.Error(), "can't set immutable config") {
				immutable++
				break
			}
			theirs := err == nil
			if theirs {
				if err := client.ConfigSet(ctx, name, original[name]).Err(); err != nil {
					t.Fatalf("restoring %s to %q: %v", name, original[name], err)
				}
			}
			checked++
			if ours == theirs || (theirs && stricterThanRedis[name+"="+value]) {
				continue
			}
			t.Errorf("%s %q: validator accepts=%v, redis-server accepts=%v (%v)", name, value, ours, theirs, err)
		}
	}
	// Guard against a test that silently checks nothing.
	if checked < 500 {
		t.Fatalf("only %d values checked (%d parameters immutable)", checked, immutable)
	}
	t.Logf("%d values checked against redis-server; %d immutable parameters skipped", checked, immutable)
}

// candidates are valid and invalid values for a parameter of prm's kind.
func candidates(prm param) []string {
	switch prm.kind {
	case kindBool:
		return []string{"yes", "no", "YES", "No", "true", "1", ""}
	case kindEnum:
		return append(slices.Clone(prm.values), strings.ToUpper(prm.values[0]), "bogus", "")
	case kindFlags:
		return []string{"default", "nosave now", "save nosave", "now now", "NOW", "force save", "", "bogus"}
	case kindInt:
		values := []string{"0", "1", "-1", "-0", "007", "+5", "1.5", "1kb", "", " 1", "9223372036854775808",
			strconv.FormatInt(prm.min, 10), strconv.FormatInt(prm.max, 10)}
		if prm.min > math.MinInt64 {
			values = append(values, strconv.FormatInt(prm.min-1, 10))
		}
		if prm.max < math.MaxInt64 {
			values = append(values, strconv.FormatInt(prm.max+1, 10))
		}
		return values
	case kindMemory, kindMemoryOrPercent:
		values := []string{"0", "1", "100mb", "1GB", "10K", "1b", "007kb", "1.5gb", "-1", "10t", "1%", "1mb",
			"1048575", "1048576", "9223372036854775807", "8589934592gb", "18446744073709551615", "18446744073709551616"}
		if prm.kind == kindMemoryOrPercent {
			values = append(values, "5%", "100%", "101%", "50.5%", "-1%", "1kb%")
		}
		return values
	case kindSave:
		return []string{"", "3600 1 300 100", "3600", "3600 1 300", "a b", "-1 1", "3600 -1", "0 0", "3600 0", "1 0"}
	case kindClientOutputBufferLimit:
		return []string{"normal 0 0 0", "replica 256mb 64mb 60", "pubsub 32mb 8mb", "foo 0 0 0", "normal 1x 0 0",
			"normal 0 0 -1", "normal 0 0 0 pubsub 1mb 1mb 1", "NORMAL 0 0 0", "master 0 0 0", "", "slave 1 1 1"}
	case kindOOMScoreAdjValues:
		return []string{"0 200 800", "0 200 3000", "0 200", "-2000 0 2000", "1 2 3 4", "a 2 3", "01 2 3"}
	case kindPercentiles:
		return []string{"50 99 99.9", "", "101", "-1", "abc", "50  99", "100", "0"}
	case kindKeyspaceEvents:
		return []string{"KEA", "Q", "", "Ex", "AA", "Ag$lshzxeKEtmdn", "x1"}
	}
	panic(fmt.Sprintf("no candidates for kind %d", prm.kind))
}
