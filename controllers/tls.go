package controllers

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/resources"
	"github.com/redis-operator/redis-operator/controllers/tlscerts"
	"github.com/redis-operator/redis-operator/controllers/topology"
)

// tlsMaterial is the cluster's TLS as one pass read it.
type tlsMaterial struct {
	// config dials the nodes (tlscerts.ClientConfig); id names the
	// material, so pooled clients are replaced when it changes.
	config *tls.Config
	id     string
	serial string
}

// tlsReloadRequeue is how soon a pass looks again while a node still
// serves an older certificate (its Secret volume not updated yet).
const tlsReloadRequeue = 5 * time.Second

// reconcileTLS reads, or with the operator's CA makes, the certificate of
// a cluster with spec.tls enabled, and fills s.tls and status.tls. The
// operator's CA (Secret <name>-tls-ca) is made once and renewed before it
// expires (renewCA); the nodes' certificate (Secret <name>-tls) is issued
// again when it is missing, has less than a third of its life left, is not
// signed by the CA that signs now or was published with another ca.crt, or
// does not name every pod IP of the cluster (tlscerts.Covers); for pod IPs
// it waits (a pass soon after) while new pods have none yet (podIPs), so a
// scale-out gets one new certificate, not one per pod. A user Secret
// (spec.tls.secretName) must hold tls.crt, tls.key and ca.crt, the
// certificate chaining to ca.crt; otherwise the pass fails naming what is
// wrong.
func (r *RedisClusterReconciler) reconcileTLS(ctx context.Context, s *scope) (ctrl.Result, bool, error) {
	rc := s.rc
	if !rc.Spec.TLSEnabled() {
		rc.Status.TLS = nil
		return ctrl.Result{}, false, nil
	}
	var ca, cert, key []byte
	var authority *tlscerts.Authority
	var wait bool
	if name := rc.Spec.TLS.SecretName; name != "" {
		sec := &corev1.Secret{}
		if err := r.reader().Get(ctx, client.ObjectKey{Namespace: rc.Namespace, Name: name}, sec); err != nil {
			return ctrl.Result{}, true, fmt.Errorf("reading TLS Secret %s (spec.tls.secretName): %w", name, err)
		}
		ca, cert, key = sec.Data[resources.TLSCAKey], sec.Data[resources.TLSCertKey], sec.Data[resources.TLSKeyKey]
		if err := tlscerts.Verify(ca, cert, key, s.now); err != nil {
			return ctrl.Result{}, true, fmt.Errorf("TLS Secret %s (spec.tls.secretName): %w", name, err)
		}
	} else {
		var err error
		if authority, cert, key, wait, err = r.operatorCertificate(ctx, s); err != nil {
			return ctrl.Result{}, true, err
		}
		ca = authority.Bundle
	}
	cfg, err := tlscerts.ClientConfig(ca, cert, key)
	if err != nil {
		return ctrl.Result{}, true, fmt.Errorf("TLS Secret %s: %w", resources.TLSSecretName(rc), err)
	}
	leaf, err := tlscerts.ParseCertificate(cert)
	if err != nil {
		return ctrl.Result{}, true, fmt.Errorf("TLS Secret %s: tls.crt: %w", resources.TLSSecretName(rc), err)
	}
	sum := sha256.Sum256(slices.Concat(ca, cert, key))
	s.tls = &tlsMaterial{config: cfg, id: hex.EncodeToString(sum[:]), serial: tlscerts.Serial(leaf)}
	applied := ""
	if rc.Status.TLS != nil {
		applied = rc.Status.TLS.AppliedSerial
	}
	rc.Status.TLS = &cachev1beta1.TLSStatus{
		SecretName:    resources.TLSSecretName(rc),
		Serial:        s.tls.serial,
		NotAfter:      &metav1.Time{Time: leaf.NotAfter.UTC()},
		AppliedSerial: applied,
	}
	if authority != nil {
		rc.Status.TLS.CANotAfter = &metav1.Time{Time: authority.Signer().NotAfter.UTC()}
		rc.Status.TLS.CARenewal = caRenewal[authority.Phase()]
	}
	if wait {
		return ctrl.Result{RequeueAfter: tlsReloadRequeue}, false, nil
	}
	return ctrl.Result{}, false, nil
}

