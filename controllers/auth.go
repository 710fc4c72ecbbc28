package controllers

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/credentials"
	"github.com/redis-operator/redis-operator/controllers/resources"
)

// The operator asks the TokenRequest API for service-account tokens to log
// in to Vault (spec.auth.vault.role).
//
// +kubebuilder:rbac:groups="",resources=serviceaccounts/token,verbs=create

// authSecretIndex indexes RedisClusters by the Secret spec.auth.secretRef names.
const authSecretIndex = "spec.auth.secretRef.name"

// Defaults and bounds of reading the password source.
const (
	// defaultRefreshInterval is spec.auth.vault.refreshInterval's default.
	defaultRefreshInterval = 5 * time.Minute
	// defaultGracePeriod is spec.auth.rotationGracePeriod's default.
	defaultGracePeriod = 60 * time.Second
	// firstRetry is the wait after the first failed read of the source; it
	// doubles with every further failure up to the refresh interval (Vault)
	// or maxRetry (Secret).
	firstRetry = 5 * time.Second
	maxRetry   = 5 * time.Minute
	// vaultTokenLifetime is what the operator asks TokenRequest for.
	vaultTokenLifetime = 10 * time.Minute
	// defaultCAKey is the key read from spec.auth.vault.caSecretRef when it
	// names none.
	defaultCAKey = "ca.crt"
)

func indexAuthSecret(o client.Object) []string {
	rc, ok := o.(*cachev1beta1.RedisCluster)
	if !ok || rc.Spec.Auth == nil || rc.Spec.Auth.SecretRef == nil {
		return nil
	}
	return []string{rc.Spec.Auth.SecretRef.Name}
}

// secretToClusters maps a Secret to the RedisClusters whose spec.auth names it.
func (r *RedisClusterReconciler) secretToClusters(ctx context.Context, o client.Object) []reconcile.Request {
	var list cachev1beta1.RedisClusterList
	if err := r.Client.List(ctx, &list, client.InNamespace(o.GetNamespace()), client.MatchingFields{authSecretIndex: o.GetName()}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing RedisClusters by auth Secret", "secret", o.GetName())
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for _, rc := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: rc.Namespace, Name: rc.Name}})
	}
	return out
}

func ownedSecretName(rc *cachev1beta1.RedisCluster) string { return resources.SecretName(rc.Name) }

