//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The benchmarks' operator process (BenchmarkManyClusters,
// BenchmarkUnrelatedObjects) acts as a ServiceAccount of its own, bound to
// the rules of the ClusterRole the overlays ship, not as the plane's admin.
// Its own names, so that an uninstall of the shipped RBAC leaves it alone.
const (
	suiteSANamespace = "redis-operator-e2e"
	suiteSAName      = "redis-operator"
	suiteRoleName    = "redis-operator-e2e-suite"
	suiteSAUser      = "system:serviceaccount:" + suiteSANamespace + ":" + suiteSAName
	// shippedRoleName is the operator's ClusterRole in kustomize/base/rbac.
	shippedRoleName = "redis-operator"
)

// operatorKubeconfig makes the suite operator's identity and writes a
// kubeconfig for it (operator.kubeconfig in the state directory): the
// ServiceAccount suiteSAName in suiteSANamespace, a ClusterRole with the
// rules of the shipped ClusterRole as `redis-operator manifests --overlay
// dev` renders it, bound cluster-wide, and a 24-hour token from the
// TokenRequest API.
func (s *suite) operatorKubeconfig() (string, error) {
	ctx := context.Background()
	out, err := exec.Command(filepath.Join(s.binDir, "redis-operator"), "manifests", "--overlay", "dev").Output()
	if err != nil {
		return "", fmt.Errorf("redis-operator manifests --overlay dev: %w", err)
	}
	rules, err := shippedRules(out)
	if err != nil {
		return "", err
	}
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: suiteSANamespace}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: suiteSANamespace, Name: suiteSAName}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: suiteRoleName}, Rules: rules},
		&rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: suiteRoleName},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: suiteRoleName},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: suiteSANamespace, Name: suiteSAName}},
		},
	}
	for _, o := range objs {
		if err := s.k8s.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return "", fmt.Errorf("creating %T %s: %w", o, o.GetName(), err)
		}
	}
	cs, err := kubernetes.NewForConfig(s.cfg)
	if err != nil {
		return "", err
	}
	tr, err := cs.CoreV1().ServiceAccounts(suiteSANamespace).CreateToken(ctx, suiteSAName, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](24 * 3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("requesting a token for %s: %w", suiteSAUser, err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["plane"] = &clientcmdapi.Cluster{Server: s.cfg.Host, CertificateAuthorityData: s.cfg.CAData, CertificateAuthority: s.cfg.CAFile}
	cfg.AuthInfos["operator"] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	cfg.Contexts["operator"] = &clientcmdapi.Context{Cluster: "plane", AuthInfo: "operator"}
	cfg.CurrentContext = "operator"
	path := filepath.Join(s.stateDir, "operator.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return "", err
	}
	return path, nil
}

// shippedRules returns the rules of the ClusterRole shippedRoleName in the
// rendered manifests.
func shippedRules(manifests []byte) ([]rbacv1.PolicyRule, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(manifests), 4096)
	for {
		var raw runtime.RawExtension
		if err := dec.Decode(&raw); errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("the manifests hold no ClusterRole %s", shippedRoleName)
		} else if err != nil {
			return nil, fmt.Errorf("decoding the manifests: %w", err)
		}
		var role rbacv1.ClusterRole
		if json.Unmarshal(raw.Raw, &role) != nil || role.Kind != "ClusterRole" || role.Name != shippedRoleName {
			continue
		}
		return role.Rules, nil
	}
}

// checkSuiteIdentity reads the plane's audit logs (test/localplane's
// AuditLog and its rotated files): the installed operator's ServiceAccount
// (installSA, bound by the shipped RBAC) must have made requests while the
// suite's own install was in place, and none of them may have been
// forbidden: a verb missing from the shipped RBAC fails the run, naming it,
// even when no scenario notices. Requests of installs a scenario made
// (TestInstalled*, TestArgoCD, whose cascade deletes the RBAC while the
// operator's pod still stops) are that scenario's to judge. It returns what
// a person reads when that fails, "" otherwise.
func (s *suite) checkSuiteIdentity() string {
	files, _ := filepath.Glob(filepath.Join(s.stateDir, "logs", "kube-apiserver-audit*.log"))
	var requests, refused int
	forbidden := map[string]int{}
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			return err.Error()
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var e auditEvent
			if json.Unmarshal(sc.Bytes(), &e) != nil || e.User.Username != installSA || !s.suiteInstalled(e.StageTimestamp.Time) {
				continue
			}
			requests++
			if e.ResponseStatus != nil && e.ResponseStatus.Code == 403 {
				what := e.Verb
				if r := e.ObjectRef; r != nil {
					what += " " + r.Resource
				}
				forbidden[what]++
				refused++
			}
		}
		_ = f.Close()
	}
	switch {
	case requests == 0:
		return fmt.Sprintf("the audit logs (%d files) hold no request of %s: the operator did not run as its ServiceAccount", len(files), installSA)
	case len(forbidden) > 0:
		var kinds []string
		for what, n := range forbidden {
			kinds = append(kinds, fmt.Sprintf("%s ×%d", what, n))
		}
		sort.Strings(kinds)
		return fmt.Sprintf("%d of %d requests of %s were forbidden (the shipped ClusterRole %s lacks them): %s",
			refused, requests, installSA, shippedRoleName, strings.Join(kinds, "; "))
	}
	fmt.Printf("e2e: the operator made %d requests as %s, none forbidden\n", requests, installSA)
	return ""
}