// caRenewal is status.tls.caRenewal for each phase of a CA renewal.
var caRenewal = map[tlscerts.Phase]cachev1beta1.TLSCARenewal{
	tlscerts.PhasePublished: cachev1beta1.TLSCARenewalPublished,
	tlscerts.PhaseSigning:   cachev1beta1.TLSCARenewalSigning,
}

// operatorCertificate returns the operator's CA and the nodes'
// certificate and key from the operator's Secrets, making the CA, renewing
// it (renewCA) and issuing the certificate as reconcileTLS describes.
func (r *RedisClusterReconciler) operatorCertificate(ctx context.Context, s *scope) (authority *tlscerts.Authority, cert, key []byte, wait bool, err error) {
	rc := s.rc
	caSecret := &corev1.Secret{}
	err = r.Client.Get(ctx, client.ObjectKey{Namespace: rc.Namespace, Name: resources.TLSCASecretName(rc.Name)}, caSecret)
	switch {
	case apierrors.IsNotFound(err):
		caCert, caKey, err := tlscerts.NewCA(caCommonName(rc), s.now, r.CAValidity)
		if err != nil {
			return nil, nil, nil, false, err
		}
		caSecret = resources.TLSCASecret(rc, caCert, caKey, nil)
		s.log.Info("Creating the cluster's TLS CA", "secret", caSecret.Name)
		if err := r.Client.Create(ctx, caSecret, client.FieldOwner(FieldOwner)); err != nil {
			return nil, nil, nil, false, fmt.Errorf("creating Secret %s: %w", caSecret.Name, err)
		}
	case err != nil:
		return nil, nil, nil, false, fmt.Errorf("reading Secret %s: %w", resources.TLSCASecretName(rc.Name), err)
	default:
		if err := checkControlled(rc, caSecret); err != nil {
			return nil, nil, nil, false, err
		}
	}
	authority, err = tlscerts.ParseAuthority(caSecret.Data[resources.TLSCAKey], caSecret.Data[resources.TLSCAPrivateKey],
		caSecret.Data[resources.TLSNextCAPrivateKey])
	if err != nil {
		return nil, nil, nil, false, fmt.Errorf("Secret %s: %w", caSecret.Name, err)
	}

	leafSecret := &corev1.Secret{}
	err = r.Client.Get(ctx, client.ObjectKey{Namespace: rc.Namespace, Name: resources.TLSOperatorSecretName(rc.Name)}, leafSecret)
	exists := err == nil
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, nil, nil, false, fmt.Errorf("reading Secret %s: %w", resources.TLSOperatorSecretName(rc.Name), err)
	}
	if exists {
		if err := checkControlled(rc, leafSecret); err != nil {
			return nil, nil, nil, false, err
		}
		if authority, err = r.renewCA(ctx, s, caSecret, authority, leafSecret); err != nil {
			return nil, nil, nil, false, err
		}
	}

	ips, waiting, err := r.clusterPodIPs(ctx, rc, s.now)
	if err != nil {
		return nil, nil, nil, false, err
	}
	dns := resources.TLSDNSNames(rc)
	if exists {
		cert, key = leafSecret.Data[resources.TLSCertKey], leafSecret.Data[resources.TLSKeyKey]
		why := reissueReason(authority, cert, key, leafSecret.Data[resources.TLSCAKey], dns, ips, s.now)
		if why == "" {
			return authority, cert, key, false, nil
		}
		if why == reasonNewPodIP && waiting > 0 {
			// New pods get their IPs within seconds of each other (a
			// scale-out makes a whole shard at once): one certificate
			// for all of them, not one per pod.
			s.log.V(1).Info("Waiting for new pods' IPs before issuing the TLS certificate", "pods", waiting)
			return authority, cert, key, true, nil
		}
		s.log.Info("Issuing a new TLS certificate", "secret", leafSecret.Name, "reason", why)
	}
	cert, key, err = tlscerts.Issue(authority.SignerPEM(), authority.Key, dns, ips, s.now)
	if err != nil {
		return nil, nil, nil, false, err
	}
	desired := resources.TLSOperatorSecret(rc, cert, key, authority.Bundle)
	if exists {
		desired.ResourceVersion = leafSecret.ResourceVersion
		err = r.Client.Update(ctx, desired, client.FieldOwner(FieldOwner))
	} else {
		err = r.Client.Create(ctx, desired, client.FieldOwner(FieldOwner))
	}
	if err != nil {
		return nil, nil, nil, false, fmt.Errorf("writing Secret %s: %w", desired.Name, err)
	}
	leaf, err := tlscerts.ParseCertificate(cert)
	if err != nil {
		return nil, nil, nil, false, err
	}
	s.did("TLSCertificateIssued", "Issued TLS certificate %s into Secret %s", tlscerts.Serial(leaf), desired.Name)
	return authority, cert, key, false, nil
}

