package controllers

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"

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
//     starts has it before its sidecar scrapes;
//   - reconcileExporterUser, from reconcileUsers: sets the user on every running node (ACL
//     SETUSER; a node that already has it as it is is skipped, so a settled cluster sends
//     nothing). With the exporter disabled, a Secret left from before means the user is still
//     on the nodes: it is deleted there (ACL DELUSER), then the Secret.

// exporterUser returns the sidecar's ACL user, creating its Secret the first time; nil when
// spec.exporter is disabled.
func (r *RedisClusterReconciler) exporterUser(ctx context.Context, s *scope) (*acl.User, error) {
	rc := s.rc
	if !rc.Spec.Exporter.Enabled {
		return nil, nil
	}
	key := client.ObjectKey{Namespace: rc.Namespace, Name: resources.ExporterSecretName(rc.Name)}
	sec := &corev1.Secret{}
	// getChild asks the API server when the cache does not show the Secret: a password is
	// never generated again to replace the one running sidecars hold.
	err := r.getChild(ctx, key, sec)
	switch {
	case apierrors.IsNotFound(err):
		sec = nil
	case err != nil:
		return nil, fmt.Errorf("reading Secret %s: %w", key.Name, err)
	default:
		if err := checkControlled(rc, sec); err != nil {
			return nil, err
		}
	}
	if sec != nil && len(sec.Data[resources.PasswordKey]) > 0 {
		return &acl.User{Name: acl.ExporterUser, Rules: acl.ExporterRules, Passwords: []string{string(sec.Data[resources.PasswordKey])}}, nil
	}
	b := make([]byte, generatedPasswordBytes)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("generating the exporter's password: %w", err)
	}
	pw := base64.RawURLEncoding.EncodeToString(b)
	desired := resources.ExporterSecret(rc, pw)
	if sec == nil {
		err = r.Client.Create(ctx, desired)
	} else {
		// Emptied by hand: the sidecars cannot have started with it.
		sec.Data = desired.Data
		err = r.Client.Update(ctx, sec)
	}
	if err != nil {
		// AlreadyExists or a conflict: another pass wrote it; the next pass reads it.
		return nil, fmt.Errorf("writing Secret %s: %w", key.Name, err)
	}
	s.log.Info("Created the exporter's ACL user password", "secret", key.Name, "user", acl.ExporterUser)
	return &acl.User{Name: acl.ExporterUser, Rules: acl.ExporterRules, Passwords: []string{pw}}, nil
}

// reconcileExporterUser sets s.exporter on the running nodes eps, or, with the exporter
// disabled, deletes a user left from before, then its Secret. It returns when to look again:
// soon after a node refused.
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
	// Only the cache: a cluster that never had the exporter costs no API call per pass.
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
