package certs

import (
	"context"
	"encoding/base64"
	"fmt"
	"math"
	"time"

	"github.com/go-logr/logr"
	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// How the rotator starts: the Secret first, already filled, then the CA
// injected, then the rotator and its reconciler, so that a normal start
// writes nothing twice and logs no error.

// secretFirst hands rotator.AddRotator the manager, except that the rotator
// itself is added wrapped in ensureSecretThenRotate: the rotator fails when
// its Secret does not exist, and this package creates it.
//
// AddRotator adds the rotator's own cache first (the reader the rotator and
// its webhook reconciler get the Secret from); secretFirst keeps it, so that
// the rotator starts only once that cache holds the Secret.
//
// Its webhook reconciler (the rotator's controller, which injects the CA
// bundle) starts only once ensureSecretThenRotate has released it: two
// replicas' reconcilers injecting at once into objects their caches had not
// yet seen updated got "the object has been modified".
type secretFirst struct {
	manager.Manager
	rotator *rotator.CertRotator
	certs   *Certs
	ensure  *ensureSecretThenRotate
}

func (m secretFirst) Add(r manager.Runnable) error {
	switch c := r.(type) {
	case *rotator.CertRotator:
		if c == m.rotator {
			return m.Manager.Add(m.ensure)
		}
	case cache.Cache:
		if m.ensure.reader == nil {
			m.ensure.reader = c
			return m.Manager.Add(r)
		}
	}
	return m.Manager.Add(&gated{Runnable: r, released: m.ensure.released})
}

// gated starts its runnable once released is closed.
type gated struct {
	manager.Runnable
	released <-chan struct{}
}

// NeedLeaderElection is the runnable's own answer (false when it has none,
// as the manager assumes only for runnables that say so).
func (g *gated) NeedLeaderElection() bool {
	if le, ok := g.Runnable.(manager.LeaderElectionRunnable); ok {
		return le.NeedLeaderElection()
	}
	return true
}

func (g *gated) Start(ctx context.Context) error {
	select {
	case <-g.released:
		return g.Runnable.Start(ctx)
	case <-ctx.Done():
		return nil
	}
}

// ensureSecretThenRotate creates the certificate Secret when it is missing,
// with a CA and a serving certificate in it; injects the Secret's CA into
// the webhook configuration and the CRD where it is not there yet; waits
// until the rotator's cache (reader) shows the Secret and both injections;
// then releases the rotator's webhook reconciler and runs the rotator. Both
// find valid certificates and injected bundles and write nothing. Should
// the rotator still report the Secret as not found, it is started again
// after a pause.
type ensureSecretThenRotate struct {
	rotator   *rotator.CertRotator
	certs     *Certs
	client    client.Client
	apiReader client.Reader
	logger    logr.Logger
	// reader is the rotator's cache, set while AddRotator adds it.
	reader client.Reader
	// released is closed when the rotator's other runnables may start.
	released chan struct{}
}

// issue fills secret with a new CA and a serving certificate signed by it,
// made by the rotator's own functions with the validity it would give them
// (from an hour ago, as the rotator does, against clock skew).
func (e *ensureSecretThenRotate) issue(secret *corev1.Secret) error {
	o := e.certs.opts
	now := time.Now()
	begin := now.Add(-time.Hour)
	ca, err := e.rotator.CreateCACert(begin, now.Add(o.CAValidity))
	if err != nil {
		return fmt.Errorf("making the webhook CA: %w", err)
	}
	certPEM, keyPEM, err := e.rotator.CreateCertPEM(ca, begin, now.Add(o.ServerValidity))
	if err != nil {
		return fmt.Errorf("making the webhook serving certificate: %w", err)
	}
	secret.Data = map[string][]byte{
		"ca.crt":         ca.CertPEM,
		"ca.key":         ca.KeyPEM,
		e.certs.certName: certPEM,
		e.certs.keyName:  keyPEM,
	}
	return nil
}

func (*ensureSecretThenRotate) NeedLeaderElection() bool { return false }

func (e *ensureSecretThenRotate) Start(ctx context.Context) error {
	o := e.certs.opts
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: o.Namespace,
			Name:      o.SecretName,
			Labels: map[string]string{
				"app.kubernetes.io/name":       "redis-operator",
				"app.kubernetes.io/component":  "webhook",
				"app.kubernetes.io/managed-by": "redis-operator",
			},
		},
		Type: corev1.SecretTypeOpaque,
	}
	if err := e.issue(secret); err != nil {
		return err
	}
	// Retry until the Secret exists: readiness stays false meanwhile (for
	// example while the namespace is missing or RBAC forbids the create).
	backoff := wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Jitter: 0.2, Steps: math.MaxInt32, Cap: 10 * time.Second}
	err := wait.ExponentialBackoffWithContext(ctx, backoff, func(ctx context.Context) (bool, error) {
		err := e.client.Create(ctx, secret)
		switch {
		case err == nil:
			e.logger.Info("Created the webhook certificate Secret", "secret", client.ObjectKeyFromObject(secret))
			return true, nil
		case apierrors.IsAlreadyExists(err):
			return true, nil
		default:
			e.logger.Error(err, "Creating the webhook certificate Secret", "secret", client.ObjectKeyFromObject(secret))
			return false, nil
		}
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("creating the webhook certificate Secret %s/%s: %w", o.Namespace, o.SecretName, err)
	}
	if !e.settle(ctx, client.ObjectKeyFromObject(secret)) {
		return nil // Stopped while waiting.
	}
	close(e.released)
	for {
		err := e.rotator.Start(ctx)
		if err == nil || ctx.Err() != nil || !apierrors.IsNotFound(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
}

// settle injects the Secret's CA where it is missing and waits until the
// rotator's cache shows the Secret and the injected bundles. A Secret
// without a CA (made empty by an older operator) is left to the rotator. It
// returns false when ctx ends first.
func (e *ensureSecretThenRotate) settle(ctx context.Context, key client.ObjectKey) bool {
	secret := &corev1.Secret{}
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if err := e.apiReader.Get(ctx, key, secret); err != nil {
			e.logger.Info("Reading the webhook certificate Secret", "secret", key, "error", err.Error())
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return false
	}
	ca := secret.Data["ca.crt"]
	if len(ca) > 0 {
		if err := e.inject(ctx, ca); err != nil {
			e.logger.Error(err, "Injecting the webhook CA bundle; the rotator will retry")
			ca = nil
		}
	}
	err = wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if e.reader == nil {
			return true, nil
		}
		if err := e.reader.Get(ctx, key, &corev1.Secret{}); err != nil {
			return false, nil
		}
		if len(ca) == 0 {
			return true, nil
		}
		for _, t := range e.targets() {
			obj := t.empty()
			if err := e.reader.Get(ctx, client.ObjectKey{Name: t.name}, obj); err != nil || setCABundle(obj, ca) {
				return false, nil
			}
		}
		return true, nil
	})
	return err == nil
}

