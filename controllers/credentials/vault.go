package credentials

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/hashicorp/go-cleanhttp"
	"github.com/hashicorp/vault/api"
	k8sauth "github.com/hashicorp/vault/api/auth/kubernetes"
)

// TokenFunc returns a token: a ServiceAccount JWT for Vault's Kubernetes
// auth (see ServiceAccountToken), or a Vault token (see TokenFromSecret).
// It is called for every login, or every Fetch for a Vault token, so it may
// return a fresh one each time.
type TokenFunc func(ctx context.Context) (string, error)

// VaultConfig says where the password lives in Vault and how to log in.
type VaultConfig struct {
	// Address is Vault's base URL, e.g. "https://vault.vault.svc:8200".
	// Required, and Addresses must allow it.
	Address string
	// Addresses is where tokens may be sent: Address, and every URL the
	// client is redirected to. The zero value allows any https address and
	// no plain http one.
	Addresses AddressPolicy
	// CACert is a PEM bundle to verify Vault's TLS certificate with, instead
	// of the system roots. Optional.
	CACert []byte
	// Namespace is sent as X-Vault-Namespace (Vault Enterprise). Optional.
	Namespace string
	// Mount is the KV v2 mount path, e.g. "secret". Required.
	Mount string
	// Path is the secret's path inside the mount, e.g. "redis/prod". Required.
	Path string
	// Key is the field of the secret's data that holds the password. Required.
	Key string
	// Version pins a KV v2 version (>= 1); 0 reads the latest.
	Version int
	// Auth is how to log in: exactly one of its fields is set.
	Auth VaultAuth
	// Timeout bounds each HTTP request to Vault. Default 10 s.
	Timeout time.Duration
	// Logger gets a line per login, renewal and re-login; never a token or
	// password. Default: discard.
	Logger logr.Logger
	// Now is the clock for token-renewal decisions. Default time.Now.
	Now func() time.Time
}

// VaultAuth selects the login method.
type VaultAuth struct {
	// Kubernetes logs in with Vault's Kubernetes auth method.
	Kubernetes *KubernetesAuth
	// Token returns a Vault token to use as it is (dev setups: a token kept
	// in a Secret). It is called on every Fetch; the token is not renewed.
	Token TokenFunc
}

// KubernetesAuth is Vault's Kubernetes auth method
// (https://developer.hashicorp.com/vault/docs/auth/kubernetes): Vault
// reviews the ServiceAccount token with the TokenReview API and returns a
// Vault token with the role's policies.
type KubernetesAuth struct {
	// Role is the Vault role to log in as. Required.
	Role string
	// MountPath is where the auth method is mounted, without "auth/".
	// Default "kubernetes".
	MountPath string
	// ServiceAccountToken returns the JWT to log in with, normally from the
	// TokenRequest API with the audience the role expects
	// (ServiceAccountToken). Required.
	ServiceAccountToken TokenFunc
}

// VaultSource reads a password from Vault KV v2. It keeps its Vault token
// between calls, renews it when a third of its TTL is left, and logs in
// again when renewal fails or Vault rejects the token. Safe for concurrent
// use; calls are serialized.
type VaultSource struct {
	cfg    VaultConfig
	client *api.Client
	log    logr.Logger
	now    func() time.Time

	mu        sync.Mutex
	loggedIn  bool          // the client holds a token from a Kubernetes login
	ttl       time.Duration // the token's TTL when issued or last renewed
	expires   time.Time     // zero when the token does not expire
	renewable bool
	// jwt is the service-account token of the last login, kept only to
	// redact it from error messages (see classify).
	jwt string
}

