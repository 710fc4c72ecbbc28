package resources

// The shell scripts the Redis container runs. They need only a POSIX sh,
// cp, cat, awk, head, sleep and redis-cli, all of which the official redis
// images (Debian based) carry, and bound each redis-cli call with
// timeout(1) when the image has it (coreutils; busybox in Alpine). They
// read the password from the mounted Secret and hand it to redis-cli
// through REDISCLI_AUTH, so it never shows in a process's arguments.

// authPrelude exports REDISCLI_AUTH when the Secret holds a password (its
// first line, read by the shell itself: no cat process, which matters for
// the readiness probe that runs every few seconds), and defines rcli HOST
// PORT ARGS...: redis-cli against HOST:PORT, its errors dropped and, where
// timeout(1) exists, killed after 3 s, so a hung node cannot stall a
// script. read fails on a last line without a newline (the Secret's value
// has none) after setting the variable, hence the || : under set -e.
const authPrelude = `p=` + AuthDir + `/` + PasswordKey + `
if [ -s "$p" ]; then IFS= read -r REDISCLI_AUTH < "$p" || :; export REDISCLI_AUTH; fi
rcli() { _h=$1; _p=$2; shift 2
  if command -v timeout >/dev/null 2>&1; then timeout 3 redis-cli -h "$_h" -p "$_p" "$@" 2>/dev/null; else redis-cli -h "$_h" -p "$_p" "$@" 2>/dev/null; fi
}
`

// infoAwk is the start of an awk program over redis-cli INFO output: it
// strips the CR of each line and splits it at the first colon into k and
// v (values may hold colons, such as IPv6 addresses).
const infoAwk = `{ sub(/\r$/, ""); i = index($0, ":"); k = substr($0, 1, i - 1); v = substr($0, i + 1) }
`

// readinessScript succeeds when the node can serve its role, judged from
// INFO replication persistence (https://redis.io/docs/latest/commands/info/;
// several sections in one call since Redis 7.0): a master when it answers
// and is not loading its dataset (loading:0); a replica only when, in
// addition, its link to its master is up (master_link_status:up) and it is
// not in a full sync (master_sync_in_progress:0). So a replica whose master
// is gone, or that is still copying the dataset, is not Ready, and the
// shard's PDB keeps a drain from evicting its master meanwhile. An error
// reply (NOAUTH) or no answer fails the probe. The fields are matched at
// the start of a line (async_loading:0 is not loading:0) by the shell's
// own case, so a probe runs sh, timeout and redis-cli and nothing else:
// it runs every 5 s in every pod, and the awk and cat it ran before cost
// 38% of its CPU time (measured on a quiet 2-core machine against a local
// redis-server: 29 ms of CPU per probe before, 18 ms after, most of it
// process start-up).
const readinessScript = authPrelude + `i="$(rcli "$POD_IP" 6379 INFO replication persistence)"
n='
'
case $i in *"${n}loading:0"*) ;; *) exit 1 ;; esac
case $i in *"${n}role:master"*) exit 0 ;; *"${n}role:slave"*) ;; *) exit 1 ;; esac
case $i in *"${n}master_link_status:up"*) ;; *) exit 1 ;; esac
case $i in *"${n}master_sync_in_progress:0"*) exit 0 ;; esac
exit 1
`

// preStopMaxLag is how many bytes (a decimal string) of the master's
// replication stream (master_repl_offset) a replica may not yet have
// acknowledged for the preStop hook to still hand over to it: the default
// repl-backlog-size. A replica acknowledges its offset every second
// (REPLCONF ACK), so one under a steady write load always trails by up to
// a second of writes; CLUSTER FAILOVER then pauses the master's clients
// until the replica has caught up with the rest.
const preStopMaxLag = "1048576"

// preStopScript runs before the container gets SIGTERM. On a master it
// picks the in-sync replica with the highest offset among those the
// master's INFO replication lists (slaveN:ip=…,port=…,state=online,
// offset=…) whose offset is within preStopMaxLag of the master's
// master_repl_offset, asks it for CLUSTER FAILOVER (a planned failover:
// the replica catches up with the master's offset before taking over;
// Redis Cluster specification, "Manual failover") and waits up to 10 s
// for this node to become a replica. With no such replica (none, or one in
// a full sync, lagging or hung) it exits 0 without a failover: Redis's
// shutdown-timeout then lets the replicas catch up before the master stops.
// It always exits 0 so a failed attempt never blocks the pod's
// termination. The operator does its own planned failover before it
// deletes a master (rolling updates); this hook covers deletions the
// operator did not start (drains, kubectl delete).
const preStopScript = authPrelude + `cli() { rcli "$POD_IP" 6379 "$@"; }
[ "$(cli ROLE | head -n 1)" = master ] || exit 0
target="$(cli INFO replication | awk -v maxlag=` + preStopMaxLag + ` '` + infoAwk + `k == "master_repl_offset" { mo = v + 0 }
k ~ /^slave[0-9]+$/ {
  n = split(v, kv, ","); ip = ""; port = ""; state = ""; off = -1
  for (j = 1; j <= n; j++) {
    e = index(kv[j], "="); name = substr(kv[j], 1, e - 1); val = substr(kv[j], e + 1)
    if (name == "ip") ip = val; else if (name == "port") port = val
    else if (name == "state") state = val; else if (name == "offset") off = val + 0
  }
  if (state == "online") { c++; ips[c] = ip; ports[c] = port; offs[c] = off }
}
END {
  best = 0
  for (j = 1; j <= c; j++) if (offs[j] > 0 && offs[j] + maxlag >= mo && (best == 0 || offs[j] > offs[best])) best = j
  if (best) print ips[best] ":" ports[best]
}')"
[ -n "$target" ] || exit 0
[ "$(rcli "${target%:*}" "${target##*:}" CLUSTER FAILOVER)" = OK ] || exit 0
i=0
while [ "$i" -lt 20 ]; do
  [ "$(cli ROLE | head -n 1)" = slave ] && exit 0
  sleep 0.5
  i=$((i + 1))
done
exit 0
`
