package controllers

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/redis-operator/redis-operator/controllers/acl"
	"github.com/redis-operator/redis-operator/controllers/resources"
	"github.com/redis-operator/redis-operator/controllers/topology"
)

// The redis_exporter sidecar (spec.exporter.enabled) logs in as its own ACL user,
// acl.ExporterUser, with a password the operator generates once per cluster and keeps in the
// Secret <cluster>-exporter (resources.ExporterSecret). The sidecar reads that password once,
// when it starts; since nothing rotates it, the sidecar keeps scraping through every rotation
// of spec.auth and of spec.users, which it used to lose (it read the default user's password
// and kept the old one until its pod restarted). Two steps:
//
//   - exporterUser, from prepareUsers: reads the Secret, creates it with a new password when it
//     is missing, and gives prepareUsers the user to add to auth.conf, so that every node that
//     starts has it before its sidecar scrapes. The Secret's UID goes into the pod template
//     (resources.Placement.ExporterSecretUID): a password made again (the Secret deleted or
//     emptied by hand) rolls the pods, whose sidecars could not log in with the old one.
//   - reconcileExporterUser, from reconcileUsers: sets the user on every running node (ACL
//     SETUSER; a node that already has it as it is is skipped, so a settled cluster sends
//     nothing).
//
// The user stays while any pod still runs the sidecar: disabling the exporter deletes the user
// on the nodes (ACL DELUSER), then the Secret, only once the roll that removes the sidecars is
// over, and enabling it again meanwhile keeps the password the sidecars have.

// exporterUser returns the sidecar's ACL user and its Secret's UID, creating the Secret when
// spec.exporter is enabled and it is missing; nil when the exporter is disabled and no pod
// runs the sidecar. A Secret of that name that is not this cluster's is an error while the
// exporter is enabled (reported; the pass stops, so no pod is built to read it) and ignored
// otherwise.
func (r *RedisClusterReconciler) exporterUser(ctx context.Context, s *scope) (*acl.User, string, error) {
	rc := s.rc
	key := client.ObjectKey{Namespace: rc.Namespace, Name: resources.ExporterSecretName(rc.Name)}
	sec := &corev1.Secret{}
	var err error
	if rc.Spec.Exporter.Enabled {
		// getChild asks the API server when the cache does not show the Secret: a password
		// is never made again to replace the one running sidecars hold.
		err = r.getChild(ctx, key, sec)
	} else {
		// Only the cache: a cluster without the exporter costs no API call per pass.
		err = r.Client.Get(ctx, key, sec)
	}
	switch {
	case apierrors.IsNotFound(err):
		sec = nil
	case err != nil:
		return nil, "", fmt.Errorf("reading Secret %s: %w", key.Name, err)
	case !metav1.IsControlledBy(sec, rc):
		if rc.Spec.Exporter.Enabled {
			// The sidecar reads its password from this name: it would be handed
			// another's Secret (a Secret of someone else's, or another cluster's
			// user Secret whose name collides). The pass stops before any pod
			// is built with it.
			s.warning("ExporterSecretConflict", "Secret %s exists and is not this cluster's: the exporter sidecar would read it; rename or delete it, or disable spec.exporter", key.Name)
			return nil, "", fmt.Errorf("Secret %s exists and is not this cluster's: the exporter sidecar would read its password; rename or delete it, or disable spec.exporter", key.Name)
		}
		return nil, "", nil
	}
	if !rc.Spec.Exporter.Enabled {
		if sec == nil {
			return nil, "", nil
		}
		running, err := r.exporterSidecarsRun(ctx, s)
		if err != nil || !running {
			return nil, "", err
		}
	}
	if sec != nil && len(sec.Data[resources.PasswordKey]) > 0 {
		return &acl.User{Name: acl.ExporterUser, Rules: acl.ExporterRules, Passwords: []string{string(sec.Data[resources.PasswordKey])}}, string(sec.UID), nil
	}
	if !rc.Spec.Exporter.Enabled {
		return nil, "", nil
	}
	if sec != nil {
		// Emptied by hand: made again under a new UID, so that the pods roll.
		if err := r.Client.Delete(ctx, sec, client.Preconditions{UID: &sec.UID}); err != nil && !apierrors.IsNotFound(err) {
			return nil, "", fmt.Errorf("deleting Secret %s: %w", key.Name, err)
		}
	}
	b := make([]byte, generatedPasswordBytes)
	if _, err := rand.Read(b); err != nil {
		return nil, "", fmt.Errorf("generating the exporter's password: %w", err)
	}
	pw := base64.RawURLEncoding.EncodeToString(b)
	created := resources.ExporterSecret(rc, pw)
	if err := r.Client.Create(ctx, created); err != nil {
		// AlreadyExists: another pass made it; the next pass reads it.
		return nil, "", fmt.Errorf("creating Secret %s: %w", key.Name, err)
	}
	s.log.Info("Created the exporter's ACL user password", "secret", key.Name, "user", acl.ExporterUser)
	return &acl.User{Name: acl.ExporterUser, Rules: acl.ExporterRules, Passwords: []string{pw}}, string(created.UID), nil
}

