package controllers

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/acl"
)

// TestUsersFromSecret: a spec.users entry gets its own Secret, whose password clients read
// only once every running node has the user (no pod runs here, so it stays pending), and
// its hashed password in auth.conf, so pods start with it; status.users shows the step and
// never the password; a changed source password replaces the pending one; a user removed
// from spec.users loses its Secret and its auth.conf line. No event shows a password or hash.
func TestUsersFromSecret(t *testing.T) {
	ns := newNamespace(t)
	const pw1, pw2 = `app "pw" 1`, "app-pw-2"
	src := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "app-pw", Namespace: ns}, Data: map[string][]byte{"password": []byte(pw1)}}
	if err := k8s.Create(testCtx, src); err != nil {
		t.Fatal(err)
	}
	rc := newCluster(t, ns, "users", func(rc *cachev1beta1.RedisCluster) {
		rc.Spec.Users = []cachev1beta1.UserSpec{{
			Name: "app", Rules: "~app:* +@read +@write",
			PasswordFrom: cachev1beta1.UserPasswordSource{SecretRef: &cachev1beta1.SecretKeySelector{Name: "app-pw"}},
		}}
	})
	userSec := &corev1.Secret{}
	owned := &corev1.Secret{}
	eventually(t, "user Secret with the pending password and auth.conf with its hash", func() error {
		if err := k8s.Get(testCtx, client.ObjectKey{Namespace: ns, Name: "users-user-app"}, userSec); err != nil {
			return err
		}
		if string(userSec.Data["password-next"]) != pw1 {
			return errors.New("no pending password")
		}
		if err := k8s.Get(testCtx, client.ObjectKey{Namespace: ns, Name: "users-auth"}, owned); err != nil {
			return err
		}
		if !strings.Contains(string(owned.Data["auth.conf"]), `user "app" "reset" "resetchannels" "on" "#`+acl.Hash(pw1)+`" "~app:*" "+@read" "+@write"`) {
			return fmt.Errorf("auth.conf %q", owned.Data["auth.conf"])
		}
		return nil
	})
	if _, ok := userSec.Data["password"]; ok {
		t.Error("the password was published before any node had the user")
	}
	if string(userSec.Data["username"]) != "app" {
		t.Errorf("username %q", userSec.Data["username"])
	}
	if strings.Contains(string(owned.Data["auth.conf"]), `app \x22pw\x22 1`) || strings.Contains(string(owned.Data["auth.conf"]), pw1) {
		t.Error("auth.conf holds the user's plain-text password")
	}
	var got *cachev1beta1.RedisCluster
	eventually(t, "status.users", func() error {
		got = getCluster(t, rc)
		if len(got.Status.Users) != 1 || got.Status.Users[0].Name != "app" || got.Status.Users[0].RotationStep != "AddingPassword" ||
			got.Status.Users[0].Source != "Secret" || got.Status.Users[0].Applied {
			return fmt.Errorf("status.users %+v", got.Status.Users)
		}
		return nil
	})
	assertNoSecretInStatus(t, got, pw1)

	src.Data["password"] = []byte(pw2)
	if err := k8s.Update(testCtx, src); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the newer password pending", func() error {
		if err := k8s.Get(testCtx, client.ObjectKey{Namespace: ns, Name: "users-user-app"}, userSec); err != nil {
			return err
		}
		if string(userSec.Data["password-next"]) != pw2 {
			return errors.New("still the first password")
		}
		return nil
	})

	got = getCluster(t, rc)
	got.Spec.Users = nil
	if err := k8s.Update(testCtx, got); err != nil {
		t.Fatal(err)
	}
	eventually(t, "user Secret deleted and auth.conf without the user", func() error {
		err := k8s.Get(testCtx, client.ObjectKey{Namespace: ns, Name: "users-user-app"}, &corev1.Secret{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("user Secret: %v", err)
		}
		if err := k8s.Get(testCtx, client.ObjectKey{Namespace: ns, Name: "users-auth"}, owned); err != nil {
			return err
		}
		if strings.Contains(string(owned.Data["auth.conf"]), "user ") {
			return fmt.Errorf("auth.conf %q", owned.Data["auth.conf"])
		}
		if got := getCluster(t, rc); len(got.Status.Users) != 0 {
			return fmt.Errorf("status.users %+v", got.Status.Users)
		}
		return nil
	})
	var events corev1.EventList
	if err := k8s.List(testCtx, &events, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		for _, s := range []string{pw1, pw2, acl.Hash(pw1), acl.Hash(pw2)} {
			if strings.Contains(e.Message, s) {
				t.Errorf("event %s shows a user's password or its hash", e.Reason)
			}
		}
	}
}

// assertNoSecretInStatus fails when the status, as JSON, holds secret or its hash.
func assertNoSecretInStatus(t *testing.T, rc *cachev1beta1.RedisCluster, secret string) {
	t.Helper()
	s := fmt.Sprintf("%+v", rc.Status)
	if strings.Contains(s, secret) || strings.Contains(s, acl.Hash(secret)) {
		t.Errorf("status holds a user's password or its hash: %s", s)
	}
}

// clip keeps status.users[].message within the CRD's bound, on a rune boundary.
func TestClip(t *testing.T) {
	long := strings.Repeat("é", 600) // 1200 bytes
	got := clip(long, maxUserMessage)
	if len(got) > maxUserMessage || !strings.HasSuffix(got, "…") || !utf8.ValidString(got) {
		t.Fatalf("clip: %d bytes, valid %v", len(got), utf8.ValidString(got))
	}
	if clip("short", maxUserMessage) != "short" {
		t.Fatal("clip changed a short message")
	}
}
