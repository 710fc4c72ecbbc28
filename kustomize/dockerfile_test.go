package kustomize

import (
	"bufio"
	"io/fs"
	"os"
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

	// Every top-level directory with non-test Go files of this module,
	// except the ones the binary must never import.
	root := ".."
	skip := map[string]bool{".git": true, "bin": true, "test": true, "hack": true, "examples": true}
	err = filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		top, _, _ := strings.Cut(filepath.ToSlash(rel), "/")
		if e.IsDir() {
			if _, err := os.Stat(filepath.Join(p, "go.mod")); (err == nil && p != root) || skip[top] || e.Name() == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if rel == top || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		if !slices.Contains(copied, top) {
			t.Errorf("the builder stage does not COPY %s/ (it holds %s)", top, rel)
			return filepath.SkipDir
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
