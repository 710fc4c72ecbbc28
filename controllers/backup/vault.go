package backup

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/credentials"
	"github.com/redis-operator/redis-operator/controllers/credentials/vaultspec"
)

// VaultKeys reads object store key pairs from Vault (an object store's
// credentialsVault) with the same builder and login as a RedisCluster's
// spec.auth.vault. It keeps one credentials.VaultSource per namespace and
// schedule or backup spec, so that a login's Vault token is reused and
// renewed rather than a login made at every pass. Safe for concurrent use.
type VaultKeys struct {
	Builder vaultspec.Builder
	Log     logr.Logger
	// Endpoints is the operator's object store endpoint policy for the
	// callers that hold only this VaultKeys: a restore (the RedisCluster
	// controller's BackupVault) checks fromBackup's endpoint against it
	// before it reads any key. Keys itself does not use it. The zero value
	// allows every endpoint.
	Endpoints EndpointPolicy

	mu      sync.Mutex
	sources map[string]*vaultKeysEntry
}

type vaultKeysEntry struct {
	spec cachev1beta1.ObjectStoreVaultCredentials
	ca   string
	src  *credentials.VaultSource
}

// Keys reads the access key pair c names, for a backup of cluster in
// namespace (the login's service account when c names none). Errors wrap
// the credentials package's sentinels (credentials.Reason names them) and
// hold no text of Vault's answers beyond their HTTP status (redactVault):
// they end in conditions, events and the log, where the spec's author
// reads them, and the address may not be a Vault.
func (v *VaultKeys) Keys(ctx context.Context, namespace, cluster string, c *cachev1beta1.ObjectStoreVaultCredentials) (Keys, error) {
	cfg, err := v.Builder.Config(ctx, &c.Vault, namespace, cluster, v.Log)
	if err != nil {
		return Keys{}, redactVault(err)
	}
	idKey, secretKey := or(c.AccessKeyIDKey, "accessKeyID"), or(c.SecretAccessKeyKey, "secretAccessKey")
	cfg.Key = secretKey
	entryKey := namespace + "/" + cluster + "/" + c.Vault.Address + "/" + c.Vault.Path
	v.mu.Lock()
	e := v.sources[entryKey]
	if e == nil || !equality.Semantic.DeepEqual(&e.spec, c) || e.ca != string(cfg.CACert) {
		src, err := credentials.NewVaultSource(cfg)
		if err != nil {
			v.mu.Unlock()
			return Keys{}, redactVault(err)
		}
		e = &vaultKeysEntry{spec: *c.DeepCopy(), ca: string(cfg.CACert), src: src}
		if v.sources == nil {
			v.sources = map[string]*vaultKeysEntry{}
		}
		v.sources[entryKey] = e
	}
	v.mu.Unlock()
	pair, _, err := e.src.FetchKeys(ctx, idKey, secretKey)
	if err != nil {
		return Keys{}, fmt.Errorf("object store credentials from Vault: %w", redactVault(err))
	}
	return Keys{AccessKeyID: pair[0].Reveal(), SecretAccessKey: pair[1].Reveal()}, nil
}

// vaultTokenLifetime is the lifetime of the service account tokens asked
// for a login (TokenRequest's minimum, 10 minutes; one login each).
const vaultTokenLifetime = 10 * time.Minute

// NewVaultKeys builds the VaultKeys of the operator: Secrets read and
// service account tokens requested with cfg's client (uncached), Vault
// addresses allowed by addresses, requests bounded by timeout.
func NewVaultKeys(cfg *rest.Config, addresses credentials.AddressPolicy, timeout time.Duration, log logr.Logger) (*VaultKeys, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("a client for Vault logins: %w", err)
	}
	return &VaultKeys{Log: log, Builder: vaultspec.Builder{
		Addresses: addresses,
		GetSecret: credentials.SecretGetterFor(cs),
		ServiceAccountToken: func(namespace, serviceAccount, audience string) credentials.TokenFunc {
			return credentials.ServiceAccountToken(cs, namespace, serviceAccount, audience, vaultTokenLifetime)
		},
		Timeout: timeout,
	}}, nil
}
