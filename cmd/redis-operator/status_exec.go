package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/redis-operator/redis-operator/cmd/redis-operator/statusview"
	"github.com/redis-operator/redis-operator/controllers/resources"
)

// sampleMarker separates the replies in the sampling script's output.
const sampleMarker = "@@redis-operator-status@@ "

// sampleScript runs in a pod's Redis container through the exec API
// (`kubectl exec`): it reads the password from its stdin (one line, empty
// for none; when empty it falls back to the password the pod mounts from
// the operator's Secret), hands it to redis-cli through REDISCLI_AUTH so
// it never shows in a process's arguments, and prints each reply after a
// marker line. redis-cli is in every official redis image, and the
// operator's own probes rely on it. A pod with spec.tls mounts its
// certificate Secret: redis-cli then speaks TLS with it, as the probes do
// (the certificate is also the client certificate tls-auth-clients asks for).
//
// Exec rather than a port-forward: it needs the same `pods/exec` right as
// the probes' kubectl debugging, and works where the node serves no
// port-forward (the local plane's does not, test/localplane/README.md).
var sampleScript = `IFS= read -r REDISCLI_AUTH || true
p=` + resources.AuthDir + `/` + resources.PasswordKey + `
if [ -z "$REDISCLI_AUTH" ] && [ -s "$p" ]; then REDISCLI_AUTH="$(cat "$p")"; fi
if [ -n "$REDISCLI_AUTH" ]; then export REDISCLI_AUTH; else unset REDISCLI_AUTH; fi
h="${POD_IP:-127.0.0.1}"
t=
if [ -s ` + resources.TLSCertFile + ` ]; then t="--tls --cacert ` + resources.TLSCAFile + ` --cert ` + resources.TLSCertFile + ` --key ` + resources.TLSKeyFile + `"; fi
r() { redis-cli $t -h "$h" -p ` + fmt.Sprint(resources.RedisPort) + ` "$@" 2>&1; }
echo '` + sampleMarker + `nodes'; r CLUSTER NODES
echo '` + sampleMarker + `info'; r CLUSTER INFO
echo '` + sampleMarker + `node'; r INFO replication keyspace server memory
`

// execSampler asks each pod's redis-server through the API server's exec
// endpoint.
type execSampler struct {
	cfg      *rest.Config
	cs       kubernetes.Interface
	password string
}

// sample runs sampleScript in pod's Redis container and splits its output.
func (e *execSampler) sample(ctx context.Context, pod *corev1.Pod) statusview.Sample {
	req := e.cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(pod.Namespace).Name(pod.Name).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{
			Container: resources.RedisContainerName,
			Command:   []string{"sh", "-c", sampleScript},
			Stdin:     true, Stdout: true, Stderr: true,
		}, scheme.ParameterCodec)
	ex, err := remotecommand.NewSPDYExecutor(e.cfg, "POST", req.URL())
	if err != nil {
		return statusview.Sample{Err: fmt.Errorf("exec in %s: %w", pod.Name, err)}
	}
	var stdout, stderr bytes.Buffer
	err = ex.StreamWithContext(ctx, remotecommand.StreamOptions{
		Stdin: strings.NewReader(e.password + "\n"), Stdout: &stdout, Stderr: &stderr,
	})
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg != "" {
			return statusview.Sample{Err: fmt.Errorf("exec in %s: %w: %s", pod.Name, err, msg)}
		}
		return statusview.Sample{Err: fmt.Errorf("exec in %s: %w", pod.Name, err)}
	}
	return splitSample(stdout.String())
}

// splitSample splits sampleScript's output into its three replies. A
// reply that is a Redis error (redis-cli prints "ERR ...", "NOAUTH ...")
// or a connection failure becomes the sample's Err.
func splitSample(out string) statusview.Sample {
	parts := map[string]string{}
	for _, chunk := range strings.Split(out, sampleMarker)[1:] {
		name, body, _ := strings.Cut(chunk, "\n")
		parts[name] = body
	}
	s := statusview.Sample{ClusterNodes: parts["nodes"], ClusterInfo: parts["info"], Info: parts["node"]}
	for _, name := range []string{"nodes", "info", "node"} {
		body, ok := parts[name]
		if !ok {
			s.Err = fmt.Errorf("no %s reply in the exec output", name)
			return s
		}
		first, _, _ := strings.Cut(strings.TrimSpace(body), "\n")
		if isErrorReply(first) {
			s.Err = fmt.Errorf("redis-cli: %s", first)
			return s
		}
	}
	return s
}

// isErrorReply tells a Redis error reply or redis-cli's connection error
// from a data line: data lines of these replies start with a node ID, a
// "key:value" pair or a "# Section" header.
func isErrorReply(line string) bool {
	if strings.HasPrefix(line, "Could not connect") || strings.HasPrefix(line, "(error)") {
		return true
	}
	word, _, _ := strings.Cut(line, " ")
	return word != "" && strings.ToUpper(word) == word && !strings.Contains(word, ":") && !strings.HasPrefix(word, "#") &&
		strings.IndexFunc(word, func(r rune) bool { return r < 'A' || r > 'Z' }) < 0
}
