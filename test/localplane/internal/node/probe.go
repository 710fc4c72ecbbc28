package node

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/redis-operator/redis-operator/test/localplane/internal/expand"
)

// staticEnv maps the container's env entries to their literal values, as
// the kubelet's prober does for exec commands
// (kubecontainer.ExpandContainerCommandOnlyStatic): a $(VAR) naming a
// valueFrom variable such as POD_IP expands to "", not to its value. Use
// `sh -c '... $POD_IP ...'` to read such variables in a probe.
func staticEnv(c *corev1.Container) expand.Mapping {
	m := map[string]string{}
	for _, e := range c.Env {
		m[e.Name] = e.Value
	}
	return expand.MapOf(m)
}

// handlerTarget is what running a probe or lifecycle handler against one
// container needs.
type handlerTarget struct {
	podIP string
	spec  *corev1.Container
	image *Image
	exec  execSpec
}

// runHandler runs one probe or lifecycle action within timeout and reports
// success and a message for events.
func runHandler(ctx context.Context, h corev1.ProbeHandler, t handlerTarget, timeout time.Duration) (bool, string) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	switch {
	case h.Exec != nil:
		argv := expand.All(h.Exec.Command, staticEnv(t.spec))
		if len(argv) == 0 {
			return false, "exec: empty command"
		}
		bin, err := t.image.Resolve(argv[0])
		if err != nil {
			return false, err.Error()
		}
		argv[0] = t.image.containerPath(bin)
		var out bytes.Buffer
		s := t.exec
		s.argv = argv
		lb := &limitedBuffer{buf: &out, max: 1024}
		s.stdout, s.stderr = lb, lb
		code, err := execIn(ctx, s)
		if err != nil {
			return false, fmt.Sprintf("exec %v: %v", h.Exec.Command, err)
		}
		if code != 0 {
			return false, fmt.Sprintf("exec %v: exit code %d: %s", h.Exec.Command, code, strings.TrimSpace(out.String()))
		}
		return true, ""
	case h.TCPSocket != nil:
		port, err := resolvePort(h.TCPSocket.Port, t.spec)
		if err != nil {
			return false, err.Error()
		}
		host := h.TCPSocket.Host
		if host == "" {
			host = t.podIP
		}
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			return false, fmt.Sprintf("tcpSocket: %v", err)
		}
		conn.Close()
		return true, ""
	case h.HTTPGet != nil:
		return httpGet(ctx, h.HTTPGet, t)
	case h.GRPC != nil:
		return false, "gRPC probes are not supported on the local plane"
	}
	return false, "probe has no handler"
}

func httpGet(ctx context.Context, g *corev1.HTTPGetAction, t handlerTarget) (bool, string) {
	port, err := resolvePort(g.Port, t.spec)
	if err != nil {
		return false, err.Error()
	}
	host := g.Host
	if host == "" {
		host = t.podIP
	}
	scheme := strings.ToLower(string(g.Scheme))
	if scheme == "" {
		scheme = "http"
	}
	u := url.URL{Scheme: scheme, Host: net.JoinHostPort(host, strconv.Itoa(port)), Path: g.Path}
	if p, q, ok := strings.Cut(g.Path, "?"); ok {
		u.Path, u.RawQuery = p, q
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return false, err.Error()
	}
	for _, h := range g.HTTPHeaders {
		req.Header.Add(h.Name, h.Value)
	}
	// Like the kubelet, HTTPS probes do not verify the certificate.
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := client.Do(req)
	if err != nil {
		return false, fmt.Sprintf("httpGet: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode >= 400 {
		return false, fmt.Sprintf("httpGet %s: status %d", u.String(), resp.StatusCode)
	}
	return true, ""
}

// resolvePort turns a number or a container port name into a port number.
func resolvePort(p intstr.IntOrString, c *corev1.Container) (int, error) {
	if p.Type == intstr.Int {
		return p.IntValue(), nil
	}
	for _, cp := range c.Ports {
		if cp.Name == p.StrVal {
			return int(cp.ContainerPort), nil
		}
	}
	if n, err := strconv.Atoi(p.StrVal); err == nil {
		return n, nil
	}
	return 0, fmt.Errorf("container %s has no port named %q", c.Name, p.StrVal)
}

func seconds(n int32, def int32) time.Duration {
	if n <= 0 {
		n = def
	}
	return time.Duration(n) * time.Second
}
