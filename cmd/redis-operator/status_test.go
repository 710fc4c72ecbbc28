package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/cmd/redis-operator/statusview"
	"github.com/redis-operator/redis-operator/controllers/resources"
)

// TestStatusFromTheAPI runs the status command against a real API server
// (envtest) given only a kubeconfig: a RedisCluster with a status, its
// owned Secret and an event, but no pods (nothing to exec into). The JSON
// carries the status, the conditions and the event, never the password;
// the namespace defaults to the kubeconfig context's ("default"); a
// missing cluster is exit code 1 naming it.
func TestStatusFromTheAPI(t *testing.T) {
	cfg, scheme, path := envtestWithKubeconfig(t, "reader")
	k8s, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	rc := &cachev1beta1.RedisCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "shop"},
		Spec: cachev1beta1.RedisClusterSpec{Shards: 3, ReplicasPerShard: 1}}
	if err := k8s.Create(ctx, rc); err != nil {
		t.Fatal(err)
	}
	rc.Status.Phase = cachev1beta1.PhaseBootstrapping
	rc.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: "False", Reason: "Bootstrapping",
		Message: "Forming the cluster", LastTransitionTime: metav1.Now()}}
	if err := k8s.Status().Update(ctx, rc); err != nil {
		t.Fatal(err)
	}
	const password = "not-to-be-printed-4711"
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: resources.SecretName("shop")},
		Data: map[string][]byte{resources.PasswordKey: []byte(password)}}
	if err := k8s.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "shop.1"},
		InvolvedObject: corev1.ObjectReference{Kind: "RedisCluster", Namespace: "default", Name: "shop", UID: rc.UID},
		Type:           "Normal", Reason: "ShardCreated", Message: "Created StatefulSets shop-shard-0", Count: 1,
		LastTimestamp: metav1.NewTime(time.Now())}
	if err := k8s.Create(ctx, ev); err != nil {
		t.Fatal(err)
	}

	var out, errOut bytes.Buffer
	if code := runStatus([]string{"shop", "--kubeconfig", path, "-o", "json"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	var r statusview.Report
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if r.Namespace != "default" || r.Phase != "Bootstrapping" || r.Shards != 3 || r.Image != "redis:7.0.15" ||
		len(r.Conditions) != 1 || r.Conditions[0].Reason != "Bootstrapping" ||
		len(r.Events) != 1 || r.Events[0].Reason != "ShardCreated" || r.Pods != 0 || r.Cluster != nil {
		t.Fatalf("report %+v", r)
	}
	if strings.Contains(out.String()+errOut.String(), password) {
		t.Fatal("the password was printed in the JSON")
	}
	out.Reset()
	if code := runStatus([]string{"--kubeconfig", path, "shop"}, &out, &errOut); code != 0 ||
		!strings.Contains(out.String(), "RedisCluster default/shop") || !strings.Contains(out.String(), "no master answered") {
		t.Fatalf("tables: exit %d\n%s\n%s", code, out.String(), errOut.String())
	}
	if strings.Contains(out.String()+errOut.String(), password) {
		t.Fatal("the password was printed")
	}

	out.Reset()
	errOut.Reset()
	if code := runStatus([]string{"nosuch", "-n", "default", "--kubeconfig", path}, &out, &errOut); code != 1 ||
		!strings.Contains(errOut.String(), "RedisCluster default/nosuch not found") {
		t.Fatalf("missing cluster: exit %d, stderr %q", code, errOut.String())
	}
}
