//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
)

// The install as rendered by `redis-operator manifests` (kustomize/base).
const (
	installNS         = "redis-operator-system"
	installDeployment = "redis-operator-controller-manager"
	installSA         = "system:serviceaccount:" + installNS + ":redis-operator-controller-manager"
	installWebhook    = "redis-operator-validating-webhook"
	installCRD        = "redisclusters.cache.redis.io"
)

// TestInstalled (label install): the operator as a user installs it, from
// scratch. The suite's operator is uninstalled; the YAML of `redis-operator
// manifests --overlay dev` (CRD with the conversion webhook, RBAC, the
// Deployment, the webhook Service and configuration, unchanged) is
// applied to the plane, whose node runs the operator's image with this
// checkout's binary (test/localplane/README.md, "Images"). The operator
// pod runs as its ServiceAccount (projected token, in-cluster config) and
// creates its own webhook certificates; the API server calls the webhooks
// through their Service. Then:
//   - a v1alpha1 RedisCluster (replicas: 6) goes through the conversion
//     webhook and forms 3 shards × 1 replica, Ready;
//   - a spec that only the validating webhook refuses (an operator-owned
//     Redis parameter) is refused by it;
//   - a scale 3→4 under writes acknowledged with WAIT completes with none
//     lost;
//   - the API server's audit log shows the operator's requests made as its
//     ServiceAccount, none of them forbidden (403), up to and including the
//     cluster's deletion through the finalizer: a missing RBAC verb fails
//     here.
//
// When it ends, the cluster is deleted (through the installed operator's
// finalizer), the install removed, and the suite's operator installed
// again.
func TestInstalled(t *testing.T) {
	tier(t, tierCI)
	scenario(t, "install/dev-overlay-v1alpha1-3-4")
	ctx := context.Background()
	removeOperator(t)
	t.Cleanup(func() { uninstall(t) })
	since := time.Now() // the audit check covers the install too
	install(t, "dev", 0)

	const name = "installed"
	c := &cluster{t: t, ns: "e2e-" + name, name: name}
	if err := ensureNamespace(ctx, c.ns); err != nil {
		t.Fatal(err)
	}
	// After the cluster's deletion (the cleanups run last first), so the
	// finalizer's work is checked too.
	t.Cleanup(func() { checkActedAsServiceAccount(t, c.ns, since) })
	c.track()
	t.Cleanup(func() {
		if t.Failed() {
			printOperatorPodLogs(t, 80)
		}
	})

	// Conversion: a v1alpha1 object, written and read back as v1alpha1.
	alpha := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cache.redis.io/v1alpha1", "kind": "RedisCluster",
		"metadata": map[string]any{"name": name, "namespace": c.ns},
		"spec":     map[string]any{"replicas": int64(6)},
	}}
	if err := env.k8s.Create(ctx, alpha); err != nil {
		t.Fatalf("creating a v1alpha1 RedisCluster through the conversion webhook: %v", err)
	}
	back := &unstructured.Unstructured{}
	back.SetAPIVersion("cache.redis.io/v1alpha1")
	back.SetKind("RedisCluster")
	if err := env.k8s.Get(ctx, c.key(), back); err != nil {
		t.Fatalf("reading it back as v1alpha1: %v", err)
	}
	if r, _, _ := unstructured.NestedInt64(back.Object, "spec", "replicas"); r != 6 {
		t.Fatalf("v1alpha1 spec.replicas read back as %d, want 6", r)
	}
	rc := c.get()
	if rc.Spec.Shards != 3 || rc.Spec.ReplicasPerShard != 1 {
		t.Fatalf("v1beta1 view: %d shards × %d replicas, want 3 × 1", rc.Spec.Shards, rc.Spec.ReplicasPerShard)
	}

	// Validation: only the webhook knows which Redis parameters the
	// operator owns.
	bad := &cachev1beta1.RedisCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: c.ns, Name: "refused"},
		Spec:       cachev1beta1.RedisClusterSpec{Shards: 3, Config: map[string]string{"bind-source-addr": "127.0.0.1"}},
	}
	err := env.k8s.Create(ctx, bad)
	if err == nil {
		_ = env.k8s.Delete(ctx, bad)
		t.Fatal("a spec setting bind-source-addr was admitted")
	}
	if !strings.Contains(err.Error(), "admission webhook") || !strings.Contains(err.Error(), "bind-source-addr") {
		t.Fatalf("refused, but not by the validating webhook naming the parameter: %v", err)
	}

	rc = c.waitReady(6 * time.Minute)
	c.checkConverged(rc)

	cl := c.clusterClient()
	defer cl.Close()
	w := startWriter(t, cl, "installed", writerOptions{Wait: true})
	w.waitWrites(50, time.Minute)
	c.update(func(rc *cachev1beta1.RedisCluster) { rc.Spec.Shards = 4 })
	rc = c.waitReady(8 * time.Minute)
	w.stop()
	c.checkConverged(rc)
	w.verify(c.clusterClient())
}

