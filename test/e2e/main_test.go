//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
)

// suite is what every scenario shares: one local plane and one installed
// operator (operator_test.go) for the whole run.
type suite struct {
	root     string // repository root
	binDir   string // localplane, redis-operator and the Kubernetes binaries
	tmpDir   string // everything this run writes
	stateDir string // the plane's state directory
	// opLog is the operator's log: every operator pod's container logs,
	// copied by opLogs as they grow, so that it outlives the pods.
	opLog  string
	opLogs *logCollector

	cfg *rest.Config
	k8s client.Client

	plane *process
	// operatorStopped is set while a scenario has stopped the operator on
	// purpose (stopOperator); checkOperator then does not fail.
	operatorStopped bool
	// operatorRestarts is the operator's container restart count when the
	// suite last installed it; checkOperator fails a scenario when it grows
	// (at most every 5 s: operatorChecked).
	operatorRestarts int32
	operatorChecked  time.Time
	// installedSince and installedSpans are when the suite's own install
	// was in place (installSuiteOperator until removeOperator): only then
	// are the ServiceAccount's requests the suite's to judge
	// (checkSuiteIdentity); scenarios that install their own judge theirs.
	installedSince time.Time
	installedSpans [][2]time.Time
	// operatorLost holds, while the operator's pods were lost with their
	// node (loseNode) and have not come back, each such pod's UID and its
	// containers' restart count at the loss (operatorLostPods).
	operatorLost map[types.UID]int32

	fixtureDir string
}

var env *suite

func TestMain(m *testing.M) {
	os.Exit(runSuite(m))
}

// runSuite sets up the plane and the operator, runs the tests and stops
// everything it started, whatever happened. A panic in a test kills this
// process without running deferred calls; the plane and the operator were
// started with a parent-death signal, so they stop by themselves then.
//
// Before anything starts it checks that every top-level test declares its
// tier (tiers_test.go); it ends with the summary line `e2e: N passed, N
// failed, N skipped (tier T)`, in which a failed set-up or suite check
// counts as one failure.
func runSuite(m *testing.M) int {
	if err := selectTier(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 2
	}
	if err := checkTierDeclarations("."); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		printSummary(1)
		return 1
	}
	s, err := setupSuite()
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: set-up failed:", err)
		if s != nil {
			s.printOperatorLog(os.Stderr, 40)
			s.teardown(false)
		}
		printSummary(1)
		return 1
	}
	env = s
	if f := os.Getenv("E2E_READY"); f != "" {
		// make test starts the unit tests beside this suite only now
		// (hack/unit-beside-e2e.sh): the plane's start and the operator's
		// install, with its CRDs, had the cores to themselves.
		if err := os.WriteFile(f, []byte("ready\n"), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: writing E2E_READY:", err)
		}
	}
	code := m.Run()
	extra := 0
	if msg := s.checkSuiteIdentity(); msg != "" {
		fmt.Fprintln(os.Stderr, "e2e: FAIL:", msg)
		code, extra = 1, 1
	}
	s.teardown(code == 0)
	printSummary(extra)
	return code
}

// planeNodes is the number of the e2e plane's nodes (the kubelet with
// containerd, pulling the images of `make images`): one more than the
// plane's default three, so that zone-a holds two nodes (localplane-1 and
// localplane-4; the zones go round zone-a, zone-b, zone-c) and losing a
// zone (TestChaos/zone-lost) is more than losing a node.
const planeNodes = 4

func setupSuite() (*suite, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("the local plane needs root (its nodes run the kubelet and containerd)")
	}
	root, err := repoRoot()
	if err != nil {
		return nil, err
	}
	s := &suite{root: root, binDir: filepath.Join(root, "bin"), fixtureDir: os.Getenv("E2E_FIXTURE_DIR")}
	for _, b := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "registry"} {
		if _, err := os.Stat(filepath.Join(s.binDir, b)); err != nil {
			return nil, fmt.Errorf("%s is missing: run `make tools` first", filepath.Join(s.binDir, b))
		}
	}
	if s.fixtureDir != "" {
		if err := os.MkdirAll(s.fixtureDir, 0o755); err != nil {
			return nil, err
		}
	}
	if os.Getenv("E2E_REUSE_BIN") != "1" {
		start := time.Now()
		if err := build(root, "-C", filepath.Join(root, "test", "localplane"), "build", "-o", filepath.Join(s.binDir, "localplane"), "./cmd/localplane"); err != nil {
			return nil, err
		}
		if err := build(root, "build", "-o", filepath.Join(s.binDir, "redis-operator"), "./cmd/redis-operator"); err != nil {
			return nil, err
		}
		fmt.Printf("e2e: built localplane and redis-operator in %.0fs\n", time.Since(start).Seconds())
	}

	// Not under /tmp: the Redis pods mount an emptyDir at /tmp in their
	// mount namespace, which would hide the plane's volume directories.
	if s.tmpDir, err = os.MkdirTemp("/var/tmp", "redis-e2e-"); err != nil {
		return nil, err
	}
	// Searchable by pod users: the node runs the operator's image (user
	// 65532) from a copy in the state directory below.
	if err := os.Chmod(s.tmpDir, 0o711); err != nil {
		return s, err
	}
	s.stateDir = filepath.Join(s.tmpDir, "plane")
	logDir := filepath.Join(s.stateDir, "logs")
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return s, err
	}

	start := time.Now()
	s.plane, err = startProcess(filepath.Join(logDir, "localplane.out"),
		filepath.Join(s.binDir, "localplane"), "up", "--state-dir", s.stateDir, "--bin-dir", s.binDir,
		"--nodes", strconv.Itoa(planeNodes))
	if err != nil {
		return s, err
	}
	if err := waitPlane(s.stateDir, s.plane, 3*time.Minute); err != nil {
		return s, err
	}
	kubeconfig := filepath.Join(s.stateDir, "kubeconfig")
	if s.cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig); err != nil {
		return s, err
	}
	s.cfg.QPS, s.cfg.Burst = 100, 200
	ctrllog.SetLogger(logr.Discard())
	// go-redis logs every refused dial; pods restarting are the point of
	// most scenarios, and the writer records what matters.
	redis.SetLogger(quietRedisLog{})
	scheme := clientgoscheme.Scheme
	if err := cachev1beta1.AddToScheme(scheme); err != nil {
		return s, err
	}
	if s.k8s, err = client.New(s.cfg, client.Options{Scheme: scheme}); err != nil {
		return s, err
	}
	fmt.Printf("e2e: local plane up in %.0fs (state %s)\n", time.Since(start).Seconds(), s.stateDir)

	s.opLog = filepath.Join(logDir, "operator.log")
	if s.opLogs, err = startLogCollector(s.podLogGlob(installNS), s.opLog); err != nil {
		return s, err
	}
	start = time.Now()
	env = s // installOverlay reads env
	s.installedSince = start
	if err := installOverlay(filepath.Join(s.binDir, "redis-operator"), suiteOverlay, 0); err != nil {
		return s, fmt.Errorf("installing the operator (overlay %s): %w", suiteOverlay, err)
	}
	fmt.Printf("e2e: operator installed from the %s overlay in %.0fs\n", suiteOverlay, time.Since(start).Seconds())
	return s, nil
}

