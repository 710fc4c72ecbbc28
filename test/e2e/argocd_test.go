//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
)

// The dev Application that examples/argocd's ApplicationSet makes, and the
// RedisCluster of examples/argocd/rediscluster.
const (
	argoApp       = "redis-dev"
	argoAppSet    = "redis"
	exampleRepo   = "https://github.com/redis-operator/redis-operator.git"
	exampleNS     = "redis"
	exampleName   = "demo"
	exampleRCFile = "examples/argocd/rediscluster/rediscluster.yaml"
)

// TestArgoCD (label gitops): the operator installed and scaled by a real
// Argo CD v3.2.6 (core: application controller, repo-server, ApplicationSet
// controller and its Redis, from the install that ships in Argo CD's
// module, with our health check from kustomize/components/argocd) syncing
// this checkout's kustomize/ and examples/argocd/ from a Git repository
// served by git daemon. The suite's operator process is stopped: Argo CD
// installs the operator from the dev overlay, as TestInstalled does.
//   - examples/argocd's ApplicationSet (repoURL pointed at the local
//     repository) makes the dev Application for the in-cluster cluster
//     labelled env=dev; its sync applies the CRDs (wave -1), the operator
//     (wave 0) and the RedisCluster (wave 1);
//   - the Application reaches Synced and Healthy; the RedisCluster's
//     health in it comes from our Lua check (Progressing while the cluster
//     forms, then Healthy with the Ready condition's reason and message);
//   - `shards: 3` → `4` is committed, the Application refreshed: it syncs
//     the new revision, goes Progressing during the migration and Healthy
//     after; it never shows OutOfSync for a revision it has synced (no
//     drift, no ignoreDifferences), and every key written before and during
//     the scale is still there;
//   - the ApplicationSet is deleted and its Application with it, cascading
//     (Argo CD's resources finalizer, as `argocd app delete --cascade`
//     adds): the RedisCluster goes first (the highest wave) through the
//     operator's finalizer, its StatefulSets with it, then the operator;
//     the CRDs stay (Argo CD never deletes a CRD in a cascade).
func TestArgoCD(t *testing.T) {
	tier(t, tierCI)
	scenario(t, "gitops/argocd-appset-waves-3-4-delete")
	ctx := context.Background()
	removeOperator(t)
	t.Cleanup(func() { uninstall(t) })
	installArgoCD(t)
	repo := serveGitRepo(t)
	t.Cleanup(func() {
		if t.Failed() {
			printArgoCDLogs(t, 40)
			printOperatorPodLogs(t, 40)
		}
	})

	// The cluster Argo CD runs in, registered with env=dev (the
	// ApplicationSet's cluster generator selects on it).
	inCluster := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: argocdNS, Name: "in-cluster", Labels: map[string]string{
			"argocd.argoproj.io/secret-type": "cluster", "env": "dev"}},
		StringData: map[string]string{"name": "in-cluster", "server": "https://kubernetes.default.svc",
			"config": `{"tlsClientConfig":{"insecure":false}}`},
	}
	if err := env.k8s.Create(ctx, inCluster); err != nil {
		t.Fatal(err)
	}
	rendered := kustomizeBuild(t, filepath.Join(env.root, "examples", "argocd"))
	rendered = bytes.ReplaceAll(rendered, []byte(exampleRepo), []byte(repo.URL))
	applyYAML(t, rendered, "e2e-argocd")
	t.Cleanup(func() { _ = env.k8s.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: exampleNS}}) })

	obs := startAppObserver(t)
	c := &cluster{t: t, ns: exampleNS, name: exampleName}
	c.obs = startObserver(c)
	t.Cleanup(func() { removeExampleCluster(t, c) })
	waitFor(t, "the ApplicationSet's dev Application", time.Minute, func() (bool, string) {
		app, err := getApp()
		if err != nil {
			return false, err.Error()
		}
		owners := app.GetOwnerReferences()
		return len(owners) == 1 && owners[0].Kind == "ApplicationSet" && owners[0].Name == argoAppSet, fmt.Sprintf("owners %v", owners)
	})
	first := waitAppSettled(t, repo.revision, 8*time.Minute)
	rc := c.get()
	if !isReady(rc) || rc.Spec.Shards != 3 {
		t.Fatalf("Synced and Healthy, but the RedisCluster is %s with %d shards", statusSummary(rc), rc.Spec.Shards)
	}
	checkLuaHealth(t, first, rc)
	if !obs.sawRCHealth("Progressing", repo.revision) {
		t.Errorf("the RedisCluster's health in the Application was never Progressing while it formed (seen: %v)", obs.rcHealths())
	}
	c.checkConverged(rc)

	cl := c.clusterClient()
	w := startWriter(t, cl, "argocd", writerOptions{Wait: true})
	w.waitWrites(50, time.Minute)
	repo.edit(exampleRCFile, "shards: 3", "shards: 4")
	repo.commit("demo: 4 shards")
	refreshApp(t)
	settled := waitAppSettled(t, repo.revision, 10*time.Minute)
	w.stop()
	rc = c.get()
	if !isReady(rc) || rc.Spec.Shards != 4 {
		t.Fatalf("Synced and Healthy at %s, but the RedisCluster is %s with %d shards", repo.revision, statusSummary(rc), rc.Spec.Shards)
	}
	checkLuaHealth(t, settled, rc)
	if !obs.sawAppHealth("Progressing", repo.revision) {
		t.Errorf("the Application was never Progressing while the cluster scaled to 4 shards (seen: %v)", obs.appHealths())
	}
	c.checkConverged(rc)
	w.verify(c.clusterClient())
	obs.stop()
	if drift := obs.drift(); len(drift) > 0 {
		t.Errorf("the Application showed OutOfSync for a revision it had synced: %v", drift)
	}

	deleteAppCascading(t, c)
}