// caCommonName names the operator's CA of rc.
func caCommonName(rc *cachev1beta1.RedisCluster) string {
	return rc.Namespace + "/" + rc.Name + " Redis CA"
}

// renewCA takes the next step of renewing the cluster's CA
// (tlscerts.Renew) when one is due, and returns the CA as it then is. The
// nodes' certificate in leafSecret counts as served by every node when
// status.tls.appliedSerial is its serial (reconcileTLSReload). The step is
// one write of the CA Secret, a merge patch of its data guarded by the
// resourceVersion read (a pass working from a stale copy conflicts and is
// retried), so an operator stopped at any moment leaves a state the next
// pass carries on from; the nodes' certificate follows in the same pass
// (reissueReason).
func (r *RedisClusterReconciler) renewCA(ctx context.Context, s *scope, caSecret *corev1.Secret, a *tlscerts.Authority, leafSecret *corev1.Secret) (*tlscerts.Authority, error) {
	cert, leafCA := leafSecret.Data[resources.TLSCertKey], leafSecret.Data[resources.TLSCAKey]
	applied := false
	if leaf, err := tlscerts.ParseCertificate(cert); err == nil && s.rc.Status.TLS != nil {
		applied = s.rc.Status.TLS.AppliedSerial == tlscerts.Serial(leaf)
	}
	next, step, err := tlscerts.Renew(a, cert, leafCA, applied, caCommonName(s.rc), s.now, r.CAValidity)
	if err != nil || step == tlscerts.StepNone {
		return a, err
	}
	s.log.Info("Renewing the cluster's TLS CA", "secret", caSecret.Name, "step", string(step))
	base := caSecret.DeepCopy()
	caSecret.Data = resources.TLSCAData(next.Bundle, next.Key, next.NextKey)
	patch := client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})
	if err := r.Client.Patch(ctx, caSecret, patch, client.FieldOwner(FieldOwner)); err != nil {
		return nil, fmt.Errorf("writing Secret %s: %w", caSecret.Name, err)
	}
	switch step {
	case tlscerts.StepPublish:
		s.did("TLSCARenewing", "CA %s expires at %s: new CA %s (until %s) added to ca.crt of Secrets %s and %s; the old one signs until every node trusts both",
			tlscerts.Serial(a.Signer()), a.Signer().NotAfter.UTC().Format(time.RFC3339), tlscerts.Serial(next.Next()),
			next.Next().NotAfter.UTC().Format(time.RFC3339), caSecret.Name, leafSecret.Name)
	case tlscerts.StepSign:
		s.did("TLSCASigning", "Every node trusts CAs %s and %s: the nodes' certificate is issued from CA %s now",
			tlscerts.Serial(a.Signer()), tlscerts.Serial(next.Signer()), tlscerts.Serial(next.Signer()))
	case tlscerts.StepDrop:
		var dropped []string
		for _, c := range a.Others() {
			dropped = append(dropped, tlscerts.Serial(c))
		}
		s.did("TLSCARenewed", "Every node serves a certificate of CA %s (until %s): CA %s removed from ca.crt",
			tlscerts.Serial(next.Signer()), next.Signer().NotAfter.UTC().Format(time.RFC3339), strings.Join(dropped, ", "))
	}
	return next, nil
}

// reissueReason says why the operator's certificate must be issued again
// ("" when it need not). A certificate with less than a third of its life
// left is issued again only when a new one would live longer: one that
// ends with its CA is replaced once the CA is renewed (renewCA).
func reissueReason(a *tlscerts.Authority, cert, key, secretCA []byte, dns []string, ips []net.IP, now time.Time) string {
	if !bytes.Equal(a.Bundle, secretCA) {
		return "the CA bundle changed"
	}
	if err := tlscerts.Verify(a.Bundle, cert, key, now); err != nil {
		return err.Error()
	}
	leaf, err := tlscerts.ParseCertificate(cert)
	if err != nil {
		return err.Error()
	}
	if !a.Signs(leaf) {
		return "another CA signs now"
	}
	if tlscerts.NeedsRenewal(leaf, now) && leaf.NotAfter.Before(a.Signer().NotAfter) {
		return "less than a third of its validity is left"
	}
	if !tlscerts.Covers(leaf, dns, ips) {
		return reasonNewPodIP
	}
	return ""
}

