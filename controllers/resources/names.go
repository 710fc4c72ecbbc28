package resources

import (
	"fmt"
	"strconv"
	"strings"
)

// Ports and paths inside a Redis pod.
const (
	// RedisPort is the client port of every Redis node.
	RedisPort = 6379
	// BusPort is the cluster bus port: RedisPort + 10000 (Redis Cluster
	// specification, "Cluster bus").
	BusPort = RedisPort + 10000
	// ExporterPort is redis_exporter's default metrics port.
	ExporterPort = 9121

	// RedisContainerName is the name of the Redis container in every pod.
	RedisContainerName = "redis"
	// ExporterContainerName is the name of the redis_exporter sidecar.
	ExporterContainerName = "redis-exporter"

	// DataVolumeName is the name of the volume claim template and volume
	// mounted at DataDir.
	DataVolumeName = "data"
	// DataDir holds nodes.conf, the AOF and RDB files and the writable
	// copy of redis.conf.
	DataDir = "/data"
	// ConfigDir is where the ConfigMap's redis.conf is mounted (read-only).
	ConfigDir = "/etc/redis"
	// AuthDir is where the operator-owned Secret is mounted (read-only).
	AuthDir = "/etc/redis-auth"

	// ConfigKey is the ConfigMap key holding redis.conf.
	ConfigKey = "redis.conf"
	// AuthConfKey is the Secret key holding the redis.conf fragment with
	// requirepass and masterauth, included by redis.conf.
	AuthConfKey = "auth.conf"
	// PasswordKey is the Secret key holding the plain password for clients
	// and for the probes. It is absent when spec.auth is unset.
	PasswordKey = "password"
)

// StatefulSetName is the name of shard i's StatefulSet, which is also the
// shard's name in status.shards and in the topology engine.
func StatefulSetName(rc string, shard int) string { return fmt.Sprintf("%s-shard-%d", rc, shard) }

// PodName is the name of a shard's pod with the given StatefulSet ordinal.
func PodName(rc string, shard, ordinal int) string {
	return fmt.Sprintf("%s-%d", StatefulSetName(rc, shard), ordinal)
}

// PDBName is the name of shard i's PodDisruptionBudget.
func PDBName(rc string, shard int) string { return StatefulSetName(rc, shard) }

// HeadlessServiceName is the governing Service of every shard's
// StatefulSet; pods resolve as <pod>.<rc>-headless.<namespace>.svc.
func HeadlessServiceName(rc string) string { return rc + "-headless" }

// ClientServiceName is the ClusterIP Service clients connect to.
func ClientServiceName(rc string) string { return rc }

// ConfigMapName is the name of the ConfigMap holding redis.conf.
func ConfigMapName(rc string) string { return rc + "-config" }

// SecretName is the name of the operator-owned Secret holding the password
// (for clients) and auth.conf (for the pods).
func SecretName(rc string) string { return rc + "-auth" }

// PVCName is the name the StatefulSet controller gives the data claim of a
// pod: <template>-<statefulset>-<ordinal>.
func PVCName(rc string, shard, ordinal int) string {
	return DataVolumeName + "-" + PodName(rc, shard, ordinal)
}

// ShardIndex parses a StatefulSet name made by StatefulSetName back into
// its shard index. ok is false when name is not a shard of rc.
func ShardIndex(rc, name string) (shard int, ok bool) {
	rest, found := strings.CutPrefix(name, rc+"-shard-")
	if !found {
		return 0, false
	}
	return parseIndex(rest)
}

// PodOrdinal parses a pod name made by PodName into shard and ordinal.
func PodOrdinal(rc, pod string) (shard, ordinal int, ok bool) {
	rest, found := strings.CutPrefix(pod, rc+"-shard-")
	if !found {
		return 0, 0, false
	}
	s, o, found := strings.Cut(rest, "-")
	if !found {
		return 0, 0, false
	}
	if shard, ok = parseIndex(s); !ok {
		return 0, 0, false
	}
	if ordinal, ok = parseIndex(o); !ok {
		return 0, 0, false
	}
	return shard, ordinal, true
}

// parseIndex accepts only canonical non-negative decimals ("0", "12", not
// "012" or "+1"), so that a name round-trips exactly.
func parseIndex(s string) (int, bool) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || strconv.Itoa(n) != s {
		return 0, false
	}
	return n, true
}

func itoa(i int) string { return strconv.Itoa(i) }