// removeExampleCluster stops c's status observer and, when t failed,
// dumps what a person needs to debug it, then deletes the RedisCluster if
// it is still there (a failure before the cascade; the installed operator
// still runs then) and waits up to 3 minutes for it to go. After the
// cascade its CRD is gone too, and there is nothing to do.
func removeExampleCluster(t *testing.T, c *cluster) {
	ctx := context.Background()
	c.obs.stop()
	if t.Failed() {
		c.dumpDebug()
	}
	rc := &cachev1beta1.RedisCluster{}
	rc.Namespace, rc.Name = c.ns, c.name
	if err := env.k8s.Delete(ctx, rc); err != nil {
		return // gone, or its kind is
	}
	deadline := time.Now().Add(3 * time.Minute)
	for env.k8s.Get(ctx, c.key(), rc) == nil {
		if time.Now().After(deadline) {
			t.Errorf("RedisCluster %s still exists 3 minutes after its deletion", c.key())
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// waitAppSettled waits until the Application has synced revision (its last
// operation Succeeded for it), is Synced to it and Healthy, and returns it.
func waitAppSettled(t *testing.T, revision string, timeout time.Duration) *unstructured.Unstructured {
	t.Helper()
	var app *unstructured.Unstructured
	start := time.Now()
	waitFor(t, "the Application Synced and Healthy at "+revision, timeout, func() (bool, string) {
		var err error
		if app, err = getApp(); err != nil {
			return false, err.Error()
		}
		s := appState(app)
		return s.sync == "Synced" && s.health == "Healthy" && s.revision == revision && s.opPhase == "Succeeded" && s.opRevision == revision, s.String()
	})
	t.Logf("the Application was Synced and Healthy at %.8s after %.0fs", revision, time.Since(start).Seconds())
	return app
}

// checkLuaHealth checks the RedisCluster's entry in the Application's
// resources: Healthy with the message our Lua check gives a Ready cluster
// (the Ready condition's "reason: message"); Argo CD has no health for the
// kind without it.
func checkLuaHealth(t *testing.T, app *unstructured.Unstructured, rc *cachev1beta1.RedisCluster) {
	t.Helper()
	status, msg := rcHealth(app)
	ready := meta.FindStatusCondition(rc.Status.Conditions, cachev1beta1.RedisClusterReadyCondition)
	if ready == nil {
		t.Fatalf("the RedisCluster has no Ready condition")
	}
	want := ready.Reason + ": " + ready.Message
	if status != "Healthy" || msg != want {
		t.Errorf("the RedisCluster's health in the Application is %s %q, want Healthy %q (our Lua check)", status, msg, want)
	}
}

// refreshApp asks Argo CD to compare the Application with Git now (the
// annotation its UI's Refresh button sets) instead of at its next poll.
func refreshApp(t *testing.T) {
	t.Helper()
	app, err := getApp()
	if err != nil {
		t.Fatal(err)
	}
	patch := client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"annotations":{"argocd.argoproj.io/refresh":"normal"}}}`))
	if err := env.k8s.Patch(context.Background(), app, patch); err != nil {
		t.Fatalf("refreshing the Application: %v", err)
	}
}

// deleteAppCascading adds Argo CD's resources finalizer to the Application
// and deletes its ApplicationSet (which owns it): the cascade removes the
// RedisCluster first, through the operator's finalizer while the operator
// still runs, then the operator's objects but not the CRDs.
func deleteAppCascading(t *testing.T, c *cluster) {
	t.Helper()
	ctx := context.Background()
	app, err := getApp()
	if err != nil {
		t.Fatal(err)
	}
	patch := client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"finalizers":["resources-finalizer.argocd.argoproj.io"]}}`))
	if err := env.k8s.Patch(ctx, app, patch); err != nil {
		t.Fatal(err)
	}
	set := &unstructured.Unstructured{}
	set.SetAPIVersion("argoproj.io/v1alpha1")
	set.SetKind("ApplicationSet")
	set.SetNamespace(argocdNS)
	set.SetName(argoAppSet)
	if err := env.k8s.Delete(ctx, set); err != nil {
		t.Fatal(err)
	}
	var sawFinalizing bool
	start := time.Now()
	waitFor(t, "the RedisCluster deleted through its finalizer", 5*time.Minute, func() (bool, string) {
		rc := &cachev1beta1.RedisCluster{}
		err := env.k8s.Get(ctx, c.key(), rc)
		if err == nil {
			if rc.DeletionTimestamp != nil && len(rc.Finalizers) > 0 {
				sawFinalizing = true
			}
			return false, fmt.Sprintf("deleting: %v, finalizers %v", rc.DeletionTimestamp, rc.Finalizers)
		}
		if !apierrors.IsNotFound(err) {
			return false, err.Error()
		}
		// Gone while its CRD and the operator are still there: the
		// operator's finalizer ran, not a CRD deletion.
		d := &appsv1.Deployment{}
		if err := env.k8s.Get(ctx, client.ObjectKey{Namespace: installNS, Name: installDeployment}, d); err != nil {
			return true, "operator Deployment: " + err.Error()
		}
		return true, ""
	})
	t.Logf("the RedisCluster was deleted %.0fs after the ApplicationSet", time.Since(start).Seconds())
	if !sawFinalizing {
		t.Errorf("the RedisCluster was never seen held by its finalizer while being deleted")
	}
	sts := &appsv1.StatefulSetList{}
	if err := env.k8s.List(ctx, sts, client.InNamespace(c.ns)); err != nil {
		t.Fatal(err)
	}
	if len(sts.Items) > 0 {
		t.Errorf("%d StatefulSets of the cluster left after its deletion", len(sts.Items))
	}
	waitFor(t, "the Application and the operator deleted", 5*time.Minute, func() (bool, string) {
		if _, err := getApp(); !apierrors.IsNotFound(err) {
			return false, fmt.Sprintf("Application: %v", err)
		}
		err := env.k8s.Get(ctx, client.ObjectKey{Namespace: installNS, Name: installDeployment}, &appsv1.Deployment{})
		return apierrors.IsNotFound(err), fmt.Sprintf("operator Deployment: %v", err)
	})
	// Argo CD never deletes a CRD in a cascade (its controller's
	// shouldBeDeleted), so that no one loses custom resources by deleting an
	// Application.
	if err := env.k8s.Get(ctx, client.ObjectKey{Name: installCRD}, &apiextensionsv1.CustomResourceDefinition{}); err != nil {
		t.Errorf("the CRD after the cascade: %v (Argo CD keeps CRDs)", err)
	}
}

