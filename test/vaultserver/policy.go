package vaultserver

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/hashicorp/hcl"
)

// Our ACL: a subset of Vault's policy language, enough for read grants.
//
// Policies are written in Vault's HCL syntax through sys/policies/acl/<name>:
//
//	path "secret/data/redis/*" {
//	  capabilities = ["read"]
//	}
//
// A pattern matches a request path exactly, or by prefix when it ends in
// "*", and a "+" segment matches any one segment. When several patterns
// match, the most specific one decides, ranked as Vault documents it
// (https://developer.hashicorp.com/vault/docs/concepts/policies#priority-matching):
// the first wildcard further right wins, then no trailing "*", then fewer "+"
// segments, then the longer pattern. Capabilities of the same pattern in
// several policies are merged, and "deny" wins. Not supported: the legacy
// `policy = "..."` form, parameter constraints (allowed_parameters, ...),
// templated paths, control groups, sentinel.

// validCapabilities are the capability names Vault accepts.
var validCapabilities = map[string]bool{
	"create": true, "read": true, "update": true, "patch": true, "delete": true,
	"list": true, "sudo": true, "deny": true, "subscribe": true, "recover": true,
}

type policyRule struct {
	pattern      string
	capabilities map[string]bool
}

type policy struct {
	name  string
	raw   string
	rules []policyRule
}

// parsePolicy parses Vault's HCL (or JSON) policy syntax.
func parsePolicy(name, text string) (*policy, error) {
	var doc struct {
		Path []struct {
			Pattern      string   `hcl:",key"`
			Capabilities []string `hcl:"capabilities"`
		} `hcl:"path"`
	}
	if err := hcl.Decode(&doc, text); err != nil {
		return nil, fmt.Errorf("failed to parse policy: %w", err)
	}
	p := &policy{name: name, raw: text}
	for _, pc := range doc.Path {
		if pc.Pattern == "" {
			return nil, fmt.Errorf("failed to parse policy: a path block has no path")
		}
		if len(pc.Capabilities) == 0 {
			return nil, fmt.Errorf("failed to parse policy: path %q has no capabilities", pc.Pattern)
		}
		caps := map[string]bool{}
		for _, c := range pc.Capabilities {
			if !validCapabilities[c] {
				return nil, fmt.Errorf("failed to parse policy: path %q: invalid capability %q", pc.Pattern, c)
			}
			caps[c] = true
		}
		p.rules = append(p.rules, policyRule{pattern: strings.TrimPrefix(pc.Pattern, "/"), capabilities: caps})
	}
	return p, nil
}

// policyStore holds the ACL policies by name. "root" is built in and grants
// everything; "default" exists from the start and grants nothing, because
// the token self-service endpoints it covers in Vault are allowed to every
// valid token by the token store itself.
type policyStore struct {
	mu       sync.RWMutex
	policies map[string]*policy
}

func newPolicyStore() *policyStore {
	return &policyStore{policies: map[string]*policy{"default": {name: "default"}}}
}

func (s *policyStore) put(p *policy) error {
	if p.name == "root" {
		return fmt.Errorf("cannot update \"root\" policy")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.policies[p.name] = p
	return nil
}

func (s *policyStore) get(name string) *policy {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.policies[name]
}

func (s *policyStore) remove(name string) error {
	switch name {
	case "root", "default":
		return fmt.Errorf("cannot delete %q policy", name)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.policies, name)
	return nil
}

func (s *policyStore) names() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := []string{"root"}
	for n := range s.policies {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// allowed reports whether a token holding policies may use capability on
// path (a request path without the /v1/ prefix).
func (s *policyStore) allowed(policies []string, path, capability string) bool {
	if slices.Contains(policies, "root") {
		return true
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	var best string
	var caps map[string]bool
	for _, name := range policies {
		p := s.policies[name]
		if p == nil {
			continue
		}
		for _, r := range p.rules {
			if !patternMatches(r.pattern, path) {
				continue
			}
			switch {
			case caps == nil || morePrecise(r.pattern, best):
				best, caps = r.pattern, map[string]bool{}
				fallthrough
			case r.pattern == best:
				for c := range r.capabilities {
					caps[c] = true
				}
			}
		}
	}
	return caps != nil && !caps["deny"] && caps[capability]
}

// patternMatches matches a policy path pattern against a request path.
func patternMatches(pattern, path string) bool {
	prefix := strings.HasSuffix(pattern, "*")
	pattern = strings.TrimSuffix(pattern, "*")
	if !strings.Contains(pattern, "+") {
		if prefix {
			return strings.HasPrefix(path, pattern)
		}
		return path == pattern
	}
	ps, xs := strings.Split(pattern, "/"), strings.Split(path, "/")
	if len(xs) < len(ps) || (!prefix && len(xs) != len(ps)) {
		return false
	}
	for i, p := range ps {
		switch {
		case p == "+":
			if xs[i] == "" {
				return false
			}
		case i == len(ps)-1 && prefix:
			if !strings.HasPrefix(xs[i], p) {
				return false
			}
		case p != xs[i]:
			return false
		}
	}
	return true
}

// morePrecise reports whether pattern a ranks above pattern b.
func morePrecise(a, b string) bool {
	wa, wb := firstWildcard(a), firstWildcard(b)
	if wa != wb {
		return wa > wb
	}
	sa, sb := strings.HasSuffix(a, "*"), strings.HasSuffix(b, "*")
	if sa != sb {
		return !sa
	}
	pa, pb := strings.Count(a, "+"), strings.Count(b, "+")
	if pa != pb {
		return pa < pb
	}
	if len(a) != len(b) {
		return len(a) > len(b)
	}
	return a > b
}

// firstWildcard is the index of the first "+" or "*" in a pattern, or its
// length when it has none.
func firstWildcard(p string) int {
	if i := strings.IndexAny(p, "+*"); i >= 0 {
		return i
	}
	return len(p)
}