// NewVaultSource checks cfg and builds the Vault client. It does not contact
// Vault. An address cfg.Addresses refuses gives an error wrapping
// ErrAddressNotAllowed; so does, at Fetch, a redirect to such an address.
// The client ignores the VAULT_* environment variables that would change
// its address, TLS or token, so that only cfg decides.
func NewVaultSource(cfg VaultConfig) (*VaultSource, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if k := cfg.Auth.Kubernetes; k != nil && k.MountPath == "" {
		kc := *k
		kc.MountPath = "kubernetes"
		cfg.Auth.Kubernetes = &kc
	}

	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12}
	if len(cfg.CACert) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(cfg.CACert) {
			return nil, fmt.Errorf("%w: CA certificate: no PEM certificate found", ErrInvalidConfig)
		}
		tlsConfig.RootCAs = pool
	}
	transport := cleanhttp.DefaultPooledTransport()
	transport.TLSClientConfig = tlsConfig
	transport.TLSHandshakeTimeout = cfg.Timeout
	httpClient := &http.Client{
		Transport: guardedTransport{policy: cfg.Addresses, next: transport},
		// The Vault client handles redirects itself.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	client, err := api.NewClient(&api.Config{
		Address:    cfg.Address,
		HttpClient: httpClient,
		Timeout:    cfg.Timeout,
		// No retries inside a Fetch: the controller requeues with backoff.
		MaxRetries: 0,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: Vault client: %v", ErrInvalidConfig, err)
	}
	client.ClearToken()
	if cfg.Namespace != "" {
		client.SetNamespace(cfg.Namespace)
	} else {
		client.ClearNamespace()
	}
	log := cfg.Logger
	if log.GetSink() == nil {
		log = logr.Discard()
	}
	return &VaultSource{cfg: cfg, client: client, log: log, now: cfg.Now}, nil
}

func (c *VaultConfig) validate() error {
	var problems []string
	u, err := url.Parse(c.Address)
	switch {
	case c.Address == "":
		problems = append(problems, "address is empty")
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		problems = append(problems, fmt.Sprintf("address %q is not an http(s) URL", c.Address))
	default:
		if err := c.Addresses.Check(c.Address); err != nil {
			return err
		}
	}
	if strings.Trim(c.Mount, "/") == "" {
		problems = append(problems, "mount is empty")
	}
	if strings.Trim(c.Path, "/") == "" {
		problems = append(problems, "path is empty")
	}
	if c.Key == "" {
		problems = append(problems, "key is empty")
	}
	if c.Version < 0 {
		problems = append(problems, fmt.Sprintf("version %d is negative", c.Version))
	}
	k, tok := c.Auth.Kubernetes, c.Auth.Token
	switch {
	case k == nil && tok == nil:
		problems = append(problems, "no auth method: set Kubernetes or Token")
	case k != nil && tok != nil:
		problems = append(problems, "both Kubernetes and Token auth are set")
	case k != nil && k.Role == "":
		problems = append(problems, "kubernetes auth role is empty")
	case k != nil && k.ServiceAccountToken == nil:
		problems = append(problems, "kubernetes auth has no service account token source")
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: %s", ErrInvalidConfig, strings.Join(problems, "; "))
	}
	return nil
}

// Fetch logs in if needed and reads the password.
func (s *VaultSource) Fetch(ctx context.Context) (Credential, error) {
	var cred Credential
	err := s.withToken(ctx, func() error {
		secret, where, version, err := s.readSecret(ctx)
		if err != nil {
			return err
		}
		pw, err := pick(secret, s.cfg.Key, where, version)
		cred = Credential{Password: pw, Version: fmt.Sprintf("vault:%s#v%d", where, version)}
		return err
	})
	if err != nil {
		return Credential{}, err
	}
	return cred, nil
}

// withToken runs read with a usable token, serialized with every other
// call; when Vault no longer knows the token it logs in again and runs
// read once more.
func (s *VaultSource) withToken(ctx context.Context, read func() error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.ensureToken(ctx); err != nil {
		return err
	}
	err := read()
	if errors.Is(err, ErrPermissionDenied) && s.cfg.Auth.Kubernetes != nil && s.loggedIn && !s.tokenValid(ctx) {
		// Vault no longer knows the token (revoked, or expired earlier than
		// its TTL said): log in again and read once more.
		s.log.Info("Vault no longer accepts the token, logging in again", "role", s.cfg.Auth.Kubernetes.Role)
		s.forgetToken()
		if err := s.ensureToken(ctx); err != nil {
			return err
		}
		err = read()
	}
	if errors.Is(err, ErrPermissionDenied) && s.cfg.Auth.Token != nil && !s.tokenValid(ctx) {
		return fmt.Errorf("%w: the given Vault token is not valid (expired or revoked)", ErrAuthFailed)
	}
	return err
}

// tokenValid asks Vault whether the client's token is still a valid token
// (auth/token/lookup-self, which every token may call). Only a 403 says no.
func (s *VaultSource) tokenValid(ctx context.Context) bool {
	_, err := s.client.Auth().Token().LookupSelfWithContext(ctx)
	var re *api.ResponseError
	return !(errors.As(err, &re) && re.StatusCode == http.StatusForbidden)
}

