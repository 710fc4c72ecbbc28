package controllers

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	cachev1alpha1 "github.com/redis-operator/redis-operator/apis/cache/v1alpha1"
	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
)

// The envtest suite runs the controller in a manager against a real
// kube-apiserver and etcd (bin/, built by `make tools`) with the generated
// CRDs. There is no kubelet, scheduler or controller-manager: no pod ever
// runs, so the topology engine is never reached and the clusters stay
// Pending; what is tested is everything on the Kubernetes side.

var (
	k8s        client.Client // the tests' own client, not counted
	reconciler *RedisClusterReconciler
	// managerCache is the manager's cache (CacheOptions), to check what it holds.
	managerCache cache.Cache
	writes       = &writeLog{}
	testCtx      context.Context
)

// writeLog records every write the controller's client makes.
type writeLog struct {
	mu  sync.Mutex
	all []string
}

func (w *writeLog) add(verb string, obj client.Object) {
	w.mu.Lock()
	defer w.mu.Unlock()
	kind := fmt.Sprintf("%T", obj)
	kind = kind[strings.LastIndex(kind, ".")+1:]
	w.all = append(w.all, fmt.Sprintf("%s %s %s/%s", verb, kind, obj.GetNamespace(), obj.GetName()))
}

// in returns the writes to objects of namespace ns since the mark.
func (w *writeLog) in(ns string, mark int) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, s := range w.all[mark:] {
		if strings.Contains(s, " "+ns+"/") {
			out = append(out, s)
		}
	}
	return out
}

func (w *writeLog) mark() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.all)
}

func countingClient(cfg *rest.Config, opts client.Options) (client.Client, error) {
	c, err := client.NewWithWatch(cfg, opts)
	if err != nil {
		return nil, err
	}
	return interceptor.NewClient(c, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			writes.add("create", obj)
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			writes.add("update", obj)
			return c.Update(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			writes.add("patch", obj)
			return c.Patch(ctx, obj, patch, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			writes.add("delete", obj)
			return c.Delete(ctx, obj, opts...)
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			writes.add("update/"+sub, obj)
			return c.SubResource(sub).Update(ctx, obj, opts...)
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			writes.add("patch/"+sub, obj)
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
	}), nil
}

func TestMain(m *testing.M) {
	os.Exit(runSuite(m))
}

func runSuite(m *testing.M) int {
	// operatorLog keeps a copy for the tests that search the log for secrets.
	logf.SetLogger(zap.New(zap.WriteTo(io.MultiWriter(os.Stderr, operatorLog)), zap.Level(zapLevel())))
	defer hostile.server.Close()
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		abs, _ := filepath.Abs(filepath.Join("..", "bin"))
		os.Setenv("KUBEBUILDER_ASSETS", abs)
	}
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, cachev1beta1.AddToScheme, cachev1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			panic(err)
		}
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "kustomize", "base", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		Scheme:                scheme,
	}
	cfg, err := env.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting envtest (run `make tools` first):", err)
		return 1
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping envtest:", err)
		}
	}()
	k8s, err = client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		panic(err)
	}

	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		NewClient:              countingClient,
		Cache:                  CacheOptions(nil),
	})
	if err != nil {
		panic(err)
	}
	managerCache = mgr.GetCache()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	testCtx = logf.IntoContext(ctx, ctrl.Log.WithName("test"))
	reconciler = &RedisClusterReconciler{ResyncPeriod: time.Hour, DeletionTimeout: time.Minute, VaultAddresses: suiteVaultAddresses()}
	skip := true
	if err := reconciler.SetupWithManager(ctx, mgr, controller.Options{SkipNameValidation: &skip}); err != nil {
		panic(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		panic("cache did not sync")
	}
	code := m.Run()
	cancel()
	if err := <-done; err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
	}
	return code
}

// zapLevel logs info and up, and debug (V(1)) with TEST_VERBOSE set.
func zapLevel() zapcore.Level {
	if os.Getenv("TEST_VERBOSE") != "" {
		return zapcore.DebugLevel
	}
	return zapcore.InfoLevel
}

// newNamespace makes a namespace for one test.
func newNamespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "rc-"}}
	if err := k8s.Create(testCtx, ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// eventually retries f until it returns nil or 30 s pass.
func eventually(t *testing.T, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var err error
	for time.Now().Before(deadline) {
		if err = f(); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s: %v", what, err)
}

func sleepBriefly() { time.Sleep(200 * time.Millisecond) }