// install applies `redis-operator manifests --overlay overlay` with
// server-side apply (field manager e2e-install), the Deployment's replica
// count set to replicas when that is not 0 (the only change the suite
// makes to an overlay), and waits until the operator's Deployment has every
// replica available and both webhooks have a CA bundle.
func install(t testing.TB, overlay string, replicas int64) {
	t.Helper()
	if err := installOverlay(filepath.Join(env.binDir, "redis-operator"), overlay, replicas); err != nil {
		t.Fatal(err)
	}
}

// installOverlay is install returning its error, for the suite's set-up.
func installOverlay(binary, overlay string, replicas int64) error {
	return installWithErr(binary, overlay, func(d *unstructured.Unstructured) error {
		if replicas > 0 {
			return unstructured.SetNestedField(d.Object, replicas, "spec", "replicas")
		}
		return nil
	})
}

// installWith applies the manifests that binary renders for overlay
// (`manifests --overlay overlay`), the operator's Deployment first changed
// by editDeployment, and waits until every replica of the Deployment runs
// its current template (a rollout finished, no pod of an older one left)
// and both webhooks have a CA bundle.
func installWith(t testing.TB, binary, overlay string, editDeployment func(*unstructured.Unstructured)) {
	t.Helper()
	if err := installWithErr(binary, overlay, func(d *unstructured.Unstructured) error { editDeployment(d); return nil }); err != nil {
		t.Fatal(err)
	}
}

func installWithErr(binary, overlay string, editDeployment func(*unstructured.Unstructured) error) error {
	ctx := context.Background()
	out, err := exec.Command(binary, "manifests", "--overlay", overlay).Output()
	if err != nil {
		return fmt.Errorf("%s manifests --overlay %s: %v", filepath.Base(binary), overlay, err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(out), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return fmt.Errorf("decoding the manifests: %v", err)
		}
		if len(u.Object) == 0 {
			continue
		}
		if u.GetKind() == "Deployment" && u.GetName() == installDeployment {
			if err := editDeployment(u); err != nil {
				return err
			}
		}
		if err := env.k8s.Patch(ctx, u, client.Apply, client.FieldOwner("e2e-install"), client.ForceOwnership); err != nil {
			return fmt.Errorf("applying %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}

	return pollErr("the operator's Deployment rolled out and its webhooks' CA bundles injected", 3*time.Minute, func() (bool, string) {
		d := &appsv1.Deployment{}
		if err := env.k8s.Get(ctx, client.ObjectKey{Namespace: installNS, Name: installDeployment}, d); err != nil {
			return false, err.Error()
		}
		want := ptrValue(d.Spec.Replicas)
		if st := d.Status; st.ObservedGeneration < d.Generation || st.UpdatedReplicas < want || st.Replicas > want ||
			st.AvailableReplicas < 1 || st.AvailableReplicas < want {
			return false, fmt.Sprintf("deployment: %d replicas, %d updated, %d available, of %d", st.Replicas, st.UpdatedReplicas, st.AvailableReplicas, want)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := env.k8s.Get(ctx, client.ObjectKey{Name: installCRD}, crd); err != nil {
			return false, err.Error()
		}
		if cv := crd.Spec.Conversion; cv == nil || cv.Webhook == nil || cv.Webhook.ClientConfig == nil || len(cv.Webhook.ClientConfig.CABundle) == 0 {
			return false, "the CRD's conversion webhook has no CA bundle yet"
		}
		vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := env.k8s.Get(ctx, client.ObjectKey{Name: installWebhook}, vwc); err != nil {
			return false, err.Error()
		}
		for _, wh := range vwc.Webhooks {
			if len(wh.ClientConfig.CABundle) == 0 {
				return false, "webhook " + wh.Name + " has no CA bundle yet"
			}
		}
		// The validating webhook answers (its Service has a ready endpoint
		// and the serving certificate matches the injected bundle): a
		// server-side dry-run create of a valid RedisCluster is admitted.
		probe := &cachev1beta1.RedisCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "e2e-webhook-probe"},
			Spec: cachev1beta1.RedisClusterSpec{Shards: 3}}
		if err := env.k8s.Create(ctx, probe, client.DryRunAll); err != nil {
			return false, "the validating webhook does not admit a dry-run create yet: " + err.Error()
		}
		return true, ""
	})
}

// pollErr polls cond every 500 ms until it holds, or returns an error with
// its last message after timeout.
func pollErr(what string, timeout time.Duration, cond func() (bool, string)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, msg := cond()
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("waiting %s for %s: %s", timeout, what, msg)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// uninstall removes what install applied: the operator's namespace
// (waiting until it and its pods are gone, so that two operators never
// reconcile at once and the next install starts clean), then the webhook
// configuration and the cluster-scoped RBAC, and puts the
// CRD back as the suite installs it (no conversion webhook).
func uninstall(t testing.TB) {
	ctx := context.Background()
	del := func(o client.Object) {
		if err := env.k8s.Delete(ctx, o); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("uninstalling %T %s: %v", o, o.GetName(), err)
		}
	}
	// The operator's pods first: with its RBAC gone while they still run,
	// its requests would be forbidden (and counted by the next scenario).
	del(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: installNS}})
	// The namespace gone, not only its pods: an install into a namespace
	// still terminating would see its objects deleted again.
	waitFor(t, "the installed operator's namespace gone", 3*time.Minute, func() (bool, string) {
		pods := &corev1.PodList{}
		if err := env.k8s.List(ctx, pods, client.InNamespace(installNS)); err != nil {
			return false, err.Error()
		}
		err := env.k8s.Get(ctx, client.ObjectKey{Name: installNS}, &corev1.Namespace{})
		return len(pods.Items) == 0 && apierrors.IsNotFound(err), fmt.Sprintf("%d pods left, namespace: %v", len(pods.Items), err)
	})
	del(&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: installWebhook}})
	del(&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "redis-operator"}})
	del(&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "redis-operator"}})
	crds := filepath.Join(env.root, "kustomize", "base", "crd", "bases")
	if _, err := envtest.InstallCRDs(env.cfg, envtest.CRDInstallOptions{Paths: []string{crds}, ErrorIfPathMissing: true}); err != nil {
		t.Errorf("putting the CRD back without its conversion webhook: %v", err)
	}
}

