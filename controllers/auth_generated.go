package controllers

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/credentials"
	"github.com/redis-operator/redis-operator/controllers/rotation"
)

// generatedPasswordBytes is the entropy of a generated password: 256 bits.
const generatedPasswordBytes = 32

// generatedCredential is the "source" of a cluster without secretRef or
// vault: the live password when there is one (generated earlier, or left
// by a source spec.auth no longer names: it is kept, not replaced), the
// pending one while a rotation to it runs, and otherwise a new random
// password of generatedPasswordBytes from crypto/rand, URL-safe base64
// (43 characters, no shell metacharacters). Its Version names the owned
// Secret, never the password.
func generatedCredential(rc *cachev1beta1.RedisCluster, st rotation.State) (credentials.Credential, error) {
	pw := st.Live
	if st.InProgress() && st.Next != "" {
		pw = st.Next
	}
	if pw == "" {
		b := make([]byte, generatedPasswordBytes)
		if _, err := rand.Read(b); err != nil {
			return credentials.Credential{}, fmt.Errorf("generating a password: %w", err)
		}
		pw = base64.RawURLEncoding.EncodeToString(b)
	}
	return credentials.Credential{Password: credentials.NewPassword(pw),
		Version: fmt.Sprintf("generated:%s/%s", rc.Namespace, ownedSecretName(rc))}, nil
}
