package nfqdelay

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestDelay: in a network namespace of its own, a TCP echo across lo
// takes at least twice the delay per round trip (the request and the reply
// each wait once) while a Delayer holds the queue the namespace's OUTPUT
// rule feeds, every byte comes back in order, and once the Delayer stops
// the rule's --queue-bypass lets packets through undelayed again.
func TestDelay(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (network namespaces, iptables, netlink)")
	}
	ns := fmt.Sprintf("nfqdelay-test-%d", os.Getpid())
	run(t, "ip", "netns", "add", ns)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
	run(t, "ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")
	const queue = 4242
	run(t, "ip", "netns", "exec", ns, "iptables", "-A", "OUTPUT", "-o", "lo", "-p", "tcp",
		"-j", "NFQUEUE", "--queue-num", fmt.Sprint(queue), "--queue-bypass")
	nsPath := "/var/run/netns/" + ns

	var ln net.Listener
	var conn net.Conn
	inNetns(t, nsPath, func() error {
		var err error
		if ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			return err
		}
		go func() {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = io.Copy(c, c)
		}()
		conn, err = net.Dial("tcp", ln.Addr().String())
		return err
	})
	t.Cleanup(func() { _ = conn.Close(); _ = ln.Close() })

	const delay = 300 * time.Millisecond
	rtt := func(label string) time.Duration {
		t.Helper()
		var rtts []time.Duration
		for i := range 5 {
			b := []byte{byte('a' + i)}
			start := time.Now()
			if _, err := conn.Write(b); err != nil {
				t.Fatal(err)
			}
			got := make([]byte, 1)
			_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
			if _, err := io.ReadFull(conn, got); err != nil {
				t.Fatalf("%s: echo %d: %v", label, i, err)
			}
			if got[0] != b[0] {
				t.Fatalf("%s: echo %d came back as %q, want %q", label, i, got, b)
			}
			rtts = append(rtts, time.Since(start))
		}
		slices.Sort(rtts)
		t.Logf("%s: round trips %v", label, rtts)
		return rtts[len(rtts)/2]
	}

	rtt("no Delayer bound (bypass)")
	d, err := Start(nsPath, queue, delay)
	if err != nil {
		t.Fatal(err)
	}
	if m := rtt("delayed"); m < 2*delay {
		t.Errorf("median round trip %v with a %v delay each way, want at least %v", m, delay, 2*delay)
	}
	if err := d.Stop(); err != nil {
		t.Fatal(err)
	}
	if m := rtt("after Stop"); m >= delay {
		t.Errorf("median round trip %v after Stop, want under %v (bypass)", m, delay)
	}
	// A second Delayer can bind the same queue once the first is gone.
	d, err = Start(nsPath, queue, delay)
	if err != nil {
		t.Fatalf("binding the queue again: %v", err)
	}
	if err := d.Stop(); err != nil {
		t.Fatal(err)
	}
}

// inNetns runs f on an OS thread inside the network namespace at path; the
// thread is discarded afterwards. Sockets f creates belong to that
// namespace.
func inNetns(t *testing.T, path string, f func() error) {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			errc <- err
			return
		}
		err = unix.Setns(fd, unix.CLONE_NEWNET)
		_ = unix.Close(fd)
		if err != nil {
			errc <- err
			return
		}
		errc <- f()
	}()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

func run(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
}
