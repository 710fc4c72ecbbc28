package resources

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
)

// TestWithRestore: the restore init container runs the operator's image as
// `restore-fetch` for this shard with the store's settings, the access keys
// from the credentials Secret and the CA mounted; it writes the data volume
// as the redis user; the pod template hash stays (dropping the container
// after formation restarts nothing) while the applied hash changes (the
// StatefulSet is applied with it, and without it again).
func TestWithRestore(t *testing.T) {
	rc := cluster()
	plain := StatefulSet(rc, 2, Placement{})
	sts := StatefulSet(rc, 2, Placement{})
	WithRestore(sts, 2, &Restore{Image: "ghcr.io/redis-operator/redis-operator:v0.1.0", Path: "redis/prod/cache/b1",
		ObjectStore: cachev1beta1.ObjectStoreSpec{Endpoint: "https://s3.example", Bucket: "bk", Region: "eu-west-1", ForcePathStyle: true,
			CredentialsSecretRef: &cachev1beta1.ObjectStoreCredentials{Name: "s3", AccessKeyIDKey: "id", SecretAccessKeyKey: "key"},
			CASecretRef:          &cachev1beta1.SecretKeySelector{Name: "ca", Key: "bundle.pem"}}})
	spec := sts.Spec.Template.Spec
	if len(spec.InitContainers) != 1 || spec.InitContainers[0].Name != RestoreContainerName {
		t.Fatalf("init containers %+v", spec.InitContainers)
	}
	c := spec.InitContainers[0]
	for _, want := range []string{"restore-fetch", "--endpoint=https://s3.example", "--bucket=bk", "--region=eu-west-1",
		"--path=redis/prod/cache/b1", "--shard=2", "--data-dir=" + DataDir, "--path-style", "--ca-file=" + restoreCADir + "/ca.crt"} {
		if !slices.Contains(c.Args, want) {
			t.Errorf("args %v lack %s", c.Args, want)
		}
	}
	env := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
			env[e.Name] = e.ValueFrom.SecretKeyRef.Name + "/" + e.ValueFrom.SecretKeyRef.Key
		case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil:
			env[e.Name] = e.ValueFrom.FieldRef.FieldPath
		}
	}
	if env["AWS_ACCESS_KEY_ID"] != "s3/id" || env["AWS_SECRET_ACCESS_KEY"] != "s3/key" || env["POD_NAME"] != "metadata.name" {
		t.Errorf("env %v", env)
	}
	if *c.SecurityContext.RunAsUser != redisUID || !*c.SecurityContext.ReadOnlyRootFilesystem {
		t.Errorf("security context %+v", c.SecurityContext)
	}
	if !slices.ContainsFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Secret != nil && v.Secret.SecretName == "ca" }) {
		t.Errorf("no CA volume in %+v", spec.Volumes)
	}
	if sts.Spec.Template.Annotations[TemplateHashAnnotation] != plain.Spec.Template.Annotations[TemplateHashAnnotation] {
		t.Error("the pod template hash changed")
	}
	if sts.Annotations[AppliedHashAnnotation] == plain.Annotations[AppliedHashAnnotation] {
		t.Error("the applied hash did not change")
	}
}

// A restore whose keys the operator read from Vault: the init container reads them from
// RestoreKeysSecret, as optional (the Secret goes once the cluster is formed); a Secret the
// user gave stays required.
func TestWithRestoreOwnedKeys(t *testing.T) {
	rc := cluster()
	sec := RestoreKeysSecret(rc, "AKID", "SECRET")
	if sec.Name != "cache-restore-keys" || string(sec.Data["accessKeyID"]) != "AKID" || string(sec.Data["secretAccessKey"]) != "SECRET" ||
		len(sec.OwnerReferences) != 1 || sec.Labels[LabelCluster] != rc.Name {
		t.Fatalf("RestoreKeysSecret %+v", sec)
	}
	for _, owned := range []bool{true, false} {
		sts := StatefulSet(rc, 0, Placement{})
		WithRestore(sts, 0, &Restore{Image: "op", Path: "p", OwnedKeys: owned, ObjectStore: cachev1beta1.ObjectStoreSpec{
			Endpoint: "https://s3.example", Bucket: "bk", CredentialsSecretRef: &cachev1beta1.ObjectStoreCredentials{Name: sec.Name}}})
		for _, e := range sts.Spec.Template.Spec.InitContainers[0].Env {
			if ref := e.ValueFrom.SecretKeyRef; ref != nil {
				if ref.Name != sec.Name || (ref.Optional != nil && *ref.Optional) != owned {
					t.Errorf("owned %v: %s from %+v", owned, e.Name, ref)
				}
			}
		}
	}
}
