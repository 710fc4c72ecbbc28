//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// argocdNS is where Argo CD's core install goes (its manifests' subjects
// name it).
const argocdNS = "argocd"

// argocdDeployments are the Deployments of Argo CD core (manifests/core-install)
// besides the application controller's StatefulSet.
var argocdDeployments = []string{"argocd-redis", "argocd-repo-server", "argocd-applicationset-controller"}

// renderArgoCD renders Argo CD v3.2.6's core install as it ships in the Go
// module hack/tools/argocd builds (manifests/core-install.yaml, the module
// found through `go list -m`), in namespace argocd, with our health check
// (kustomize/components/argocd) and test/e2e/testdata/argocd's patch, by
// bin/kustomize (the manifests are outside this repository, hence
// LoadRestrictionsNone). Its Redis runs our redis:8.0 image (`make images`:
// Debian's Redis 8.0) instead of public.ecr.aws/docker/library/redis:8.2.2-alpine,
// which the plane's registry does not have; the install's args (--save ""
// --appendonly no --requirepass) and read-only root suit it.
func renderArgoCD(t *testing.T) []byte {
	t.Helper()
	list := exec.Command("go", "-C", filepath.Join(env.root, "hack", "tools", "argocd"), "list", "-m", "-f", "{{.Dir}}", "github.com/argoproj/argo-cd/v3")
	list.Env = append(os.Environ(), "GOWORK=off")
	out, err := list.Output()
	if err != nil {
		t.Fatalf("finding the Argo CD module (run `make tools`): %v", err)
	}
	module := strings.TrimSpace(string(out))
	dir := t.TempDir()
	rel := func(p string) string {
		r, err := filepath.Rel(dir, p)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	patches := filepath.Join(env.root, "test", "e2e", "testdata", "argocd")
	k := fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: %s
resources:
- %s
components:
- %s
patches:
- path: %s
- path: %s
images:
- name: public.ecr.aws/docker/library/redis
  newName: redis
  newTag: "8.0"
`, argocdNS, rel(filepath.Join(module, "manifests", "core-install.yaml")),
		rel(filepath.Join(env.root, "kustomize", "components", "argocd")),
		rel(filepath.Join(patches, "repo-server-gpg.yaml")), rel(filepath.Join(patches, "cmd-params.yaml")))
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	return kustomizeBuild(t, dir, "--load-restrictor", "LoadRestrictionsNone")
}

// kustomizeBuild runs bin/kustomize build dir.
func kustomizeBuild(t *testing.T, dir string, flags ...string) []byte {
	t.Helper()
	cmd := exec.Command(filepath.Join(env.binDir, "kustomize"), append([]string{"build", dir}, flags...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kustomize build %s: %v: %s", dir, err, stderr.String())
	}
	return out
}

// applyYAML server-side applies every object of a multi-document YAML
// (field manager owner) and returns how many it applied.
func applyYAML(t *testing.T, docs []byte, owner string) int {
	t.Helper()
	ctx := context.Background()
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(docs), 4096)
	n := 0
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			return n
		} else if err != nil {
			t.Fatalf("decoding manifests: %v", err)
		}
		if len(u.Object) == 0 {
			continue
		}
		if err := env.k8s.Patch(ctx, u, client.Apply, client.FieldOwner(owner), client.ForceOwnership); err != nil {
			t.Fatalf("applying %s %s: %v", u.GetKind(), u.GetName(), err)
		}
		n++
	}
}

// installArgoCD applies renderArgoCD's install, gives argocd-secret the
// server.secretkey that Argo CD's API server would otherwise generate (core
// runs none, and the controllers refuse to read cluster settings without
// it), and waits until every component runs; t's cleanup removes the
// install again.
func installArgoCD(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	// Argo CD's own install, not a Redis namespace: its pods are as Argo
	// CD ships them.
	if err := createNamespace(ctx, argocdNS, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { uninstallArgoCD(t) })
	n := applyYAML(t, renderArgoCD(t), "e2e-argocd")
	t.Logf("applied %d objects of Argo CD's core install", n)
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	secret := &corev1.Secret{}
	if err := env.k8s.Get(ctx, client.ObjectKey{Namespace: argocdNS, Name: "argocd-secret"}, secret); err != nil {
		t.Fatal(err)
	}
	if secret.Data == nil {
		secret.Data = map[string][]byte{}
	}
	secret.Data["server.secretkey"] = []byte(base64.StdEncoding.EncodeToString(key))
	if err := env.k8s.Update(ctx, secret); err != nil {
		t.Fatalf("setting server.secretkey: %v", err)
	}
	waitFor(t, "Argo CD's components available", 3*time.Minute, func() (bool, string) {
		for _, name := range argocdDeployments {
			d := &appsv1.Deployment{}
			if err := env.k8s.Get(ctx, client.ObjectKey{Namespace: argocdNS, Name: name}, d); err != nil {
				return false, err.Error()
			}
			if d.Status.AvailableReplicas < 1 {
				return false, name + " not available yet"
			}
		}
		s := &appsv1.StatefulSet{}
		if err := env.k8s.Get(ctx, client.ObjectKey{Namespace: argocdNS, Name: "argocd-application-controller"}, s); err != nil {
			return false, err.Error()
		}
		return s.Status.ReadyReplicas >= 1, "argocd-application-controller not ready yet"
	})
}

// uninstallArgoCD deletes Argo CD's namespace (waiting for its pods to go),
// its cluster-wide RBAC and its CRDs.
func uninstallArgoCD(t *testing.T) {
	ctx := context.Background()
	del := func(o client.Object) {
		if err := env.k8s.Delete(ctx, o); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("uninstalling Argo CD: %T %s: %v", o, o.GetName(), err)
		}
	}
	del(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: argocdNS}})
	waitFor(t, "Argo CD's namespace gone", 3*time.Minute, func() (bool, string) {
		err := env.k8s.Get(ctx, client.ObjectKey{Name: argocdNS}, &corev1.Namespace{})
		return apierrors.IsNotFound(err), fmt.Sprintf("namespace: %v", err)
	})
	del(&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "argocd-application-controller"}})
	del(&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "argocd-application-controller"}})
	for _, crd := range []string{"applications.argoproj.io", "applicationsets.argoproj.io", "appprojects.argoproj.io"} {
		del(&apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: crd}})
	}
}

// gitRepo is a Git repository served by `git daemon` (Debian's git) for
// Argo CD's repo-server: a bare repository and a work tree to commit from.
type gitRepo struct {
	t        *testing.T
	work     string
	URL      string
	bareDir  string
	revision string
}

// serveGitRepo makes a repository holding this checkout's kustomize/ and
// examples/argocd/ (the working tree's files, committed as one commit on
// main) and serves it read-only with `git daemon` on the plane's gateway
// address: the host address pods reach (with the pod network, a pod cannot
// reach 127.0.0.1; without it, 127.0.0.1 is used). The daemon stops when t
// ends.
func serveGitRepo(t *testing.T) *gitRepo {
	t.Helper()
	base := filepath.Join(env.tmpDir, "git")
	r := &gitRepo{t: t, work: filepath.Join(base, "work"), bareDir: filepath.Join(base, "redis-operator.git")}
	if err := os.MkdirAll(filepath.Join(r.work, "examples"), 0o755); err != nil {
		t.Fatal(err)
	}
	r.git(base, "init", "-q", "--bare", "-b", "main", r.bareDir)
	for _, d := range [][2]string{{"kustomize", "kustomize"}, {"examples/argocd", "examples"}} {
		if out, err := exec.Command("cp", "-a", filepath.Join(env.root, d[0]), filepath.Join(r.work, d[1])).CombinedOutput(); err != nil {
			t.Fatalf("copying %s: %v: %s", d[0], err, out)
		}
	}
	r.git(r.work, "init", "-q", "-b", "main")
	r.commit("kustomize/ and examples/argocd/ of this checkout")

	host := planeGateway(t)
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	p, err := startProcess(filepath.Join(env.tmpDir, "git-daemon.log"), "git", "daemon", "--listen="+host,
		fmt.Sprintf("--port=%d", port), "--base-path="+base, "--export-all", "--reuseaddr")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.stop(5 * time.Second) })
	r.URL = fmt.Sprintf("git://%s/redis-operator.git", net.JoinHostPort(host, fmt.Sprint(port)))
	waitFor(t, "git daemon serving "+r.URL, 30*time.Second, func() (bool, string) {
		out, err := exec.Command("git", "ls-remote", r.URL, "HEAD").CombinedOutput()
		return err == nil && strings.HasPrefix(string(out), r.revision), string(out)
	})
	return r
}

// commit commits the work tree as it is and pushes it to the served
// repository; r.revision becomes the new commit.
func (r *gitRepo) commit(msg string) {
	r.t.Helper()
	r.git(r.work, "add", "-A")
	r.git(r.work, "-c", "user.name=e2e", "-c", "user.email=e2e@localhost", "commit", "-q", "-m", msg)
	r.git(r.work, "push", "-q", r.bareDir, "main")
	r.revision = strings.TrimSpace(r.git(r.work, "rev-parse", "HEAD"))
}

// edit replaces old with new in the work tree's file rel (exactly once).
func (r *gitRepo) edit(rel, old, new string) {
	r.t.Helper()
	p := filepath.Join(r.work, rel)
	b, err := os.ReadFile(p)
	if err != nil {
		r.t.Fatal(err)
	}
	if strings.Count(string(b), old) != 1 {
		r.t.Fatalf("%s does not hold %q exactly once", rel, old)
	}
	if err := os.WriteFile(p, []byte(strings.Replace(string(b), old, new, 1)), 0o644); err != nil {
		r.t.Fatal(err)
	}
}

func (r *gitRepo) git(dir string, args ...string) string {
	r.t.Helper()
	out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
	if err != nil {
		r.t.Fatalf("git %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out)
}
