package vaultserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/hashicorp/go-secure-stdlib/parseutil"
	"github.com/hashicorp/vault/sdk/logical"
)

// handleSys serves the sys/ endpoints this server has: mounts, auth,
// policies/acl. Ours: they need the root token (Vault checks ACLs with sudo
// there instead).
func (s *Server) handleSys(ctx context.Context, w http.ResponseWriter, req *logical.Request) {
	tok := s.tokens.lookup(req.ClientToken)
	if tok == nil || !slices.Contains(tok.policies, "root") {
		logical.RespondError(w, http.StatusForbidden, logical.ErrPermissionDenied)
		return
	}
	p := strings.TrimPrefix(req.Path, "sys/")
	op := req.Operation
	switch {
	case p == "mounts" && op == logical.ReadOperation:
		respondData(w, req, s.mounts.list(false))
	case p == "auth" && op == logical.ReadOperation:
		respondData(w, req, s.mounts.list(true))
	case strings.HasPrefix(p, "mounts/"):
		s.handleMount(ctx, w, req, strings.Trim(strings.TrimPrefix(p, "mounts/"), "/")+"/")
	case strings.HasPrefix(p, "auth/"):
		s.handleMount(ctx, w, req, "auth/"+strings.Trim(strings.TrimPrefix(p, "auth/"), "/")+"/")
	case p == "policies/acl/" && op == logical.ListOperation:
		respond(w, req, logical.ListResponse(s.policies.names()), nil)
	case strings.HasPrefix(p, "policies/acl/"):
		s.handlePolicy(w, req, strings.ToLower(strings.TrimPrefix(p, "policies/acl/")))
	default:
		respond(w, req, nil, logical.ErrUnsupportedPath)
	}
}

// handleMount reads, enables or disables the mount at path.
func (s *Server) handleMount(ctx context.Context, w http.ResponseWriter, req *logical.Request, path string) {
	switch req.Operation {
	case logical.ReadOperation:
		m := s.mounts.match(path)
		if m == nil || m.path != path {
			respond(w, req, nil, badRequest(fmt.Errorf("no mount at %q", path)))
			return
		}
		respondData(w, req, m.describe())
	case logical.UpdateOperation:
		typ, _ := req.Data["type"].(string)
		desc, _ := req.Data["description"].(string)
		options := map[string]string{}
		if raw, ok := req.Data["options"].(map[string]any); ok {
			for k, v := range raw {
				s, err := parseutil.ParseString(v)
				if err != nil {
					respond(w, req, nil, badRequest(fmt.Errorf("option %q: %w", k, err)))
					return
				}
				options[k] = s
			}
		}
		if typ == "kv-v2" {
			typ, options["version"] = "kv", "2"
		}
		if err := s.mounts.mount(ctx, path, typ, options, desc); err != nil {
			respond(w, req, nil, badRequest(err))
			return
		}
		respond(w, req, nil, nil)
	case logical.DeleteOperation:
		s.mounts.unmount(ctx, path)
		respond(w, req, nil, nil)
	default:
		respond(w, req, nil, logical.ErrUnsupportedOperation)
	}
}

// handlePolicy reads, writes or deletes one ACL policy.
func (s *Server) handlePolicy(w http.ResponseWriter, req *logical.Request, name string) {
	if name == "" {
		respond(w, req, nil, badRequest(errors.New("policy name missing")))
		return
	}
	switch req.Operation {
	case logical.ReadOperation:
		p := s.policies.get(name)
		if p == nil && name != "root" {
			respond(w, req, nil, nil)
			return
		}
		raw := ""
		if p != nil {
			raw = p.raw
		}
		respondData(w, req, map[string]any{"name": name, "policy": raw})
	case logical.UpdateOperation:
		text, _ := req.Data["policy"].(string)
		p, err := parsePolicy(name, text)
		if err == nil {
			err = s.policies.put(p)
		}
		if err != nil {
			respond(w, req, nil, badRequest(err))
			return
		}
		respond(w, req, nil, nil)
	case logical.DeleteOperation:
		if err := s.policies.remove(name); err != nil {
			respond(w, req, nil, badRequest(err))
			return
		}
		respond(w, req, nil, nil)
	default:
		respond(w, req, nil, logical.ErrUnsupportedOperation)
	}
}