// ensureToken makes sure the client holds a usable token.
func (s *VaultSource) ensureToken(ctx context.Context) error {
	if s.cfg.Auth.Token != nil {
		token, err := s.cfg.Auth.Token(ctx)
		if err != nil {
			return fmt.Errorf("%w: getting the Vault token: %w", ErrAuthFailed, err)
		}
		if token == "" {
			return fmt.Errorf("%w: the Vault token is empty", ErrAuthFailed)
		}
		s.client.SetToken(token)
		return nil
	}
	if !s.loggedIn {
		return s.login(ctx)
	}
	if s.expires.IsZero() {
		return nil
	}
	now := s.now()
	left := s.expires.Sub(now)
	if left > s.ttl/3 {
		return nil
	}
	if s.renewable && left > 0 {
		err := s.renew(ctx)
		if err == nil {
			return nil
		}
		if errors.Is(err, ErrVaultUnreachable) {
			return err
		}
		s.log.Info("Renewing the Vault token failed, logging in again", "reason", Reason(err))
	}
	s.forgetToken()
	return s.login(ctx)
}

// login performs the Kubernetes auth login with a fresh ServiceAccount token.
func (s *VaultSource) login(ctx context.Context) error {
	k := s.cfg.Auth.Kubernetes
	jwt, err := k.ServiceAccountToken(ctx)
	if err != nil {
		return fmt.Errorf("%w: getting the service account token: %w", ErrAuthFailed, err)
	}
	s.jwt = jwt
	method, err := k8sauth.NewKubernetesAuth(k.Role, k8sauth.WithServiceAccountToken(jwt), k8sauth.WithMountPath(k.MountPath))
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	s.log.V(1).Info("Logging in to Vault", "role", k.Role, "authMount", k.MountPath)
	start := s.now()
	secret, err := s.client.Auth().Login(ctx, method)
	if err != nil {
		s.client.ClearToken()
		return classify(err, fmt.Sprintf("logging in to Vault as role %q at auth/%s", k.Role, k.MountPath), ErrAuthFailed, s.sent()...)
	}
	s.remember(secret.Auth, start)
	return nil
}

// renew extends the token's TTL with auth/token/renew-self.
func (s *VaultSource) renew(ctx context.Context) error {
	start := s.now()
	secret, err := s.client.Auth().Token().RenewSelfWithContext(ctx, int(s.ttl.Seconds()))
	if err != nil {
		return classify(err, "renewing the Vault token", ErrAuthFailed, s.sent()...)
	}
	if secret == nil || secret.Auth == nil || secret.Auth.LeaseDuration <= 0 {
		return fmt.Errorf("%w: renewing the Vault token: no lease in the answer", ErrAuthFailed)
	}
	s.log.V(1).Info("Renewed the Vault token", "ttl", time.Duration(secret.Auth.LeaseDuration)*time.Second)
	s.remember(secret.Auth, start)
	return nil
}

// remember records the lifetime of the token the client now holds.
func (s *VaultSource) remember(auth *api.SecretAuth, issued time.Time) {
	s.loggedIn = true
	s.renewable = auth.Renewable
	s.ttl = time.Duration(auth.LeaseDuration) * time.Second
	if s.ttl > 0 {
		s.expires = issued.Add(s.ttl)
	} else {
		s.expires = time.Time{}
	}
}

func (s *VaultSource) forgetToken() {
	s.client.ClearToken()
	s.loggedIn, s.ttl, s.expires, s.renewable = false, 0, time.Time{}, false
}

