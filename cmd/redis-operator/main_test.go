package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/kustomize"
)

// TestRunsAgainstAKubeconfig builds the command, runs it as a process
// against a real API server (envtest) given only a kubeconfig file, the
// way `go run ./cmd/redis-operator --kubeconfig X` runs, and checks that
// it takes the leader Lease, reconciles a RedisCluster, and stops cleanly
// on SIGTERM.
func TestRunsAgainstAKubeconfig(t *testing.T) {
	cfg, scheme, kubeconfigPath := envtestWithKubeconfig(t, "operator")
	dir := filepath.Dir(kubeconfigPath)

	bin := filepath.Join(dir, "redis-operator")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	var logs bytes.Buffer
	cmd := exec.Command(bin, "--kubeconfig", kubeconfigPath, "--webhooks=false",
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0", "--resync-period", "10s")
	cmd.Env = append(os.Environ(), "POD_NAMESPACE=", "KUBECONFIG=")
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	done := make(chan struct{})
	go func() {
		exited <- cmd.Wait()
		close(done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})

	ctx := context.Background()
	k8s, rc := createCluster(t, cfg, scheme, "cmd")
	waitOperator(t, 60*time.Second, exited, &logs, func() error { return reconciled(ctx, k8s, rc) })

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("exit after SIGTERM: %v\n%s", err, logs.String())
		}
	case <-time.After(30 * time.Second):
		t.Errorf("the operator did not stop within 30 s of SIGTERM\n%s", logs.String())
	}
}

// reconciled checks that the operator held the leader Lease, wrote the
// cluster's status and created its three shard StatefulSets.
// waitOperator polls check every 200 ms until it returns nil, failing t with
// the operator's log when the operator process exits (exited) or timeout
// passes.
func waitOperator(t *testing.T, timeout time.Duration, exited <-chan error, logs *bytes.Buffer, check func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return
		}
		select {
		case e := <-exited:
			t.Fatalf("the operator exited: %v\n%s", e, logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%v\noperator log:\n%s", err, logs.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func reconciled(ctx context.Context, k8s client.Client, rc *cachev1beta1.RedisCluster) error {
	got := &cachev1beta1.RedisCluster{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(rc), got); err != nil {
		return err
	}
	if meta.FindStatusCondition(got.Status.Conditions, cachev1beta1.RedisClusterReadyCondition) == nil {
		return fmt.Errorf("no status yet")
	}
	var list appsv1.StatefulSetList
	if err := k8s.List(ctx, &list, client.InNamespace(rc.Namespace)); err != nil {
		return err
	}
	if len(list.Items) != 3 {
		return fmt.Errorf("%d StatefulSets", len(list.Items))
	}
	lease := &coordinationv1.Lease{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: "default", Name: "redis-operator.cache.redis.io"}, lease); err != nil {
		return fmt.Errorf("leader Lease: %w", err)
	}
	return nil
}

// TestManifestsSubcommand: `redis-operator manifests --overlay prod` prints
// exactly what kustomize renders for that overlay, from the manifests
// embedded in the binary.
func TestManifestsSubcommand(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "redis-operator")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	got, err := exec.Command(bin, "manifests", "--overlay", "prod").Output()
	if err != nil {
		t.Fatalf("redis-operator manifests --overlay prod: %v", err)
	}
	want, err := kustomize.Render("prod")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("manifests output (%d bytes) differs from kustomize.Render(\"prod\") (%d bytes)", len(got), len(want))
	}
	if !bytes.Contains(got, []byte("kind: CustomResourceDefinition")) || !bytes.Contains(got, []byte("kind: Deployment")) {
		t.Fatal("the prod render lacks the CRD or the manager Deployment")
	}
}

// startEnvtest starts a real API server (envtest, the binaries in bin/
// unless KUBEBUILDER_ASSETS says otherwise) with the repository's CRDs,
// stopped when t ends, and returns its admin config and a scheme with
// client-go's and the v1beta1 types.
func startEnvtest(t *testing.T) (*envtest.Environment, *rest.Config, *runtime.Scheme) {
	t.Helper()
	return startEnvtestCRDs(t, true)
}

// crdPaths is where the generated CRDs are.
var crdPaths = []string{filepath.Join("..", "..", "kustomize", "base", "crd", "bases")}

// startEnvtestCRDs is startEnvtest, with the CRDs installed or not.
func startEnvtestCRDs(t *testing.T, withCRDs bool) (*envtest.Environment, *rest.Config, *runtime.Scheme) {
	t.Helper()
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		abs, _ := filepath.Abs(filepath.Join("..", "..", "bin"))
		t.Setenv("KUBEBUILDER_ASSETS", abs)
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := cachev1beta1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	env := &envtest.Environment{Scheme: scheme}
	if withCRDs {
		env.CRDDirectoryPaths, env.ErrorIfCRDPathMissing = crdPaths, true
	}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("starting envtest (run `make tools` first): %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	return env, cfg, scheme
}

// envtestWithKubeconfig is startEnvtest plus a kubeconfig, in a temporary
// directory of t, for a user named user in system:masters. It returns the
// admin config, the scheme and the kubeconfig's path.
func envtestWithKubeconfig(t *testing.T, user string) (*rest.Config, *runtime.Scheme, string) {
	t.Helper()
	env, cfg, scheme := startEnvtest(t)
	return cfg, scheme, kubeconfigFor(t, env, cfg, user)
}

// kubeconfigFor writes a kubeconfig of env for a user named user in
// system:masters into a temporary directory of t and returns its path.
func kubeconfigFor(t *testing.T, env *envtest.Environment, cfg *rest.Config, user string) string {
	t.Helper()
	u, err := env.AddUser(envtest.User{Name: user, Groups: []string{"system:masters"}}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := u.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// createCluster creates a 3×1 RedisCluster name in namespace default and
// returns it with the client that created it.
func createCluster(t *testing.T, cfg *rest.Config, scheme *runtime.Scheme, name string) (client.Client, *cachev1beta1.RedisCluster) {
	t.Helper()
	k8s, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	rc := &cachev1beta1.RedisCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec:       cachev1beta1.RedisClusterSpec{Shards: 3, ReplicasPerShard: 1},
	}
	if err := k8s.Create(context.Background(), rc); err != nil {
		t.Fatal(err)
	}
	return k8s, rc
}

// runOperator builds the command and runs it with args, POD_NAMESPACE set
// to podNamespace and no KUBECONFIG, until t ends; it returns the channel
// its exit arrives on and its output so far.
func runOperator(t *testing.T, podNamespace string, args ...string) (<-chan error, *bytes.Buffer) {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "redis-operator")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	logs := &bytes.Buffer{}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "POD_NAMESPACE="+podNamespace, "KUBECONFIG=")
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	waited := make(chan struct{})
	go func() { exited <- cmd.Wait(); close(waited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-waited // also when the test took the exit from exited
	})
	return exited, logs
}
