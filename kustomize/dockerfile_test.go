package kustomize

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
)

// TestDockerfile checks the Dockerfile (which CI cannot build: no container
// engine) against what the manifests and the module need: a distroless
// static final stage running as a numeric non-root user, the entrypoint
// the manager Deployment runs, and a COPY for every top-level directory
// holding the operator's Go packages.
func TestDockerfile(t *testing.T) {
	f, err := os.Open(filepath.Join("..", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var from, user, entrypoint string
	var copied []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) < 2 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		switch fields[0] {
		case "FROM":
			from, user, entrypoint = fields[1], "", ""
		case "USER":
			user = fields[1]
		case "ENTRYPOINT":
			entrypoint = strings.Join(fields[1:], " ")
		case "COPY":
			if !strings.HasPrefix(fields[1], "--from") {
				copied = append(copied, strings.TrimSuffix(fields[1], "/"))
			}
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(from, "gcr.io/distroless/static") || !strings.HasSuffix(from, ":nonroot") {
		t.Errorf("final stage FROM %s, want distroless static nonroot", from)
	}
	if uid, _, _ := strings.Cut(user, ":"); uid == "" || uid == "0" || strings.Trim(uid, "0123456789") != "" {
		t.Errorf("final stage USER %q, want a numeric non-root user", user)
	}
	d := as[appsv1.Deployment](t, find(t, rendered(t, "prod"), "Deployment", manager))
	if want := `["` + strings.Join(d.Spec.Template.Spec.Containers[0].Command, `", "`) + `"]`; entrypoint != want {
		t.Errorf("ENTRYPOINT %s, but the Deployment runs %s", entrypoint, want)
	}

	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}}", "github.com/redis-operator/redis-operator/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		rel := strings.TrimPrefix(pkg, "github.com/redis-operator/redis-operator/")
		top, _, _ := strings.Cut(rel, "/")
		if top == "test" || top == "hack" || top == "examples" || rel == pkg {
			continue
		}
		if !slices.Contains(copied, top) {
			t.Errorf("the builder stage does not COPY %s/ (package %s)", top, pkg)
		}
	}
}
