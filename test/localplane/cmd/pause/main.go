// Command pause is the sandbox ("pause") container of the local plane's real
// nodes (image registry.k8s.io/pause, built by `make images`): it holds the
// pod's namespaces, reaps the orphans it inherits as the pod's PID 1, and
// exits 0 on SIGINT or SIGTERM. It is a static Go binary, so the image holds
// nothing else.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range signals {
		if sig != syscall.SIGCHLD {
			os.Exit(0)
		}
		// Reap every child that has exited; more may have than signals were sent.
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
