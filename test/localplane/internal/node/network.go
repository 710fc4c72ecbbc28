package node

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/redis-operator/redis-operator/test/localplane/internal/clusterdns"
	"github.com/redis-operator/redis-operator/test/localplane/internal/podnet"
)

// podAddress gives a new pod its IP: a network namespace of its own when
// the node has a pod network, else a free loopback address.
func (n *Node) podAddress() (string, *podnet.Pod, error) {
	if n.network == nil {
		ip, err := loopbackIPs.allocate()
		return ip, nil, err
	}
	p, err := n.network.Add()
	if err != nil {
		return "", nil, err
	}
	return p.IP, &p, nil
}

// releaseAddress frees a stopped pod's IP and removes its namespace.
func (n *Node) releaseAddress(pr *podRuntime) {
	if pr.netns == nil {
		loopbackIPs.release(pr.ip)
		return
	}
	if err := n.network.Remove(*pr.netns); err != nil {
		n.log.Warn("Removing pod network namespace failed", "pod", pr.key, "err", err)
	}
}

// netnsPath is the file of the pod's network namespace, or "".
func (pr *podRuntime) netnsPath() string {
	if pr.netns == nil {
		return ""
	}
	return pr.netns.Path()
}

// apiRelay forwards TCP connections from the pod network's gateway to the
// API server on loopback, which pods in their own namespaces cannot reach:
// pods get gateway:port as KUBERNETES_SERVICE_HOST/PORT (the gateway is in
// the API server's certificate). Each connection is copied both ways
// until either side closes.
type apiRelay struct {
	l  net.Listener
	wg sync.WaitGroup
}

func startAPIRelay(gateway string, port int) (*apiRelay, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(gateway, strconv.Itoa(port)))
	if err != nil {
		return nil, err
	}
	r := &apiRelay{l: l}
	target := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	r.wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go relay(c, target)
		}
	})
	return r, nil
}

func relay(c net.Conn, target string) {
	defer c.Close()
	up, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	defer up.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
	<-done
}

// close stops accepting; open connections end with their peers.
func (r *apiRelay) close() error {
	err := r.l.Close()
	r.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// networkFiles writes the pod's /etc/resolv.conf and /etc/hosts, as the
// kubelet does for dnsPolicy ClusterFirst, into the pod directory and
// returns their (read-only) mounts: the cluster DNS on the gateway, the
// search path of the pod's namespace with ndots:5, and the pod's hostname
// (with its subdomain's FQDN when it has one) on its IP.
func (pr *podRuntime) networkFiles(hostname string) ([]mountSpec, error) {
	dir := filepath.Join(pr.dir, "etc")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	pod := pr.podCopy()
	search := fmt.Sprintf("%s.svc.%s svc.%[2]s %[2]s", pod.Namespace, clusterdns.Domain)
	resolv := fmt.Sprintf("search %s\nnameserver %s\noptions ndots:5\n", search, pr.n.network.Gateway)
	names := hostname
	if sub := pod.Spec.Subdomain; sub != "" {
		names = fmt.Sprintf("%s.%s.%s.svc.%s %s", hostname, sub, pod.Namespace, clusterdns.Domain, hostname)
	}
	hosts := fmt.Sprintf("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n%s\t%s\n", pr.ip, names)
	var out []mountSpec
	for name, content := range map[string]string{"resolv.conf": resolv, "hosts": hosts} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			return nil, err
		}
		out = append(out, mountSpec{src: path, dst: "/etc/" + name, readOnly: true})
	}
	return out, nil
}
