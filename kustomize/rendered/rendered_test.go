package rendered

import (
	"bytes"
	"os"
	"slices"
	"strings"
	"testing"
)

// TestRunManifests: `redis-operator manifests --overlay prod` prints
// prod.yaml byte for byte; bad arguments give exit code 2, an unknown
// overlay 1, each with a message naming the problem and nothing on stdout.
func TestRunManifests(t *testing.T) {
	if got := Overlays(); !slices.Equal(got, []string{"dev", "prod", "staging"}) {
		t.Fatalf("Overlays() = %v, want [dev prod staging]", got)
	}
	var stdout, stderr bytes.Buffer
	if code := RunManifests([]string{"--overlay", "prod"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	want, err := os.ReadFile("prod.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(stdout.Bytes(), want) {
		t.Errorf("output (%d bytes) differs from prod.yaml (%d bytes)", stdout.Len(), len(want))
	}
	if !bytes.Contains(want, []byte("kind: CustomResourceDefinition")) || !bytes.Contains(want, []byte("kind: Deployment")) {
		t.Error("prod.yaml lacks the CRD or the manager Deployment")
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
