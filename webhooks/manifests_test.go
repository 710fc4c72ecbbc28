package webhooks

import (
	iofs "io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/resmap"
	kusttypes "sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/redis-operator/redis-operator/webhooks/certs"
)

// renderWebhookInstall builds, with kustomize's library, the manager, the
// CRD and the webhook pieces wired the way kustomize/base/webhook's
// kustomization.yaml says to wire them, and an overlay of them with the
// given components.
func renderWebhookInstall(t *testing.T, components ...string) resmap.ResMap {
	t.Helper()
	// kustomize takes no absolute roots: copy the tree into memory and
	// render a kustomization beside base/ and components/.
	fs := filesys.MakeFsInMemory()
	src := filepath.Join("..", "kustomize")
	err := filepath.WalkDir(src, func(path string, d iofs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".yaml") {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		return fs.WriteFile(filepath.Join("/kustomize", rel), data)
	})
	if err != nil {
		t.Fatal(err)
	}
	// As installed: a base with the webhook pieces wired in, and an overlay
	// adding the components.
	base := `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: redis-operator-system
resources:
- ../base/manager
- ../base/crd
- ../base/webhook
patches:
- path: ../base/webhook/manager_webhook_patch.yaml
- path: ../base/crd/patches/webhook_in_redisclusters.yaml
`
	overlay := "resources:\n- ../webhook-test-base\ncomponents:\n"
	for _, c := range components {
		overlay += "- ../components/" + c + "\n"
	}
	if err := fs.WriteFile("/kustomize/webhook-test-base/kustomization.yaml", []byte(base)); err != nil {
		t.Fatal(err)
	}
	if err := fs.WriteFile("/kustomize/webhook-test/kustomization.yaml", []byte(overlay)); err != nil {
		t.Fatal(err)
	}
	opts := krusty.MakeDefaultOptions()
	opts.LoadRestrictions = kusttypes.LoadRestrictionsNone
	m, err := krusty.MakeKustomizer(opts).Run(fs, "/kustomize/webhook-test")
	if err != nil {
		t.Fatalf("kustomize build: %v", err)
	}
	return m
}

// object decodes the one rendered object of kind and name into out.
func object(t *testing.T, m resmap.ResMap, kind, name string, out any) {
	t.Helper()
	for _, r := range m.Resources() {
		if r.GetKind() == kind && r.GetName() == name {
			raw, err := r.AsYAML()
			if err != nil {
				t.Fatal(err)
			}
			if err := yaml.Unmarshal(raw, out); err != nil {
				t.Fatal(err)
			}
			return
		}
	}
	var have []string
	for _, r := range m.Resources() {
		have = append(have, r.GetKind()+"/"+r.GetName())
	}
	t.Fatalf("no %s %s among %v", kind, name, have)
}

