package resources

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
)

const (
	// PlainPort is the plain-text client port kept beside the TLS one with
	// spec.tls.plainPort (with TLS on, RedisPort serves TLS).
	PlainPort = 6380
	// TLSDir is where the certificate Secret is mounted in the Redis and
	// exporter containers.
	TLSDir = "/etc/redis-tls"
	// TLSCertKey, TLSKeyKey and TLSCAKey are the keys of a TLS Secret, as
	// cert-manager writes them (and kubernetes.io/tls Secrets name the first two).
	TLSCertKey = "tls.crt"
	TLSKeyKey  = "tls.key"
	TLSCAKey   = "ca.crt"
	// TLSCAPrivateKey is the key of the CA's private key in the operator's CA Secret.
	TLSCAPrivateKey = "ca.key"
	// TLSNextCAPrivateKey is the key, in the operator's CA Secret, of the
	// private key of a new CA that is trusted (in ca.crt) but does not
	// sign yet, while the CA is renewed (tlscerts.Authority).
	TLSNextCAPrivateKey = "next-ca.key"
	// tlsVolumeName is the pod volume of the certificate Secret.
	tlsVolumeName = "tls"
)

// TLSCertFile, TLSKeyFile and TLSCAFile are the paths of the mounted
// certificate, key and CA bundle inside the containers, as redis.conf's
// tls-cert-file, tls-key-file and tls-ca-cert-file name them.
const (
	TLSCertFile = TLSDir + "/" + TLSCertKey
	TLSKeyFile  = TLSDir + "/" + TLSKeyKey
	TLSCAFile   = TLSDir + "/" + TLSCAKey
)

// TLSCASecretName is the Secret holding the operator's CA of cluster rc
// (ca.crt and ca.key), owned by the RedisCluster.
func TLSCASecretName(rc string) string { return rc + "-tls-ca" }

// TLSOperatorSecretName is the Secret holding the nodes' certificate the
// operator's CA issued (tls.crt, tls.key, ca.crt), owned by the RedisCluster.
func TLSOperatorSecretName(rc string) string { return rc + "-tls" }

// TLSSecretName is the Secret the pods mount the certificate from:
// spec.tls.secretName, or the operator's TLSOperatorSecretName. "" when TLS
// is off.
func TLSSecretName(rc *cachev1beta1.RedisCluster) string {
	if !rc.Spec.TLSEnabled() {
		return ""
	}
	if rc.Spec.TLS.SecretName != "" {
		return rc.Spec.TLS.SecretName
	}
	return TLSOperatorSecretName(rc.Name)
}

// TLSDNSNames are the names the operator's certificate carries: each pod's
// name under the headless Service (pod.headless.ns.svc and its
// cluster.local form, as one wildcard each) and the headless and client
// Services' names in every form a client in the cluster may use.
func TLSDNSNames(rc *cachev1beta1.RedisCluster) []string {
	var out []string
	for _, svc := range []string{ClientServiceName(rc.Name), HeadlessServiceName(rc.Name)} {
		out = append(out, svc, svc+"."+rc.Namespace, svc+"."+rc.Namespace+".svc", svc+"."+rc.Namespace+".svc.cluster.local")
	}
	h := HeadlessServiceName(rc.Name) + "." + rc.Namespace + ".svc"
	return append(out, "*."+h, "*."+h+".cluster.local")
}

// tlsAuthClients maps spec.tls.authClients to tls-auth-clients' value.
func tlsAuthClients(a cachev1beta1.TLSAuthClients) string {
	switch a {
	case cachev1beta1.TLSAuthClientsRequired:
		return "yes"
	case cachev1beta1.TLSAuthClientsOptional:
		return "optional"
	}
	return "no"
}

// renderPorts writes the port lines of redis.conf: port RedisPort without
// TLS; with TLS, tls-port RedisPort, port PlainPort or 0 (no plain-text
// listener), the mounted certificate files, tls-replication and
// tls-cluster yes and tls-auth-clients from spec.tls. Redis 7.0 then
// announces the TLS port in the cluster (tls-cluster yes) and MIGRATE
// dials over TLS too.
func renderPorts(b *strings.Builder, rc *cachev1beta1.RedisCluster) {
	if !rc.Spec.TLSEnabled() {
		fmt.Fprintf(b, "port %d\n", RedisPort)
		return
	}
	plain := 0
	if plainPortOpen(rc) {
		plain = PlainPort
	}
	fmt.Fprintf(b, "port %d\n", plain)
	fmt.Fprintf(b, "tls-port %d\n", RedisPort)
	b.WriteString("tls-cert-file " + TLSCertFile + "\n")
	b.WriteString("tls-key-file " + TLSKeyFile + "\n")
	b.WriteString("tls-ca-cert-file " + TLSCAFile + "\n")
	b.WriteString("tls-replication yes\n")
	b.WriteString("tls-cluster yes\n")
	b.WriteString("tls-auth-clients " + tlsAuthClients(rc.Spec.TLS.AuthClients) + "\n")
}

// tlsPrelude redefines authPrelude's rcli to speak TLS with the mounted
// certificate (presented as client certificate, for tls-auth-clients) and
// CA. redis-cli checks the chain, not the name (hiredis), so a node is
// reached at its pod IP.
const tlsPrelude = `rcli() { _h=$1; _p=$2; shift 2
  set -- --tls --cacert ` + TLSCAFile + ` --cert ` + TLSCertFile + ` --key ` + TLSKeyFile + ` -h "$_h" -p "$_p" "$@"
  if command -v timeout >/dev/null 2>&1; then timeout 3 redis-cli "$@" 2>/dev/null; else redis-cli "$@" 2>/dev/null; fi
}
`

