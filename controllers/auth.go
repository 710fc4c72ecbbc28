package controllers

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/credentials"
	"github.com/redis-operator/redis-operator/controllers/resources"
)

// authSecretIndex indexes RedisClusters by the Secret spec.auth.secretRef names.
const authSecretIndex = "spec.auth.secretRef.name"

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

// reconcileCredentials finds the password the pods should run with and
// puts it into the operator-owned Secret.
//
//   - spec.auth unset: no password (CredentialsReady=True, NoAuth).
//   - spec.auth.secretRef: the password is read from that Secret and
//     copied into the owned Secret the first time. When the source later
//     holds a different password, the owned Secret keeps the live one and
//     CredentialsReady turns False (RotatingCredentials): changing a live
//     password without downtime is the rotation procedure, which this
//     controller does not run yet, and restarting pods with a new password
//     while clients use the old one is the failure other operators show.
//   - spec.auth.vault: reported as not readable by this controller.
//
// When no password can be determined at all (the source is unreadable and
// no owned Secret exists yet), the pass stops before anything that needs
// it; the source Secret's watch wakes the controller when it appears.
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
	livePassword, live := "", false
	if owned != nil {
		livePassword, live = string(owned.Data[resources.PasswordKey]), true
	}

	auth := rc.Spec.Auth
	if auth == nil {
		s.obs.Creds = credentialsObservation{NoAuth: true, Live: true}
		s.password, s.passwordKnown = "", true
		return ctrl.Result{}, false, r.applySecret(ctx, s, owned, "")
	}

	c := &s.obs.Creds
	var cred credentials.Credential
	switch {
	case auth.SecretRef != nil:
		c.Source = "Secret"
		src, serr := credentials.NewSecretSource(r.getSecret, rc.Namespace, auth.SecretRef.Name, secretKey(auth.SecretRef))
		if serr == nil {
			cred, serr = src.Fetch(ctx)
		}
		err = serr
	case auth.Vault != nil:
		c.Source = "Vault"
		err = fmt.Errorf("%w: reading the password from Vault is not wired into this controller yet; use spec.auth.secretRef", credentials.ErrInvalidConfig)
	default:
		c.Source = "spec.auth"
		err = fmt.Errorf("%w: spec.auth names no source", credentials.ErrInvalidConfig)
	}
	c.Live = live && livePassword != ""

	if err != nil {
		c.Err, c.Reason = err, credentialsReason(err)
		s.log.Info("Cannot read the password source", "source", c.Source, "reason", c.Reason)
		if !c.Live {
			// Nothing to start pods with: wait for the source.
			return ctrl.Result{RequeueAfter: r.ResyncPeriod}, true, nil
		}
		s.password, s.passwordKnown = livePassword, true
		return ctrl.Result{}, false, nil
	}

	c.Version = cred.Version
	fetched := cred.Password.Reveal()
	if c.Live && subtle.ConstantTimeCompare([]byte(fetched), []byte(livePassword)) != 1 {
		c.Err = fmt.Errorf("the password in Secret %s changed; the live password stays until it is rotated, which this operator version does not do yet: restore the previous password to clear this", auth.SecretRef.Name)
		c.Reason = cachev1beta1.RedisClusterRotatingCredentialsReason
		c.Version = ""
		if rc.Status.Credentials != nil {
			c.Version = rc.Status.Credentials.Version
		}
		s.password, s.passwordKnown = livePassword, true
		return ctrl.Result{}, false, nil
	}
	s.password, s.passwordKnown = fetched, true
	return ctrl.Result{}, false, r.applySecret(ctx, s, owned, fetched)
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
	if ref.Key == "" {
		return resources.PasswordKey
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
	case errors.Is(err, credentials.ErrAuthFailed):
		return cachev1beta1.RedisClusterVaultPermissionDeniedReason
	case errors.Is(err, credentials.ErrInvalidConfig):
		return cachev1beta1.RedisClusterInvalidSpecReason
	default:
		return cachev1beta1.RedisClusterReconcileErrorReason
	}
}
