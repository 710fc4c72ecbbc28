package node

import (
	"bufio"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"net"
	"os"
	"strings"
	"sync"
)

// ipAllocator hands out pod IPs from 127.64.0.0/10 (127.64.0.1 to
// 127.127.255.254), a part of the loopback range left alone by the usual
// 127.0.0.1 services. Each pod gets its own address, so every pod can listen
// on the same port. An address is free when this allocator has not handed it
// out and no socket on the machine is bound to it (read from /proc/net/tcp,
// which also covers other local planes running at the same time).
type ipAllocator struct {
	mu   sync.Mutex
	used map[string]bool
}

// loopbackIPs is shared by every process node of this process, so two
// nodes never hand out the same address.
var loopbackIPs = &ipAllocator{used: map[string]bool{}}

func (a *ipAllocator) allocate() (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	bound, err := boundIPv4s()
	if err != nil {
		return "", err
	}
	for range 1000 {
		n := rand.Uint32N(1 << 22)
		ip := net.IPv4(127, byte(64+n>>16), byte(n>>8), byte(n)).String()
		if byte(n) == 0 || byte(n) == 255 || a.used[ip] || bound[ip] {
			continue
		}
		a.used[ip] = true
		return ip, nil
	}
	return "", errors.New("no free pod IP in 127.64.0.0/10")
}

func (a *ipAllocator) release(ip string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.used, ip)
}

// boundIPv4s returns the local IPv4 addresses of all TCP sockets on the
// machine, from /proc/net/tcp (see proc(5): local_address is the address
// in hexadecimal, in host byte order, then ":" and the port).
func boundIPv4s() (map[string]bool, error) {
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]bool{}
	sc := bufio.NewScanner(f)
	sc.Scan() // header
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			continue
		}
		addr, _, _ := strings.Cut(fields[1], ":")
		b, err := hex.DecodeString(addr)
		if err != nil || len(b) != 4 {
			continue
		}
		out[net.IPv4(b[3], b[2], b[1], b[0]).String()] = true
	}
	return out, sc.Err()
}
