// Package redistest starts real redis-server processes in cluster mode for tests.
//
// Every node listens on 127.0.0.1 (or, with Options.OwnAddress, on an address of its own in
// 127.0.0.0/8) on a free port P (its cluster bus on P+10000), keeps its
// nodes.conf, RDB/AOF files and log in a directory under t.TempDir(), and is killed by a
// t.Cleanup even when the test fails. Nodes can be stopped (SIGTERM, which saves the RDB),
// killed (SIGKILL), restarted with their files on the same or a new port, or wiped to come
// back as a fresh empty node. No Docker: the binary is /usr/bin/redis-server (override with
// REDIS_SERVER, read at every start; CLI names the matching redis-cli, REDIS_CLI).
package redistest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// Options configures every node a call to Start creates.
type Options struct {
	// Password sets requirepass and masterauth. Empty means no authentication.
	Password string
	// NodeTimeout is cluster-node-timeout. Default 2 s (short, so failure detection is fast).
	NodeTimeout time.Duration
	// AppendFsyncAlways turns on the AOF with appendfsync always, so that every acknowledged
	// write (including keys received through MIGRATE) survives kill -9. Off by default: data
	// then survives Stop (SIGTERM saves an RDB) but not Kill.
	AppendFsyncAlways bool
	// Extra holds additional redis.conf lines, e.g. "maxmemory 100mb".
	Extra []string
	// OwnAddress gives each node an address of its own in 127.0.0.0/8 (see Node.IP): it
	// listens there, announces it (cluster-announce-ip) and opens its cluster-bus and
	// replication connections from it (bind-source-addr, Redis 7.0), so that a firewall rule
	// on a pair of addresses cuts exactly the link between two nodes (see Cut). Test
	// clients still connect from 127.0.0.1.
	OwnAddress bool
	// TLS, when set, serves TLS only (port 0, tls-port on the node's port) with these files,
	// for replication and the cluster bus too; the helper's own clients use TLS.Client.
	TLS *TLS
}

// Node is one redis-server process. Its methods are safe for concurrent use.
type Node struct {
	t    testing.TB
	opts Options
	// Dir holds redis.conf, nodes.conf, the data files and redis.log.
	Dir string

	ip   string // listen address, "127.0.0.1" unless Options.OwnAddress
	mu   sync.Mutex
	port int
	cmd  *exec.Cmd
	done chan struct{}
}

var (
	portsMu sync.Mutex
	// ports handed out by this test binary; kept reserved while a node is stopped so a
	// restart on the same port cannot collide with a sibling node.
	usedPorts = map[int]bool{}
)

// Binary returns the redis-server path used by the helper.
func Binary() string {
	if b := os.Getenv("REDIS_SERVER"); b != "" {
		return b
	}
	return "/usr/bin/redis-server"
}

// CLI returns the redis-cli that tests run against the helper's servers: $REDIS_CLI, or
// "redis-cli" from PATH. Set it with REDIS_SERVER to another build's own CLI (valkey-cli
// for Valkey).
func CLI() string {
	if c := os.Getenv("REDIS_CLI"); c != "" {
		return c
	}
	return "redis-cli"
}

// Start starts n nodes in parallel and waits until each answers PING.
func Start(t testing.TB, n int, opts Options) []*Node {
	t.Helper()
	nodes := make([]*Node, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range nodes {
		nodes[i] = newNode(t, opts)
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = nodes[i].startOnFreePort()
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("redistest: start %d nodes: %v", n, err)
	}
	return nodes
}

// StartOne starts a single node.
func StartOne(t testing.TB, opts Options) *Node {
	t.Helper()
	return Start(t, 1, opts)[0]
}

func newNode(t testing.TB, opts Options) *Node {
	if opts.NodeTimeout == 0 {
		opts.NodeTimeout = 2 * time.Second
	}
	n := &Node{t: t, opts: opts, Dir: t.TempDir(), ip: "127.0.0.1"}
	if opts.OwnAddress {
		n.ip = nextIP()
	}
	t.Cleanup(n.cleanup)
	return n
}

// Addr is "ip:port".
func (n *Node) Addr() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return net.JoinHostPort(n.ip, strconv.Itoa(n.port))
}

// IP is the address the node listens on: 127.0.0.1, or its own with Options.OwnAddress.
func (n *Node) IP() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.ip
}

var (
	ipMu   sync.Mutex
	ipNext int
)

// nextIP hands out 127.X.Y.Z addresses, X derived from the process ID so that test binaries
// running at once pick different ranges.
func nextIP() string {
	ipMu.Lock()
	defer ipMu.Unlock()
	ipNext++
	return fmt.Sprintf("127.%d.%d.%d", 100+os.Getpid()%100, ipNext/250, ipNext%250+1)
}

// Port is the client port; the cluster bus listens on Port()+10000.
func (n *Node) Port() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.port
}

