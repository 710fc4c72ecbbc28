package webhooks

import (
	"context"
	"encoding/json"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/redis-operator/redis-operator/apis/cache/v1alpha1"
	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
)

func appUser(name, rules string) cachev1beta1.UserSpec {
	return cachev1beta1.UserSpec{Name: name, Rules: rules, PasswordFrom: cachev1beta1.UserPasswordSource{
		SecretRef: &cachev1beta1.SecretKeySelector{Name: name + "-pw", Key: "password"},
	}}
}

// TestUsersThroughAPIServer: spec.users with bad ACL rules is refused naming the user and
// the rule; the reserved default user and duplicate names are refused, by the schema for
// v1beta1 and by the webhook for what a v1alpha1 write carries in its conversion annotation,
// which no schema checks; valid users survive a v1alpha1 read-edit-write.
func TestUsersThroughAPIServer(t *testing.T) {
	c := startAPIServer(t)
	ctx := context.Background()
	ns := newNamespace(t, c, "users")

	bad := fullHub(ns, "bad-rules")
	bad.Spec.Users = []cachev1beta1.UserSpec{appUser("app", "~app:* +@read"), appUser("cache", "~c:* +@foo >pw")}
	causes := apiCauses(t, c.Create(ctx, bad))
	if !hasCause(causes, `spec.users[1].rules: Invalid value: "~c:* +@foo >pw": user "cache": invalid ACL rule "+@foo": unknown ACL category`) {
		t.Fatalf("bad rules: causes %q", causes)
	}
	if len(causes) != 1 {
		t.Fatalf("want only the first bad rule reported: %q", causes)
	}
	bad.Spec.Users[1].Rules = "~c:* +nosuchcommand"
	if causes := apiCauses(t, c.Create(ctx, bad)); !hasCause(causes, `spec.users[1].rules: Invalid value: "~c:* +nosuchcommand": user "cache": invalid ACL rule "+nosuchcommand"`) {
		t.Fatalf("unknown command: causes %q", causes)
	}

	for _, name := range []string{"default", "redis-operator-exporter"} {
		reserved := fullHub(ns, "reserved")
		reserved.Spec.Users = []cachev1beta1.UserSpec{appUser(name, "+@all")}
		if causes := apiCauses(t, c.Create(ctx, reserved)); !hasCause(causes, "spec.users[0].name: Invalid value: \"string\": default and redis-operator-exporter are the operator's own users") {
			t.Fatalf("user %s: causes %q", name, causes)
		}
	}
	dup := fullHub(ns, "dup")
	dup.Spec.Users = []cachev1beta1.UserSpec{appUser("app", "+@read"), appUser("app", "+@write")}
	if causes := apiCauses(t, c.Create(ctx, dup)); !hasCause(causes, "spec.users[1]: Duplicate value") {
		t.Fatalf("duplicate users: causes %q", causes)
	}

	// Valid users, then a v1alpha1 client edits the object: the users stay.
	good := fullHub(ns, "good")
	good.Spec.Users = []cachev1beta1.UserSpec{appUser("app", "~app:* +@read +@write"), appUser("reader.ro", "%R~app:* +@read")}
	if err := c.Create(ctx, good); err != nil {
		t.Fatal(err)
	}
	want := good.Spec.Users
	alpha := &cachev1alpha1.RedisCluster{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(good), alpha); err != nil {
		t.Fatal(err)
	}
	alpha.Spec.Config["maxmemory"] = "700mb"
	if err := c.Update(ctx, alpha); err != nil {
		t.Fatal(err)
	}
	got := &cachev1beta1.RedisCluster{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(good), got); err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(got.Spec.Users, want) || got.Spec.Config["maxmemory"] != "700mb" {
		t.Fatalf("after a v1alpha1 edit: users %+v, config %v", got.Spec.Users, got.Spec.Config)
	}

	// A v1alpha1 write whose conversion annotation names the default user twice.
	if err := c.Get(ctx, client.ObjectKeyFromObject(good), alpha); err != nil {
		t.Fatal(err)
	}
	var data map[string]any
	if err := json.Unmarshal([]byte(alpha.Annotations[cachev1alpha1.ConversionDataAnnotation]), &data); err != nil {
		t.Fatal(err)
	}
	spec := data["spec"].(map[string]any)
	users := spec["users"].([]any)
	users[0].(map[string]any)["name"] = "default"
	users[1].(map[string]any)["rules"] = "+@read resetpass"
	spec["users"] = append(users, users[1])
	raw, err := json.Marshal(data)
	if err != nil {
		t.Fatal(err)
	}
	alpha.Annotations[cachev1alpha1.ConversionDataAnnotation] = string(raw)
	causes = apiCauses(t, c.Update(ctx, alpha))
	const in = "metadata.annotations[cache.redis.io/conversion-data]: Invalid value: v1beta1 field "
	if !hasCause(causes, in+`spec.users[0].name: Forbidden: user "default" is reserved`) ||
		!hasCause(causes, in+`spec.users[1].rules: Invalid value: "+@read resetpass": user "reader.ro": invalid ACL rule "resetpass": passwords are the operator's`) ||
		!hasCause(causes, in+`spec.users[2].name: Duplicate value: "reader.ro"`) {
		t.Fatalf("v1alpha1 with reserved and duplicate users: causes %q", causes)
	}
}