// teardown stops the plane (`localplane down`, which stops the operator's
// pod with the others and sweeps any process a pod left behind), and
// removes the run's directory unless the run failed or E2E_KEEP_STATE=1.
func (s *suite) teardown(passed bool) {
	s.opLogs.flush()
	if s.stateDir != "" {
		down := exec.Command(filepath.Join(s.binDir, "localplane"), "down", "--state-dir", s.stateDir, "--timeout", "90s")
		if out, err := down.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: localplane down: %v\n%s", err, out)
		}
	}
	if s.plane != nil {
		s.plane.stop(30 * time.Second)
	}
	s.opLogs.stop()
	switch {
	case s.tmpDir == "":
	case passed && os.Getenv("E2E_KEEP_STATE") != "1":
		_ = os.RemoveAll(s.tmpDir)
	default:
		fmt.Printf("e2e: state, logs and the operator log kept in %s\n", s.stateDir)
	}
}

// printOperatorLog writes the last n lines of the operator's log.
func (s *suite) printOperatorLog(w *os.File, n int) {
	if s.opLog == "" {
		return
	}
	b, err := os.ReadFile(s.opLog)
	if err != nil {
		return
	}
	fmt.Fprintf(w, "--- last %d lines of the operator log (%s)\n%s\n", n, s.opLog, tail(b, n))
}

func tail(b []byte, n int) string {
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

func repoRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil &&
			strings.Contains(string(b), "module github.com/redis-operator/redis-operator\n") {
			return dir, nil
		}
		if filepath.Dir(dir) == dir {
			return "", fmt.Errorf("no repository root above %s", wd)
		}
	}
}

func build(dir string, args ...string) error {
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

// process is a child process that dies with the test binary.
type process struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// startProcess runs name with args, its output appended to logPath. The
// child gets SIGTERM when the thread that started it exits; that thread is
// locked for the child's lifetime, so this happens exactly when the test
// binary exits, however it exits.
func startProcess(logPath, name string, args ...string) (*process, error) {
	return startProcessAs(nil, logPath, name, args...)
}

// startProcessAs is startProcess with the child's credentials (nil: this
// process's own).
func startProcessAs(cred *syscall.Credential, logPath, name string, args ...string) (*process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	p := &process{done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the process
		defer logFile.Close()
		p.cmd = exec.Command(name, args...)
		p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
		p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM, Setpgid: true, Credential: cred}
		if err := p.cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	return p, nil
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM and, after grace, SIGKILL; it returns when the
// process is gone.
func (p *process) stop(grace time.Duration) {
	if p.exited() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// kill sends SIGKILL and returns when the process is gone.
func (p *process) kill() {
	if p.exited() {
		return
	}
	_ = p.cmd.Process.Kill()
	<-p.done
}

// waitPlane waits for `localplane up` to write its ready file.
func waitPlane(stateDir string, p *process, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(filepath.Join(stateDir, "ready")); err == nil {
			return nil
		}
		if p.exited() {
			b, _ := os.ReadFile(filepath.Join(stateDir, "logs", "localplane.out"))
			return fmt.Errorf("localplane exited before it was ready (%v):\n%s", p.err, tail(b, 30))
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("the local plane was not ready within %s; see %s/logs", timeout, stateDir)
}

// ensureNamespace creates ns if it does not exist, enforcing the Pod
// Security Standards' restricted level as a careful user's namespace for
// Redis does (the operator's own namespace has it from
// kustomize/base/namespace.yaml): a pod the operator builds that breaks it
// is refused by the API server and fails the scenario.
func ensureNamespace(ctx context.Context, ns string) error {
	return createNamespace(ctx, ns, map[string]string{
		"pod-security.kubernetes.io/enforce":         "restricted",
		"pod-security.kubernetes.io/enforce-version": "latest",
	})
}

// createNamespace creates ns with labels if it does not exist.
func createNamespace(ctx context.Context, ns string, labels map[string]string) error {
	obj := &corev1.Namespace{}
	obj.Name = ns
	obj.Labels = labels
	if err := env.k8s.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

// quietRedisLog discards go-redis's internal log.
type quietRedisLog struct{}

func (quietRedisLog) Printf(context.Context, string, ...any) {}