// handleToken serves auth/token/...: the self endpoints for any valid token
// (Vault's "default" policy grants them), the others by ACL as in Vault.
func (s *Server) handleToken(ctx context.Context, w http.ResponseWriter, req *logical.Request) {
	tok := s.tokens.lookup(req.ClientToken)
	if tok == nil {
		logical.RespondError(w, http.StatusForbidden, logical.ErrPermissionDenied)
		return
	}
	p := strings.TrimPrefix(req.Path, "auth/token/")
	self := p == "lookup-self" || p == "renew-self" || p == "revoke-self"
	if !self && !s.policies.allowed(tok.policies, req.Path, capability(req.Operation)) {
		logical.RespondError(w, http.StatusForbidden, logical.ErrPermissionDenied)
		return
	}
	op := req.Operation
	write := op == logical.UpdateOperation
	switch {
	case p == "lookup-self" && (write || op == logical.ReadOperation):
		respondData(w, req, s.tokens.lookupData(tok, true))
	case p == "renew-self" && write:
		s.renew(ctx, w, req, tok)
	case p == "revoke-self" && write:
		s.tokens.revoke(tok)
		respond(w, req, nil, nil)
	case (p == "create" || p == "create-orphan") && write:
		s.createToken(w, req, tok)
	case p == "lookup-accessor" && write:
		if e := s.accessorArg(w, req); e != nil {
			respondData(w, req, s.tokens.lookupData(e, false))
		}
	case p == "revoke-accessor" && write:
		if e := s.accessorArg(w, req); e != nil {
			s.tokens.revoke(e)
			respond(w, req, nil, nil)
		}
	case p == "accessors/" && op == logical.ListOperation:
		respond(w, req, logical.ListResponse(s.tokens.accessors()), nil)
	default:
		respond(w, req, nil, logical.ErrUnsupportedPath)
	}
}

func (s *Server) renew(ctx context.Context, w http.ResponseWriter, req *logical.Request, tok *tokenEntry) {
	increment, err := parseutil.ParseDurationSecond(req.Data["increment"])
	if err != nil {
		respond(w, req, nil, badRequest(fmt.Errorf("increment: %w", err)))
		return
	}
	auth, err := s.tokens.renew(ctx, tok, increment)
	if err != nil {
		respond(w, req, nil, err)
		return
	}
	respond(w, req, &logical.Response{Auth: auth}, nil)
}

// createToken serves auth/token/create: policies (a subset of the caller's
// unless root), ttl, explicit_max_ttl, renewable (default true),
// no_default_policy, display_name, meta.
func (s *Server) createToken(w http.ResponseWriter, req *logical.Request, parent *tokenEntry) {
	bad := func(err error) { respond(w, req, nil, badRequest(err)) }
	policies, err := parseutil.ParseCommaStringSlice(req.Data["policies"])
	if err != nil {
		bad(fmt.Errorf("policies: %w", err))
		return
	}
	if len(policies) == 0 {
		policies = slices.Clone(parent.policies)
	}
	if !slices.Contains(parent.policies, "root") {
		for _, p := range policies {
			if !slices.Contains(parent.policies, p) {
				bad(fmt.Errorf("child policies must be subset of parent"))
				return
			}
		}
	}
	ttl, err := parseutil.ParseDurationSecond(req.Data["ttl"])
	if err != nil {
		bad(fmt.Errorf("ttl: %w", err))
		return
	}
	maxTTL, err := parseutil.ParseDurationSecond(req.Data["explicit_max_ttl"])
	if err != nil {
		bad(fmt.Errorf("explicit_max_ttl: %w", err))
		return
	}
	renewable := true
	if v, ok := req.Data["renewable"]; ok {
		if renewable, err = parseutil.ParseBool(v); err != nil {
			bad(fmt.Errorf("renewable: %w", err))
			return
		}
	}
	noDefault := false
	if v, ok := req.Data["no_default_policy"]; ok {
		if noDefault, err = parseutil.ParseBool(v); err != nil {
			bad(fmt.Errorf("no_default_policy: %w", err))
			return
		}
	}
	display, _ := req.Data["display_name"].(string)
	meta := map[string]string{}
	if raw, ok := req.Data["meta"].(map[string]any); ok {
		for k, v := range raw {
			meta[k] = fmt.Sprint(v)
		}
	}
	auth := &logical.Auth{
		DisplayName:     "token-" + display,
		Policies:        policies,
		Metadata:        meta,
		NoDefaultPolicy: noDefault,
		LeaseOptions:    logical.LeaseOptions{TTL: ttl, Renewable: renewable},
		ExplicitMaxTTL:  maxTTL,
	}
	if _, err := s.tokens.issue(nil, req.Path, auth); err != nil {
		respond(w, req, nil, err)
		return
	}
	respond(w, req, &logical.Response{Auth: auth}, nil)
}

// accessorArg finds the token named by the "accessor" field, or writes the
// error answer and returns nil.
func (s *Server) accessorArg(w http.ResponseWriter, req *logical.Request) *tokenEntry {
	accessor, _ := req.Data["accessor"].(string)
	if accessor == "" {
		respond(w, req, nil, badRequest(errors.New("missing accessor")))
		return nil
	}
	e := s.tokens.lookupAccessor(accessor)
	if e == nil {
		respond(w, req, nil, badRequest(errors.New("invalid accessor")))
		return nil
	}
	return e
}

// badRequest makes err answer with HTTP 400, through the sdk's
// logical.HTTPCodedError that logical.RespondError honours.
func badRequest(err error) error {
	return logical.CodedError(http.StatusBadRequest, err.Error())
}
