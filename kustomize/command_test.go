package kustomize

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// TestRunManifests: `redis-operator manifests --overlay prod` prints
// exactly krusty's render of kustomize/overlays/prod from disk; bad
// arguments give exit code 2 and a message naming the problem.
func TestRunManifests(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := RunManifests([]string{"--overlay", "prod"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	dir, err := filepath.Abs(filepath.Join("overlays", "prod"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := Build(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatal(err)
	}
	want, err := m.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(stdout.Bytes(), want) {
		t.Errorf("output (%d bytes) differs from the render from disk (%d bytes)", stdout.Len(), len(want))
	}
	if stderr.Len() != 0 {
		t.Errorf("stderr: %s", stderr.String())
	}

	cases := []struct {
		args []string
		code int
		msg  string
	}{
		{nil, 2, "--overlay is required (one of: dev, prod, staging)"},
		{[]string{"--overlay", "production"}, 1, `unknown overlay "production" (known: dev, prod, staging)`},
		{[]string{"--overlay", "dev", "extra"}, 2, "unexpected arguments: extra"},
		{[]string{"--overlays", "dev"}, 2, "flag provided but not defined: -overlays"},
	}
	for _, tc := range cases {
		stdout.Reset()
		stderr.Reset()
		code := RunManifests(tc.args, &stdout, &stderr)
		if code != tc.code || !strings.Contains(stderr.String(), tc.msg) || stdout.Len() != 0 {
			t.Errorf("args %q: exit %d, stderr %q, %d bytes out; want exit %d and %q", tc.args, code, stderr.String(), stdout.Len(), tc.code, tc.msg)
		}
	}
}
