package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// TestMetricsNeedAToken runs the operator as a process with its default
// metrics serving (--metrics-secure): /metrics answers 401 without a bearer
// token, 403 to a ServiceAccount's token that may not get /metrics, and the
// metrics once a ClusterRoleBinding grants it the ClusterRole the base
// ships (redis-operator-metrics-reader: get on the non-resource URL).
func TestMetricsNeedAToken(t *testing.T) {
	cfg, scheme, kubeconfigPath := envtestWithKubeconfig(t, "operator")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	exited, logs := runOperator(t, "", "--kubeconfig", kubeconfigPath, "--webhooks=false", "--leader-elect=false",
		"--metrics-bind-address", addr, "--health-probe-bind-address", "0")

	ctx := context.Background()
	k8s, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "scraper"}}
	if err := k8s.Create(ctx, sa); err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts("default").CreateToken(ctx, sa.Name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	token := tr.Status.Token

	// The operator's certificate is self-signed: the token is what it checks.
	httpc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	scrape := func(token string) (int, string, error) {
		req, _ := http.NewRequest(http.MethodGet, "https://"+addr+"/metrics", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := httpc.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), nil
	}
	expect := func(what, token string, want int) string {
		t.Helper()
		var body string
		waitOperator(t, 60*time.Second, exited, logs, func() error {
			code, b, err := scrape(token)
			if err != nil {
				return err
			}
			if code != want {
				return fmt.Errorf("%s: status %d, want %d (%s)", what, code, want, strings.TrimSpace(b))
			}
			body = b
			return nil
		})
		return body
	}
	expect("no token", "", http.StatusUnauthorized)
	expect("a token without the ClusterRole", token, http.StatusForbidden)

	reader := &rbacv1.ClusterRole{}
	shipped, err := os.ReadFile(filepath.Join("..", "..", "kustomize", "base", "metrics", "metrics_reader_role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(shipped, reader); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "scraper-metrics"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: reader.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "default", Name: sa.Name}}}
	for _, o := range []client.Object{reader, binding} {
		if err := k8s.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	if body := expect("a token with the ClusterRole", token, http.StatusOK); !strings.Contains(body, "controller_runtime_") {
		t.Errorf("/metrics answered 200 without controller-runtime's metrics:\n%.500s", body)
	}
}