// reconcileCredentials reads the password source and decides which
// password the pods run with (s.password, always the owned Secret's
// "password" once it exists) and whether a rotation is under way.
//
//   - spec.auth unset: no password (CredentialsReady=True, NoAuth).
//   - first pass with a source (no owned Secret yet, so no pod has run):
//     its password goes into the owned Secret.
//   - the source holds a different password than the owned Secret: a
//     rotation starts (see rotation.go); the pending password is kept in the
//     owned Secret under rotationNextKey, so it survives a crash. An owned
//     Secret without a password means the cluster runs without one
//     (spec.auth was unset): setting spec.auth then turns authentication on
//     through the same rotation, from "" to the source's password; clients
//     without a password are refused from its first step on.
//   - the source cannot be read: CredentialsReady=False with the reason;
//     Redis keeps the last good password; reads are retried with a growing
//     delay (firstRetry doubling up to the refresh interval).
//
// When no password can be determined at all (the source is unreadable and
// no owned Secret exists yet), the pass stops before anything that needs
// it; the source Secret's watch or the retry wakes the controller.
func (r *RedisClusterReconciler) reconcileCredentials(ctx context.Context, s *scope) (ctrl.Result, bool, error) {
	rc := s.rc
	owned := &corev1.Secret{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: rc.Namespace, Name: ownedSecretName(rc)}, owned)
	switch {
	case apierrors.IsNotFound(err):
		owned = nil
	case err != nil:
		return ctrl.Result{}, true, fmt.Errorf("reading Secret %s: %w", ownedSecretName(rc), err)
	}
	if owned != nil {
		if err := checkControlled(rc, owned); err != nil {
			return ctrl.Result{}, true, err
		}
	}
	st := readRotationState(owned)

	auth := rc.Spec.Auth
	if auth == nil {
		r.creds.forget(rc)
		s.obs.Creds = credentialsObservation{NoAuth: true, Live: true}
		s.password, s.passwordKnown = "", true
		return ctrl.Result{}, false, r.applySecret(ctx, s, owned, "")
	}

	c := &s.obs.Creds
	c.Source = "Secret"
	if auth.Vault != nil {
		c.Source = "Vault"
	}
	// The owned Secret exists: the pods run with its password, even "".
	c.Live = owned != nil
	liveVersion := ""
	if rc.Status.Credentials != nil {
		liveVersion = rc.Status.Credentials.Version
		c.RotationStep = rc.Status.Credentials.RotationStep
	}
	if st.inProgress() {
		c.RotationTarget = st.PendingVersion
		if c.RotationStep == "" {
			c.RotationStep = st.step()
		}
	}

	cred, res, err := r.fetchCredential(ctx, s)
	if err != nil {
		c.Err, c.Reason = err, credentialsReason(err)
		r.credentialsFailed(s, c.Reason)
		if !c.Live {
			// Nothing to start pods with: wait for the source.
			return res, true, nil
		}
		c.Version = liveVersion
		s.password, s.passwordKnown = st.Live, true
		s.rotation = st
		return res, false, nil
	}

	if !c.Live {
		c.Version = cred.Version
		fetched := cred.Password.Reveal()
		s.password, s.passwordKnown = fetched, true
		return res, false, r.applySecret(ctx, s, owned, fetched)
	}
	s.password, s.passwordKnown = st.Live, true
	c.Version = liveVersion
	switch {
	case st.Live != "" && st.Next != "" && !cred.Password.Equal(credentials.NewPassword(st.Next)):
		// The source changed again before clients got the pending password:
		// aim at the newest one (a node keeping the earlier pending password
		// loses it when the rotation ends). Not when turning authentication
		// on: nodes given the pending password accept no other one, so that
		// rotation ends first and the newest password starts the next.
		st.Next, st.PendingVersion = cred.Password.Reveal(), cred.Version
		if err := r.applyRotationSecret(ctx, s, st); err != nil {
			return ctrl.Result{}, true, err
		}
		c.RotationTarget = st.PendingVersion
	case st.inProgress():
		// Finish the rotation under way first; a newer source value starts
		// the next one.
	case subtle.ConstantTimeCompare([]byte(cred.Password.Reveal()), []byte(st.Live)) != 1:
		st.Next, st.PendingVersion = cred.Password.Reveal(), cred.Version
		s.log.Info("Starting a password rotation", "fromVersion", liveVersion, "toVersion", cred.Version)
		if err := r.applyRotationSecret(ctx, s, st); err != nil {
			return ctrl.Result{}, true, err
		}
		s.normal("RotationStarted", "The password source changed (version %s); rotating without restarts", cred.Version)
		c.RotationStep, c.RotationTarget = st.step(), st.PendingVersion
	default:
		c.Version = cred.Version
		if err := r.applySecret(ctx, s, owned, st.Live); err != nil {
			return ctrl.Result{}, true, err
		}
	}
	s.rotation = st
	if st.inProgress() {
		setRotationStep(s, c.RotationStep)
	}
	return res, false, nil
}

// credentialsFailed logs and records a Warning event when the source's
// failure reason differs from the one CredentialsReady already shows, so
// a source that stays unreadable causes one event, not one per pass.
func (r *RedisClusterReconciler) credentialsFailed(s *scope, reason string) {
	old := meta.FindStatusCondition(s.original.Status.Conditions, cachev1beta1.RedisClusterCredentialsReadyCondition)
	if old != nil && old.Status == metav1.ConditionFalse && old.Reason == reason {
		s.log.V(1).Info("Password source still unreadable", "source", s.obs.Creds.Source, "reason", reason)
		return
	}
	s.log.Info("Cannot read the password source", "source", s.obs.Creds.Source, "reason", reason)
	s.warning(reason, "Cannot read the password from %s: %v; Redis keeps the last good password", s.obs.Creds.Source, s.obs.Creds.Err)
}

// fetchCredential reads spec.auth's source, or for Vault returns the
// credential read last while the refresh interval has not passed and the
// refresh annotation is unchanged. After a failure the source is read
// again only once the retry delay has passed; the returned Result asks
// for a pass then.
func (r *RedisClusterReconciler) fetchCredential(ctx context.Context, s *scope) (credentials.Credential, ctrl.Result, error) {
	rc := s.rc
	auth := rc.Spec.Auth
	e := r.creds.entry(rc)
	e.mu.Lock()
	defer e.mu.Unlock()

	now := r.Clock.Now()
	refresh := rc.Annotations[cachev1beta1.RefreshCredentialsAnnotation]
	interval := maxRetry
	if v := auth.Vault; v != nil {
		interval = defaultRefreshInterval
		if v.RefreshInterval != nil && v.RefreshInterval.Duration > 0 {
			interval = v.RefreshInterval.Duration
		}
	}
	switch {
	case refresh != e.refresh, !equality.Semantic.DeepEqual(e.auth, auth):
		// Asked to refresh, or spec.auth changed: read now.
		e.failures, e.ok = 0, false
	case e.failures > 0 && now.Before(e.next):
		return credentials.Credential{}, ctrl.Result{RequeueAfter: e.next.Sub(now)}, e.err
	case auth.Vault != nil && e.ok && now.Before(e.next):
		return e.cred, ctrl.Result{RequeueAfter: e.next.Sub(now)}, nil
	}
	e.refresh, e.auth = refresh, auth.DeepCopy()

	cred, err := r.readSource(ctx, s, e)
	if err != nil {
		e.failures++
		delay := firstRetry << min(e.failures-1, 16)
		if delay > interval {
			delay = interval
		}
		e.next, e.err = now.Add(delay), err
		return credentials.Credential{}, ctrl.Result{RequeueAfter: delay}, err
	}
	e.failures, e.err, e.ok, e.cred = 0, nil, true, cred
	e.next = now.Add(interval)
	if auth.Vault == nil {
		// A Secret is watched: its change starts a pass at once.
		return cred, ctrl.Result{}, nil
	}
	return cred, ctrl.Result{RequeueAfter: interval}, nil
}