// getApp reads the dev Application.
func getApp() (*unstructured.Unstructured, error) {
	app := &unstructured.Unstructured{}
	app.SetAPIVersion("argoproj.io/v1alpha1")
	app.SetKind("Application")
	err := env.k8s.Get(context.Background(), client.ObjectKey{Namespace: argocdNS, Name: argoApp}, app)
	return app, err
}

// appSample is what the observer records of the Application.
type appSample struct {
	sync, health, revision string
	// opPhase and opRevision are the last sync operation's phase and
	// revision.
	opPhase, opRevision string
	rcHealth, rcMessage string
}

func (s appSample) String() string {
	return fmt.Sprintf("sync %s health %s revision %.8s, last operation %s at %.8s, RedisCluster %s %q",
		s.sync, s.health, s.revision, s.opPhase, s.opRevision, s.rcHealth, s.rcMessage)
}

func appState(app *unstructured.Unstructured) appSample {
	str := func(path ...string) string { v, _, _ := unstructured.NestedString(app.Object, path...); return v }
	s := appSample{
		sync: str("status", "sync", "status"), health: str("status", "health", "status"),
		revision: str("status", "sync", "revision"), opPhase: str("status", "operationState", "phase"),
		opRevision: str("status", "operationState", "syncResult", "revision"),
	}
	s.rcHealth, s.rcMessage = rcHealth(app)
	return s
}

