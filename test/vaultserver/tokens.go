package vaultserver

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/hashicorp/vault/sdk/framework"
	"github.com/hashicorp/vault/sdk/logical"
)

// Our token store: service tokens in memory, looked up by ID and by
// accessor. Lifetimes are computed with the sdk's framework.CalculateTTL from
// what the auth backend returned (or what auth/token/create asked for), the
// same function Vault's expiration manager uses; an expired token is gone.

type tokenEntry struct {
	id          string
	accessor    string
	policies    []string
	meta        map[string]string
	displayName string
	path        string // creation path, e.g. "auth/kubernetes/login"
	mount       *mount // auth mount that issued it; nil for token-store tokens
	auth        *logical.Auth
	created     time.Time
	lastRenewal time.Time
	ttl         time.Duration // creation TTL; 0 = never expires (root)
	expires     time.Time     // zero = never expires
	renewable   bool
}

type tokenStore struct {
	sysView logical.SystemView

	mu         sync.Mutex
	byID       map[string]*tokenEntry
	byAccessor map[string]*tokenEntry
}

func newTokenStore(sysView logical.SystemView, rootToken string) *tokenStore {
	ts := &tokenStore{sysView: sysView, byID: map[string]*tokenEntry{}, byAccessor: map[string]*tokenEntry{}}
	ts.add(&tokenEntry{
		id: rootToken, accessor: rand.Text(), policies: []string{"root"},
		displayName: "root", path: "auth/token/root", created: time.Now(),
		auth: &logical.Auth{},
	})
	return ts
}

func (ts *tokenStore) add(e *tokenEntry) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.byID[e.id] = e
	ts.byAccessor[e.accessor] = e
}

// lookup returns the live token with this ID, or nil. Expired tokens are
// removed on the way.
func (ts *tokenStore) lookup(id string) *tokenEntry {
	if id == "" {
		return nil
	}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.liveLocked(ts.byID[id])
}

func (ts *tokenStore) lookupAccessor(accessor string) *tokenEntry {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.liveLocked(ts.byAccessor[accessor])
}

func (ts *tokenStore) liveLocked(e *tokenEntry) *tokenEntry {
	if e == nil {
		return nil
	}
	if !e.expires.IsZero() && !time.Now().Before(e.expires) {
		delete(ts.byID, e.id)
		delete(ts.byAccessor, e.accessor)
		return nil
	}
	return e
}

func (ts *tokenStore) revoke(e *tokenEntry) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	delete(ts.byID, e.id)
	delete(ts.byAccessor, e.accessor)
}

func (ts *tokenStore) accessors() []string {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	out := make([]string, 0, len(ts.byAccessor))
	for a, e := range ts.byAccessor {
		if ts.liveLocked(e) != nil {
			out = append(out, a)
		}
	}
	sort.Strings(out)
	return out
}

// issue creates a token for auth (a login answer from the auth backend at m,
// or a token-store creation when m is nil), fills in auth's token fields the
// way Vault's HTTP answer carries them, and stores it.
func (ts *tokenStore) issue(m *mount, path string, auth *logical.Auth) (*tokenEntry, error) {
	ttl, _, err := framework.CalculateTTL(ts.sysView, 0, auth.TTL, auth.Period, auth.MaxTTL, auth.ExplicitMaxTTL, time.Time{})
	if err != nil {
		return nil, err
	}
	policies := slices.Clone(auth.Policies)
	if !auth.NoDefaultPolicy && !slices.Contains(policies, "root") {
		policies = append(policies, "default")
	}
	sort.Strings(policies)
	policies = slices.Compact(policies)

	now := time.Now()
	e := &tokenEntry{
		id:          "hvs." + rand.Text(),
		accessor:    rand.Text(),
		policies:    policies,
		meta:        maps.Clone(auth.Metadata),
		displayName: auth.DisplayName,
		path:        path,
		mount:       m,
		created:     now,
		ttl:         ttl,
		expires:     now.Add(ttl),
		renewable:   auth.Renewable,
	}
	auth.ClientToken = e.id
	auth.Accessor = e.accessor
	auth.TTL = ttl
	auth.Policies = policies
	auth.TokenPolicies = policies
	auth.TokenType = logical.TokenTypeService
	auth.Orphan = true
	auth.IssueTime = now
	e.auth = auth
	ts.add(e)
	return e, nil
}

// renew extends e as Vault's token renewal does: the issuing auth backend's
// renew handler (framework AuthRenew) gives the role's current TTLs, then
// framework.CalculateTTL caps the new TTL at the max TTL counted from
// creation.
func (ts *tokenStore) renew(ctx context.Context, e *tokenEntry, increment time.Duration) (*logical.Auth, error) {
	if e.expires.IsZero() {
		return nil, badRequest(errors.New("token has no TTL and needs no renewal"))
	}
	if !e.renewable {
		return nil, badRequest(errors.New("lease is not renewable"))
	}
	ts.mu.Lock()
	auth := *e.auth
	auth.Metadata = maps.Clone(e.auth.Metadata)
	auth.InternalData = maps.Clone(e.auth.InternalData)
	ts.mu.Unlock()
	if e.mount != nil {
		resp, err := e.mount.backend.HandleRequest(ctx, &logical.Request{
			Operation:  logical.RenewOperation,
			Path:       e.path[len(e.mount.path):],
			Auth:       &auth,
			Storage:    e.mount.storage,
			MountPoint: e.mount.path,
			MountType:  e.mount.typ,
		})
		if err != nil {
			return nil, err
		}
		if resp == nil || resp.Auth == nil {
			return nil, fmt.Errorf("auth backend %s returned no auth on renewal", e.mount.path)
		}
		if resp.IsError() {
			return nil, resp.Error()
		}
		auth = *resp.Auth
	}
	ttl, _, err := framework.CalculateTTL(ts.sysView, increment, auth.TTL, auth.Period, auth.MaxTTL, auth.ExplicitMaxTTL, e.created)
	if err != nil {
		return nil, badRequest(err)
	}
	now := time.Now()
	ts.mu.Lock()
	e.expires = now.Add(ttl)
	e.lastRenewal = now
	e.auth.TTL = ttl
	out := *e.auth
	ts.mu.Unlock()
	return &out, nil
}

// lookupData is the body of auth/token/lookup-self and lookup-accessor.
// The token ID is included only when withID (lookup-self).
func (ts *tokenStore) lookupData(e *tokenEntry, withID bool) map[string]any {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	var ttl int64
	var expire any
	if !e.expires.IsZero() {
		ttl = int64(time.Until(e.expires).Round(time.Second).Seconds())
		expire = e.expires.UTC().Format(time.RFC3339Nano)
	}
	var lastRenewal any
	if !e.lastRenewal.IsZero() {
		lastRenewal = e.lastRenewal.UTC().Format(time.RFC3339Nano)
	}
	d := map[string]any{
		"accessor":          e.accessor,
		"creation_time":     e.created.Unix(),
		"creation_ttl":      int64(e.ttl.Seconds()),
		"display_name":      e.displayName,
		"entity_id":         "",
		"expire_time":       expire,
		"explicit_max_ttl":  int64(e.auth.ExplicitMaxTTL.Seconds()),
		"id":                "",
		"issue_time":        e.created.UTC().Format(time.RFC3339Nano),
		"last_renewal_time": lastRenewal,
		"meta":              e.meta,
		"num_uses":          0,
		"orphan":            true,
		"path":              e.path,
		"policies":          e.policies,
		"renewable":         e.renewable,
		"ttl":               ttl,
		"type":              "service",
	}
	if withID {
		d["id"] = e.id
	}
	return d
}