// exporterSidecarsRun reports whether a pod of the cluster still has the exporter sidecar in
// its spec (from the cache).
func (r *RedisClusterReconciler) exporterSidecarsRun(ctx context.Context, s *scope) (bool, error) {
	var pods corev1.PodList
	if err := r.Client.List(ctx, &pods, client.InNamespace(s.rc.Namespace), managedBy(s.rc)); err != nil {
		return false, fmt.Errorf("listing pods: %w", err)
	}
	for _, p := range pods.Items {
		if slices.ContainsFunc(p.Spec.Containers, func(c corev1.Container) bool { return c.Name == resources.ExporterContainerName }) {
			return true, nil
		}
	}
	return false, nil
}

// reconcileExporterUser sets s.exporter on the running nodes eps or, once no pod runs the
// sidecar and the exporter is disabled, deletes a user left from before, then its Secret. It
// returns when to look again: soon after a node refused.
func (r *RedisClusterReconciler) reconcileExporterUser(ctx context.Context, s *scope, eng *topology.Engine, eps []topology.Endpoint) (ctrl.Result, error) {
	rc := s.rc
	if s.exporter != nil {
		if len(eps) == 0 {
			return ctrl.Result{}, nil // every node starts from auth.conf, which has the user
		}
		if err := eng.ApplyUsers(ctx, eps, []acl.User{*s.exporter}); err != nil {
			s.log.Info("Setting the exporter's ACL user failed; retrying", "user", acl.ExporterUser, "error", err.Error())
			return ctrl.Result{RequeueAfter: busyRequeue}, nil
		}
		return ctrl.Result{}, nil
	}
	if rc.Spec.Exporter.Enabled {
		return ctrl.Result{}, nil // its Secret is another's (exporterUser reported it)
	}
	sec := &corev1.Secret{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: rc.Namespace, Name: resources.ExporterSecretName(rc.Name)}, sec)
	switch {
	case apierrors.IsNotFound(err):
		return ctrl.Result{}, nil
	case err != nil:
		return ctrl.Result{}, fmt.Errorf("reading Secret %s: %w", resources.ExporterSecretName(rc.Name), err)
	case !metav1.IsControlledBy(sec, rc):
		return ctrl.Result{}, nil
	}
	if len(eps) > 0 {
		if err := eng.DeleteUsers(ctx, eps, []string{acl.ExporterUser}); err != nil {
			s.log.Info("Deleting the exporter's ACL user failed; retrying", "user", acl.ExporterUser, "error", err.Error())
			return ctrl.Result{RequeueAfter: busyRequeue}, nil
		}
	}
	if err := r.Client.Delete(ctx, sec); err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("deleting Secret %s: %w", sec.Name, err)
	}
	s.did("UserDeleted", "ACL user %s (spec.exporter is disabled) deleted from %d nodes", acl.ExporterUser, len(eps))
	return ctrl.Result{}, nil
}
