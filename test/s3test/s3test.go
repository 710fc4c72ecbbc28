// Package s3test starts a real S3-compatible object store for tests:
// SeaweedFS's `weed mini` (master, volume server, filer and S3 gateway in
// one process; bin/weed, built by `make tools` from hack/tools/seaweedfs,
// or $WEED), on a loopback address of its own, with one identity whose
// access key pair signs every request (anonymous requests are refused).
package s3test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// The identity every Server accepts.
const (
	AccessKey = "redis-operator-test"
	SecretKey = "s3test-secret-key-0123456789abcdef"
)

// S3Port is the S3 gateway's port on the Server's address (weed's default).
const S3Port = 8333

// Server is one `weed mini` process.
type Server struct {
	// IP is the loopback address every port of the server listens on.
	IP string
	// Endpoint is the S3 API's URL, http://IP:8333.
	Endpoint string
	// Dir holds the data and weed.log.
	Dir  string
	bin  string
	cmd  *exec.Cmd
	done chan struct{} // closed once the current process exited
	// grpcFlags give each component its own gRPC port (grpcPorts): weed
	// names the unix socket of a component's gRPC server after that port
	// alone, in /tmp (/tmp/seaweedfs-volume-grpc-<port>.sock), so two
	// servers on different addresses with weed's default ports take each
	// other's sockets, and one's volume server vanishes for the other.
	grpcFlags []string
}

var next atomic.Int32

// Binary is the weed binary: $WEED, else bin/weed of the first directory
// upward from the working directory that has one.
func Binary() (string, error) {
	if w := os.Getenv("WEED"); w != "" {
		return w, nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, "bin", "weed")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("s3test: no bin/weed above the working directory: run make tools (or set $WEED)")
		}
		dir = parent
	}
}

// Start starts a server in a temporary directory on an address of its own,
// 127.83.X.Y (X from the process ID, Y counting the servers of the
// process), and waits (up to 90 s) until its S3 gateway answers a signed
// ListBuckets; it is stopped when the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	n := next.Add(1)
	return StartAt(t, fmt.Sprintf("127.83.%d.%d", os.Getpid()%250, n%250+1))
}

