// Package vaultserver is a test Vault server: Vault's own secrets and auth
// backends behind a thin adapter that speaks Vault's HTTP API.
//
// What is real: the backends. KV v2 is github.com/hashicorp/vault-plugin-secrets-kv
// (kv.Factory with config version=2), the Kubernetes auth method is
// github.com/hashicorp/vault-plugin-auth-kubernetes (its Factory, which calls the
// TokenReview API of the apiserver named in auth/<mount>/config). Both run on
// logical.InmemStorage from github.com/hashicorp/vault/sdk, and the HTTP status
// codes and JSON bodies of their answers are produced by the sdk's own
// logical.RespondErrorCommon, logical.RespondError and
// logical.LogicalResponseToHTTPResponse. Token lifetimes come from the sdk's
// framework.CalculateTTL, and renewals of login tokens go through the auth
// backend's own renew handler.
//
// What is ours (and simpler than Vault): the HTTP routing of /v1/<path> to a
// mount, the token store (auth/token/...), the ACL check (policies written in
// Vault's HCL policy syntax, see policy.go), the sys/ endpoints (mounts, auth,
// policies, health) and the namespace check. There is no seal, no audit, no
// leases for secrets, no identity store, no response wrapping and no
// persistence: everything lives in memory until Close.
//
// It serves plain HTTP on a loopback address, or HTTPS (Options.TLSCertFile
// and TLSKeyFile) on a loopback or private address, such as the gateway of
// the local plane's pod network that pods reach.
package vaultserver

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	hclog "github.com/hashicorp/go-hclog"
	"github.com/hashicorp/vault/sdk/logical"
)

// Options configures Start. The zero value is usable.
type Options struct {
	// Listen is the TCP address to listen on. It must be a loopback address
	// (127.0.0.0/8, ::1 or localhost), or with TLS also a private one
	// (10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16, fc00::/7); never an
	// unspecified one (0.0.0.0, ::, empty host). Default "127.0.0.1:0" (a
	// free port).
	Listen string
	// TLSCertFile and TLSKeyFile are PEM files: the serving certificate
	// (leaf first, then any intermediates) and its private key. With both
	// set the server speaks HTTPS (TLS 1.2 or later) and Addr is https://;
	// with neither, plain HTTP. One without the other fails Start.
	TLSCertFile string
	TLSKeyFile  string
	// RootToken is the token with every right. Default: a random token,
	// readable with Server.RootToken.
	RootToken string
	// Namespace, when set, is the only Vault Enterprise namespace this server
	// answers for: every request except sys/health must carry it in the
	// X-Vault-Namespace header, or it fails with 400 "unknown namespace".
	// Empty: the header is accepted and ignored, as Vault OSS does.
	Namespace string
	// DefaultLeaseTTL and MaxLeaseTTL are the system-wide token TTLs the
	// backends see through logical.SystemView. Defaults: 768h each, as in Vault.
	DefaultLeaseTTL time.Duration
	MaxLeaseTTL     time.Duration
	// Logger receives the backends' log lines and one Info line per request
	// (method, path, status; never bodies, tokens or query strings).
	// Default: discard.
	Logger hclog.Logger
	// NoDefaultMounts skips mounting KV v2 at "secret/" and Kubernetes auth
	// at "auth/kubernetes/"; mounts can then be added through sys/mounts and
	// sys/auth.
	NoDefaultMounts bool
}

// Server is a running test Vault server.
type Server struct {
	opts     Options
	addr     string
	listener net.Listener
	http     *http.Server
	sysView  *logical.StaticSystemView
	log      hclog.Logger

	mounts   *mountTable
	tokens   *tokenStore
	policies *policyStore

	closeOnce sync.Once
	closeErr  error
}

