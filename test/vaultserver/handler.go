package vaultserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/hashicorp/go-uuid"
	"github.com/hashicorp/vault/sdk/logical"
)

// maxRequestSize bounds request bodies, as Vault's max_request_size does
// (same default, 32 MiB).
const maxRequestSize = 32 << 20

// ServeHTTP routes /v1/<path> the way Vault does: sys/health, sys/...,
// auth/token/... to this package's own handlers, everything else to the
// backend mounted at the longest matching prefix.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
	s.serve(r.Context(), rec, r)
	s.log.Info("Request", "method", r.Method, "path", r.URL.Path, "status", rec.status)
}

func (s *Server) serve(ctx context.Context, w http.ResponseWriter, r *http.Request) {
	path, ok := strings.CutPrefix(r.URL.Path, "/v1/")
	if !ok {
		logical.RespondError(w, http.StatusNotFound, fmt.Errorf("no handler for route %q", r.URL.Path))
		return
	}
	if path == "sys/health" {
		s.health(w)
		return
	}
	if ns := s.opts.Namespace; ns != "" && strings.Trim(r.Header.Get("X-Vault-Namespace"), "/") != ns {
		logical.RespondError(w, http.StatusBadRequest, errors.New("unknown namespace"))
		return
	}
	req, err := parseRequest(r, path)
	if err != nil {
		logical.RespondError(w, http.StatusBadRequest, err)
		return
	}
	switch {
	case strings.HasPrefix(path, "sys/"):
		s.handleSys(ctx, w, req)
	case strings.HasPrefix(path, "auth/token/"):
		s.handleToken(ctx, w, req)
	default:
		s.handleBackend(ctx, w, req)
	}
}

// parseRequest turns an HTTP request into a logical.Request as Vault's HTTP
// layer does: GET is read (list with ?list=true), LIST is list, POST and PUT
// are update (turned into create by the existence check later), PATCH is
// patch, DELETE is delete; a JSON body, or the query string for GET, becomes
// the request data.
func parseRequest(r *http.Request, path string) (*logical.Request, error) {
	var op logical.Operation
	var data map[string]any
	switch r.Method {
	case http.MethodGet:
		op = logical.ReadOperation
		q := r.URL.Query()
		if q.Get("list") == "true" {
			op = logical.ListOperation
		}
		q.Del("list")
		if len(q) > 0 {
			data = map[string]any{}
			for k, v := range q {
				if len(v) == 1 {
					data[k] = v[0]
				} else {
					data[k] = v
				}
			}
		}
	case "LIST":
		op = logical.ListOperation
	case http.MethodPost, http.MethodPut:
		op = logical.UpdateOperation
	case http.MethodPatch:
		op = logical.PatchOperation
	case http.MethodDelete:
		op = logical.DeleteOperation
	default:
		return nil, fmt.Errorf("unsupported method %s", r.Method)
	}
	if op == logical.UpdateOperation || op == logical.PatchOperation {
		dec := json.NewDecoder(io.LimitReader(r.Body, maxRequestSize))
		dec.UseNumber()
		if err := dec.Decode(&data); err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("failed to parse JSON input: %w", err)
		}
	}
	if op == logical.ListOperation && !strings.HasSuffix(path, "/") {
		path += "/"
	}
	id, err := uuid.GenerateUUID()
	if err != nil {
		return nil, err
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	token := r.Header.Get("X-Vault-Token")
	if token == "" {
		token, _ = strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	}
	return &logical.Request{
		ID:          id,
		Operation:   op,
		Path:        path,
		Data:        data,
		ClientToken: token,
		Connection:  &logical.Connection{RemoteAddr: host},
	}, nil
}