// forTLS returns script (one of the scripts starting with authPrelude) as
// the pods of rc run it: unchanged without TLS, so a cluster without TLS
// keeps its pod template; with TLS, rcli speaks TLS (tlsPrelude).
func forTLS(rc *cachev1beta1.RedisCluster, script string) string {
	if !rc.Spec.TLSEnabled() {
		return script
	}
	return strings.Replace(script, authPrelude, authPrelude+tlsPrelude, 1)
}

// tlsVolume and tlsMount bring the certificate Secret into the pod (0440,
// group fsGroup, as the auth Secret). Secret volumes are updated in place
// when the Secret changes, which certificate rotation relies on.
func tlsVolume(rc *cachev1beta1.RedisCluster) corev1.Volume {
	return corev1.Volume{Name: tlsVolumeName, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
		SecretName:  TLSSecretName(rc),
		DefaultMode: ptr.To[int32](0o440),
		Items: []corev1.KeyToPath{
			{Key: TLSCertKey, Path: TLSCertKey}, {Key: TLSKeyKey, Path: TLSKeyKey}, {Key: TLSCAKey, Path: TLSCAKey},
		},
	}}}
}

func tlsMount() corev1.VolumeMount {
	return corev1.VolumeMount{Name: tlsVolumeName, MountPath: TLSDir, ReadOnly: true}
}

// exporterTLSEnv points redis_exporter at its pod's TLS port by the pod's
// DNS name under the headless Service, <pod>.<headless>.<ns>.svc (which
// publishes not-ready pods too; the pods' DNS search path completes the
// cluster domain): the exporter verifies the certificate against the host
// it dials, and a certificate names that wildcard (the operator's does;
// cert-manager's should, see examples/tls), not the pod IP. It uses the
// exporter's documented REDIS_ADDR scheme rediss:// and
// REDIS_EXPORTER_TLS_CLIENT_CERT_FILE, REDIS_EXPORTER_TLS_CLIENT_KEY_FILE
// and REDIS_EXPORTER_TLS_CA_CERT_FILE (github.com/oliver006/redis_exporter
// README; checked against Debian's redis_exporter 1.45 and redis-server
// 7.0 with client certificates required). POD_NAME comes first, so
// REDIS_ADDR can expand it.
func exporterTLSEnv(rc *cachev1beta1.RedisCluster) []corev1.EnvVar {
	host := "$(POD_NAME)." + HeadlessServiceName(rc.Name) + "." + rc.Namespace + ".svc"
	return []corev1.EnvVar{
		{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{
			FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"},
		}},
		{Name: "REDIS_ADDR", Value: fmt.Sprintf("rediss://%s:%d", host, RedisPort)},
		{Name: "REDIS_EXPORTER_TLS_CLIENT_CERT_FILE", Value: TLSCertFile},
		{Name: "REDIS_EXPORTER_TLS_CLIENT_KEY_FILE", Value: TLSKeyFile},
		{Name: "REDIS_EXPORTER_TLS_CA_CERT_FILE", Value: TLSCAFile},
	}
}

// TLSCASecret is the operator's CA Secret of rc, owned by rc, holding
// TLSCAData.
func TLSCASecret(rc *cachev1beta1.RedisCluster, bundle, key, nextKey []byte) *corev1.Secret {
	return &corev1.Secret{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: TLSCASecretName(rc.Name), Namespace: rc.Namespace,
			Labels: ClusterLabels(rc.Name), OwnerReferences: ownerRefs(rc)},
		Type: corev1.SecretTypeOpaque,
		Data: TLSCAData(bundle, key, nextKey),
	}
}

// TLSCAData is the data of the operator's CA Secret (PEM): ca.crt, the
// CAs the nodes and clients trust; ca.key, the key of the one that signs;
// next-ca.key, only while a renewal publishes a new CA that does not sign
// yet, its key.
func TLSCAData(bundle, key, nextKey []byte) map[string][]byte {
	data := map[string][]byte{TLSCAKey: bundle, TLSCAPrivateKey: key}
	if len(nextKey) > 0 {
		data[TLSNextCAPrivateKey] = nextKey
	}
	return data
}

// TLSOperatorSecret is the Secret of the nodes' certificate the operator's
// CA issued: tls.crt, tls.key and ca.crt (PEM), type kubernetes.io/tls,
// owned by rc.
func TLSOperatorSecret(rc *cachev1beta1.RedisCluster, cert, key, ca []byte) *corev1.Secret {
	return &corev1.Secret{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: TLSOperatorSecretName(rc.Name), Namespace: rc.Namespace,
			Labels: ClusterLabels(rc.Name), OwnerReferences: ownerRefs(rc)},
		Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{TLSCertKey: cert, TLSKeyKey: key, TLSCAKey: ca},
	}
}

// plainPortOpen reports whether the pods serve plain text on PlainPort
// beside TLS (spec.tls.plainPort).
func plainPortOpen(rc *cachev1beta1.RedisCluster) bool {
	return rc.Spec.TLSEnabled() && rc.Spec.TLS.PlainPort
}

// clientPorts are the client ports a NetworkPolicy opens: RedisPort, and
// PlainPort when it is open.
func clientPorts(rc *cachev1beta1.RedisCluster) []networkingv1.NetworkPolicyPort {
	ports := tcpPort(RedisPort)
	if plainPortOpen(rc) {
		ports = append(ports, tcpPort(PlainPort)...)
	}
	return ports
}
