package credentials

import (
	"context"
	"fmt"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// minTokenExpiration is the shortest lifetime the TokenRequest API grants
// (ExpirationSeconds must be at least 600; k8s.io/api authentication/v1
// TokenRequestSpec).
const minTokenExpiration = 10 * time.Minute

// ServiceAccountToken returns a TokenFunc that asks the TokenRequest API
// (POST /api/v1/namespaces/{namespace}/serviceaccounts/{name}/token) for a
// new token of that ServiceAccount, bound to audience (the audience the
// Vault role expects, e.g. "vault"), valid for expiration (at least 10 min;
// 0 means 10 min). The token is used for one login only.
func ServiceAccountToken(client kubernetes.Interface, namespace, serviceAccount, audience string, expiration time.Duration) TokenFunc {
	if expiration < minTokenExpiration {
		expiration = minTokenExpiration
	}
	seconds := int64(expiration / time.Second)
	return func(ctx context.Context) (string, error) {
		tr, err := client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, serviceAccount, &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{
				Audiences:         []string{audience},
				ExpirationSeconds: &seconds,
			},
		}, metav1.CreateOptions{})
		if err != nil {
			return "", fmt.Errorf("token request for service account %s/%s with audience %q: %w", namespace, serviceAccount, audience, err)
		}
		if tr.Status.Token == "" {
			return "", fmt.Errorf("token request for service account %s/%s returned no token", namespace, serviceAccount)
		}
		return tr.Status.Token, nil
	}
}

// SecretGetter reads one Secret, like a client-go or controller-runtime
// client Get. It returns the API's errors unchanged (NotFound, Forbidden).
type SecretGetter func(ctx context.Context, namespace, name string) (*corev1.Secret, error)

// SecretGetterFor reads Secrets straight from the API with client.
func SecretGetterFor(client kubernetes.Interface) SecretGetter {
	return func(ctx context.Context, namespace, name string) (*corev1.Secret, error) {
		return client.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
	}
}

// TokenFromSecret returns a TokenFunc that reads a Vault token from the
// given key of a Secret, on every call, so a replaced token is picked up.
// For dev setups (VaultAuth.Token); errors are wrapped like SecretSource's.
func TokenFromSecret(get SecretGetter, namespace, name, key string) TokenFunc {
	return func(ctx context.Context) (string, error) {
		value, _, err := secretValue(ctx, get, namespace, name, key)
		if err != nil {
			return "", err
		}
		return string(value), nil
	}
}

// SecretSource reads the password from a key of a Kubernetes Secret.
type SecretSource struct {
	get                  SecretGetter
	namespace, name, key string
}

// NewSecretSource returns a Source for data[key] of Secret namespace/name.
func NewSecretSource(get SecretGetter, namespace, name, key string) (*SecretSource, error) {
	switch {
	case get == nil:
		return nil, fmt.Errorf("%w: no SecretGetter", ErrInvalidConfig)
	case namespace == "" || name == "" || key == "":
		return nil, fmt.Errorf("%w: secret namespace %q, name %q and key %q must all be set", ErrInvalidConfig, namespace, name, key)
	}
	return &SecretSource{get: get, namespace: namespace, name: name, key: key}, nil
}

// Fetch reads the Secret. Version is "secret:<namespace>/<name>#<resourceVersion>":
// it moves on any change of the Secret, so a caller compares passwords before
// deciding to rotate.
func (s *SecretSource) Fetch(ctx context.Context) (Credential, error) {
	value, rv, err := secretValue(ctx, s.get, s.namespace, s.name, s.key)
	if err != nil {
		return Credential{}, err
	}
	pw, err := passwordFrom(string(value), s.key, fmt.Sprintf("secret %s/%s", s.namespace, s.name))
	if err != nil {
		return Credential{}, err
	}
	return Credential{Password: pw, Version: fmt.Sprintf("secret:%s/%s#%s", s.namespace, s.name, rv)}, nil
}

// secretValue reads data[key] of a Secret and its resourceVersion, with the
// errors classified.
func secretValue(ctx context.Context, get SecretGetter, namespace, name, key string) ([]byte, string, error) {
	sec, err := get(ctx, namespace, name)
	switch {
	case apierrors.IsNotFound(err):
		return nil, "", fmt.Errorf("%w: secret %s/%s does not exist", ErrSecretNotFound, namespace, name)
	case apierrors.IsForbidden(err):
		return nil, "", fmt.Errorf("%w: reading secret %s/%s: %v", ErrPermissionDenied, namespace, name, err)
	case err != nil:
		return nil, "", fmt.Errorf("%w: reading secret %s/%s: %w", ErrKubernetesAPI, namespace, name, err)
	}
	value, ok := sec.Data[key]
	if !ok {
		return nil, "", fmt.Errorf("%w: secret %s/%s has no key %q", ErrKeyMissing, namespace, name, key)
	}
	if len(value) == 0 {
		return nil, "", fmt.Errorf("%w: key %q of secret %s/%s is empty", ErrInvalidPassword, key, namespace, name)
	}
	return value, sec.ResourceVersion, nil
}
