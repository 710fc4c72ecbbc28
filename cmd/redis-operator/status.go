package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/cmd/redis-operator/statusview"
	"github.com/redis-operator/redis-operator/controllers/resources"
)

// pluginName is the name under which the binary acts as a kubectl plugin
// (`kubectl rediscluster status NAME`): kubectl runs kubectl-rediscluster
// from the PATH with the words after "rediscluster".
const pluginName = "kubectl-rediscluster"

// statusEvents is how many of the newest events the status shows.
const statusEvents = 10

// statusTimeout bounds the whole command; each pod's exec gets
// statusExecTimeout, and at most statusParallel run at once.
const (
	statusTimeout     = 60 * time.Second
	statusExecTimeout = 15 * time.Second
	statusParallel    = 8
)

// isPlugin reports whether the binary was started as kubectl-rediscluster
// (its file name, or a symlink's, as kubectl runs it).
func isPlugin(argv0 string) bool { return filepath.Base(argv0) == pluginName }

// runPlugin serves `kubectl rediscluster SUBCOMMAND ...`; status is the
// only subcommand. It returns the exit code.
func runPlugin(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "status" {
		fmt.Fprintln(stderr, "usage: kubectl rediscluster status NAME [-n NAMESPACE] [-o json] [--kubeconfig FILE] [--context NAME]")
		return 2
	}
	return runStatus(args[1:], stdout, stderr)
}

// runStatus is `redis-operator status NAME [-n NS] [-o json]`: it prints
// the RedisCluster's status from the API (the object, its pods and
// events) and from each Redis node (CLUSTER NODES, CLUSTER INFO and INFO,
// asked through the API server's exec endpoint), as tables or, with
// -o json, as statusview.Report. The kubeconfig is found as kubectl finds
// it (--kubeconfig, $KUBECONFIG, ~/.kube/config, in-cluster). Needs get on
// redisclusters, list on pods and events, create on pods/exec, and get on
// the cluster's <name>-auth Secret (without it each pod's mounted copy of
// that Secret is used). The password is never printed. Exit code 0 when
// the status was printed, 1 on an error, 2 on a usage error.
func runStatus(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var namespace, output, kubeconfig, kubeContext string
	fs.StringVar(&namespace, "n", "", "Namespace of the RedisCluster (default: the kubeconfig context's)")
	fs.StringVar(&namespace, "namespace", "", "Same as -n")
	fs.StringVar(&output, "o", "", "Output format: empty for tables, json for the statusview.Report JSON")
	fs.StringVar(&output, "output", "", "Same as -o")
	fs.StringVar(&kubeconfig, "kubeconfig", "", "Path of the kubeconfig file (default: kubectl's rules)")
	fs.StringVar(&kubeContext, "context", "", "Kubeconfig context to use")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: redis-operator status NAME [-n NAMESPACE] [-o json] [--kubeconfig FILE] [--context NAME]")
		fs.PrintDefaults()
	}
	// Flags may come before or after NAME, as with kubectl.
	var names []string
	for {
		if err := fs.Parse(args); err != nil {
			return 2
		}
		if fs.NArg() == 0 {
			break
		}
		names = append(names, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(names) != 1 || (output != "" && output != "json") {
		fs.Usage()
		return 2
	}
	loading := clientcmd.NewDefaultClientConfigLoadingRules()
	loading.ExplicitPath = kubeconfig
	kc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(loading, &clientcmd.ConfigOverrides{CurrentContext: kubeContext})
	if namespace == "" {
		ns, _, err := kc.Namespace()
		if err != nil {
			fmt.Fprintln(stderr, "Error: reading the kubeconfig:", err)
			return 1
		}
		namespace = ns
	}
	cfg, err := kc.ClientConfig()
	if err != nil {
		fmt.Fprintln(stderr, "Error: reading the kubeconfig:", err)
		return 1
	}
	cfg.UserAgent = "redis-operator-status"
	ctx, cancel := context.WithTimeout(context.Background(), statusTimeout)
	defer cancel()
	in, warn, err := gatherStatus(ctx, cfg, namespace, names[0])
	if err != nil {
		fmt.Fprintln(stderr, "Error:", err)
		return 1
	}
	if warn != "" {
		fmt.Fprintln(stderr, "Warning:", warn)
	}
	report := statusview.Build(in)
	if output == "json" {
		err = statusview.RenderJSON(stdout, report)
	} else {
		err = statusview.RenderText(stdout, report, time.Now())
	}
	if err != nil {
		fmt.Fprintln(stderr, "Error:", err)
		return 1
	}
	return 0
}

// gatherStatus reads the RedisCluster, its pods, its events and the
// owned Secret's password, then samples every running pod at once. warn
// names what was read another way (the Secret).
func gatherStatus(ctx context.Context, cfg *rest.Config, namespace, name string) (statusview.Input, string, error) {
	scheme := runtime.NewScheme()
	if err := cachev1beta1.AddToScheme(scheme); err != nil {
		return statusview.Input{}, "", err
	}
	if err := corev1.AddToScheme(scheme); err != nil {
		return statusview.Input{}, "", err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return statusview.Input{}, "", err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return statusview.Input{}, "", err
	}
	var rc cachev1beta1.RedisCluster
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &rc); err != nil {
		if apierrors.IsNotFound(err) {
			return statusview.Input{}, "", fmt.Errorf("RedisCluster %s/%s not found", namespace, name)
		}
		return statusview.Input{}, "", fmt.Errorf("reading RedisCluster %s/%s: %w", namespace, name, err)
	}
	pods, err := cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(labels.Set{resources.LabelCluster: name}).String(),
	})
	if err != nil {
		return statusview.Input{}, "", fmt.Errorf("listing the pods of %s/%s: %w", namespace, name, err)
	}
	evs, err := cs.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{
		FieldSelector: fields.SelectorFromSet(fields.Set{"involvedObject.name": name, "involvedObject.kind": "RedisCluster"}).String(),
	})
	if err != nil {
		return statusview.Input{}, "", fmt.Errorf("listing the events of %s/%s: %w", namespace, name, err)
	}

	// The password the pods run with is the owned Secret's "password" key
	// (absent: no authentication).
	var warn string
	var password string
	secret, err := cs.CoreV1().Secrets(namespace).Get(ctx, resources.SecretName(name), metav1.GetOptions{})
	switch {
	case err == nil:
		password = string(secret.Data[resources.PasswordKey])
	case apierrors.IsForbidden(err) || apierrors.IsNotFound(err):
		warn = fmt.Sprintf("cannot read Secret %s (%s); each pod's mounted copy of it is used instead",
			resources.SecretName(name), apierrors.ReasonForError(err))
	default:
		return statusview.Input{}, "", fmt.Errorf("reading Secret %s: %w", resources.SecretName(name), err)
	}

	sampler := &execSampler{cfg: cfg, cs: cs, password: password}
	samples := map[string]statusview.Sample{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	slots := make(chan struct{}, statusParallel)
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			slots <- struct{}{}
			defer func() { <-slots }()
			ctx, cancel := context.WithTimeout(ctx, statusExecTimeout)
			defer cancel()
			s := sampler.sample(ctx, p)
			if errors.Is(ctx.Err(), context.DeadlineExceeded) && s.Err != nil {
				s.Err = fmt.Errorf("no answer within %s: %w", statusExecTimeout, s.Err)
			}
			mu.Lock()
			samples[p.Name] = s
			mu.Unlock()
		}()
	}
	wg.Wait()
	return statusview.Input{Cluster: &rc, Pods: pods.Items, Events: evs.Items, Samples: samples, MaxEvents: statusEvents}, warn, nil
}
