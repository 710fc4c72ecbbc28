// Command vaultserver runs the test Vault server (package vaultserver) until
// SIGINT or SIGTERM: Vault's own KV v2 backend at secret/ and Kubernetes auth
// method at auth/kubernetes/, in memory, over plain HTTP on a loopback
// address, or over HTTPS on a loopback or private address when
// --tls-cert-file and --tls-key-file name a PEM certificate and its key.
// For demos and for tests in other modules.
//
//	go run ./cmd/vaultserver --listen 127.0.0.1:8200
//	go run ./cmd/vaultserver --listen 10.244.0.1:0 --tls-cert-file tls.crt --tls-key-file tls.key
//
// It prints two lines on standard output once it is serving, in shell
// syntax:
//
//	VAULT_ADDR=http://127.0.0.1:8200
//	VAULT_TOKEN=<root token>
//
// (VAULT_ADDR=https://... with TLS; a port 0 in --listen is printed as the
// port picked.)
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
	listen := flag.String("listen", "127.0.0.1:8200", "address to listen on: loopback, or with TLS also private (10/8, 172.16/12, 192.168/16, fc00::/7); port 0 picks a free port")
	tlsCert := flag.String("tls-cert-file", "", "PEM serving certificate (leaf first, then intermediates); with --tls-key-file the server speaks HTTPS")
	tlsKey := flag.String("tls-key-file", "", "PEM private key of --tls-cert-file")
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
		Listen:      *listen,
		TLSCertFile: *tlsCert,
		TLSKeyFile:  *tlsKey,
		RootToken:   rootToken,
		Namespace:   *namespace,
		Logger:      logger,
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
