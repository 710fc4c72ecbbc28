package webhooks

import (
	"fmt"
	"slices"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/resources"
)

// One rule everywhere: for every object a spec makes the operator read or
// use on its behalf (a Secret and its key, a service account's token for
// an audience, a ConfigMap, a claim, the pods its extras amount to), the
// user writing the spec must be allowed to do it themselves. The functions
// below list those permissions for each kind of reference; accessChecks
// (RedisCluster) and backupAccessChecks (the backup kinds) gather them,
// and reviewAccess asks the API server with one SubjectAccessReview each.

// podServiceAccount is the service account the Redis pods run as: the
// StatefulSets name none (controllers/resources), so the namespace's
// default one, whose token a projected volume would mint.
const podServiceAccount = "default"

// secretCheck: the user must be allowed to get Secret name of ns.
func secretCheck(ns, name string, p *field.Path, consequence string) accessCheck {
	return accessCheck{path: p, consequence: consequence, attrs: authorizationv1.ResourceAttributes{
		Namespace: ns, Verb: "get", Resource: "secrets", Name: name,
	}}
}

// tokenCheck: the user must be allowed to create a token of service
// account sa of ns.
func tokenCheck(ns, sa string, p *field.Path, consequence string) accessCheck {
	return accessCheck{path: p, consequence: consequence, attrs: authorizationv1.ResourceAttributes{
		Namespace: ns, Verb: "create", Resource: "serviceaccounts", Subresource: "token", Name: sa,
	}}
}

// vaultAccessChecks are the permissions a Vault login at p uses (v over
// ov, nil when new; sa and oldSA the service accounts the login uses when
// v names none): get its token Secret, or without one create a token of
// its service account, whenever anything of the login changed (a new
// address sends the token somewhere new; a new role, mount, path, key,
// KV version, Vault namespace or auth mount reads another secret with the
// same rights; a new audience makes the token valid for something new);
// get its CA Secret when new or changed.
func vaultAccessChecks(ns string, p *field.Path, ov *cachev1beta1.VaultSource, oldSA string, v *cachev1beta1.VaultSource, sa string) []accessCheck {
	var checks []accessCheck
	changed := ov == nil || oldSA != sa || !apiequality.Semantic.DeepEqual(*ov, *v)
	if ref := v.TokenSecretRef; ref != nil && changed {
		checks = append(checks, secretCheck(ns, ref.Name, p.Child("tokenSecretRef", "name"),
			fmt.Sprintf("the operator would log in to %s with the Vault token it holds and read %s", v.Address, vaultSecretName(v))))
	}
	if ref := v.CASecretRef; ref != nil && (ov == nil || !sameSelector(ov.CASecretRef, ref)) {
		checks = append(checks, secretCheck(ns, ref.Name, p.Child("caSecretRef", "name"), "the operator would read it as Vault's CA bundle"))
	}
	if v.TokenSecretRef == nil && changed {
		what := fmt.Sprintf("the operator would request a token of it (audience %q) and send it to %s, logging in as role %q to read %s", v.Audience, v.Address, v.Role, vaultSecretName(v))
		if v.ServiceAccountName == "" {
			what = fmt.Sprintf("serviceAccountName is empty, so %q is used; %s", sa, what)
		}
		checks = append(checks, tokenCheck(ns, sa, p.Child("serviceAccountName"), what))
	}
	return checks
}

// objectStoreAccessChecks are the permissions an object store at p uses
// (s over os, nil when new; sa and oldSA the service accounts its Vault
// login uses when it names none): get its credentials Secret when new or
// changed, or when the store moved (another endpoint, bucket, prefix,
// region or addressing style: the signed requests would read or write
// somewhere new); get its CA Secret when new or changed; its Vault login's
// (vaultAccessChecks) when the store moved too.
func objectStoreAccessChecks(ns string, p *field.Path, os *cachev1beta1.ObjectStoreSpec, oldSA string, s *cachev1beta1.ObjectStoreSpec, sa string) []accessCheck {
	var checks []accessCheck
	moved := os == nil || os.Endpoint != s.Endpoint || os.Bucket != s.Bucket || os.Prefix != s.Prefix ||
		os.Region != s.Region || os.ForcePathStyle != s.ForcePathStyle
	if ref := s.CredentialsSecretRef; ref != nil && (moved || os.CredentialsSecretRef == nil || *os.CredentialsSecretRef != *ref) {
		checks = append(checks, secretCheck(ns, ref.Name, p.Child("credentialsSecretRef", "name"),
			fmt.Sprintf("the operator would sign requests to %s (bucket %q, prefix %q) with the access keys it holds (keys %q and %q)",
				s.Endpoint, s.Bucket, s.Prefix, ref.AccessKeyIDKey, ref.SecretAccessKeyKey)))
	}
	if ref := s.CASecretRef; ref != nil && (os == nil || !sameSelector(os.CASecretRef, ref)) {
		checks = append(checks, secretCheck(ns, ref.Name, p.Child("caSecretRef", "name"), "the operator would read it as the object store's CA bundle"))
	}
	if cv := s.CredentialsVault; cv != nil {
		var ov *cachev1beta1.VaultSource
		if os != nil && os.CredentialsVault != nil && !moved {
			ov = &os.CredentialsVault.Vault
		}
		checks = append(checks, vaultAccessChecks(ns, p.Child("credentialsVault", "vault"), ov, oldSA, &cv.Vault, loginServiceAccount(sa, &cv.Vault))...)
	}
	return checks
}

