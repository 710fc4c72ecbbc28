package credentials

import (
	"context"
	"errors"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

func TestSecretSourceFollowsTheSecret(t *testing.T) {
	ctx := context.Background()
	kc, _ := kube(t)
	ns := namespace(t, kc)
	sec, err := kc.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "redis-auth"},
		Data:       map[string][]byte{"password": []byte("first")},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSecretSource(SecretGetterFor(kc), ns, "redis-auth", "password")
	if err != nil {
		t.Fatal(err)
	}
	c1 := fetch(t, s)
	if c1.Password.Reveal() != "first" || c1.Version != fmt.Sprintf("secret:%s/redis-auth#%s", ns, sec.ResourceVersion) {
		t.Fatalf("first fetch = %q %s", c1.Password.Reveal(), c1.Version)
	}

	// An in-place edit of the Secret is seen, with a new version.
	sec.Data["password"] = []byte("second")
	if _, err := kc.CoreV1().Secrets(ns).Update(ctx, sec, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	c2 := fetch(t, s)
	if c2.Password.Reveal() != "second" || c2.Version == c1.Version {
		t.Fatalf("after the edit = %q %s (before: %s)", c2.Password.Reveal(), c2.Version, c1.Version)
	}

	for name, tc := range map[string]struct {
		data map[string][]byte
		want error
	}{
		"no-key":    {map[string][]byte{"user": []byte("x")}, ErrKeyMissing},
		"empty-key": {map[string][]byte{"password": {}}, ErrInvalidPassword},
	} {
		if _, err := kc.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: name}, Data: tc.data,
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		src, err := NewSecretSource(SecretGetterFor(kc), ns, name, "password")
		if err != nil {
			t.Fatal(err)
		}
		fetchErr(t, src, tc.want)
	}
	missing, err := NewSecretSource(SecretGetterFor(kc), ns, "absent", "password")
	if err != nil {
		t.Fatal(err)
	}
	fetchErr(t, missing, ErrSecretNotFound)
}

func TestSecretSourceForbidden(t *testing.T) {
	kc, cfg := kube(t)
	ns := namespace(t, kc)
	// A ServiceAccount with no RBAC grants, impersonated by the admin client.
	nobody := rest.CopyConfig(cfg)
	nobody.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":nobody"}
	s, err := NewSecretSource(SecretGetterFor(kubernetes.NewForConfigOrDie(nobody)), ns, "redis-auth", "password")
	if err != nil {
		t.Fatal(err)
	}
	err = fetchErr(t, s, ErrPermissionDenied)
	if Reason(err) != ReasonPermissionDenied {
		t.Fatalf("Reason = %q", Reason(err))
	}
}

func TestNewSecretSourceRejectsBadConfig(t *testing.T) {
	get := func(context.Context, string, string) (*corev1.Secret, error) { return nil, errors.New("unused") }
	for _, args := range [][4]any{
		{nil, "ns", "name", "key"},
		{SecretGetter(get), "", "name", "key"},
		{SecretGetter(get), "ns", "", "key"},
		{SecretGetter(get), "ns", "name", ""},
	} {
		g, _ := args[0].(SecretGetter)
		if _, err := NewSecretSource(g, args[1].(string), args[2].(string), args[3].(string)); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("NewSecretSource%v: err = %v, want ErrInvalidConfig", args[1:], err)
		}
	}
}