// readSource builds (or reuses) the source of spec.auth and reads it.
func (r *RedisClusterReconciler) readSource(ctx context.Context, s *scope, e *sourceEntry) (credentials.Credential, error) {
	rc := s.rc
	auth := rc.Spec.Auth
	switch {
	case auth.SecretRef != nil:
		src, err := credentials.NewSecretSource(r.getSecret, rc.Namespace, auth.SecretRef.Name, secretKey(auth.SecretRef))
		if err != nil {
			return credentials.Credential{}, err
		}
		return src.Fetch(ctx)
	case auth.Vault != nil:
		src, err := r.vaultSource(ctx, s, e)
		if err != nil {
			return credentials.Credential{}, err
		}
		return src.Fetch(ctx)
	default:
		return credentials.Credential{}, fmt.Errorf("%w: spec.auth names no source", credentials.ErrInvalidConfig)
	}
}

// vaultSource returns the VaultSource for spec.auth.vault, kept between
// passes (it holds the Vault token and renews it) and built anew when the
// spec or the CA changed.
func (r *RedisClusterReconciler) vaultSource(ctx context.Context, s *scope, e *sourceEntry) (*credentials.VaultSource, error) {
	rc := s.rc
	v := rc.Spec.Auth.Vault
	// Refuse the address before reading any Secret or token for it.
	if err := r.VaultAddresses.Check(v.Address); err != nil {
		return nil, err
	}
	var ca []byte
	if v.CASecretRef != nil {
		key := v.CASecretRef.Key
		if key == "" {
			key = defaultCAKey
		}
		sec, err := r.getSecret(ctx, rc.Namespace, v.CASecretRef.Name)
		if err != nil {
			return nil, fmt.Errorf("%w: reading the Vault CA from Secret %s: %v", credentials.ErrInvalidConfig, v.CASecretRef.Name, err)
		}
		if ca = sec.Data[key]; len(ca) == 0 {
			return nil, fmt.Errorf("%w: Secret %s has no CA under key %q", credentials.ErrInvalidConfig, v.CASecretRef.Name, key)
		}
	}
	if e.vault != nil && equality.Semantic.DeepEqual(e.vaultSpec, v) && string(e.vaultCA) == string(ca) {
		return e.vault, nil
	}
	cfg := credentials.VaultConfig{
		Address:   v.Address,
		Addresses: r.VaultAddresses,
		CACert:    ca,
		Namespace: v.Namespace,
		Mount:     v.Mount,
		Path:      v.Path,
		Key:       v.Key,
		Timeout:   r.RedisTimeout,
		Logger:    s.log.WithName("vault"),
		Now:       r.Clock.Now,
	}
	if cfg.Mount == "" {
		cfg.Mount = "secret"
	}
	if cfg.Key == "" {
		cfg.Key = resources.PasswordKey
	}
	if v.Version != nil {
		cfg.Version = int(*v.Version)
	}
	switch {
	case v.TokenSecretRef != nil:
		cfg.Auth.Token = credentials.TokenFromSecret(r.getSecret, rc.Namespace, v.TokenSecretRef.Name, secretKeyOr(v.TokenSecretRef, "token"))
	default:
		sa := v.ServiceAccountName
		if sa == "" {
			sa = rc.Name
		}
		audience := v.Audience
		if audience == "" {
			audience = "vault"
		}
		cfg.Auth.Kubernetes = &credentials.KubernetesAuth{
			Role:                v.Role,
			MountPath:           v.AuthMount,
			ServiceAccountToken: r.serviceAccountToken(rc.Namespace, sa, audience),
		}
	}
	src, err := credentials.NewVaultSource(cfg)
	if err != nil {
		return nil, err
	}
	e.vault, e.vaultSpec, e.vaultCA = src, v.DeepCopy(), ca
	return src, nil
}