// vaultSecretName names the KV v2 secret a login reads, for messages.
func vaultSecretName(v *cachev1beta1.VaultSource) string {
	mount := v.Mount
	if mount == "" {
		mount = "secret"
	}
	return fmt.Sprintf("%s/%s", mount, v.Path)
}

// userAccessChecks: each spec.users entry's password source, matched with
// the old entry of the same name: get its Secret, or its Vault login's
// permissions (vaultAccessChecks, the cluster's service account when it
// names none).
func userAccessChecks(old, obj *cachev1beta1.RedisCluster) []accessCheck {
	oldUsers := map[string]*cachev1beta1.UserSpec{}
	if old != nil {
		for i := range old.Spec.Users {
			oldUsers[old.Spec.Users[i].Name] = &old.Spec.Users[i]
		}
	}
	var checks []accessCheck
	for i := range obj.Spec.Users {
		u := &obj.Spec.Users[i]
		p := field.NewPath("spec", "users").Index(i).Child("passwordFrom")
		ou := oldUsers[u.Name]
		if ref := u.PasswordFrom.SecretRef; ref != nil && (ou == nil || !sameSelector(ou.PasswordFrom.SecretRef, ref)) {
			checks = append(checks, secretCheck(obj.Namespace, ref.Name, p.Child("secretRef", "name"),
				fmt.Sprintf("the operator would copy it into the cluster's Secret %s as user %q's password", resources.UserSecretName(obj.Name, u.Name), u.Name)))
		}
		if v := u.PasswordFrom.Vault; v != nil {
			var ov *cachev1beta1.VaultSource
			oldSA := ""
			if ou != nil && ou.PasswordFrom.Vault != nil {
				ov, oldSA = ou.PasswordFrom.Vault, loginServiceAccount(old.Name, ou.PasswordFrom.Vault)
			}
			checks = append(checks, vaultAccessChecks(obj.Namespace, p.Child("vault"), ov, oldSA, v, loginServiceAccount(obj.Name, v))...)
		}
	}
	return checks
}

// restoreAccessChecks: spec.bootstrap.fromBackup.objectStore's
// permissions (objectStoreAccessChecks; its Vault login uses the cluster's
// service account when it names none).
func restoreAccessChecks(old, obj *cachev1beta1.RedisCluster) []accessCheck {
	s := restoreStore(obj)
	if s == nil {
		return nil
	}
	os, oldSA := restoreStore(old), ""
	if os != nil {
		oldSA = old.Name
	}
	return objectStoreAccessChecks(obj.Namespace, field.NewPath("spec", "bootstrap", "fromBackup", "objectStore"), os, oldSA, s, obj.Name)
}

// restoreStore is rc's spec.bootstrap.fromBackup.objectStore, nil when rc
// is nil or names none.
func restoreStore(rc *cachev1beta1.RedisCluster) *cachev1beta1.ObjectStoreSpec {
	if rc == nil || rc.Spec.Bootstrap == nil || rc.Spec.Bootstrap.FromBackup == nil {
		return nil
	}
	return rc.Spec.Bootstrap.FromBackup.ObjectStore
}

// podExtrasAccessChecks: spec.pod's sidecars, init containers and volumes
// become part of the Redis pods the operator creates, so changing them is
// creating pods: the user must be allowed to create pods in the namespace,
// and to do what each new reference in them implies (podExtrasReferences).
// References the old spec already had are not asked again.
func podExtrasAccessChecks(old, obj *cachev1beta1.RedisCluster) []accessCheck {
	extras := &obj.Spec.Pod
	if len(extras.Sidecars) == 0 && len(extras.InitContainers) == 0 && len(extras.Volumes) == 0 {
		return nil
	}
	var oldChecks []accessCheck
	if old != nil {
		o := &old.Spec.Pod
		if apiequality.Semantic.DeepEqual(o.Sidecars, extras.Sidecars) && apiequality.Semantic.DeepEqual(o.InitContainers, extras.InitContainers) &&
			apiequality.Semantic.DeepEqual(o.Volumes, extras.Volumes) {
			return nil
		}
		oldChecks = podExtrasReferences(old)
	}
	p := field.NewPath("spec", "pod")
	checks := []accessCheck{{path: p, consequence: "spec.pod's sidecars, init containers and volumes are part of the Redis pods the operator creates",
		attrs: authorizationv1.ResourceAttributes{Namespace: obj.Namespace, Verb: "create", Resource: "pods"}}}
	for _, c := range podExtrasReferences(obj) {
		if !slices.ContainsFunc(oldChecks, func(o accessCheck) bool { return o.attrs == c.attrs }) {
			checks = append(checks, c)
		}
	}
	return checks
}

