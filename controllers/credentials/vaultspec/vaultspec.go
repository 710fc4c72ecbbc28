// Package vaultspec turns the API's VaultSource (a RedisCluster's
// spec.auth.vault, a user's passwordFrom.vault, an object store's
// credentialsVault) into a credentials.VaultConfig: the defaults the CRD
// documents, the CA read from its Secret, and the login (Kubernetes auth
// with a service account token, or a token kept in a Secret). One builder
// for every place the API names a Vault secret.
package vaultspec

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/credentials"
)

// Defaults of a VaultSource, as the CRD schema documents them (a spec
// written before a default was added may lack it).
const (
	DefaultMount     = "secret"
	DefaultKey       = "password"
	DefaultAudience  = credentials.DefaultAudience
	DefaultCAKey     = "ca.crt"
	DefaultTokenKey  = "token"
	DefaultAuthMount = "kubernetes"
)

// Builder holds what every Vault login of the operator shares.
type Builder struct {
	// Addresses is where Vault addresses may point (the operator's flags).
	Addresses credentials.AddressPolicy
	// GetSecret reads the CA and token Secrets.
	GetSecret credentials.SecretGetter
	// ServiceAccountToken returns the TokenFunc that requests a token of
	// namespace/serviceAccount for audience (the TokenRequest API).
	ServiceAccountToken func(namespace, serviceAccount, audience string) credentials.TokenFunc
	// Timeout bounds each request to Vault (0: the credentials default).
	Timeout time.Duration
	// Now is the clock of token renewals (nil: time.Now).
	Now func() time.Time
}

// Config builds the VaultConfig of v, whose Secrets and service account
// live in namespace; serviceAccount is the login's service account when v
// names none. It refuses an address or a token audience the policy
// refuses before reading any Secret. Errors wrap
// credentials.ErrAddressNotAllowed, credentials.ErrAudienceNotAllowed or
// credentials.ErrInvalidConfig (a CA Secret missing or without its key).
func (b Builder) Config(ctx context.Context, v *cachev1beta1.VaultSource, namespace, serviceAccount string, log logr.Logger) (credentials.VaultConfig, error) {
	if err := b.Addresses.Check(v.Address); err != nil {
		return credentials.VaultConfig{}, err
	}
	audience := or(v.Audience, DefaultAudience)
	if v.TokenSecretRef == nil {
		if err := b.Addresses.CheckAudience(audience); err != nil {
			return credentials.VaultConfig{}, err
		}
	}
	var ca []byte
	if ref := v.CASecretRef; ref != nil {
		key := or(ref.Key, DefaultCAKey)
		sec, err := b.GetSecret(ctx, namespace, ref.Name)
		if err != nil {
			return credentials.VaultConfig{}, fmt.Errorf("%w: reading the Vault CA from Secret %s: %v", credentials.ErrInvalidConfig, ref.Name, err)
		}
		if ca = sec.Data[key]; len(ca) == 0 {
			return credentials.VaultConfig{}, fmt.Errorf("%w: Secret %s has no CA under key %q", credentials.ErrInvalidConfig, ref.Name, key)
		}
	}
	cfg := credentials.VaultConfig{
		Address:   v.Address,
		Addresses: b.Addresses,
		CACert:    ca,
		Namespace: v.Namespace,
		Mount:     or(v.Mount, DefaultMount),
		Path:      v.Path,
		Key:       or(v.Key, DefaultKey),
		Timeout:   b.Timeout,
		Logger:    log,
		Now:       b.Now,
	}
	if v.Version != nil {
		cfg.Version = int(*v.Version)
	}
	if ref := v.TokenSecretRef; ref != nil {
		cfg.Auth.Token = credentials.TokenFromSecret(b.GetSecret, namespace, ref.Name, or(ref.Key, DefaultTokenKey))
		return cfg, nil
	}
	cfg.Auth.Kubernetes = &credentials.KubernetesAuth{
		Role:                v.Role,
		MountPath:           or(v.AuthMount, DefaultAuthMount),
		ServiceAccountToken: b.ServiceAccountToken(namespace, or(v.ServiceAccountName, serviceAccount), audience),
	}
	return cfg, nil
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
