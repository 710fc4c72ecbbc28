package webhooks

import (
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// This file holds the grammar of the redis.conf parameters a RedisCluster may
// set in spec.config, for Redis 7.0.
//
// Sources, in order of authority:
//   - redis.conf of Redis 7.0 (the self-documented example configuration;
//     Debian's redis-server 7.0.15 ships it as /etc/redis/redis.conf), for
//     what each parameter means and the units grammar ("Note on units");
//   - the answers of a real redis-server 7.0.15 to CONFIG SET, which give each
//     parameter's accepted range ("argument must be between 0 and 2147483647
//     inclusive") and grammar (yes/no, enums, memory values).
//     redisconf_redis_test.go replays the grammar below against that server,
//     so a disagreement fails the tests.
//
// A value is what CONFIG SET takes as its single argument: parameters that
// hold several words (save, client-output-buffer-limit, ...) take them
// separated by single spaces, exactly as CONFIG SET does.

// paramKind is how a parameter's value is checked.
type paramKind int

const (
	// kindOwned parameters are set by the operator or break the cluster; any value is rejected.
	kindOwned paramKind = iota
	// kindRefused parameters are never accepted, for the reason given.
	kindRefused
	// kindLockedOff parameters open a way to run code or read files inside
	// redis-server with its rights; only "no" (their default) is accepted.
	kindLockedOff
	// kindBool is yes or no, in any letter case (redis.conf booleans).
	kindBool
	// kindEnum is one of param.values, in any letter case.
	kindEnum
	// kindFlags is one or more of param.values separated by spaces (shutdown-on-sigterm).
	kindFlags
	// kindInt is a decimal integer between param.min and param.max.
	kindInt
	// kindMemory is a memory value (see parseMemory) between param.min and param.max bytes.
	kindMemory
	// kindMemoryOrPercent is a memory value or a percentage of maxmemory up to 100% (maxmemory-clients).
	kindMemoryOrPercent
	// kindSave is "" or pairs of <seconds> <changes>.
	kindSave
	// kindClientOutputBufferLimit is groups of <class> <hard> <soft> <seconds>.
	kindClientOutputBufferLimit
	// kindOOMScoreAdjValues is three integers between -2000 and 2000.
	kindOOMScoreAdjValues
	// kindPercentiles is decimal numbers between 0 and 100 separated by single spaces.
	kindPercentiles
	// kindKeyspaceEvents is a set of keyspace notification class characters.
	kindKeyspaceEvents
	// kindRenameCommand is "<command> <new-name>" for a command the operator does not use.
	kindRenameCommand
	// kindString is free text Redis checks itself (file paths of modules, CPU lists, templates).
	kindString
)

// param describes one redis.conf parameter.
type param struct {
	kind paramKind
	// min and max bound kindInt and kindMemory values.
	min, max int64
	// umax replaces max for unsigned memory parameters (maxmemory), when non-zero.
	umax uint64
	// values are the choices of kindEnum and kindFlags.
	values []string
	// reason says, for kindOwned, why the parameter cannot be set.
	reason string
	// alias names the parameter this one is another name of (slave-* for replica-*).
	alias string
}

const (
	intMax   = math.MaxInt32
	intMin   = math.MinInt32
	llongMax = math.MaxInt64
	uintMax  = math.MaxUint32
	mb       = 1 << 20
)

// Reasons shared by several operator-owned parameters.
const (
	reasonNetwork     = "the operator sets the addresses and ports every pod listens on and announces, which the cluster bus and the clients rely on"
	reasonClusterMode = "the operator runs every pod in cluster mode with its own nodes.conf on the pod's volume"
	reasonLayout      = "the operator owns the file layout on the pod's volume"
	reasonAuth        = "passwords and users come from spec.auth"
	reasonTopology    = "the operator owns replication: it pairs replicas with masters with CLUSTER REPLICATE"
	reasonProcess     = "the container runtime supervises redis-server, which must stay in the foreground and log to standard output"
	reasonTLS         = "the operator configures TLS from spec.tls (certificate files, ports, replication and bus encryption)"
)

func owned(reason string) param { return param{kind: kindOwned, reason: reason} }

func lockedOff(reason string) param { return param{kind: kindLockedOff, reason: reason} }

func boolean() param { return param{kind: kindBool} }

func enum(values ...string) param { return param{kind: kindEnum, values: values} }

func integer(min, max int64) param { return param{kind: kindInt, min: min, max: max} }

func memory(min int64) param { return param{kind: kindMemory, min: min, max: llongMax} }

func aliasOf(name string) param { return param{alias: name} }

// redisParams are the parameters of Redis 7.0: every name CONFIG GET *
// returns on redis-server 7.0.15, plus the redis.conf-only directives
// (include, loadmodule, rename-command, user). Ranges are those redis-server
// reports on CONFIG SET.
var redisParams = map[string]param{
	// Owned: network, cluster mode, files, auth, replication, process, TLS.
	"bind":                            owned(reasonNetwork),
	"bind-source-addr":                owned(reasonNetwork),
	"port":                            owned(reasonNetwork),
	"tls-port":                        owned(reasonNetwork),
	"unixsocket":                      owned(reasonNetwork),
	"unixsocketperm":                  owned(reasonNetwork),
	"protected-mode":                  owned("the operator keeps protected mode off so that pods reach each other, and protects Redis with spec.auth"),
	"cluster-enabled":                 owned(reasonClusterMode),
	"cluster-config-file":             owned(reasonClusterMode),
	"cluster-port":                    owned(reasonNetwork),
	"cluster-announce-ip":             owned(reasonNetwork),
	"cluster-announce-port":           owned(reasonNetwork),
	"cluster-announce-bus-port":       owned(reasonNetwork),
	"cluster-announce-tls-port":       owned(reasonNetwork),
	"cluster-announce-hostname":       owned(reasonNetwork),
	"cluster-preferred-endpoint-type": owned(reasonNetwork),
	"replica-announce-ip":             owned(reasonNetwork),
	"replica-announce-port":           owned(reasonNetwork),
	"slave-announce-ip":               aliasOf("replica-announce-ip"),
	"slave-announce-port":             aliasOf("replica-announce-port"),
	"dir":                             owned(reasonLayout),
	"dbfilename":                      owned(reasonLayout),
	"appenddirname":                   owned(reasonLayout),
	"appendfilename":                  owned(reasonLayout),
	"include":                         owned("the operator writes the whole redis.conf; files it does not know of are not in the pods"),
	"requirepass":                     owned(reasonAuth),
	"masterauth":                      owned(reasonAuth),
	"masteruser":                      owned(reasonAuth),
	"aclfile":                         owned(reasonAuth),
	"user":                            owned(reasonAuth),
	"replicaof":                       owned(reasonTopology),
	"slaveof":                         aliasOf("replicaof"),
	"daemonize":                       owned(reasonProcess),
	"supervised":                      owned(reasonProcess),
	"pidfile":                         owned(reasonProcess),
	"logfile":                         owned(reasonProcess),
	"tls-auth-clients":                owned(reasonTLS),
	"tls-ca-cert-dir":                 owned(reasonTLS),
	"tls-ca-cert-file":                owned(reasonTLS),
	"tls-cert-file":                   owned(reasonTLS),
	"tls-ciphers":                     owned(reasonTLS),
	"tls-ciphersuites":                owned(reasonTLS),
	"tls-client-cert-file":            owned(reasonTLS),
	"tls-client-key-file":             owned(reasonTLS),
	"tls-client-key-file-pass":        owned(reasonTLS),
	"tls-cluster":                     owned(reasonTLS),
	"tls-dh-params-file":              owned(reasonTLS),
	"tls-key-file":                    owned(reasonTLS),
	"tls-key-file-pass":               owned(reasonTLS),
	"tls-prefer-server-ciphers":       owned(reasonTLS),
	"tls-protocols":                   owned(reasonTLS),
	"tls-replication":                 owned(reasonTLS),
	"tls-session-cache-size":          owned(reasonTLS),
	"tls-session-cache-timeout":       owned(reasonTLS),
	"tls-session-caching":             owned(reasonTLS),

	// Booleans.
	"activedefrag":                        boolean(),
	"activerehashing":                     boolean(),
	"always-show-logo":                    boolean(),
	"aof-disable-auto-gc":                 boolean(),
	"aof-load-truncated":                  boolean(),
	"aof-rewrite-incremental-fsync":       boolean(),
	"aof-timestamp-enabled":               boolean(),
	"aof-use-rdb-preamble":                boolean(),
	"appendonly":                          boolean(),
	"cluster-allow-pubsubshard-when-down": boolean(),
	"cluster-allow-reads-when-down":       boolean(),
	"cluster-allow-replica-migration":     boolean(),
	"cluster-replica-no-failover":         boolean(),
	"cluster-slave-no-failover":           aliasOf("cluster-replica-no-failover"),
	"cluster-require-full-coverage":       boolean(),
	"crash-log-enabled":                   boolean(),
	"crash-memcheck-enabled":              boolean(),
	"disable-thp":                         boolean(),
	"dynamic-hz":                          boolean(),
	"io-threads-do-reads":                 boolean(),
	"jemalloc-bg-thread":                  boolean(),
	"latency-tracking":                    boolean(),
	"lazyfree-lazy-eviction":              boolean(),
	"lazyfree-lazy-expire":                boolean(),
	"lazyfree-lazy-server-del":            boolean(),
	"lazyfree-lazy-user-del":              boolean(),
	"lazyfree-lazy-user-flush":            boolean(),
	"no-appendfsync-on-rewrite":           boolean(),
	"rdb-del-sync-files":                  boolean(),
	"rdb-save-incremental-fsync":          boolean(),
	"rdbchecksum":                         boolean(),
	"rdbcompression":                      boolean(),
	"repl-disable-tcp-nodelay":            boolean(),
	"repl-diskless-sync":                  boolean(),
	"replica-announced":                   boolean(),
	"replica-ignore-disk-write-errors":    boolean(),
	"replica-ignore-maxmemory":            boolean(),
	"slave-ignore-maxmemory":              aliasOf("replica-ignore-maxmemory"),
	"replica-lazy-flush":                  boolean(),
	"slave-lazy-flush":                    aliasOf("replica-lazy-flush"),
	"replica-read-only":                   boolean(),
	"slave-read-only":                     aliasOf("replica-read-only"),
	"replica-serve-stale-data":            boolean(),
	"slave-serve-stale-data":              aliasOf("replica-serve-stale-data"),
	"set-proc-title":                      boolean(),
	"stop-writes-on-bgsave-error":         boolean(),
	"syslog-enabled":                      boolean(),

	// Enums.
	"acl-pubsub-default":         enum("allchannels", "resetchannels"),
	"appendfsync":                enum("always", "everysec", "no"),
	"enable-debug-command":       lockedOff("DEBUG can crash the server, change its state behind the operator's back and read memory; run DEBUG from a maintenance shell you were granted instead"),
	"enable-module-command":      lockedOff("MODULE LOAD runs any shared object from the pod's file system inside redis-server"),
	"enable-protected-configs":   lockedOff("it lets clients CONFIG SET dir and dbfilename, which turns SAVE into a write of any file the redis user can reach"),
	"loglevel":                   enum("debug", "verbose", "notice", "warning"),
	"maxmemory-policy":           enum("volatile-lru", "volatile-lfu", "volatile-random", "volatile-ttl", "allkeys-lru", "allkeys-lfu", "allkeys-random", "noeviction"),
	"oom-score-adj":              enum("no", "yes", "relative", "absolute"),
	"propagation-error-behavior": enum("ignore", "panic", "panic-on-replicas"),
	"repl-diskless-load":         enum("disabled", "on-empty-db", "swapdb"),
	"sanitize-dump-payload":      enum("no", "yes", "clients"),
	"syslog-facility":            enum("user", "local0", "local1", "local2", "local3", "local4", "local5", "local6", "local7"),
	"shutdown-on-sigint":         {kind: kindFlags, values: []string{"default", "save", "nosave", "now", "force"}},
	"shutdown-on-sigterm":        {kind: kindFlags, values: []string{"default", "save", "nosave", "now", "force"}},

	// Integers, with the ranges redis-server 7.0 enforces, except where noted.
	"acllog-max-len":                integer(0, llongMax),
	"active-defrag-cycle-max":       integer(1, 99),
	"active-defrag-cycle-min":       integer(1, 99),
	"active-defrag-max-scan-fields": integer(1, llongMax),
	"active-defrag-threshold-lower": integer(0, 1000),
	"active-defrag-threshold-upper": integer(0, 1000),
	"active-expire-effort":          integer(1, 10),
	"auto-aof-rewrite-percentage":   integer(0, intMax),
	"busy-reply-threshold":          integer(0, llongMax),
	"lua-time-limit":                aliasOf("busy-reply-threshold"),
	"cluster-migration-barrier":     integer(0, intMax),
	// Redis accepts 0, but a node timeout of 0 ms marks every node as
	// failing at once; the operator asks for at least 1.
	"cluster-node-timeout":            integer(1, llongMax),
	"cluster-replica-validity-factor": integer(0, intMax),
	"cluster-slave-validity-factor":   aliasOf("cluster-replica-validity-factor"),
	"databases":                       integer(1, intMax),
	"hash-max-listpack-entries":       integer(0, llongMax),
	"hash-max-ziplist-entries":        aliasOf("hash-max-listpack-entries"),
	"hz":                              integer(0, intMax),
	"io-threads":                      integer(1, 128),
	"latency-monitor-threshold":       integer(0, llongMax),
	"lfu-decay-time":                  integer(0, intMax),
	"lfu-log-factor":                  integer(0, intMax),
	"list-compress-depth":             integer(0, intMax),
	"list-max-listpack-size":          integer(intMin, intMax),
	"list-max-ziplist-size":           aliasOf("list-max-listpack-size"),
	"maxclients":                      integer(1, uintMax),
	"maxmemory-eviction-tenacity":     integer(0, 100),
	"maxmemory-samples":               integer(1, intMax),
	"min-replicas-max-lag":            integer(0, intMax),
	"min-slaves-max-lag":              aliasOf("min-replicas-max-lag"),
	"min-replicas-to-write":           integer(0, intMax),
	"min-slaves-to-write":             aliasOf("min-replicas-to-write"),
	"repl-backlog-ttl":                integer(0, llongMax),
	"repl-diskless-sync-delay":        integer(0, intMax),
	"repl-diskless-sync-max-replicas": integer(0, intMax),
	"repl-ping-replica-period":        integer(1, intMax),
	"repl-ping-slave-period":          aliasOf("repl-ping-replica-period"),
	"repl-timeout":                    integer(1, intMax),
	"replica-priority":                integer(0, intMax),
	"slave-priority":                  aliasOf("replica-priority"),
	"set-max-intset-entries":          integer(0, llongMax),
	"shutdown-timeout":                integer(0, intMax),
	"slowlog-log-slower-than":         integer(-1, llongMax),
	"slowlog-max-len":                 integer(0, llongMax),
	"socket-mark-id":                  integer(0, uintMax),
	"stream-node-max-entries":         integer(0, llongMax),
	"tcp-backlog":                     integer(0, intMax),
	"tcp-keepalive":                   integer(0, intMax),
	"timeout":                         integer(0, intMax),
	"tracking-table-max-keys":         integer(0, llongMax),
	"zset-max-listpack-entries":       integer(0, llongMax),
	"zset-max-ziplist-entries":        aliasOf("zset-max-listpack-entries"),

	// Memory values.
	"active-defrag-ignore-bytes": memory(1),
	"auto-aof-rewrite-min-size":  memory(0),
	"client-query-buffer-limit":  memory(mb),
	"cluster-link-sendbuf-limit": {kind: kindMemory, umax: math.MaxUint64},
	"hash-max-listpack-value":    memory(0),
	"hash-max-ziplist-value":     aliasOf("hash-max-listpack-value"),
	"hll-sparse-max-bytes":       memory(0),
	"maxmemory":                  {kind: kindMemory, umax: math.MaxUint64},
	"maxmemory-clients":          {kind: kindMemoryOrPercent, max: llongMax},
	"proto-max-bulk-len":         memory(mb),
	"repl-backlog-size":          memory(1),
	"stream-node-max-bytes":      memory(0),
	"zset-max-listpack-value":    memory(0),
	"zset-max-ziplist-value":     aliasOf("zset-max-listpack-value"),

	// Structured values.
	"save":                              {kind: kindSave},
	"client-output-buffer-limit":        {kind: kindClientOutputBufferLimit},
	"oom-score-adj-values":              {kind: kindOOMScoreAdjValues},
	"latency-tracking-info-percentiles": {kind: kindPercentiles},
	"notify-keyspace-events":            {kind: kindKeyspaceEvents},
	"rename-command":                    {kind: kindRenameCommand},

	// Free text Redis checks on its own.
	"aof_rewrite_cpulist": {kind: kindString},
	"bgsave_cpulist":      {kind: kindString},
	"bio_cpulist":         {kind: kindString},
	"server_cpulist":      {kind: kindString},
	"ignore-warnings":     {kind: kindString},
	"loadmodule":          {kind: kindRefused, reason: "a module is native code run inside redis-server with its rights; modules are not supported by the operator (a custom image would have to ship them and the operator's topology and backups know nothing of their data types)"},
	"proc-title-template": {kind: kindString},
	"syslog-ident":        {kind: kindString},
}

// operatorCommands are the commands the operator, redis-cli --cluster, the
// redis_exporter sidecar and Redis Cluster clients issue by name; renaming
// one (rename-command) would break them.
var operatorCommands = []string{
	"acl", "asking", "auth", "client", "cluster", "config", "dbsize", "failover",
	"hello", "info", "latency", "migrate", "ping", "readonly", "readwrite",
	"replicaof", "scan", "shutdown", "slaveof", "slowlog", "wait",
}

// keyspaceEventClasses are the class characters notify-keyspace-events accepts
// (redis.conf, "EVENT NOTIFICATION"; redis-server answers
// "Use 'Ag$lshzxeKEtmdn'").
const keyspaceEventClasses = "Ag$lshzxeKEtmdn"

// configKeyPattern is the shape of a Redis parameter name as written by the
// user: lowercase letters, digits, '-' and '_'. Redis matches names without
// regard to letter case, so "PORT" would be port: names are asked in
// lowercase so that no spelling slips past the operator-owned list.
var configKeyPattern = regexp.MustCompile(`^[a-z][a-z0-9_-]*$`)

// validateConfig checks spec.config: every key a known, lowercase Redis 7.0
// parameter the operator does not own, set once (aliases included), with a
// value of the right grammar. Unknown parameters are warnings, not errors,
// because newer Redis images know parameters 7.0 does not; Redis itself
// refuses to start on a directive it does not know.
func validateConfig(config map[string]string, p *field.Path, r *result) {
	seen := map[string]string{}
	for _, key := range slices.Sorted(maps.Keys(config)) {
		value := config[key]
		kp := p.Key(key)
		if !configKeyPattern.MatchString(key) {
			r.add(field.Invalid(kp, key, "must be a Redis parameter name in lowercase letters, digits, '-' and '_' (Redis ignores letter case, so other spellings could slip past the parameters the operator owns)"))
			continue
		}
		if strings.ContainsAny(value, "\r\n\x00") {
			// The value is left out of the message: a smuggled line may
			// well carry a password.
			r.add(field.Invalid(kp, field.OmitValueType{}, "must not contain line breaks or NUL characters: each parameter is one line of redis.conf"))
			continue
		}
		name := key
		prm, known := redisParams[key]
		if known && prm.alias != "" {
			name = prm.alias
			prm = redisParams[name]
		}
		if !known {
			if part, risky := riskyUnknownKey(key); risky {
				r.add(field.Forbidden(kp, fmt.Sprintf("%q is not a parameter this operator knows, and its name holds %q: a parameter of a newer server that names listening, announced addresses, files, credentials or code could send clients elsewhere or expose the data, so it is refused until the operator knows it", key, part)))
				continue
			}
			r.warn(kp, "%q is not a Redis 7.0 parameter; redis-server refuses to start with a directive it does not know, so make sure the image's Redis version has it", key)
			continue
		}
		if other, dup := seen[name]; dup {
			r.add(field.Invalid(kp, key, fmt.Sprintf("is the same Redis parameter as %s, which is also set", other)))
			continue
		}
		seen[name] = key
		if err := checkParam(key, prm, value); err != "" {
			if prm.kind == kindOwned || prm.kind == kindRefused || prm.kind == kindLockedOff {
				r.add(field.Forbidden(kp, err))
				continue
			}
			if prm.kind == kindEnum {
				r.add(field.NotSupported(kp, value, prm.values))
				continue
			}
			r.add(field.Invalid(kp, value, err))
		}
	}
}

// checkParam returns what is wrong with value for the parameter key, or "".
func checkParam(key string, prm param, value string) string {
	switch prm.kind {
	case kindOwned:
		return fmt.Sprintf("%s is set by the operator: %s", key, prm.reason)
	case kindRefused:
		return fmt.Sprintf("%s is refused: %s", key, prm.reason)
	case kindLockedOff:
		if !strings.EqualFold(value, "no") {
			return fmt.Sprintf("%s may only be no: %s", key, prm.reason)
		}
	case kindBool:
		if !strings.EqualFold(value, "yes") && !strings.EqualFold(value, "no") {
			return "must be yes or no"
		}
	case kindEnum:
		if !slices.ContainsFunc(prm.values, func(v string) bool { return strings.EqualFold(v, value) }) {
			return "unsupported"
		}
	case kindFlags:
		return checkFlags(prm.values, value)
	case kindInt:
		n, ok := parseRedisInt(value)
		if !ok || n < prm.min || n > prm.max {
			return fmt.Sprintf("must be an integer from %d to %d", prm.min, prm.max)
		}
	case kindMemory:
		return checkMemory(prm, value)
	case kindMemoryOrPercent:
		if pct, ok := strings.CutSuffix(value, "%"); ok {
			n, err := strconv.ParseUint(pct, 10, 64)
			if err != nil || !allDigits(pct) || n > 100 {
				return "must be a memory size (for example 100mb) or a percentage of maxmemory from 0% to 100%"
			}
			return ""
		}
		return checkMemory(prm, value)
	case kindSave:
		return checkSave(value)
	case kindClientOutputBufferLimit:
		return checkClientOutputBufferLimit(value)
	case kindOOMScoreAdjValues:
		fields := strings.Split(value, " ")
		if len(fields) != 3 {
			return "must be three integers from -2000 to 2000 (for replicas, masters and background children)"
		}
		for _, f := range fields {
			n, err := strconv.Atoi(f)
			if err != nil || n < -2000 || n > 2000 {
				return "must be three integers from -2000 to 2000 (for replicas, masters and background children)"
			}
		}
	case kindPercentiles:
		if value == "" {
			return ""
		}
		for _, f := range strings.Split(value, " ") {
			x, err := strconv.ParseFloat(f, 64)
			if err != nil || math.IsNaN(x) || x < 0 || x > 100 {
				return "must be decimal percentiles from 0 to 100 separated by single spaces (for example 50 99 99.9)"
			}
		}
	case kindKeyspaceEvents:
		for _, r := range value {
			if !strings.ContainsRune(keyspaceEventClasses, r) {
				return fmt.Sprintf("must consist of the event class characters %s", keyspaceEventClasses)
			}
		}
	case kindRenameCommand:
		return checkRenameCommand(value)
	case kindString:
	}
	return ""
}

// checkFlags checks a space-separated set of flags (shutdown-on-sigterm
// "nosave now"): at least one, each known, save and nosave not together.
func checkFlags(values []string, value string) string {
	msg := fmt.Sprintf("must be one or more of %s separated by spaces", strings.Join(values, ", "))
	words := strings.Split(value, " ")
	var save, nosave bool
	for _, w := range words {
		w = strings.ToLower(w)
		if !slices.Contains(values, w) {
			return msg
		}
		save = save || w == "save"
		nosave = nosave || w == "nosave"
	}
	if save && nosave {
		return "save and nosave cannot be used together"
	}
	return ""
}

// checkMemory checks a memory value against prm's bounds.
func checkMemory(prm param, value string) string {
	n, ok := parseMemory(value)
	if !ok {
		return "must be a memory size: a whole number of bytes, optionally followed by a unit b, k, kb, m, mb, g or gb (for example 100mb or 1gb)"
	}
	if prm.umax != 0 {
		if n > prm.umax {
			return fmt.Sprintf("must be at most %d bytes", prm.umax)
		}
		return ""
	}
	if n < uint64(prm.min) || n > uint64(prm.max) {
		return fmt.Sprintf("must be from %s to %d bytes", formatBytes(prm.min), prm.max)
	}
	return ""
}

func formatBytes(n int64) string {
	if n >= mb && n%mb == 0 {
		return fmt.Sprintf("%dmb", n/mb)
	}
	return strconv.FormatInt(n, 10)
}

// parseMemory parses a redis.conf memory value: digits, then optionally a
// unit, in any letter case: b (bytes), k (1000), kb (1024), m (1000²),
// mb (1024²), g (1000³), gb (1024³) (redis.conf, "Note on units"). Signs,
// decimals, spaces and other units are not memory values; neither is the
// empty string, which Redis reads as 0 but nobody means. ok is false above
// 2^64-1, where redis-server 7.0 silently saturates (and, for the signed
// maxmemory-clients, wraps to a percentage: kindMemoryOrPercent keeps to
// 2^63-1).
func parseMemory(value string) (uint64, bool) {
	i := 0
	for i < len(value) && value[i] >= '0' && value[i] <= '9' {
		i++
	}
	digits, unit := value[:i], strings.ToLower(value[i:])
	if digits == "" {
		return 0, false
	}
	var mul uint64
	switch unit {
	case "", "b":
		mul = 1
	case "k":
		mul = 1000
	case "kb":
		mul = 1024
	case "m":
		mul = 1000 * 1000
	case "mb":
		mul = 1024 * 1024
	case "g":
		mul = 1000 * 1000 * 1000
	case "gb":
		mul = 1024 * 1024 * 1024
	default:
		return 0, false
	}
	n, err := strconv.ParseUint(digits, 10, 64)
	if err != nil || n > math.MaxUint64/mul {
		return 0, false
	}
	return n * mul, true
}

// parseRedisInt parses an integer the way Redis's string2ll does: an
// optional minus sign and decimal digits without leading zeros ("0" alone
// is fine, "-0", "+1", "007" and " 1" are not), within 64 bits.
func parseRedisInt(value string) (int64, bool) {
	digits := strings.TrimPrefix(value, "-")
	if digits == "" || !allDigits(digits) || (digits[0] == '0' && (len(digits) > 1 || value != digits)) {
		return 0, false
	}
	n, err := strconv.ParseInt(value, 10, 64)
	return n, err == nil
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// checkSave checks save: "" (no snapshots) or pairs "<seconds> <changes>"
// with seconds ≥ 1 and changes ≥ 0 (redis.conf, "SNAPSHOTTING").
func checkSave(value string) string {
	if value == "" {
		return ""
	}
	msg := `must be "" (no snapshots) or pairs of <seconds> <changes> separated by spaces, seconds at least 1 (for example 3600 1 300 100)`
	fields := strings.Fields(value)
	if len(fields) == 0 || len(fields)%2 != 0 {
		return msg
	}
	for i, f := range fields {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil || (i%2 == 0 && n < 1) || n < 0 {
			return msg
		}
	}
	return ""
}

// checkClientOutputBufferLimit checks groups of "<class> <hard limit> <soft
// limit> <soft seconds>" where class is normal, replica (or slave) or pubsub
// and the limits are memory values (redis.conf, "CLIENTS OUTPUT BUFFER
// LIMITS").
func checkClientOutputBufferLimit(value string) string {
	if value == "" {
		return ""
	}
	msg := "must be groups of <class> <hard limit> <soft limit> <soft seconds>, class normal, replica or pubsub (for example replica 256mb 64mb 60)"
	fields := strings.Split(value, " ")
	if len(fields)%4 != 0 {
		return msg
	}
	for i := 0; i < len(fields); i += 4 {
		switch strings.ToLower(fields[i]) {
		case "normal", "replica", "slave", "pubsub":
		default:
			return msg
		}
		_, okHard := parseMemory(fields[i+1])
		_, okSoft := parseMemory(fields[i+2])
		secs, err := strconv.ParseInt(fields[i+3], 10, 64)
		if !okHard || !okSoft || err != nil || secs < 0 {
			return msg
		}
	}
	return ""
}

// checkRenameCommand checks "<command> <new-name>" (new-name "" disables
// the command) and refuses to rename a command in operatorCommands
// (redis.conf, "SECURITY": rename-command).
func checkRenameCommand(value string) string {
	fields, ok := splitConfigArgs(value)
	if !ok {
		return `must be "<command> <new-name>" as redis.conf reads it: a quote is not closed`
	}
	if len(fields) != 2 {
		return `must be "<command> <new-name>" (a new name of "" disables the command)`
	}
	cmd := strings.ToLower(fields[0])
	if slices.Contains(operatorCommands, cmd) {
		return fmt.Sprintf("%s must keep its name: the operator, the redis_exporter sidecar or Redis Cluster clients use it", strings.ToUpper(cmd))
	}
	return ""
}

// riskyKeyWords are words of a parameter's name (between dashes or
// underscores) that
// choose where the server listens or what it tells clients (Valkey 8's
// cluster-announce-client-ipv4 sends every MOVED there), which files it
// writes, which credentials it uses, or which code it runs (Redis 8's
// search-ext-load loads a shared object); a word starting with ip (ipv4,
// ipv6) counts too.
var riskyKeyWords = []string{"announce", "bind", "port", "socket", "unixsocket", "unixsocketgroup", "hostname", "addr", "address", "file", "dir", "path",
	"pass", "password", "auth", "acl", "tls", "cert", "module", "debug", "protected", "enable", "replicaof", "slaveof", "master",
	"load", "ext", "ini", "lib", "exec", "script", "so"}

// riskyUnknownKey reports whether key, a parameter not in redisParams,
// holds one of riskyKeyWords (or a word starting with ip), and which.
func riskyUnknownKey(key string) (string, bool) {
	for _, word := range strings.FieldsFunc(key, func(r rune) bool { return r == '-' || r == '_' }) {
		if slices.Contains(riskyKeyWords, word) {
			return word, true
		}
		if strings.HasPrefix(word, "ip") {
			return word, true
		}
	}
	return "", false
}

// splitConfigArgs splits a redis.conf value into arguments as redis-server
// does (sdssplitargs): words separated by spaces, "double quoted" with
// backslash escapes (\xHH, \n, \r, \t, \b, \a, else the character), or
// 'single quoted' with \' only; ok is false for an
// unclosed quote or a closing quote not followed by a space. So a rule on
// the first word judges the word Redis reads (rename-command "acl" is ACL).
func splitConfigArgs(value string) (args []string, ok bool) {
	i := 0
	for {
		for i < len(value) && (value[i] == ' ' || value[i] == '\t') {
			i++
		}
		if i == len(value) {
			return args, true
		}
		var cur strings.Builder
		switch q := value[i]; q {
		case '"', '\'':
			i++
			for {
				if i >= len(value) {
					return nil, false
				}
				c := value[i]
				if c == '\\' && q == '"' && i+3 < len(value) && value[i+1] == 'x' && isHex(value[i+2]) && isHex(value[i+3]) {
					b, _ := strconv.ParseUint(value[i+2:i+4], 16, 8)
					cur.WriteByte(byte(b))
					i += 4
					continue
				}
				if c == '\\' && i+1 < len(value) && (q == '"' || value[i+1] == '\'') {
					e := value[i+1]
					if q == '"' {
						switch e {
						case 'n':
							e = '\n'
						case 'r':
							e = '\r'
						case 't':
							e = '\t'
						case 'b':
							e = '\b'
						case 'a':
							e = '\a'
						}
					}
					cur.WriteByte(e)
					i += 2
					continue
				}
				if c == q {
					i++
					if i < len(value) && value[i] != ' ' && value[i] != '\t' {
						return nil, false
					}
					break
				}
				cur.WriteByte(c)
				i++
			}
		default:
			for i < len(value) && value[i] != ' ' && value[i] != '\t' {
				cur.WriteByte(value[i])
				i++
			}
		}
		args = append(args, cur.String())
	}
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}
