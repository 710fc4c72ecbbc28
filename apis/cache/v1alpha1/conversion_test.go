package v1alpha1

import (
	"math/rand"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/apitesting/fuzzer"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metafuzzer "k8s.io/apimachinery/pkg/apis/meta/fuzzer"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"sigs.k8s.io/randfill"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
)

// fuzzIterations is how many random objects each round-trip direction converts.
const fuzzIterations = 10000

func newFiller(t *testing.T) *randfill.Filler {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := cachev1beta1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	funcs := fuzzer.MergeFuzzerFuncs(metafuzzer.Funcs, func(serializer.CodecFactory) []interface{} {
		return []interface{}{
			// Quantities and durations hold canonical values, as they do after
			// the API server has parsed them.
			func(q *resource.Quantity, c randfill.Continue) {
				*q = *resource.NewQuantity(c.Int63n(1<<40), resource.BinarySI)
			},
			func(d *metav1.Duration, c randfill.Continue) {
				d.Duration = time.Duration(c.Int63n(int64(24 * time.Hour)))
			},
			// Nobody but the conversion writes the conversion-data annotation.
			func(m *metav1.ObjectMeta, c randfill.Continue) {
				c.FillNoCustom(m)
				delete(m.Annotations, ConversionDataAnnotation)
			},
		}
	})
	return fuzzer.FuzzerFor(funcs, rand.NewSource(rand.Int63()), serializer.NewCodecFactory(scheme))
}

// TestHubSpokeHubRoundTrip: every v1beta1 object survives
// v1beta1 → v1alpha1 → v1beta1 unchanged, and the hub never shows the
// conversion-data annotation.
func TestHubSpokeHubRoundTrip(t *testing.T) {
	f := newFiller(t)
	for i := 0; i < fuzzIterations; i++ {
		hub := &cachev1beta1.RedisCluster{}
		f.Fill(hub)
		spoke := &RedisCluster{}
		if err := spoke.ConvertFrom(hub.DeepCopy()); err != nil {
			t.Fatalf("ConvertFrom: %v", err)
		}
		back := &cachev1beta1.RedisCluster{}
		if err := spoke.ConvertTo(back); err != nil {
			t.Fatalf("ConvertTo: %v", err)
		}
		if _, ok := back.Annotations[ConversionDataAnnotation]; ok {
			t.Fatalf("hub object carries %s", ConversionDataAnnotation)
		}
		if !apiequality.Semantic.DeepEqual(hub, back) {
			t.Fatalf("v1beta1 → v1alpha1 → v1beta1 changed the object (iteration %d):\n%s", i, cmp.Diff(hub, back))
		}
	}
}

// TestSpokeHubSpokeRoundTrip: every v1alpha1 object survives
// v1alpha1 → v1beta1 → v1alpha1 unchanged (but for the conversion-data
// annotation the hub adds, which v1alpha1 clients may ignore).
func TestSpokeHubSpokeRoundTrip(t *testing.T) {
	f := newFiller(t)
	for i := 0; i < fuzzIterations; i++ {
		spoke := &RedisCluster{}
		f.Fill(spoke)
		hub := &cachev1beta1.RedisCluster{}
		if err := spoke.DeepCopy().ConvertTo(hub); err != nil {
			t.Fatalf("ConvertTo: %v", err)
		}
		back := &RedisCluster{}
		if err := back.ConvertFrom(hub); err != nil {
			t.Fatalf("ConvertFrom: %v", err)
		}
		delete(back.Annotations, ConversionDataAnnotation)
		if len(back.Annotations) == 0 {
			back.Annotations = nil
		}
		if !apiequality.Semantic.DeepEqual(spoke, back) {
			t.Fatalf("v1alpha1 → v1beta1 → v1alpha1 changed the object (iteration %d):\n%s", i, cmp.Diff(spoke, back))
		}
	}
}

// TestReplicasMapping pins the documented mapping between v1alpha1 replicas
// and v1beta1 shards × (1 + replicasPerShard).
func TestReplicasMapping(t *testing.T) {
	for _, tc := range []struct {
		name             string
		replicas         int32
		previous         *cachev1beta1.RedisClusterSpec
		shards, perShard int32
	}{
		{name: "even count gives one replica per shard", replicas: 6, shards: 3, perShard: 1},
		{name: "odd count gives masters only", replicas: 5, shards: 5, perShard: 0},
		{name: "unchanged total keeps the v1beta1 shape", replicas: 9, previous: &cachev1beta1.RedisClusterSpec{Shards: 3, ReplicasPerShard: 2}, shards: 3, perShard: 2},
		{name: "new total keeps replicas per shard when it divides", replicas: 12, previous: &cachev1beta1.RedisClusterSpec{Shards: 3, ReplicasPerShard: 2}, shards: 4, perShard: 2},
		{name: "new total that does not divide falls back to the default mapping", replicas: 10, previous: &cachev1beta1.RedisClusterSpec{Shards: 3, ReplicasPerShard: 2}, shards: 5, perShard: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spoke := &RedisCluster{Spec: RedisClusterSpec{Replicas: tc.replicas}}
			if tc.previous != nil {
				hub := &cachev1beta1.RedisCluster{Spec: *tc.previous}
				if err := spoke.ConvertFrom(hub); err != nil {
					t.Fatal(err)
				}
				spoke.Spec.Replicas = tc.replicas
			}
			hub := &cachev1beta1.RedisCluster{}
			if err := spoke.ConvertTo(hub); err != nil {
				t.Fatal(err)
			}
			if hub.Spec.Shards != tc.shards || hub.Spec.ReplicasPerShard != tc.perShard {
				t.Fatalf("replicas %d → shards %d × replicasPerShard %d, want %d × %d",
					tc.replicas, hub.Spec.Shards, hub.Spec.ReplicasPerShard, tc.shards, tc.perShard)
			}
		})
	}
}

// TestMalformedConversionData: a hand-edited annotation is an error that
// names the annotation, not a silent loss.
func TestMalformedConversionData(t *testing.T) {
	spoke := &RedisCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "x", Annotations: map[string]string{ConversionDataAnnotation: "{not json"}},
		Spec:       RedisClusterSpec{Replicas: 6},
	}
	err := spoke.ConvertTo(&cachev1beta1.RedisCluster{})
	if err == nil {
		t.Fatal("ConvertTo accepted malformed conversion data")
	}
	if want := ConversionDataAnnotation; !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q does not name %s", err, want)
	}
}