// readSecret gets the configured version of the secret: its data, where
// it lives (<mount>/data/<path>) and its version.
func (s *VaultSource) readSecret(ctx context.Context) (map[string]any, string, int, error) {
	mount, path := strings.Trim(s.cfg.Mount, "/"), strings.Trim(s.cfg.Path, "/")
	where := fmt.Sprintf("%s/data/%s", mount, path)
	kv := s.client.KVv2(mount)
	var secret *api.KVSecret
	var err error
	if s.cfg.Version > 0 {
		secret, err = kv.GetVersion(ctx, path, s.cfg.Version)
	} else {
		secret, err = kv.Get(ctx, path)
	}
	if err != nil {
		if errors.Is(err, api.ErrSecretNotFound) {
			return nil, where, 0, fmt.Errorf("%w: no secret at %s%s", ErrSecretNotFound, where, versionSuffix(s.cfg.Version))
		}
		return nil, where, 0, classify(err, "reading "+where, ErrVaultError, s.sent()...)
	}
	if secret == nil || secret.VersionMetadata == nil {
		return nil, where, 0, fmt.Errorf("%w: %s has no version metadata; is %s a KV v2 mount?", ErrVaultError, where, mount)
	}
	version := secret.VersionMetadata.Version
	if secret.Data == nil {
		return nil, where, version, fmt.Errorf("%w: version %d of %s is deleted or destroyed", ErrSecretNotFound, version, where)
	}
	return secret.Data, where, version, nil
}

// pick is key's value of a secret's data.
func pick(data map[string]any, key, where string, version int) (Password, error) {
	value, ok := data[key]
	if !ok {
		return Password{}, fmt.Errorf("%w: %s version %d has no key %q", ErrKeyMissing, where, version, key)
	}
	return passwordFrom(value, key, fmt.Sprintf("%s version %d", where, version))
}

func versionSuffix(v int) string {
	if v == 0 {
		return ""
	}
	return fmt.Sprintf(" version %d", v)
}

// sent lists the tokens this source has sent to Vault and may still send:
// the Vault token the client holds and the last login's JWT.
func (s *VaultSource) sent() []string { return []string{s.client.Token(), s.jwt} }

// maxVaultErrorText bounds how much of Vault's error answer an error keeps:
// the message ends in a condition (at most 32768 bytes, metav1.Condition)
// and an event, and an answer is not necessarily from a real Vault.
const maxVaultErrorText = 512

// classify wraps a Vault client error in this package's sentinel errors.
// fallback is used for error answers that are not 403 or unavailability.
// sent are the tokens the request carried (the Vault token, the login's
// JWT): Vault's own messages never hold them, but whatever answers at the
// address might echo them, so any occurrence in the message is replaced by
// "[redacted]", and Vault's error text is cut at maxVaultErrorText bytes.
func classify(err error, doing string, fallback error, sent ...string) error {
	var re *api.ResponseError
	if errors.As(err, &re) {
		msg := fmt.Sprintf("%s: Vault answered %d", doing, re.StatusCode)
		if len(re.Errors) > 0 {
			text := redact(strings.Join(re.Errors, "; "), sent)
			if len(text) > maxVaultErrorText {
				text = strings.ToValidUTF8(text[:maxVaultErrorText], "") + "..."
			}
			msg += ": " + text
		}
		switch {
		case re.StatusCode == http.StatusForbidden && fallback == ErrAuthFailed:
			return fmt.Errorf("%w: %s", ErrAuthFailed, msg)
		case re.StatusCode == http.StatusForbidden:
			return fmt.Errorf("%w: %s", ErrPermissionDenied, msg)
		case re.StatusCode == http.StatusTooManyRequests, re.StatusCode == http.StatusBadGateway,
			re.StatusCode == http.StatusServiceUnavailable, re.StatusCode == http.StatusGatewayTimeout:
			return fmt.Errorf("%w: %s", ErrVaultUnreachable, msg)
		default:
			return fmt.Errorf("%w: %s", fallback, msg)
		}
	}
	if text := err.Error(); redact(text, sent) != text {
		// Keep the kind, drop the chain that holds the token.
		err = errors.New(redact(text, sent))
	}
	if errors.Is(err, ErrAddressNotAllowed) {
		return fmt.Errorf("%s: %w", doing, err)
	}
	if errors.Is(err, context.Canceled) {
		return fmt.Errorf("%s: %w", doing, err)
	}
	var netErr net.Error
	var urlErr *url.Error
	if errors.As(err, &netErr) || errors.As(err, &urlErr) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w: %s: %w", ErrVaultUnreachable, doing, err)
	}
	return fmt.Errorf("%w: %s: %w", fallback, doing, err)
}

// redact replaces every occurrence of the non-empty strings of secrets in
// text by "[redacted]".
func redact(text string, secrets []string) string {
	for _, s := range secrets {
		if s != "" {
			text = strings.ReplaceAll(text, s, redacted)
		}
	}
	return text
}
