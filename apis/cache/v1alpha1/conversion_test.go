package v1alpha1

import (
	"encoding/json"
	"maps"
	"math/rand"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
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
// v1beta1 → v1alpha1 → v1beta1 unchanged (what a v1alpha1 client that reads
// and writes back sends), and the hub never shows the conversion-data
// annotation.
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

// TestConversionDataHoldsOnlyHubFields: the annotation carries none of the
// fields v1alpha1 holds itself (resources, config, the storage class,
// conditions, masterPod, readyReplicas), only the rest.
func TestConversionDataHoldsOnlyHubFields(t *testing.T) {
	fast := "fast"
	formed := metav1.NewTime(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	hub := &cachev1beta1.RedisCluster{
		Spec: cachev1beta1.RedisClusterSpec{
			Shards:           3,
			ReplicasPerShard: 2,
			Image:            "redis:7.0.15",
			Resources:        corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}},
			Config:           map[string]string{"maxmemory-policy": "noeviction"},
			Storage:          cachev1beta1.StorageSpec{StorageClassName: &fast},
			Paused:           true,
		},
		Status: cachev1beta1.RedisClusterStatus{
			Phase:         cachev1beta1.PhaseReady,
			MasterPod:     "x-0-0",
			ReadyReplicas: 9,
			Conditions:    []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Ready"}},
			FormedTime:    &formed,
		},
	}
	spoke := &RedisCluster{}
	if err := spoke.ConvertFrom(hub); err != nil {
		t.Fatal(err)
	}
	var data map[string]map[string]any
	if err := json.Unmarshal([]byte(spoke.Annotations[ConversionDataAnnotation]), &data); err != nil {
		t.Fatalf("annotation %s: %v", ConversionDataAnnotation, err)
	}
	if len(data) != 2 || data["spec"] == nil || data["status"] == nil {
		t.Fatalf("annotation holds %v, want spec and status", slices.Sorted(maps.Keys(data)))
	}
	spec, status := data["spec"], data["status"]
	for _, key := range []string{"resources", "config"} {
		// encoding/json writes a struct left empty as {}.
		if v, ok := spec[key]; ok && !cmp.Equal(v, map[string]any{}) {
			t.Errorf("annotation holds spec.%s = %v, which v1alpha1 holds", key, v)
		}
	}
	if storage, _ := spec["storage"].(map[string]any); storage["storageClassName"] != nil {
		t.Errorf("annotation holds spec.storage.storageClassName, which v1alpha1 holds as storageClass")
	}
	for _, key := range []string{"conditions", "masterPod", "readyReplicas"} {
		if v, ok := status[key]; ok {
			t.Errorf("annotation holds status.%s = %v, which v1alpha1 holds", key, v)
		}
	}
	if spec["image"] != "redis:7.0.15" || spec["paused"] != true || spec["replicasPerShard"] != float64(2) {
		t.Errorf("annotation lost hub-only spec fields: %v", spec)
	}
	if status["formedTime"] != "2026-12-01T10:00:00Z" || status["phase"] != "Ready" {
		t.Errorf("annotation lost hub-only status fields: %v", status)
	}
}

// TestOlderConversionData: an annotation an older operator wrote (the whole
// v1beta1 spec and status) still converts, v1alpha1's own fields winning.
func TestOlderConversionData(t *testing.T) {
	old := `{"spec":{"shards":3,"replicasPerShard":1,"image":"redis:7.0","config":{"maxmemory":"1gb"}},` +
		`"status":{"phase":"Ready","masterPod":"old-0-0","readyReplicas":6,"conditions":[{"type":"Ready","status":"True","reason":"Ready","message":"","lastTransitionTime":"2026-12-01T10:00:00Z"}]}}`
	spoke := &RedisCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "x", Annotations: map[string]string{ConversionDataAnnotation: old}},
		Spec:       RedisClusterSpec{Replicas: 6, Config: map[string]string{"maxmemory": "2gb"}},
		Status: RedisClusterStatus{MasterPod: "x-0-0", ReadyReplicas: 5, Conditions: []metav1.Condition{
			{Type: "Ready", Status: metav1.ConditionFalse, Reason: "Scaling"},
		}},
	}
	hub := &cachev1beta1.RedisCluster{}
	if err := spoke.ConvertTo(hub); err != nil {
		t.Fatal(err)
	}
	if hub.Spec.Config["maxmemory"] != "2gb" || hub.Spec.Image != "redis:7.0" || hub.Status.Phase != cachev1beta1.PhaseReady ||
		hub.Status.MasterPod != "x-0-0" || hub.Status.ReadyReplicas != 5 ||
		len(hub.Status.Conditions) != 1 || hub.Status.Conditions[0].Reason != "Scaling" {
		t.Fatalf("older annotation converted to spec %+v status %+v", hub.Spec, hub.Status)
	}
}