// waitFor polls cond every 500 ms until it holds, failing t with its last
// message after timeout.
func waitFor(t testing.TB, what string, timeout time.Duration, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, msg := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting %s for %s: %s", timeout, what, msg)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// auditEvent is the part of an audit.k8s.io/v1 Event this test reads.
type auditEvent struct {
	StageTimestamp metav1.MicroTime `json:"stageTimestamp"`
	Verb           string           `json:"verb"`
	User           struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef *struct {
		Resource  string `json:"resource"`
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	RequestURI string `json:"requestURI"`
}

// checkActedAsServiceAccount reads the plane's audit log (every service
// account's requests outside kube-system, test/localplane's AuditLog) from
// since on: the operator's ServiceAccount must have created the
// StatefulSets of ns, and none of its requests may have been forbidden.
func checkActedAsServiceAccount(t *testing.T, ns string, since time.Time) {
	t.Helper()
	f, err := os.Open(filepath.Join(env.stateDir, "logs", "kube-apiserver-audit.log"))
	if err != nil {
		t.Fatalf("the plane's audit log: %v", err)
	}
	defer f.Close()
	var requests, statefulSets int
	var forbidden []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var e auditEvent
		if json.Unmarshal(sc.Bytes(), &e) != nil || e.User.Username != installSA || e.StageTimestamp.Time.Before(since) {
			continue
		}
		requests++
		if e.ResponseStatus != nil && e.ResponseStatus.Code == 403 {
			forbidden = append(forbidden, e.Verb+" "+e.RequestURI)
		}
		if r := e.ObjectRef; r != nil && r.Resource == "statefulsets" && r.Namespace == ns && (e.Verb == "create" || e.Verb == "patch") {
			statefulSets++
		}
	}
	if len(forbidden) > 0 {
		t.Errorf("%d of %d requests of the operator's ServiceAccount were forbidden, e.g. %s", len(forbidden), requests, strings.Join(forbidden[:min(5, len(forbidden))], "; "))
		return
	}
	if statefulSets == 0 {
		t.Errorf("no StatefulSet of %s was written by %s (of its %d requests): the operator did not act as its ServiceAccount", ns, installSA, requests)
		return
	}
	t.Logf("the operator made %d requests as %s (%d StatefulSet writes in %s), none forbidden", requests, installSA, statefulSets, ns)
}

// printOperatorPodLogs prints the last n lines of each log file of the
// installed operator's pods (podLogGlob).
func printOperatorPodLogs(t *testing.T, n int) {
	files, _ := filepath.Glob(env.podLogGlob(installNS))
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		t.Logf("--- last %d lines of %s\n%s", n, p, tail(criLines(b), n))
	}
}