// rcHealth is the health status and message of the RedisCluster in the
// Application's status.resources.
func rcHealth(app *unstructured.Unstructured) (string, string) {
	res, _, _ := unstructured.NestedSlice(app.Object, "status", "resources")
	for _, r := range res {
		m, _ := r.(map[string]any)
		if m["kind"] == "RedisCluster" && m["name"] == exampleName {
			status, _, _ := unstructured.NestedString(m, "health", "status")
			msg, _, _ := unstructured.NestedString(m, "health", "message")
			return status, msg
		}
	}
	return "", ""
}

// appObserver samples the Application every 250 ms.
type appObserver struct {
	mu      sync.Mutex
	samples []appSample
	stopCh  chan struct{}
	done    chan struct{}
}

func startAppObserver(t *testing.T) *appObserver {
	o := &appObserver{stopCh: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(o.done)
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			if app, err := getApp(); err == nil {
				s := appState(app)
				o.mu.Lock()
				if n := len(o.samples); n == 0 || o.samples[n-1] != s {
					o.samples = append(o.samples, s)
				}
				o.mu.Unlock()
			}
			select {
			case <-o.stopCh:
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(o.stop)
	return o
}

func (o *appObserver) stop() {
	select {
	case <-o.stopCh:
	default:
		close(o.stopCh)
	}
	<-o.done
}

// sawRCHealth reports whether the RedisCluster's health was status while
// the Application compared against revision.
func (o *appObserver) sawRCHealth(status, revision string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, s := range o.samples {
		if s.rcHealth == status && s.revision == revision {
			return true
		}
	}
	return false
}

// sawAppHealth reports whether the Application's health was status while
// it compared against revision.
func (o *appObserver) sawAppHealth(status, revision string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, s := range o.samples {
		if s.health == status && s.revision == revision {
			return true
		}
	}
	return false
}

// drift lists the samples that were OutOfSync at a revision after the
// Application had been seen Synced at it with its sync operation Succeeded
// for it: drift once a sync settled. (Right after an operation succeeds,
// the status may still hold the comparison made before it: OutOfSync
// before the first Synced sample is not drift.)
func (o *appObserver) drift() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	settled := map[string]bool{}
	var out []string
	for _, s := range o.samples {
		switch {
		case s.sync == "Synced" && s.opPhase == "Succeeded" && s.opRevision == s.revision:
			settled[s.revision] = true
		case s.sync == "OutOfSync" && settled[s.revision]:
			out = append(out, s.String())
		}
	}
	return out
}

func (o *appObserver) rcHealths() []string {
	return o.column(func(s appSample) string { return s.rcHealth })
}
func (o *appObserver) appHealths() []string {
	return o.column(func(s appSample) string { return s.health })
}

// column lists the distinct successive values of one field of the samples.
func (o *appObserver) column(f func(appSample) string) []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []string
	for _, s := range o.samples {
		if v := f(s); len(out) == 0 || out[len(out)-1] != v {
			out = append(out, v)
		}
	}
	return out
}

// printArgoCDLogs prints the last n lines of each Argo CD pod's logs.
func printArgoCDLogs(t *testing.T, n int) {
	files, _ := filepath.Glob(env.podLogGlob(argocdNS))
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			t.Logf("--- last %d lines of %s\n%s", n, p, tail(criLines(b), n))
		}
	}
}
