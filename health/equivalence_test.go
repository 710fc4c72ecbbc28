package health

import (
	"math/rand/v2"
	"testing"

	argohealth "github.com/argoproj/gitops-engine/pkg/health"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/redis-operator/redis-operator/health/argocd"
)

// TestLuaAndGoAgreeOnGeneratedObjects runs health.lua and the Go assessment
// over thousands of generated RedisClusters, well-formed and malformed
// (fields of the wrong type, conditions that are not objects), and requires
// the same status and message from both. The fixtures pin the verdicts; this
// pins the equivalence of the two implementations beyond them.
func TestLuaAndGoAgreeOnGeneratedObjects(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	seen := map[argohealth.HealthStatusCode]int{}
	const runs = 3000
	for i := range runs {
		obj := &unstructured.Unstructured{Object: randomRedisCluster(rng)}
		goHealth, err := Override{}.GetResourceHealth(obj)
		if err != nil {
			t.Fatalf("object %d: Go assessment: %v", i, err)
		}
		luaHealth, err := runHealthLua(argocd.HealthLua, obj, false)
		if err != nil {
			t.Fatalf("object %d: Lua: %v\n%v", i, err, obj.Object)
		}
		if *goHealth != *luaHealth {
			t.Fatalf("object %d: Go %+v, Lua %+v\n%v", i, *goHealth, *luaHealth, obj.Object)
		}
		seen[goHealth.Status]++
	}
	// The generator must reach every verdict, or the comparison proves little.
	for _, code := range []argohealth.HealthStatusCode{argohealth.HealthStatusUnknown, argohealth.HealthStatusProgressing,
		argohealth.HealthStatusHealthy, argohealth.HealthStatusSuspended, argohealth.HealthStatusDegraded} {
		if seen[code] < runs/100 {
			t.Errorf("only %d of %d generated objects assessed %s: %v", seen[code], runs, code, seen)
		}
	}
}

// pick returns one of the choices; the value absent leaves a field out.
func pick(rng *rand.Rand, choices ...any) any { return choices[rng.IntN(len(choices))] }

type absentT struct{}

var absent = absentT{}

func set(m map[string]any, key string, v any) {
	if v != absent {
		m[key] = v
	}
}

// randomRedisCluster builds a RedisCluster in unstructured form, with numbers
// as int64 (API server) or float64 (YAML) and a share of wrongly typed values.
func randomRedisCluster(rng *rand.Rand) map[string]any {
	number := func(v int64) any {
		if rng.IntN(2) == 0 {
			return v
		}
		return float64(v)
	}
	// Mostly the object's own generation, so that verdicts for "this
	// generation" come up often; sometimes another, absent or a string.
	own := int64(1 + rng.IntN(3))
	generation := func() any {
		if rng.IntN(10) < 7 {
			return number(own)
		}
		return pick(rng, number(1), number(2), number(3), absent, "2")
	}

	obj := map[string]any{"apiVersion": "cache.redis.io/v1beta1", "kind": "RedisCluster"}
	meta := map[string]any{"name": "demo"}
	set(meta, "generation", generation())
	obj["metadata"] = meta

	spec := map[string]any{}
	set(spec, "paused", pick(rng, true, false, false, false, absent, "true"))
	set(obj, "spec", pick(rng, spec, spec, absent))

	if rng.IntN(10) == 0 {
		set(obj, "status", pick(rng, absent, map[string]any{}, "broken"))
		return obj
	}
	status := map[string]any{}
	set(status, "observedGeneration", generation())
	set(status, "phase", pick(rng, absent, "Pending", "Bootstrapping", "Ready", "Ready", "Scaling", "Upgrading", "Degraded", "Failed", 5))
	set(status, "credentials", pick(rng, absent, absent, map[string]any{"rotationStep": pick(rng, "", "GracePeriod", 4)}))
	migration := map[string]any{}
	set(migration, "slotsMoved", pick(rng, absent, number(0), number(10)))
	set(migration, "slotsTotal", pick(rng, absent, number(0), number(100), "100"))
	set(status, "migration", pick(rng, absent, migration))

	reasons := []any{absent, "", 7, "Ready", "PodsPending", "Bootstrapping", "Scaling", "Upgrading", "RotatingCredentials",
		"SlotsUncovered", "OpenSlots", "ShardLost", "ReplicaMissing", "ClusterStateFail", "RedisUnreachable",
		"ReconcileError", "InvalidSpec", "Paused", "NotPaused", "SecretNotFound", "VaultUnreachable",
		"VaultPermissionDenied", "NotObservedYet"}
	var conditions []any
	for range rng.IntN(8) {
		if rng.IntN(20) == 0 {
			conditions = append(conditions, pick(rng, "Ready", number(1)))
			continue
		}
		c := map[string]any{}
		set(c, "type", pick(rng, "Ready", "Ready", "Progressing", "Degraded", "Paused", "SlotsAssigned", "CredentialsReady", absent))
		set(c, "status", pick(rng, "True", "False", "Unknown", absent, true))
		set(c, "reason", pick(rng, reasons...))
		set(c, "message", pick(rng, absent, "", "a message", 3))
		set(c, "observedGeneration", generation())
		conditions = append(conditions, c)
	}
	set(status, "conditions", pick(rng, conditions, conditions, conditions, absent, map[string]any{"type": "Ready"}))
	obj["status"] = status
	return obj
}
