package credentials

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

// TestVaultFetchKeys: an access key pair read from one KV v2 version with
// Kubernetes auth, one login for both reads, a missing field named.
func TestVaultFetchKeys(t *testing.T) {
	f := newFixture(t, vaultOptions{})
	v := f.putPassword(t, "s3", map[string]any{"accessKeyID": "AKID", "secretAccessKey": "SECRET"})
	s := mustSource(t, f.config("s3"))
	ctx := context.Background()
	pair, version, err := s.FetchKeys(ctx, "accessKeyID", "secretAccessKey")
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("vault:%s/data/redis/s3#v%d", f.vault.kvMount, v)
	if pair[0].Reveal() != "AKID" || pair[1].Reveal() != "SECRET" || version != want {
		t.Fatalf("got %s %s at %s, want AKID SECRET at %s", pair[0].Reveal(), pair[1].Reveal(), version, want)
	}
	_, _, err = s.FetchKeys(ctx, "accessKeyID", "sessionToken")
	if !errors.Is(err, ErrKeyMissing) || Reason(err) != ReasonKeyMissing {
		t.Fatalf("a missing field: %v", err)
	}
	if n := len(f.loginTokens(t)); n != 1 {
		t.Fatalf("%d login tokens, want 1 (the source keeps its token)", n)
	}
}