// podExtrasReferences lists what spec.pod's extras make the pods read: the
// Secrets, ConfigMaps and claims their volumes name, the service-account
// token a projected volume mints, the claims an ephemeral volume creates,
// the Secrets and ConfigMaps the containers' env and envFrom name, and the
// operator's own volumes a sidecar or init container mounts (auth and data
// hold the cluster's password and keys: get the cluster's auth Secret; tls
// holds the pods' private key: get its Secret).
func podExtrasReferences(rc *cachev1beta1.RedisCluster) []accessCheck {
	ns := rc.Namespace
	extras := &rc.Spec.Pod
	var checks []accessCheck
	get := func(resource, name string, p *field.Path, consequence string) {
		checks = append(checks, accessCheck{path: p, consequence: consequence, attrs: authorizationv1.ResourceAttributes{
			Namespace: ns, Verb: "get", Resource: resource, Name: name,
		}})
	}
	const mounted = "the operator would mount it into the Redis pods"
	for i := range extras.Volumes {
		v := &extras.Volumes[i]
		vp := field.NewPath("spec", "pod", "volumes").Index(i)
		switch {
		case v.Secret != nil:
			get("secrets", v.Secret.SecretName, vp.Child("secret", "secretName"), mounted)
		case v.ConfigMap != nil:
			get("configmaps", v.ConfigMap.Name, vp.Child("configMap", "name"), mounted)
		case v.PersistentVolumeClaim != nil:
			get("persistentvolumeclaims", v.PersistentVolumeClaim.ClaimName, vp.Child("persistentVolumeClaim", "claimName"), "the operator would mount the claim's volume into the Redis pods")
		case v.CSI != nil && v.CSI.NodePublishSecretRef != nil:
			get("secrets", v.CSI.NodePublishSecretRef.Name, vp.Child("csi", "nodePublishSecretRef", "name"), "the CSI driver would read it for the Redis pods")
		case v.Ephemeral != nil:
			checks = append(checks, accessCheck{path: vp.Child("ephemeral"), consequence: "each Redis pod would create a claim of its own",
				attrs: authorizationv1.ResourceAttributes{Namespace: ns, Verb: "create", Resource: "persistentvolumeclaims"}})
		case v.Projected != nil:
			for j, src := range v.Projected.Sources {
				sp := vp.Child("projected", "sources").Index(j)
				switch {
				case src.Secret != nil:
					get("secrets", src.Secret.Name, sp.Child("secret", "name"), mounted)
				case src.ConfigMap != nil:
					get("configmaps", src.ConfigMap.Name, sp.Child("configMap", "name"), mounted)
				case src.ServiceAccountToken != nil:
					checks = append(checks, tokenCheck(ns, podServiceAccount, sp.Child("serviceAccountToken"),
						fmt.Sprintf("the Redis pods would receive a token of it for audience %q", src.ServiceAccountToken.Audience)))
				}
			}
		}
	}
	for _, list := range []struct {
		field string
		cs    []corev1.Container
	}{{"sidecars", extras.Sidecars}, {"initContainers", extras.InitContainers}} {
		for i := range list.cs {
			c := &list.cs[i]
			cp := field.NewPath("spec", "pod", list.field).Index(i)
			const exposed = "the operator would expose it to the container"
			for j, e := range c.Env {
				if e.ValueFrom == nil {
					continue
				}
				ep := cp.Child("env").Index(j).Child("valueFrom")
				if r := e.ValueFrom.SecretKeyRef; r != nil {
					get("secrets", r.Name, ep.Child("secretKeyRef", "name"), exposed)
				}
				if r := e.ValueFrom.ConfigMapKeyRef; r != nil {
					get("configmaps", r.Name, ep.Child("configMapKeyRef", "name"), exposed)
				}
			}
			for j, e := range c.EnvFrom {
				ep := cp.Child("envFrom").Index(j)
				if e.SecretRef != nil {
					get("secrets", e.SecretRef.Name, ep.Child("secretRef", "name"), exposed)
				}
				if e.ConfigMapRef != nil {
					get("configmaps", e.ConfigMapRef.Name, ep.Child("configMapRef", "name"), exposed)
				}
			}
			for j, m := range c.VolumeMounts {
				mp := cp.Child("volumeMounts").Index(j).Child("name")
				switch m.Name {
				case resources.DataVolumeName, "auth":
					get("secrets", resources.SecretName(rc.Name), mp,
						fmt.Sprintf("volume %q holds the cluster's keys or its password, which Secret %s guards", m.Name, resources.SecretName(rc.Name)))
				case "tls":
					get("secrets", resources.TLSSecretName(rc), mp, "volume \"tls\" holds the Redis pods' private key")
				}
			}
		}
	}
	return checks
}
