package resources

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
)

// LiveConfigDefaults lists the redis.conf parameters that Redis 7.0 accepts
// in CONFIG SET at run time, each with its Redis 7.0 default value (as
// CONFIG GET reports it on a server started with no config file).
//
// Source: the parameters not flagged IMMUTABLE_CONFIG or PROTECTED_CONFIG in
// Redis 7.0's src/config.c (see also https://redis.io/docs/latest/commands/config-set/
// and the self-documented redis.conf of 7.0). TestLiveConfigAgainstRedis
// checks every entry against the installed redis-server 7.0: CONFIG SET of
// the key succeeds and the default matches.
//
// A key of spec.config in this table is applied on every node with CONFIG
// SET, without a restart (a restarted node reads it from the ConfigMap,
// updated first; nothing goes to the node's disk); its value does
// not enter the pod template hash. When a live key is removed from
// spec.config it is set back to this default. Any other key (including
// aliases such as slave-priority) is restart-only: a change rolls the pods.
var LiveConfigDefaults = map[string]string{
	"maxmemory":                           "0",
	"maxmemory-policy":                    "noeviction",
	"maxmemory-samples":                   "5",
	"maxmemory-eviction-tenacity":         "10",
	"maxmemory-clients":                   "0",
	"timeout":                             "0",
	"tcp-keepalive":                       "300",
	"hz":                                  "10",
	"dynamic-hz":                          "yes",
	"loglevel":                            "notice",
	"slowlog-log-slower-than":             "10000",
	"slowlog-max-len":                     "128",
	"latency-monitor-threshold":           "0",
	"latency-tracking":                    "yes",
	"latency-tracking-info-percentiles":   "50 99 99.9",
	"notify-keyspace-events":              "",
	"hash-max-listpack-entries":           "512",
	"hash-max-listpack-value":             "64",
	"list-max-listpack-size":              "-2",
	"list-compress-depth":                 "0",
	"set-max-intset-entries":              "512",
	"zset-max-listpack-entries":           "128",
	"zset-max-listpack-value":             "64",
	"hll-sparse-max-bytes":                "3000",
	"stream-node-max-bytes":               "4096",
	"stream-node-max-entries":             "100",
	"activerehashing":                     "yes",
	"client-output-buffer-limit":          "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60",
	"client-query-buffer-limit":           "1073741824",
	"proto-max-bulk-len":                  "536870912",
	"lazyfree-lazy-eviction":              "no",
	"lazyfree-lazy-expire":                "no",
	"lazyfree-lazy-server-del":            "no",
	"lazyfree-lazy-user-del":              "no",
	"lazyfree-lazy-user-flush":            "no",
	"replica-lazy-flush":                  "no",
	"appendonly":                          "no",
	"appendfsync":                         "everysec",
	"no-appendfsync-on-rewrite":           "no",
	"auto-aof-rewrite-percentage":         "100",
	"auto-aof-rewrite-min-size":           "67108864",
	"aof-rewrite-incremental-fsync":       "yes",
	"rdb-save-incremental-fsync":          "yes",
	"aof-load-truncated":                  "yes",
	"aof-use-rdb-preamble":                "yes",
	"aof-timestamp-enabled":               "no",
	"save":                                "3600 1 300 100 60 10000",
	"rdbcompression":                      "yes",
	"rdb-del-sync-files":                  "no",
	"stop-writes-on-bgsave-error":         "yes",
	"repl-backlog-size":                   "1048576",
	"repl-backlog-ttl":                    "3600",
	"repl-timeout":                        "60",
	"repl-ping-replica-period":            "10",
	"repl-diskless-sync":                  "yes",
	"repl-diskless-sync-delay":            "5",
	"repl-diskless-sync-max-replicas":     "0",
	"repl-diskless-load":                  "disabled",
	"repl-disable-tcp-nodelay":            "no",
	"min-replicas-to-write":               "0",
	"min-replicas-max-lag":                "10",
	"replica-serve-stale-data":            "yes",
	"replica-read-only":                   "yes",
	"replica-priority":                    "100",
	"replica-ignore-maxmemory":            "yes",
	"replica-announced":                   "yes",
	"cluster-node-timeout":                "15000",
	"cluster-require-full-coverage":       "yes",
	"cluster-replica-validity-factor":     "10",
	"cluster-migration-barrier":           "1",
	"cluster-allow-replica-migration":     "yes",
	"cluster-allow-reads-when-down":       "no",
	"cluster-allow-pubsubshard-when-down": "yes",
	"cluster-replica-no-failover":         "no",
	"cluster-link-sendbuf-limit":          "0",
	"busy-reply-threshold":                "5000",
	"active-expire-effort":                "1",
	"activedefrag":                        "no",
	"active-defrag-ignore-bytes":          "104857600",
	"active-defrag-threshold-lower":       "10",
	"active-defrag-threshold-upper":       "100",
	"active-defrag-cycle-min":             "1",
	"active-defrag-cycle-max":             "25",
	"active-defrag-max-scan-fields":       "1000",
	"lfu-log-factor":                      "10",
	"lfu-decay-time":                      "1",
	"jemalloc-bg-thread":                  "yes",
	"oom-score-adj":                       "no",
	"oom-score-adj-values":                "0 200 800",
	"tracking-table-max-keys":             "1000000",
	"acllog-max-len":                      "128",
	"shutdown-timeout":                    "10",
	"shutdown-on-sigterm":                 "default",
	"shutdown-on-sigint":                  "default",
	"crash-log-enabled":                   "yes",
	"crash-memcheck-enabled":              "yes",
	"propagation-error-behavior":          "ignore",
	"replica-ignore-disk-write-errors":    "no",
}

