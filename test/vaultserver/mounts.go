package vaultserver

import (
	"context"
	"crypto/rand"
	"fmt"
	"sort"
	"strings"
	"sync"

	hclog "github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-uuid"
	kubeauth "github.com/hashicorp/vault-plugin-auth-kubernetes"
	kv "github.com/hashicorp/vault-plugin-secrets-kv"
	"github.com/hashicorp/vault/sdk/logical"
)

// factories are the backend types this server can mount: Vault's own plugin
// code, the same Factory functions Vault registers as builtins.
var factories = map[string]struct {
	factory logical.Factory
	auth    bool
}{
	"kv":         {factory: kv.Factory},
	"kubernetes": {factory: kubeauth.Factory, auth: true},
}

// mount is one backend at a path such as "secret/" or "auth/kubernetes/",
// with its own in-memory storage.
type mount struct {
	path     string // with trailing slash; auth mounts start with "auth/"
	typ      string // "kv" or "kubernetes"
	options  map[string]string
	desc     string
	uuid     string
	accessor string
	backend  logical.Backend
	storage  logical.Storage
}

// mountTable routes request paths to mounts by longest prefix, as Vault's
// router does.
type mountTable struct {
	sysView logical.SystemView
	log     hclog.Logger

	mu     sync.RWMutex
	mounts map[string]*mount
}

func newMountTable(sysView logical.SystemView, log hclog.Logger) *mountTable {
	return &mountTable{sysView: sysView, log: log, mounts: map[string]*mount{}}
}

// mount creates, sets up and initializes a backend of type typ at path (which
// must end in "/"; auth backends must live under "auth/"). Like Vault, it
// refuses a path that overlaps an existing mount.
func (t *mountTable) mount(ctx context.Context, path, typ string, options map[string]string, desc string) error {
	f, ok := factories[typ]
	if !ok {
		return fmt.Errorf("unsupported backend type %q (this test server has kv and kubernetes)", typ)
	}
	if f.auth != strings.HasPrefix(path, "auth/") {
		return fmt.Errorf("backend type %q cannot be mounted at %q", typ, path)
	}
	if strings.HasPrefix(path, "sys/") || strings.HasPrefix(path, "auth/token/") || path == "auth/" || path == "/" {
		return fmt.Errorf("cannot mount at reserved path %q", path)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for existing := range t.mounts {
		if strings.HasPrefix(path, existing) || strings.HasPrefix(existing, path) {
			return fmt.Errorf("path is already in use at %s", existing)
		}
	}
	id, err := uuid.GenerateUUID()
	if err != nil {
		return err
	}
	if options == nil {
		options = map[string]string{}
	}
	storage := &logical.InmemStorage{}
	conf := &logical.BackendConfig{
		StorageView: storage,
		Logger:      t.log.Named(strings.TrimSuffix(path, "/")),
		System:      t.sysView,
		BackendUUID: id,
		Config:      options,
	}
	b, err := f.factory(ctx, conf)
	if err != nil {
		return err
	}
	if b == nil {
		return fmt.Errorf("backend type %q with options %v returned no backend", typ, options)
	}
	if err := b.Initialize(ctx, &logical.InitializationRequest{Storage: storage}); err != nil {
		b.Cleanup(ctx)
		return err
	}
	t.mounts[path] = &mount{
		path: path, typ: typ, options: options, desc: desc, uuid: id,
		accessor: strings.ToLower(typ + "_" + rand.Text()[:8]),
		backend:  b, storage: storage,
	}
	return nil
}

// unmount removes the mount at path and drops its data. A missing mount is
// not an error, as in Vault.
func (t *mountTable) unmount(ctx context.Context, path string) {
	t.mu.Lock()
	m := t.mounts[path]
	delete(t.mounts, path)
	t.mu.Unlock()
	if m != nil {
		m.backend.Cleanup(ctx)
	}
}

// match returns the mount with the longest path that prefixes reqPath.
func (t *mountTable) match(reqPath string) *mount {
	t.mu.RLock()
	defer t.mu.RUnlock()
	var best *mount
	for p, m := range t.mounts {
		if strings.HasPrefix(reqPath, p) || reqPath+"/" == p {
			if best == nil || len(p) > len(best.path) {
				best = m
			}
		}
	}
	return best
}

// list returns the mounts whose kind (auth or not) is auth, keyed the way
// sys/mounts and sys/auth answer (the auth ones without the "auth/" prefix).
func (t *mountTable) list(auth bool) map[string]any {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := map[string]any{}
	for p, m := range t.mounts {
		if factories[m.typ].auth != auth {
			continue
		}
		out[strings.TrimPrefix(p, "auth/")] = m.describe()
	}
	return out
}

// describe is the mount's entry in sys/mounts or sys/auth.
func (m *mount) describe() map[string]any {
	return map[string]any{
		"type":        m.typ,
		"description": m.desc,
		"accessor":    m.accessor,
		"uuid":        m.uuid,
		"options":     m.options,
		"config": map[string]any{
			"default_lease_ttl": 0,
			"max_lease_ttl":     0,
			"force_no_cache":    false,
		},
		"local":     false,
		"seal_wrap": false,
	}
}

// closeAll cleans up every backend, in path order.
func (t *mountTable) closeAll(ctx context.Context) {
	t.mu.Lock()
	paths := make([]string, 0, len(t.mounts))
	for p := range t.mounts {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	ms := make([]*mount, 0, len(paths))
	for _, p := range paths {
		ms = append(ms, t.mounts[p])
	}
	t.mounts = map[string]*mount{}
	t.mu.Unlock()
	for _, m := range ms {
		m.backend.Cleanup(ctx)
	}
}
