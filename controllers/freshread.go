package controllers

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
)

// writtenVersions remembers, per RedisCluster, the resourceVersion of the
// operator's own last write of it (status, finalizer, status.migration).
// A pass that starts right after another pass wrote reads the object from
// the manager's cache, which may not have seen that write yet: the pass
// would then judge from a status that is no longer stored, and every
// write it makes (the Scaling announced before a migration, the final
// status) would be lost to a conflict. getCluster reads such an object
// from the API server instead.
type writtenVersions struct {
	mu sync.Mutex
	rv map[types.NamespacedName]string
}

// remember records rv as the cluster's version after the operator's write.
func (w *writtenVersions) remember(rc *cachev1beta1.RedisCluster) {
	if rc.ResourceVersion == "" {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.rv == nil {
		w.rv = map[types.NamespacedName]string{}
	}
	w.rv[client.ObjectKeyFromObject(rc)] = rc.ResourceVersion
}

// stale reports whether the cached object may predate the operator's last
// write: its resourceVersion is not the one that write returned. (It may
// also be newer, someone else's write; a fresh read tells, and remember
// records what it found, so the next pass reads the cache again.)
func (w *writtenVersions) stale(rc *cachev1beta1.RedisCluster) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	rv, ok := w.rv[client.ObjectKeyFromObject(rc)]
	return ok && rv != rc.ResourceVersion
}

func (w *writtenVersions) forget(key types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.rv, key)
}

// getCluster reads the RedisCluster from the cache, or from the API server
// when the cached copy may predate the operator's own last write of it.
func (r *RedisClusterReconciler) getCluster(ctx context.Context, key types.NamespacedName, rc *cachev1beta1.RedisCluster) error {
	if err := r.Client.Get(ctx, key, rc); err != nil {
		return err
	}
	if !r.written.stale(rc) {
		return nil
	}
	if err := r.reader().Get(ctx, key, rc); err != nil {
		return err
	}
	r.written.remember(rc)
	return nil
}