// caTarget is an object whose caBundle fields receive the CA.
type caTarget struct {
	gvk  schema.GroupVersionKind
	name string
}

func (t caTarget) empty() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(t.gvk)
	return u
}

// targets are the objects the rotator injects into (rotator.WebhookInfo).
func (e *ensureSecretThenRotate) targets() []caTarget {
	o := e.certs.opts
	return []caTarget{
		{schema.GroupVersionKind{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "ValidatingWebhookConfiguration"}, o.ValidatingWebhookConfigurationName},
		{schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}, o.CRDName},
	}
}

// inject writes ca into every caBundle of the targets that lacks it, read
// from the API server and updated as the rotator updates them (an Update by
// field owner redis-operator), retrying on conflicts with another replica.
// An object that does not exist is skipped (the rotator reports it).
func (e *ensureSecretThenRotate) inject(ctx context.Context, ca []byte) error {
	for _, t := range e.targets() {
		err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
			obj := t.empty()
			if err := e.apiReader.Get(ctx, client.ObjectKey{Name: t.name}, obj); err != nil {
				return err
			}
			if !setCABundle(obj, ca) {
				return nil
			}
			return e.client.Update(ctx, obj, client.FieldOwner("redis-operator"))
		})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("injecting the CA into %s %s: %w", t.gvk.Kind, t.name, err)
		}
	}
	return nil
}

// setCABundle sets ca (base64, as the API's JSON carries bytes) as the
// caBundle of every webhook of a webhook configuration, or of a CRD's
// conversion webhook when it has one, and reports whether anything changed.
func setCABundle(obj *unstructured.Unstructured, ca []byte) bool {
	want := base64.StdEncoding.EncodeToString(ca)
	changed := false
	set := func(m map[string]any, path ...string) {
		if got, _, _ := unstructured.NestedString(m, path...); got != want {
			_ = unstructured.SetNestedField(m, want, path...)
			changed = true
		}
	}
	if obj.GetKind() == "CustomResourceDefinition" {
		if _, ok, _ := unstructured.NestedMap(obj.Object, "spec", "conversion", "webhook", "clientConfig"); ok {
			set(obj.Object, "spec", "conversion", "webhook", "clientConfig", "caBundle")
		}
		return changed
	}
	hooks, _, _ := unstructured.NestedSlice(obj.Object, "webhooks")
	for i := range hooks {
		if h, ok := hooks[i].(map[string]any); ok {
			set(h, "clientConfig", "caBundle")
		}
	}
	if changed {
		_ = unstructured.SetNestedSlice(obj.Object, hooks, "webhooks")
	}
	return changed
}
