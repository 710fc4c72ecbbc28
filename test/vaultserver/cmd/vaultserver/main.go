// Command vaultserver runs the test Vault server (package vaultserver) until
// SIGINT or SIGTERM: Vault's own KV v2 backend at secret/ and Kubernetes auth
// method at auth/kubernetes/, in memory, over plain HTTP on a loopback
// address. For demos and for tests in other modules.
//
//	go run ./cmd/vaultserver --listen 127.0.0.1:8200
//
// It prints two lines on standard output once it is serving, in shell
// syntax:
//
//	VAULT_ADDR=http://127.0.0.1:8200
//	VAULT_TOKEN=<root token>
//
// The second line is printed only when the root token was generated; set
// VAULT_DEV_ROOT_TOKEN_ID (as for `vault server -dev`) to choose it instead.
// Request log lines (method, path, status) go to standard error.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	hclog "github.com/hashicorp/go-hclog"

	"github.com/redis-operator/redis-operator/test/vaultserver"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:8200", "loopback address to listen on (port 0 picks a free port)")
	namespace := flag.String("namespace", "", "if set, the only X-Vault-Namespace accepted")
	logLevel := flag.String("log-level", "info", "log level for standard error: trace, debug, info, warn, error, off")
	flag.Parse()

	logger := hclog.New(&hclog.LoggerOptions{
		Name:   "vaultserver",
		Level:  hclog.LevelFromString(*logLevel),
		Output: os.Stderr,
	})
	rootToken := os.Getenv("VAULT_DEV_ROOT_TOKEN_ID")
	srv, err := vaultserver.Start(vaultserver.Options{
		Listen:    *listen,
		RootToken: rootToken,
		Namespace: *namespace,
		Logger:    logger,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("VAULT_ADDR=%s\n", srv.Addr())
	if rootToken == "" {
		fmt.Printf("VAULT_TOKEN=%s\n", srv.RootToken())
	}

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
	if err := srv.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