// serviceAccountToken returns a TokenFunc asking the TokenRequest API
// (serviceaccounts/token) for a token of namespace/name with audience.
func (r *RedisClusterReconciler) serviceAccountToken(namespace, name, audience string) credentials.TokenFunc {
	seconds := int64(vaultTokenLifetime / time.Second)
	return func(ctx context.Context) (string, error) {
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
		tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
			Audiences:         []string{audience},
			ExpirationSeconds: &seconds,
		}}
		if err := r.Client.SubResource("token").Create(ctx, sa, tr); err != nil {
			return "", fmt.Errorf("token request for service account %s/%s with audience %q: %w", namespace, name, audience, err)
		}
		if tr.Status.Token == "" {
			return "", fmt.Errorf("token request for service account %s/%s returned no token", namespace, name)
		}
		return tr.Status.Token, nil
	}
}

// credentialCache keeps, per RedisCluster, what the last read of its
// password source gave and when to read it again. In memory only: after an
// operator restart every source is read at once.
type credentialCache struct {
	mu      sync.Mutex
	entries map[types.NamespacedName]*sourceEntry
}

// sourceEntry is one RedisCluster's source state; mu serializes its reads.
type sourceEntry struct {
	mu sync.Mutex
	// refresh is the refresh annotation's value at the last read, and auth
	// the spec.auth read then.
	refresh string
	auth    *cachev1beta1.AuthSpec
	// ok and cred: the last successful read.
	ok   bool
	cred credentials.Credential
	// failures counts reads failed in a row; err is the last one.
	failures int
	err      error
	// next is when the source is read again.
	next time.Time

	vault     *credentials.VaultSource
	vaultSpec *cachev1beta1.VaultSource
	vaultCA   []byte
}

func (c *credentialCache) entry(rc *cachev1beta1.RedisCluster) *sourceEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil {
		c.entries = map[types.NamespacedName]*sourceEntry{}
	}
	key := types.NamespacedName{Namespace: rc.Namespace, Name: rc.Name}
	e, ok := c.entries[key]
	if !ok {
		e = &sourceEntry{}
		c.entries[key] = e
	}
	return e
}

func (c *credentialCache) forget(rc *cachev1beta1.RedisCluster) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.entries, types.NamespacedName{Namespace: rc.Namespace, Name: rc.Name})
}

// applySecret creates or updates the owned Secret when its content differs
// from what password gives (compared directly: no hash of a password is
// ever stored).
func (r *RedisClusterReconciler) applySecret(ctx context.Context, s *scope, live *corev1.Secret, password string) error {
	desired := resources.Secret(s.rc, password)
	if live != nil {
		if err := checkControlled(s.rc, live); err != nil {
			return err
		}
		if secretUpToDate(live, desired) {
			return nil
		}
	}
	s.log.Info("Applying Secret", "secret", desired.Name)
	if err := r.Client.Patch(ctx, desired, client.Apply, client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("applying Secret %s: %w", desired.Name, err)
	}
	return nil
}

func secretUpToDate(live, desired *corev1.Secret) bool {
	if len(live.Data) != len(desired.Data) {
		return false
	}
	for k, v := range desired.Data {
		if subtle.ConstantTimeCompare(live.Data[k], v) != 1 {
			return false
		}
	}
	for k, v := range desired.Labels {
		if live.Labels[k] != v {
			return false
		}
	}
	for _, k := range []string{rotationVersionAnnotation, rotationSwitchedAnnotation} {
		if live.Annotations[k] != desired.Annotations[k] {
			return false
		}
	}
	return true
}

func (r *RedisClusterReconciler) getSecret(ctx context.Context, namespace, name string) (*corev1.Secret, error) {
	s := &corev1.Secret{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, s); err != nil {
		return nil, err
	}
	return s, nil
}

func secretKey(ref *cachev1beta1.SecretKeySelector) string {
	return secretKeyOr(ref, resources.PasswordKey)
}

func secretKeyOr(ref *cachev1beta1.SecretKeySelector, def string) string {
	if ref.Key == "" {
		return def
	}
	return ref.Key
}

// credentialsReason maps a credentials error to a condition reason of the API.
func credentialsReason(err error) string {
	switch {
	case errors.Is(err, credentials.ErrSecretNotFound), errors.Is(err, credentials.ErrKeyMissing), errors.Is(err, credentials.ErrInvalidPassword):
		return cachev1beta1.RedisClusterSecretNotFoundReason
	case errors.Is(err, credentials.ErrVaultUnreachable), errors.Is(err, credentials.ErrVaultError):
		return cachev1beta1.RedisClusterVaultUnreachableReason
	case errors.Is(err, credentials.ErrAuthFailed), errors.Is(err, credentials.ErrPermissionDenied):
		return cachev1beta1.RedisClusterVaultPermissionDeniedReason
	case errors.Is(err, credentials.ErrInvalidConfig):
		return cachev1beta1.RedisClusterInvalidSpecReason
	default:
		return cachev1beta1.RedisClusterReconcileErrorReason
	}
}