// StartAt is Start on ip, an address of this machine whose weed ports
// (8333, 8888, 9333, 9340 and their gRPC ports, +10000) are free: for
// example a local plane's gateway, which its pods can reach.
func StartAt(t testing.TB, ip string) *Server {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg, _ := json.Marshal(map[string]any{"identities": []any{map[string]any{
		"name":        "tester",
		"credentials": []any{map[string]string{"accessKey": AccessKey, "secretKey": SecretKey}},
		"actions":     []string{"Admin", "Read", "List", "Tagging", "Write"},
	}}})
	cfgFile := filepath.Join(dir, "s3.json")
	if err := os.WriteFile(cfgFile, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	s := &Server{IP: ip, Endpoint: fmt.Sprintf("http://%s:%d", ip, S3Port), Dir: dir, bin: bin}
	s.grpcFlags, err = grpcPorts()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	s.launch(t)
	return s
}

// launch starts weed mini on s's address and directory, appending to its
// weed.log, and waits (up to 90 s) until its S3 gateway answers a signed
// ListBuckets.
func (s *Server) launch(t testing.TB) {
	t.Helper()
	data := filepath.Join(s.Dir, "data")
	logf, err := os.OpenFile(filepath.Join(s.Dir, "weed.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	args := []string{"mini", "-dir=" + data, "-ip=" + s.IP, "-ip.bind=" + s.IP,
		"-s3.config=" + filepath.Join(s.Dir, "s3.json"), "-s3.port=" + fmt.Sprint(S3Port), "-s3.iam=false", "-s3.port.iceberg=0", "-s3.port.lance=0",
		"-webdav=false", "-admin.ui=false", "-admin.port.legacy=0", "-master.telemetry=false",
		"-filer.localSocket=" + filepath.Join(s.Dir, "filer.sock"), "-s3.localSocket=" + filepath.Join(s.Dir, "s3.sock")}
	cmd := exec.Command(s.bin, append(args, s.grpcFlags...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	// Pdeathsig fires when the OS thread that forked the server ends, not
	// when this process does: the Go runtime ends a thread whenever a
	// goroutine locked to it returns (the e2e suite's process starter does
	// so), which may be the thread that happened to run Start. A thread of
	// the server's own, locked and never unlocked, lives exactly as long as
	// the server.
	started, done := make(chan error, 1), make(chan struct{})
	go func() {
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		_ = cmd.Wait()
		close(done)
	}()
	if err := <-started; err != nil {
		t.Fatalf("s3test: starting %s: %v", s.bin, err)
	}
	s.cmd, s.done = cmd, done
	deadline := time.Now().Add(90 * time.Second)
	c := s.Client(t)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := c.ListBuckets(ctx)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(s.Dir, "weed.log"))
			t.Fatalf("s3test: weed mini on %s not answering after 90 s: %v\n%s", s.IP, err, tail(log, 4000))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// Freeze stops every process of the server with SIGSTOP: connections stay
// open and nothing answers, as with a hung store. Stop or Restart ends it.
func (s *Server) Freeze() {
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGSTOP)
}

// Restart kills the server (SIGKILL, as a crash) if it still runs and
// starts it again on the same address and directory: buckets and objects
// written before are there again, as far as weed had stored them.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.Stop()
	s.launch(t)
}

// Client is a minio client signed with the server's identity.
func (s *Server) Client(t testing.TB) *minio.Client {
	t.Helper()
	c, err := minio.New(fmt.Sprintf("%s:%d", s.IP, S3Port), &minio.Options{
		Creds: credentials.NewStaticV4(AccessKey, SecretKey, ""), Region: "us-east-1", BucketLookup: minio.BucketLookupPath,
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// MakeBucket creates a bucket, failing the test on an error.
func (s *Server) MakeBucket(t testing.TB, name string) {
	t.Helper()
	if err := s.Client(t).MakeBucket(context.Background(), name, minio.MakeBucketOptions{Region: "us-east-1"}); err != nil {
		t.Fatalf("s3test: creating bucket %s: %v", name, err)
	}
}

// Stop kills the server's process group and waits for it.
func (s *Server) Stop() {
	if s.cmd == nil {
		return // never started
	}
	select {
	case <-s.done:
		return
	default:
	}
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	<-s.done
	// A killed weed leaves its gRPC sockets behind; they are this server's alone.
	for _, f := range s.grpcFlags {
		var c string
		var port int
		if _, err := fmt.Sscanf(strings.ReplaceAll(f, ".port.grpc=", " "), "-%s %d", &c, &port); err == nil {
			_ = os.Remove(fmt.Sprintf("/tmp/seaweedfs-%s-grpc-%d.sock", c, port))
		}
	}
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// grpcComponents are the components of weed mini that serve gRPC, each on
// its own port (-<component>.port.grpc).
var grpcComponents = []string{"master", "volume", "filer", "s3", "admin"}

// grpcPorts picks a gRPC port for each of grpcComponents, as flags: ports
// the kernel gives a wildcard listener (free on every address at that
// moment), none of which names an existing /tmp/seaweedfs-*-grpc-<port>.sock,
// so that no two servers of this machine share a socket.
func grpcPorts() ([]string, error) {
	var flags []string
	taken := map[int]bool{}
	for _, c := range grpcComponents {
		for attempt := 0; ; attempt++ {
			if attempt == 100 {
				return nil, fmt.Errorf("s3test: no free gRPC port for weed's %s", c)
			}
			l, err := net.Listen("tcp", ":0")
			if err != nil {
				return nil, fmt.Errorf("s3test: picking a gRPC port: %w", err)
			}
			port := l.Addr().(*net.TCPAddr).Port
			_ = l.Close()
			if taken[port] {
				continue
			}
			if socks, _ := filepath.Glob(fmt.Sprintf("/tmp/seaweedfs-*-grpc-%d.sock", port)); len(socks) > 0 {
				continue
			}
			taken[port] = true
			flags = append(flags, fmt.Sprintf("-%s.port.grpc=%d", c, port))
			break
		}
	}
	return flags, nil
}