// RefusedConfigKeys are redis.conf parameters never accepted in
// spec.config, and LockedOffConfigKeys those accepted only as "no": each
// lets a client run code inside redis-server (modules, DEBUG) or write
// files (CONFIG SET dir and dbfilename). ValidateConfig refuses them as a
// last line for clusters admitted without the validating webhook, which
// refuses them at admission with the reason for each
// (webhooks/redisconf.go).
var (
	RefusedConfigKeys   = []string{"loadmodule"}
	LockedOffConfigKeys = []string{"enable-debug-command", "enable-module-command", "enable-protected-configs"}
)

// OperatorOwnedConfigKeys are redis.conf parameters the operator sets
// itself, or that would break the cluster or the pods if set by a user
// (listening address and port, cluster mode, files, credentials). A
// spec.config holding one of them is rejected: by ValidateConfig here, as
// a last line for clusters admitted without the validating webhook, which
// rejects a superset of these (and checks values) at admission.
var OperatorOwnedConfigKeys = []string{
	"aclfile",
	"bind",
	"bind-source-addr",
	"cluster-announce-bus-port",
	"cluster-announce-hostname",
	"cluster-announce-ip",
	"cluster-announce-port",
	"cluster-announce-tls-port",
	"cluster-config-file",
	"cluster-enabled",
	"cluster-port",
	"daemonize",
	"dir",
	"include",
	"logfile",
	"masterauth",
	"masteruser",
	"pidfile",
	"port",
	"replica-announce-ip",
	"replica-announce-port",
	"replicaof",
	"requirepass",
	"slave-announce-ip",
	"slave-announce-port",
	"slaveof",
	"supervised",
	"tls-cluster",
	"tls-port",
	"tls-replication",
	"unixsocket",
	"unixsocketperm",
}

// operatorDefaults are redis.conf settings the operator renders unless
// spec.config overrides them. All are live keys.
//
//   - appendonly yes: persistence across restarts is what makes a full
//     restart keep its data (the RDB "save" points stay at Redis's default too).
//   - cluster-node-timeout 5000: failure detection in about 5 s instead of 15 s.
//   - cluster-allow-replica-migration no: replicas stay in their shard (the
//     StatefulSet they run in); the operator, not Redis, places replicas.
var operatorDefaults = map[string]string{
	"appendonly":                      "yes",
	"cluster-node-timeout":            "5000",
	"cluster-allow-replica-migration": "no",
}

