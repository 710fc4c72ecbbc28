package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/kustomize"
)

const (
	installNamespace = "redis-operator-system"
	managerAccount   = "redis-operator-controller-manager"
)

// TestNamespacedInstall runs the operator as its ServiceAccount, holding
// only the RBAC the namespaced component renders (plus the documented
// RoleBinding in the namespace it watches), against an API server that
// enforces RBAC, with --watch-namespaces=watched: the RedisCluster in
// "watched" is reconciled (status, StatefulSets, the generated password's
// Secret) with no request forbidden, and the one in "other" is not
// touched.
func TestNamespacedInstall(t *testing.T) {
	_, cfg, scheme := startEnvtest(t)
	k8s, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, ns := range []string{installNamespace, "watched", "other"} {
		if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	installRBAC(t, ctx, k8s)
	kubeconfigPath := accountKubeconfig(t, ctx, k8s, cfg)

	exited, logs := runOperator(t, installNamespace, "--kubeconfig", kubeconfigPath, "--webhooks=false", "--watch-namespaces=watched",
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0")

	other := &cachev1beta1.RedisCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "elsewhere", Namespace: "other"},
		Spec:       cachev1beta1.RedisClusterSpec{Shards: 3, ReplicasPerShard: 1},
	}
	watched := &cachev1beta1.RedisCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "here", Namespace: "watched"},
		Spec:       cachev1beta1.RedisClusterSpec{Shards: 3, ReplicasPerShard: 1},
	}
	for _, rc := range []*cachev1beta1.RedisCluster{other, watched} {
		if err := k8s.Create(ctx, rc); err != nil {
			t.Fatal(err)
		}
	}
	waitOperator(t, 90*time.Second, exited, logs, func() error { return reconciledIn(ctx, k8s, watched) })

	got := &cachev1beta1.RedisCluster{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(other), got); err != nil {
		t.Fatal(err)
	}
	if len(got.Finalizers) != 0 || len(got.Status.Conditions) != 0 {
		t.Errorf("the RedisCluster outside --watch-namespaces was reconciled: finalizers %v, conditions %v", got.Finalizers, got.Status.Conditions)
	}
	var sts appsv1.StatefulSetList
	if err := k8s.List(ctx, &sts, client.InNamespace("other")); err != nil {
		t.Fatal(err)
	}
	if len(sts.Items) != 0 {
		t.Errorf("%d StatefulSets outside --watch-namespaces", len(sts.Items))
	}
	if strings.Contains(strings.ToLower(logs.String()), "forbidden") {
		t.Errorf("a request was forbidden: the namespaced RBAC does not suffice\n%s", logs.String())
	}
}

// installRBAC creates what the base with the namespaced component renders
// for RBAC (ServiceAccount, roles, bindings), and the RoleBinding that
// component's documentation asks for in each watched namespace, here
// "watched".
func installRBAC(t *testing.T, ctx context.Context, k8s client.Client) {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", "..", "kustomize"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	// kustomize takes other kustomizations by relative path only.
	base, err := filepath.Rel(dir, filepath.Join(root, "base"))
	if err != nil {
		t.Fatal(err)
	}
	component, err := filepath.Rel(dir, filepath.Join(root, "components", "namespaced"))
	if err != nil {
		t.Fatal(err)
	}
	k := fmt.Sprintf("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: %s\nresources: [%s]\ncomponents: [%s]\n",
		installNamespace, base, component)
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := kustomize.Build(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range m.Resources() {
		switch r.GetKind() {
		case "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
		default:
			continue
		}
		data, err := r.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(data); err != nil {
			t.Fatal(err)
		}
		if err := k8s.Create(ctx, u); err != nil {
			t.Fatalf("creating %s %s: %v", u.GetKind(), u.GetName(), err)
		}
		if u.GetKind() == "RoleBinding" && u.GetName() == "redis-operator-namespaced" {
			rb := &rbacv1.RoleBinding{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, rb); err != nil {
				t.Fatal(err)
			}
			rb.ObjectMeta = metav1.ObjectMeta{Name: rb.Name, Namespace: "watched"}
			if err := k8s.Create(ctx, rb); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// accountKubeconfig writes a kubeconfig that authenticates as the
// manager's ServiceAccount with a token from the TokenRequest API.
func accountKubeconfig(t *testing.T, ctx context.Context, k8s client.Client, cfg *rest.Config) string {
	t.Helper()
	tr := &authenticationv1.TokenRequest{}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: installNamespace, Name: managerAccount}}
	if err := k8s.SubResource("token").Create(ctx, sa, tr); err != nil {
		t.Fatal(err)
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["operator"] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	kc.Contexts["operator"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "operator"}
	kc.CurrentContext = "operator"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// reconciledIn checks that rc has a status, its three StatefulSets and its
// generated password's Secret.
func reconciledIn(ctx context.Context, k8s client.Client, rc *cachev1beta1.RedisCluster) error {
	got := &cachev1beta1.RedisCluster{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(rc), got); err != nil {
		return err
	}
	if meta.FindStatusCondition(got.Status.Conditions, cachev1beta1.RedisClusterReadyCondition) == nil {
		return fmt.Errorf("no status yet")
	}
	var list appsv1.StatefulSetList
	if err := k8s.List(ctx, &list, client.InNamespace(rc.Namespace)); err != nil {
		return err
	}
	if len(list.Items) != 3 {
		return fmt.Errorf("%d StatefulSets", len(list.Items))
	}
	return k8s.Get(ctx, client.ObjectKey{Namespace: rc.Namespace, Name: rc.Name + "-auth"}, &corev1.Secret{})
}
