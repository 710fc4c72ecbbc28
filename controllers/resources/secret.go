package resources

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
)

// Secret builds the operator-owned Secret SecretName(rc): PasswordKey holds
// the password for clients and for the pods' probes, and AuthConfKey the
// redis.conf fragment that redis.conf includes:
//
//	requirepass "<password>"
//	masterauth "<password>"
//
// With an empty password (spec.auth unset) PasswordKey is absent and
// auth.conf holds only a comment, so Redis runs without a password. The
// password never appears in a pod's command line or environment.
func Secret(rc *cachev1beta1.RedisCluster, password string) *corev1.Secret {
	data := map[string][]byte{}
	if password == "" {
		data[AuthConfKey] = []byte("# spec.auth is unset: Redis runs without a password.\n")
	} else {
		q := QuoteConfigValue(password)
		data[AuthConfKey] = []byte("requirepass " + q + "\nmasterauth " + q + "\n")
		data[PasswordKey] = []byte(password)
	}
	// No AppliedHashAnnotation: a hash of the password would let anyone
	// who reads the annotation test guesses offline. The controller
	// compares the data itself.
	return ownedSecret(rc, SecretName(rc.Name), ClusterLabels(rc.Name), data)
}

// ownedSecret is an Opaque Secret of rc's namespace named name, with
// labels and data, controlled by rc.
func ownedSecret(rc *cachev1beta1.RedisCluster, name string, labels map[string]string, data map[string][]byte) *corev1.Secret {
	return &corev1.Secret{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{
			Name:            name,
			Namespace:       rc.Namespace,
			Labels:          labels,
			OwnerReferences: ownerRefs(rc),
		},
		Type: corev1.SecretTypeOpaque,
		Data: data,
	}
}

// QuoteConfigValue quotes s as one redis.conf argument: in double quotes,
// with every byte other than printable ASCII (and the quote and backslash
// themselves) written as \xHH, which Redis's config parser (sdssplitargs)
// decodes back to the same bytes.
func QuoteConfigValue(s string) string {
	const hex = "0123456789abcdef"
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c < 0x7f && c != '"' && c != '\\' {
			b.WriteByte(c)
			continue
		}
		b.WriteString(`\x`)
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&0xf])
	}
	b.WriteByte('"')
	return b.String()
}