// TestManifestsMatchTheCode: the rendered ValidatingWebhookConfiguration,
// Service and CRD conversion name the paths this package serves, the
// names the certificate code injects into, and the manager's pods.
func TestManifestsMatchTheCode(t *testing.T) {
	m := renderWebhookInstall(t)

	vwc := &admissionv1.ValidatingWebhookConfiguration{}
	object(t, m, "ValidatingWebhookConfiguration", certs.DefaultValidatingWebhookConfigurationName, vwc)
	paths := map[string]string{}
	for _, wh := range vwc.Webhooks {
		svc := wh.ClientConfig.Service
		if svc == nil || svc.Name != certs.DefaultServiceName || svc.Namespace != certs.DefaultNamespace {
			t.Errorf("webhook %s calls %+v, want Service %s/%s", wh.Name, svc, certs.DefaultNamespace, certs.DefaultServiceName)
			continue
		}
		if *wh.FailurePolicy != admissionv1.Fail || *wh.MatchPolicy != admissionv1.Exact || *wh.SideEffects != admissionv1.SideEffectClassNone {
			t.Errorf("webhook %s: failurePolicy %s, matchPolicy %s, sideEffects %s", wh.Name, *wh.FailurePolicy, *wh.MatchPolicy, *wh.SideEffects)
		}
		paths[wh.Name+" "+strings.Join(wh.Rules[0].Resources, ",")+"/"+strings.Join(wh.Rules[0].APIVersions, ",")] = *svc.Path
	}
	if want := map[string]string{
		"v1alpha1.redisclusters.cache.redis.io redisclusters/v1alpha1":                             ValidateV1alpha1Path,
		"v1beta1.redisclusters.cache.redis.io redisclusters/v1beta1":                               ValidateV1beta1Path,
		"v1beta1.redisclusterbackups.cache.redis.io redisclusterbackups/v1beta1":                   ValidateBackupPath,
		"v1beta1.redisclusterscheduledbackups.cache.redis.io redisclusterscheduledbackups/v1beta1": ValidateSchedulePath,
	}; !maps.Equal(paths, want) {
		t.Errorf("webhook paths %v, want %v", paths, want)
	}

	crd := &apiextensionsv1.CustomResourceDefinition{}
	object(t, m, "CustomResourceDefinition", certs.DefaultCRDName, crd)
	conv := crd.Spec.Conversion
	if conv == nil || conv.Strategy != apiextensionsv1.WebhookConverter || conv.Webhook.ClientConfig.Service == nil {
		t.Fatalf("CRD conversion %+v", conv)
	}
	if svc := conv.Webhook.ClientConfig.Service; svc.Name != certs.DefaultServiceName || svc.Namespace != certs.DefaultNamespace || *svc.Path != ConvertPath {
		t.Errorf("CRD conversion calls %+v", svc)
	}

	svc := &corev1.Service{}
	object(t, m, "Service", certs.DefaultServiceName, svc)
	deploy := &appsv1.Deployment{}
	object(t, m, "Deployment", "redis-operator-controller-manager", deploy)
	if !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(deploy.Spec.Template.Labels)) {
		t.Errorf("Service selector %v does not select the manager's pods %v", svc.Spec.Selector, deploy.Spec.Template.Labels)
	}
	manager := deploy.Spec.Template.Spec.Containers[0]
	if !slices.ContainsFunc(manager.Ports, func(p corev1.ContainerPort) bool {
		return p.Name == svc.Spec.Ports[0].TargetPort.StrVal && p.ContainerPort == 9443
	}) {
		t.Errorf("the manager has no port %s 9443: %+v", svc.Spec.Ports[0].TargetPort.StrVal, manager.Ports)
	}
	if !slices.ContainsFunc(manager.VolumeMounts, func(v corev1.VolumeMount) bool {
		return v.MountPath == "/tmp/k8s-webhook-server/serving-certs"
	}) {
		t.Errorf("the manager's certificate directory is not writable: mounts %+v", manager.VolumeMounts)
	}
}

// TestCertManagerComponent: with the component, cert-manager issues the
// certificate for the Service's name, cainjector fills both caBundles, and
// the manager reads the mounted Secret instead of issuing its own.
func TestCertManagerComponent(t *testing.T) {
	m := renderWebhookInstall(t, "cert-manager")
	want := certs.DefaultNamespace + "/" + certs.DefaultSecretName

	vwc := &admissionv1.ValidatingWebhookConfiguration{}
	object(t, m, "ValidatingWebhookConfiguration", certs.DefaultValidatingWebhookConfigurationName, vwc)
	crd := &apiextensionsv1.CustomResourceDefinition{}
	object(t, m, "CustomResourceDefinition", certs.DefaultCRDName, crd)
	for kind, annotations := range map[string]map[string]string{"ValidatingWebhookConfiguration": vwc.Annotations, "CustomResourceDefinition": crd.Annotations} {
		if annotations["cert-manager.io/inject-ca-from"] != want {
			t.Errorf("%s annotations %v, want inject-ca-from %s", kind, annotations, want)
		}
	}
	if crd.Annotations["controller-gen.kubebuilder.io/version"] == "" {
		t.Errorf("the component dropped the CRD's other annotations: %v", crd.Annotations)
	}

	var cert struct {
		Metadata struct{ Name, Namespace string }
		Spec     struct {
			SecretName string   `json:"secretName"`
			DNSNames   []string `json:"dnsNames"`
		}
	}
	object(t, m, "Certificate", certs.DefaultSecretName, &cert)
	if cert.Spec.SecretName != certs.DefaultSecretName || !slices.Contains(cert.Spec.DNSNames, certs.DefaultServiceName+"."+certs.DefaultNamespace+".svc") {
		t.Errorf("Certificate %+v", cert)
	}

	deploy := &appsv1.Deployment{}
	object(t, m, "Deployment", "redis-operator-controller-manager", deploy)
	if args := deploy.Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, "--webhook-certs="+CertsCertManager) {
		t.Errorf("manager args %v", args)
	}
	for _, v := range deploy.Spec.Template.Spec.Volumes {
		if v.Name == "webhook-certs" && (v.EmptyDir != nil || v.Secret == nil || v.Secret.SecretName != certs.DefaultSecretName) {
			t.Errorf("certificate volume %+v, want only Secret %s", v.VolumeSource, certs.DefaultSecretName)
		}
	}
}