// Running reports whether the process is alive.
func (n *Node) Running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.runningLocked()
}

func (n *Node) runningLocked() bool {
	if n.done == nil {
		return false
	}
	select {
	case <-n.done:
		return false
	default:
		return true
	}
}

// ClientOptions are go-redis options for a direct connection to this node.
func (n *Node) ClientOptions() *redis.Options {
	return &redis.Options{
		Addr:                     n.Addr(),
		Password:                 n.opts.Password,
		Protocol:                 2,
		DisableIdentity:          true,
		DialTimeout:              2 * time.Second,
		ReadTimeout:              10 * time.Second,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
		TLSConfig:                n.opts.TLS.client(),
	}
}

// Client opens a direct connection to the node; it is closed when the test ends.
func (n *Node) Client() *redis.Client {
	c := redis.NewClient(n.ClientOptions())
	n.t.Cleanup(func() { _ = c.Close() })
	return c
}

// Do runs one command on the node and fails the test on error.
func (n *Node) Do(args ...any) any {
	n.t.Helper()
	c := redis.NewClient(n.ClientOptions())
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	v, err := c.Do(ctx, args...).Result()
	if err != nil {
		n.t.Fatalf("redistest: %s %v: %v", n.Addr(), args, err)
	}
	return v
}

// Stop shuts the node down with SIGTERM (it saves its RDB first) and waits for the exit.
func (n *Node) Stop() { n.signal(syscall.SIGTERM) }

// Kill sends SIGKILL and waits for the exit: nothing is saved.
func (n *Node) Kill() { n.signal(syscall.SIGKILL) }

