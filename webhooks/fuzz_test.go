package webhooks

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/randfill"

	cachev1alpha1 "github.com/redis-operator/redis-operator/apis/cache/v1alpha1"
	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
)

// fuzzSeeds are JSON RedisClusters: the shapes the validator branches on,
// and values at the edges of Redis's grammar.
var fuzzSeeds = []string{
	`{}`,
	`{"spec":{"shards":3,"replicasPerShard":1,"image":"redis:7.0","storage":{"size":"1Gi"}}}`,
	`{"spec":{"shards":-2147483648,"replicasPerShard":2147483647,"image":"::::"}}`,
	`{"spec":{"config":{"maxmemory":"18446744073709551616","maxmemory-clients":"100%","PORT":"1","save":"1 0 2","rename-command":"a b c"}}}`,
	`{"spec":{"config":{"client-output-buffer-limit":"normal 0 0 0 pubsub 99999999999999999999gb 1 -1","oom-score-adj-values":"  ","latency-tracking-info-percentiles":"NaN"}}}`,
	`{"spec":{"resources":{"requests":{"memory":"1Ei","cpu":"-1"},"limits":{"memory":"1"}},"storage":{"size":"-1","storageClassName":""}}}`,
	`{"spec":{"auth":{"secretRef":{"name":""},"vault":{"address":"http://[::1","path":"/data/","tokenSecretRef":{},"refreshInterval":"-1s","version":0}}}}`,
	`{"spec":{"pod":{"labels":{"":""},"tolerations":[{"operator":"Bogus","tolerationSeconds":1}],"topologySpreadConstraints":[{"minDomains":0}],"affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{}},"podAffinity":{"preferredDuringSchedulingIgnoredDuringExecution":[{"weight":0,"podAffinityTerm":{"labelSelector":{"matchExpressions":[{"key":"","operator":"In"}]}}}]}}}}}`,
	`{"spec":{"exporter":{"enabled":true,"resources":{"limits":{"hugepages-x":"1"}}}}}`,
	`{"metadata":{"annotations":{"cache.redis.io/conversion-data":"{\"spec\":{\"shards\":0,\"auth\":{}}}"}},"spec":{"replicas":-7}}`,
	`{"metadata":{"annotations":{"cache.redis.io/conversion-data":"null"}},"spec":{"replicas":0}}`,
}

// FuzzValidate: whatever the spec, validation returns (an error or not)
// and never panics, for both versions, on create and on update. Each input
// is read twice: as JSON of both versions, and as the random source of a
// filler that builds arbitrary objects. `go test` runs the seeds;
// `go test -fuzz FuzzValidate ./webhooks` explores further.
func FuzzValidate(f *testing.F) {
	for _, seed := range fuzzSeeds {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v := &Validator{}
		ctx := context.Background()

		hubs := []*cachev1beta1.RedisCluster{validHub()}
		spokes := []*cachev1alpha1.RedisCluster{validSpoke()}
		if hub := (&cachev1beta1.RedisCluster{}); json.Unmarshal(data, hub) == nil {
			hubs = append(hubs, hub)
		}
		if spoke := (&cachev1alpha1.RedisCluster{}); json.Unmarshal(data, spoke) == nil {
			spokes = append(spokes, spoke)
		}
		filler := fuzzFiller(data)
		hub, spoke := &cachev1beta1.RedisCluster{}, &cachev1alpha1.RedisCluster{}
		filler.Fill(hub)
		filler.Fill(spoke)
		hubs = append(hubs, hub)
		spokes = append(spokes, spoke)

		for _, obj := range hubs {
			for _, old := range hubs {
				_, _ = v.V1beta1().ValidateCreate(ctx, obj)
				_, _ = v.V1beta1().ValidateUpdate(ctx, old, obj)
			}
		}
		for _, obj := range spokes {
			for _, old := range spokes {
				_, _ = v.V1alpha1().ValidateCreate(ctx, obj)
				_, _ = v.V1alpha1().ValidateUpdate(ctx, old, obj)
			}
		}
	})
}

// fuzzFiller fills objects from data. Quantities and durations are filled
// through their constructors, so that they hold what parsing JSON can
// produce, negative values included.
func fuzzFiller(data []byte) *randfill.Filler {
	return randfill.NewFromGoFuzz(data).NilChance(0.3).NumElements(0, 3).MaxDepth(8).Funcs(
		func(q *resource.Quantity, c randfill.Continue) {
			formats := []resource.Format{resource.BinarySI, resource.DecimalSI, resource.DecimalExponent}
			*q = *resource.NewQuantity(c.Int63()-c.Int63(), formats[c.Intn(len(formats))])
		},
		func(d *metav1.Duration, c randfill.Continue) {
			d.Duration = time.Duration(c.Int63() - c.Int63())
		},
		func(m *map[string]string, c randfill.Continue) {
			// Config keys from the real parameter list, so that the
			// grammar checks run and not only the unknown-key warning.
			*m = map[string]string{}
			names := slices.Sorted(maps.Keys(redisParams))
			for n := c.Intn(6); n > 0; n-- {
				var value string
				c.Fill(&value)
				(*m)[names[c.Intn(len(names))]] = value
			}
			var key, value string
			c.Fill(&key)
			c.Fill(&value)
			(*m)[key] = value
		},
	)
}
