package webhooks

import (
	"context"
	"slices"
	"strings"
	"testing"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
)

// TestTLSAccessChecks: a new or changed spec.tls.secretName asks whether
// the user may get that Secret; the operator's own CA and an unchanged
// name ask nothing.
func TestTLSAccessChecks(t *testing.T) {
	withTLS := func(secret string) *cachev1beta1.RedisCluster {
		rc := validHub()
		rc.Namespace = "team"
		rc.Spec.TLS = &cachev1beta1.TLSSpec{Enabled: true, SecretName: secret}
		return rc
	}
	for _, tc := range []struct {
		name     string
		old, obj *cachev1beta1.RedisCluster
		want     []string
	}{
		{"create with a Secret", nil, withTLS("redis-cert"), []string{"spec.tls.secretName: get secrets team/redis-cert"}},
		{"create with the operator's CA", nil, withTLS(""), nil},
		{"unchanged", withTLS("redis-cert"), withTLS("redis-cert"), nil},
		{"changed", withTLS("redis-cert"), withTLS("other"), []string{"spec.tls.secretName: get secrets team/other"}},
	} {
		var got []string
		for _, c := range tlsAccessChecks(tc.old, tc.obj) {
			got = append(got, c.path.String()+": "+c.attrs.Verb+" "+c.attrs.Resource+" "+c.attrs.Namespace+"/"+c.attrs.Name)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: checks %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestTLSEnabledImmutable: turning spec.tls.enabled on or off for an
// existing cluster is refused naming the field; other changes of spec.tls
// are not.
func TestTLSEnabledImmutable(t *testing.T) {
	on := &cachev1beta1.RedisClusterSpec{TLS: &cachev1beta1.TLSSpec{Enabled: true}}
	onPlain := &cachev1beta1.RedisClusterSpec{TLS: &cachev1beta1.TLSSpec{Enabled: true, PlainPort: true}}
	off := &cachev1beta1.RedisClusterSpec{}
	for _, tc := range []struct {
		name     string
		old, new *cachev1beta1.RedisClusterSpec
		refused  bool
	}{{"on", off, on, true}, {"off", on, off, true}, {"plain port", on, onPlain, false}, {"unchanged off", off, off, false}} {
		var r result
		validateTLSUpdate(tc.old, tc.new, nil, &r)
		if (len(r.errs) > 0) != tc.refused {
			t.Errorf("%s: errors %v, want refused=%v", tc.name, r.errs, tc.refused)
		}
		for _, e := range r.errs {
			if e.Field != "enabled" {
				t.Errorf("%s: error on %q", tc.name, e.Field)
			}
		}
	}
}

// TestTLSSwitchNamesBlueGreen: turning TLS on, or off, for a running
// cluster is refused with one cause on spec.tls.enabled that says why and
// names the blue/green path: a new cluster with the wanted spec.tls,
// restored from a backup or with the clients migrated, then the old one
// deleted.
func TestTLSSwitchNamesBlueGreen(t *testing.T) {
	withTLS := func(on bool) *cachev1beta1.RedisCluster {
		rc := validHub()
		if on {
			rc.Spec.TLS = &cachev1beta1.TLSSpec{Enabled: true}
		}
		return rc
	}
	for _, on := range []bool{true, false} {
		_, err := (&Validator{}).ValidateV1beta1(context.Background(), withTLS(!on), withTLS(on))
		got := causes(t, err)
		if len(got) != 1 || !strings.HasPrefix(got[0], "spec.tls.enabled: Forbidden: cannot change on an existing cluster") {
			t.Fatalf("enabled=%v: causes %q", on, got)
		}
		for _, want := range []string{"cluster bus", "blue/green", "create a new RedisCluster", "spec.bootstrap.fromBackup",
			"migrate the clients", "then delete this one"} {
			if !strings.Contains(got[0], want) {
				t.Errorf("enabled=%v: %q does not say %q", on, got[0], want)
			}
		}
	}
}