// handleBackend serves a request for a mounted backend.
func (s *Server) handleBackend(ctx context.Context, w http.ResponseWriter, req *logical.Request) {
	m := s.mounts.match(req.Path)
	if m == nil {
		logical.RespondError(w, http.StatusNotFound, fmt.Errorf("no handler for route %q. route entry not found.", req.Path))
		return
	}
	fullPath := req.Path
	req.Path = strings.TrimPrefix(req.Path, m.path)
	req.MountPoint, req.MountType, req.Storage = m.path, m.typ, m.storage

	var tok *tokenEntry
	if !unauthenticated(m.backend, req.Path) {
		if tok = s.tokens.lookup(req.ClientToken); tok == nil {
			logical.RespondError(w, http.StatusForbidden, logical.ErrPermissionDenied)
			return
		}
		req.ClientTokenAccessor, req.DisplayName = tok.accessor, tok.displayName
	}
	if req.Operation == logical.UpdateOperation {
		if found, exists, err := m.backend.HandleExistenceCheck(ctx, req); err == nil && found && !exists {
			req.Operation = logical.CreateOperation
		}
	}
	if tok != nil && !s.policies.allowed(tok.policies, fullPath, capability(req.Operation)) {
		logical.RespondError(w, http.StatusForbidden, logical.ErrPermissionDenied)
		return
	}
	resp, err := m.backend.HandleRequest(ctx, req)
	if err == nil && resp != nil && resp.Auth != nil && !resp.IsError() && factories[m.typ].auth {
		if _, ierr := s.tokens.issue(m, fullPath, resp.Auth); ierr != nil {
			resp, err = nil, ierr
		}
	}
	if resp != nil {
		resp.MountType = m.typ
	}
	respond(w, req, resp, err)
}

// unauthenticated reports whether path is one of the backend's
// PathsSpecial.Unauthenticated paths (e.g. "login"), which need no token.
func unauthenticated(b logical.Backend, path string) bool {
	sp := b.SpecialPaths()
	if sp == nil {
		return false
	}
	for _, p := range sp.Unauthenticated {
		if patternMatches(p, path) {
			return true
		}
	}
	return false
}

// capability is the ACL capability an operation needs.
func capability(op logical.Operation) string {
	switch op {
	case logical.CreateOperation:
		return "create"
	case logical.UpdateOperation:
		return "update"
	case logical.PatchOperation:
		return "patch"
	case logical.DeleteOperation:
		return "delete"
	case logical.ListOperation:
		return "list"
	default:
		return "read"
	}
}

// respond writes a backend's answer the way Vault's HTTP layer does, using
// the sdk's own translation: raw responses (logical.HTTPStatusCode in Data)
// as they are, errors through logical.RespondErrorCommon and
// logical.RespondError, a nil answer as 204 (or 404 for a read), anything else
// as logical.LogicalResponseToHTTPResponse.
func respond(w http.ResponseWriter, req *logical.Request, resp *logical.Response, err error) {
	if err == nil && resp != nil && resp.Data != nil {
		if _, raw := resp.Data[logical.HTTPStatusCode]; raw {
			respondRaw(w, resp)
			return
		}
	}
	if status, rerr := logical.RespondErrorCommon(req, resp, err); status != 0 {
		logical.RespondError(w, status, rerr)
		return
	}
	if resp == nil {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	out := logical.LogicalResponseToHTTPResponse(resp)
	out.RequestID = req.ID
	writeJSON(w, http.StatusOK, out)
}

// respondRaw writes a response built with logical.RespondWithStatusCode.
func respondRaw(w http.ResponseWriter, resp *logical.Response) {
	status := http.StatusOK
	switch c := resp.Data[logical.HTTPStatusCode].(type) {
	case int:
		status = c
	case json.Number:
		if n, err := c.Int64(); err == nil {
			status = int(n)
		}
	}
	if ct, ok := resp.Data[logical.HTTPContentType].(string); ok {
		w.Header().Set("Content-Type", ct)
	}
	w.WriteHeader(status)
	switch body := resp.Data[logical.HTTPRawBody].(type) {
	case string:
		_, _ = io.WriteString(w, body)
	case []byte:
		_, _ = w.Write(body)
	}
}

// respondData writes a 200 with data in Vault's response envelope.
func respondData(w http.ResponseWriter, req *logical.Request, data map[string]any) {
	respond(w, req, &logical.Response{Data: data}, nil)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// health answers sys/health for an initialized, unsealed, active node.
func (s *Server) health(w http.ResponseWriter) {
	writeJSON(w, http.StatusOK, map[string]any{
		"initialized":                  true,
		"sealed":                       false,
		"standby":                      false,
		"performance_standby":          false,
		"replication_performance_mode": "disabled",
		"replication_dr_mode":          "disabled",
		"server_time_utc":              time.Now().Unix(),
		"version":                      s.sysView.VersionString,
		"cluster_name":                 "vaultserver",
	})
}

// statusRecorder remembers the status code for the request log line.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}