// IsLiveConfigKey reports whether Redis 7.0 can change key with CONFIG SET
// (see LiveConfigDefaults). Keys are compared in lower case, as Redis does.
func IsLiveConfigKey(key string) bool {
	_, ok := LiveConfigDefaults[strings.ToLower(key)]
	return ok
}

// ValidateConfig checks spec.config: keys are single lower- or upper-case
// words of letters, digits and dashes, no key is operator-owned, no key
// appears twice in different case, and no value holds a line break or
// other control character (which could inject directives into redis.conf).
// The error names the first offending key.
func ValidateConfig(config map[string]string) error {
	seen := make(map[string]string, len(config))
	for _, key := range slices.Sorted(maps.Keys(config)) {
		lower := strings.ToLower(key)
		if lower == "" || strings.IndexFunc(lower, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-')
		}) >= 0 {
			return fmt.Errorf("spec.config: key %q is not a redis.conf parameter name (letters, digits and dashes)", key)
		}
		if slices.Contains(OperatorOwnedConfigKeys, lower) {
			return fmt.Errorf("spec.config: key %q is set by the operator and cannot be configured", key)
		}
		if slices.Contains(RefusedConfigKeys, lower) {
			return fmt.Errorf("spec.config: key %q is refused: it runs native code inside redis-server", key)
		}
		if slices.Contains(LockedOffConfigKeys, lower) && !strings.EqualFold(strings.TrimSpace(config[key]), "no") {
			return fmt.Errorf("spec.config: key %q may only be \"no\": it lets clients run code or write files in redis-server", key)
		}
		if other, dup := seen[lower]; dup {
			return fmt.Errorf("spec.config: keys %q and %q name the same parameter", other, key)
		}
		seen[lower] = key
		if strings.IndexFunc(config[key], func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0 {
			return fmt.Errorf("spec.config: value of %q holds a line break or control character", key)
		}
	}
	return nil
}

// MaxmemoryPercentOfLimit is the share of the Redis container's memory
// limit, in percent, that SafeMaxmemory gives to maxmemory. The rest is
// for what maxmemory does not bound and the kernel still charges to the
// container:
//   - copy-on-write of the fork that writes an RDB (snapshots, and every
//     full sync of a replica, diskless or not) or rewrites the AOF: "Redis
//     may use up to 2 times the memory normally used" in a write-heavy
//     application (https://redis.io/docs/latest/operate/oss_and_stack/management/admin/);
//   - allocator fragmentation: "if you think you have 10 GB of free memory,
//     set it to 8 or 9" (https://redis.io/docs/latest/operate/oss_and_stack/management/optimization/memory-optimization/);
//   - replica output buffers, which maxmemory does not count (up to the
//     256 MB hard limit of client-output-buffer-limit replica).
//
// 50 keeps the worst case of a fork (every page copied) inside the limit.
// The exporter runs in its own container with its own limit.
const MaxmemoryPercentOfLimit = 50

// SafeMaxmemory is the maxmemory, in bytes, for a Redis container whose
// memory limit is limit: MaxmemoryPercentOfLimit percent of it, rounded
// down. It returns 0 (Redis's "no limit") for no limit or a non-positive
// one.
func SafeMaxmemory(limit resource.Quantity) int64 {
	if limit.Sign() <= 0 {
		return 0
	}
	return limit.Value() * MaxmemoryPercentOfLimit / 100
}