func (n *Node) signal(sig syscall.Signal) {
	n.t.Helper()
	n.mu.Lock()
	cmd, done := n.cmd, n.done
	n.mu.Unlock()
	if cmd == nil || done == nil {
		return
	}
	select {
	case <-done:
		return
	default:
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

// Restart starts the stopped node again on its port with its files (nodes.conf, data).
func (n *Node) Restart() {
	n.t.Helper()
	if err := n.launch(n.Port()); err != nil {
		n.t.Fatalf("redistest: restart %s: %v", n.Addr(), err)
	}
}

// RestartOnNewPort starts the stopped node again with its files on a fresh port, as a pod
// that comes back with its volume but a new IP.
func (n *Node) RestartOnNewPort() {
	n.t.Helper()
	if err := n.startOnFreePort(); err != nil {
		n.t.Fatalf("redistest: restart on a new port: %v", err)
	}
}

// RestartOnNewAddress starts the stopped node again with its files on a fresh address of
// its own and a fresh port, as a pod that comes back with its volume but a new IP. It needs
// Options.OwnAddress.
func (n *Node) RestartOnNewAddress() {
	n.t.Helper()
	if !n.opts.OwnAddress {
		n.t.Fatal("redistest: RestartOnNewAddress needs Options.OwnAddress")
	}
	n.mu.Lock()
	n.ip = nextIP()
	n.mu.Unlock()
	if err := n.startOnFreePort(); err != nil {
		n.t.Fatalf("redistest: restart on a new address: %v", err)
	}
}

// Wipe deletes nodes.conf and the data files of a stopped node, so that the next Restart
// brings up a fresh empty node (a new node ID) on the same port, as a pod that lost its
// volume.
func (n *Node) Wipe() {
	n.t.Helper()
	if n.Running() {
		n.t.Fatalf("redistest: wipe %s while it runs", n.Addr())
	}
	entries, err := os.ReadDir(n.Dir)
	if err != nil {
		n.t.Fatalf("redistest: wipe: %v", err)
	}
	for _, e := range entries {
		if e.Name() == "redis.log" {
			continue
		}
		if err := os.RemoveAll(filepath.Join(n.Dir, e.Name())); err != nil {
			n.t.Fatalf("redistest: wipe: %v", err)
		}
	}
}

// LogTail returns the last lines of the node's log.
func (n *Node) LogTail(lines int) string {
	b, err := os.ReadFile(filepath.Join(n.Dir, "redis.log"))
	if err != nil {
		return ""
	}
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

func (n *Node) cleanup() {
	n.mu.Lock()
	cmd, done := n.cmd, n.done
	port := n.port
	n.mu.Unlock()
	if cmd != nil && done != nil {
		select {
		case <-done:
		default:
			_ = cmd.Process.Kill()
			<-done
		}
	}
	if n.t.Failed() {
		n.t.Logf("redistest: last log lines of node on port %d:\n%s", port, n.LogTail(15))
	}
	portsMu.Lock()
	delete(usedPorts, port)
	portsMu.Unlock()
}

// startOnFreePort picks a port whose client and bus ports are free and launches the node,
// retrying with another port when another process won the race for it.
func (n *Node) startOnFreePort() error {
	var last error
	for range 20 {
		port, err := reservePort(n.ip)
		if err != nil {
			return err
		}
		old := n.Port()
		if last = n.launch(port); last == nil {
			if old != 0 {
				portsMu.Lock()
				delete(usedPorts, old)
				portsMu.Unlock()
			}
			return nil
		}
		portsMu.Lock()
		delete(usedPorts, port)
		portsMu.Unlock()
		if !errors.Is(last, errAddrInUse) {
			return last
		}
	}
	return last
}

var errAddrInUse = errors.New("address in use")

func reservePort(ip string) (int, error) {
	portsMu.Lock()
	defer portsMu.Unlock()
	for range 1000 {
		p := 20000 + rand.IntN(35000)
		if usedPorts[p] || !portFree(ip, p) || !portFree(ip, p+10000) {
			continue
		}
		usedPorts[p] = true
		return p, nil
	}
	return 0, fmt.Errorf("no free port pair on %s", ip)
}

func portFree(ip string, p int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(p)))
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}

func (n *Node) config(port int) string {
	var b strings.Builder
	line := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	line("bind %s", n.ip)
	if n.opts.OwnAddress {
		line("cluster-announce-ip %s", n.ip)
		line("bind-source-addr %s", n.ip)
	}
	if n.opts.TLS != nil {
		n.opts.TLS.lines(line, port)
	} else {
		line("port %d", port)
	}
	line("protected-mode no")
	line("daemonize no")
	line("dir %s", n.Dir)
	line("logfile %s", filepath.Join(n.Dir, "redis.log"))
	line("cluster-enabled yes")
	line("cluster-config-file nodes.conf")
	line("cluster-node-timeout %d", n.opts.NodeTimeout.Milliseconds())
	// Replicas start their full sync at once instead of waiting 5 s for company.
	line("repl-diskless-sync-delay 0")
	// Save only at shutdown (SIGTERM): no background saves while tests load data.
	line("save 86400 1")
	if n.opts.AppendFsyncAlways {
		line("appendonly yes")
		line("appendfsync always")
	} else {
		line("appendonly no")
	}
	if n.opts.Password != "" {
		line("requirepass %q", n.opts.Password)
		line("masterauth %q", n.opts.Password)
	}
	for _, l := range n.opts.Extra {
		line("%s", l)
	}
	return b.String()
}

// launch starts redis-server on port and waits until it answers PING.
func (n *Node) launch(port int) error {
	n.mu.Lock()
	if n.runningLocked() {
		n.mu.Unlock()
		return fmt.Errorf("node on port %d is already running", n.port)
	}
	n.mu.Unlock()

	conf := filepath.Join(n.Dir, "redis.conf")
	if err := os.WriteFile(conf, []byte(n.config(port)), 0o600); err != nil {
		return err
	}
	logPath := filepath.Join(n.Dir, "redis.log")
	logStart := fileSize(logPath)

	cmd := exec.Command(Binary(), conf)
	// The kernel kills the server if the test binary dies without running its cleanups.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", Binary(), err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	n.mu.Lock()
	n.port, n.cmd, n.done = port, cmd, done
	n.mu.Unlock()

	c := redis.NewClient(n.ClientOptions())
	defer c.Close()
	deadline := time.Now().Add(20 * time.Second)
	for {
		select {
		case <-done:
			tail := logSince(logPath, logStart)
			if strings.Contains(tail, "Address already in use") {
				return fmt.Errorf("port %d: %w", port, errAddrInUse)
			}
			return fmt.Errorf("redis-server on port %d exited: %s", port, tail)
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-done
			return fmt.Errorf("redis-server on port %d not answering: %v", port, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func fileSize(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return st.Size()
}

func logSince(path string, offset int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if _, err := f.Seek(offset, 0); err != nil {
		return ""
	}
	var lines []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		lines = append(lines, s.Text())
	}
	if len(lines) > 10 {
		lines = lines[len(lines)-10:]
	}
	return strings.Join(lines, "\n")
}

// FilesHolding lists the files of the node's directory (redis.conf, nodes.conf, the RDB and
// AOF files, the log) whose content contains s, by path relative to Dir.
func (n *Node) FilesHolding(s string) []string {
	n.t.Helper()
	found, _, err := FilesContaining(n.Dir, s)
	if err != nil {
		n.t.Fatalf("redistest: reading %s: %v", n.Dir, err)
	}
	return found
}

// FilesContaining walks root and returns the files (paths relative to root) whose content
// contains any of the non-empty strings in secrets, and how many files it read.
func FilesContaining(root string, secrets ...string) (found []string, files int, err error) {
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files++
		for _, s := range secrets {
			if s != "" && strings.Contains(string(b), s) {
				rel, _ := filepath.Rel(root, path)
				found = append(found, rel)
				break
			}
		}
		return nil
	})
	return found, files, err
}