// Start listens on opts.Listen and serves Vault's HTTP API until Close.
// Unless opts.NoDefaultMounts, KV v2 is mounted at "secret/" and the
// Kubernetes auth method at "auth/kubernetes/", as `vault server -dev` does
// for KV.
func Start(opts Options) (*Server, error) {
	if opts.Listen == "" {
		opts.Listen = "127.0.0.1:0"
	}
	if (opts.TLSCertFile == "") != (opts.TLSKeyFile == "") {
		return nil, errors.New("vaultserver: TLSCertFile and TLSKeyFile go together")
	}
	var tlsConfig *tls.Config
	if opts.TLSCertFile != "" {
		cert, err := tls.LoadX509KeyPair(opts.TLSCertFile, opts.TLSKeyFile)
		if err != nil {
			return nil, fmt.Errorf("vaultserver: TLS key pair: %w", err)
		}
		tlsConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	if err := checkListen(opts.Listen, tlsConfig != nil); err != nil {
		return nil, err
	}
	if opts.RootToken == "" {
		opts.RootToken = "hvs." + rand.Text()
	}
	if opts.DefaultLeaseTTL == 0 {
		opts.DefaultLeaseTTL = 768 * time.Hour
	}
	if opts.MaxLeaseTTL == 0 {
		opts.MaxLeaseTTL = 768 * time.Hour
	}
	if opts.DefaultLeaseTTL > opts.MaxLeaseTTL {
		return nil, fmt.Errorf("vaultserver: DefaultLeaseTTL %s exceeds MaxLeaseTTL %s", opts.DefaultLeaseTTL, opts.MaxLeaseTTL)
	}
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	s := &Server{
		opts: opts,
		log:  opts.Logger,
		sysView: &logical.StaticSystemView{
			DefaultLeaseTTLVal: opts.DefaultLeaseTTL,
			MaxLeaseTTLVal:     opts.MaxLeaseTTL,
			VersionString:      "vaultserver (test)",
		},
		policies: newPolicyStore(),
	}
	s.mounts = newMountTable(s.sysView, s.log)
	s.tokens = newTokenStore(s.sysView, opts.RootToken)

	ctx := context.Background()
	if !opts.NoDefaultMounts {
		if err := s.mounts.mount(ctx, "secret/", "kv", map[string]string{"version": "2"}, "key/value secret storage"); err != nil {
			s.mounts.closeAll(ctx)
			return nil, fmt.Errorf("vaultserver: mounting KV v2 at secret/: %w", err)
		}
		if err := s.mounts.mount(ctx, "auth/kubernetes/", "kubernetes", nil, ""); err != nil {
			s.mounts.closeAll(ctx)
			return nil, fmt.Errorf("vaultserver: mounting Kubernetes auth at auth/kubernetes/: %w", err)
		}
	}

	ln, err := net.Listen("tcp", opts.Listen)
	if err != nil {
		s.mounts.closeAll(ctx)
		return nil, fmt.Errorf("vaultserver: listen on %s: %w", opts.Listen, err)
	}
	s.listener = ln
	s.addr = "http://" + ln.Addr().String()
	s.http = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second, TLSConfig: tlsConfig,
		// TLS handshake failures (a client without the CA) and accept errors.
		ErrorLog: s.log.StandardLogger(&hclog.StandardLoggerOptions{ForceLevel: hclog.Warn})}
	serve := s.http.Serve
	if tlsConfig != nil {
		s.addr = "https://" + ln.Addr().String()
		// The key pair is in TLSConfig already.
		serve = func(ln net.Listener) error { return s.http.ServeTLS(ln, "", "") }
	}
	go func() {
		if err := serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("Serving stopped", "error", err)
		}
	}()
	return s, nil
}

// Addr is the base URL to give clients as VAULT_ADDR, e.g.
// "http://127.0.0.1:41234", or "https://10.244.0.1:41234" with TLS.
func (s *Server) Addr() string { return s.addr }

// RootToken is the token that passes every ACL check; use it for setup only.
func (s *Server) RootToken() string { return s.opts.RootToken }

// Close stops serving, waits up to 5 s for requests in flight, and cleans up
// the backends (the Kubernetes auth backend stops its CA reload loop).
// Everything stored is lost.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.http.Shutdown(ctx); err != nil {
			s.closeErr = errors.Join(err, s.http.Close())
		}
		s.mounts.closeAll(ctx)
	})
	return s.closeErr
}

// checkListen refuses listen addresses this server should not answer on:
// tokens and stored passwords cross every connection. Plain HTTP only on
// loopback (nothing in clear off the host); with TLS also on a private
// address (net.IP.IsPrivate: RFC 1918 and IPv6 unique local; the local
// plane's gateway, which pods reach, is one). Never an unspecified
// address, which would be every interface.
func checkListen(hostport string, withTLS bool) error {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return fmt.Errorf("vaultserver: listen address %q: %w", hostport, err)
	}
	if host == "localhost" {
		return nil
	}
	ip := net.ParseIP(host)
	switch {
	case ip != nil && ip.IsLoopback():
		return nil
	case !withTLS:
		return fmt.Errorf("vaultserver: listen address %q is not a loopback address (plain HTTP; with TLS a private address is allowed too)", hostport)
	case ip != nil && ip.IsPrivate():
		return nil
	default:
		return fmt.Errorf("vaultserver: listen address %q is neither a loopback nor a private IP address", hostport)
	}
}
