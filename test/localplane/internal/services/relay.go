package services

import (
	"errors"
	"io"
	"net"
	"strconv"
	"sync"
)

// apiRelay forwards TCP connections from the pod network's gateway to the
// API server on 127.0.0.1, which pods cannot reach from their own network
// namespaces: the API server advertises the gateway as the kubernetes
// Service's endpoint (and has it in its certificate). Each connection is
// copied both ways until either side closes.
type apiRelay struct {
	l  net.Listener
	wg sync.WaitGroup
}

// startAPIRelay listens on gateway:port and relays to 127.0.0.1:port.
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