// EffectiveConfig is spec.config (keys in lower case) on top of the
// operator's defaults. When spec.config has no maxmemory and the Redis
// container has a memory limit, maxmemory defaults to SafeMaxmemory of
// that limit (in bytes), so Redis evicts or refuses writes (per
// maxmemory-policy) before the kernel kills it. When spec.config has no
// repl-diskless-sync-max-replicas, it is spec.replicasPerShard: a master
// streams its dataset as soon as all its replicas asked for a full sync
// instead of waiting repl-diskless-sync-delay (5 s) for more (a replica
// that attaches alone still waits the delay for the others). Both the rendered
// redis.conf and the live config come from here. It assumes
// ValidateConfig passed.
func EffectiveConfig(rc *cachev1beta1.RedisCluster) map[string]string {
	out := maps.Clone(operatorDefaults)
	for k, v := range rc.Spec.Config {
		out[strings.ToLower(k)] = v
	}
	if _, set := out["repl-diskless-sync-max-replicas"]; !set && rc.Spec.ReplicasPerShard > 0 {
		out["repl-diskless-sync-max-replicas"] = strconv.Itoa(int(rc.Spec.ReplicasPerShard))
	}
	if _, set := out["maxmemory"]; !set {
		if n := SafeMaxmemory(rc.Spec.Resources.Limits[corev1.ResourceMemory]); n > 0 {
			out["maxmemory"] = strconv.FormatInt(n, 10)
		}
	}
	return out
}

// LiveConfig is the part of EffectiveConfig that CONFIG SET can change:
// what the controller passes to the topology engine's ApplyConfig.
func LiveConfig(rc *cachev1beta1.RedisCluster) map[string]string {
	out := map[string]string{}
	for k, v := range EffectiveConfig(rc) {
		if IsLiveConfigKey(k) {
			out[k] = v
		}
	}
	return out
}

// RestartConfig is the part of EffectiveConfig that needs a restart; it is
// hashed into the pod template so that a change rolls the pods.
func RestartConfig(rc *cachev1beta1.RedisCluster) map[string]string {
	out := map[string]string{}
	for k, v := range EffectiveConfig(rc) {
		if !IsLiveConfigKey(k) {
			out[k] = v
		}
	}
	return out
}

// LiveConfigToApply is the map to CONFIG SET on every node: the desired
// live config plus, for each key in previous (the live keys applied last
// time) that is no longer set, its Redis default.
func LiveConfigToApply(desired map[string]string, previous []string) map[string]string {
	out := maps.Clone(desired)
	for _, k := range previous {
		if _, ok := out[k]; ok {
			continue
		}
		if def, ok := LiveConfigDefaults[k]; ok {
			out[k] = def
		}
	}
	return out
}

// RenderConfig renders redis.conf for every node of the cluster. The pod
// copies it to DataDir at start (see startScript) and adds bind, cluster-announce-ip and replica-announce-ip with its own IP on
// the command line.
//
// Layout: the operator-owned settings, then EffectiveConfig sorted by key,
// then the include of the Secret's auth.conf last, so nothing overrides
// requirepass and masterauth.
func RenderConfig(rc *cachev1beta1.RedisCluster) string {
	var b strings.Builder
	b.WriteString("# Rendered by redis-operator from RedisCluster " + rc.Namespace + "/" + rc.Name + ".\n")
	b.WriteString("# Do not edit: change spec.config of the RedisCluster instead.\n")
	renderPorts(&b, rc)
	b.WriteString("cluster-enabled yes\n")
	b.WriteString("cluster-config-file " + DataDir + "/nodes.conf\n")
	b.WriteString("dir " + DataDir + "\n")
	b.WriteString("daemonize no\n")
	b.WriteString("logfile \"\"\n")
	b.WriteString("protected-mode no\n")
	cfg := EffectiveConfig(rc)
	for _, k := range slices.Sorted(maps.Keys(cfg)) {
		v := cfg[k]
		if v == "" {
			v = `""`
		}
		b.WriteString(k + " " + v + "\n")
	}
	if rc.Spec.ExternalAccessEnabled() {
		// MOVED, ASK, CLUSTER SLOTS and SHARDS name each node by its
		// cluster-announce-hostname (its per-pod Service's address).
		b.WriteString("cluster-preferred-endpoint-type hostname\n")
	}
	b.WriteString("include " + AuthDir + "/" + AuthConfKey + "\n")
	return b.String()
}