// reasonNewPodIP is reissueReason's answer for a certificate that lacks a
// pod IP.
const reasonNewPodIP = "it does not name every pod IP"

// tlsIPWait bounds how long a new pod without an IP holds back the
// certificate for the others (podIPs): a pod that cannot be scheduled
// must not keep the other new pods' IPs out of it.
const tlsIPWait = time.Minute

// clusterPodIPs lists the cluster's pods and returns podIPs of them.
func (r *RedisClusterReconciler) clusterPodIPs(ctx context.Context, rc *cachev1beta1.RedisCluster, now time.Time) ([]net.IP, int, error) {
	var pods corev1.PodList
	if err := r.Client.List(ctx, &pods, client.InNamespace(rc.Namespace), managedBy(rc)); err != nil {
		return nil, 0, fmt.Errorf("listing pods: %w", err)
	}
	ips, waiting := podIPs(pods.Items, now)
	return ips, waiting, nil
}

// podIPs are the IPs of the pods that have one, sorted, and how many pods
// have none yet while they will soon: not being deleted, not finished,
// created less than tlsIPWait before now.
func podIPs(pods []corev1.Pod, now time.Time) (ips []net.IP, waiting int) {
	for _, p := range pods {
		if ip := net.ParseIP(p.Status.PodIP); ip != nil {
			ips = append(ips, ip)
			continue
		}
		if p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodFailed && p.Status.Phase != corev1.PodSucceeded &&
			now.Sub(p.CreationTimestamp.Time) < tlsIPWait {
			waiting++
		}
	}
	slices.SortFunc(ips, func(a, b net.IP) int { return bytes.Compare(a, b) })
	return ips, waiting
}

// reconcileTLSReload makes every running node serve the current
// certificate (topology.Engine.ReloadTLS) once it differs from
// status.tls.appliedSerial, and records it there when all do. It runs
// before the topology work: a node that still serves another certificate
// (its Secret volume not updated yet; a new pod's, which does not name its
// IP) is held out of receiving slots (s.noSlots, topology.Endpoint.NoSlots),
// so no client is sent there to fail its handshake. While one does, or a
// pod is not up, the pass looks again soon.
func (r *RedisClusterReconciler) reconcileTLSReload(ctx context.Context, s *scope) (ctrl.Result, bool, error) {
	st := s.rc.Status.TLS
	if s.tls == nil || st == nil || st.AppliedSerial == st.Serial || !s.passwordKnown {
		return ctrl.Result{}, false, nil
	}
	var addrs []string
	byAddr := map[string]string{}
	allUp := true
	for _, sh := range s.shards {
		for _, p := range sh.Pods {
			if !p.Up {
				allUp = false
				continue
			}
			addr := p.endpoint().Addr
			addrs = append(addrs, addr)
			byAddr[addr] = p.Name
		}
	}
	pending, err := r.engine(s, s.password).ReloadTLS(ctx, addrs, st.Serial,
		topology.TLSFiles{Cert: resources.TLSCertFile, Key: resources.TLSKeyFile, CA: resources.TLSCAFile})
	if err != nil {
		s.log.Info("Reloading the TLS certificate", "error", err.Error())
		return ctrl.Result{RequeueAfter: tlsReloadRequeue}, false, nil
	}
	if len(pending) > 0 {
		s.log.V(1).Info("Nodes do not serve the new TLS certificate yet", "nodes", pending)
		for _, addr := range pending {
			s.holdSlots(byAddr[addr], fmt.Sprintf("it does not serve TLS certificate %s yet", st.Serial))
		}
		return ctrl.Result{RequeueAfter: tlsReloadRequeue}, false, nil
	}
	if !allUp {
		return ctrl.Result{RequeueAfter: tlsReloadRequeue}, false, nil
	}
	if st.AppliedSerial != "" {
		s.did("TLSCertificateApplied", "Every node serves TLS certificate %s", st.Serial)
	}
	st.AppliedSerial = st.Serial
	return ctrl.Result{}, false, nil
}
