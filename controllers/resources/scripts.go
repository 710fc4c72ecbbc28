package resources

// The shell scripts the Redis container runs. They need only a POSIX sh,
// cp, cat, awk, sleep and redis-cli, all of which the official redis
// images (Debian based) carry. They read the password from the mounted
// Secret and hand it to redis-cli through REDISCLI_AUTH, so it never shows
// in a process's arguments.

// authPrelude exports REDISCLI_AUTH when the Secret holds a password.
const authPrelude = `p=` + AuthDir + `/` + PasswordKey + `
if [ -s "$p" ]; then REDISCLI_AUTH="$(cat "$p")"; export REDISCLI_AUTH; fi
`

// startScript copies the rendered redis.conf to the data volume (CONFIG
// REWRITE needs a writable file next to a writable directory; the
// ConfigMap mount is read-only) and execs redis-server with the pod's own
// IP as listen address and as the address it announces to the cluster and
// to its master. POD_IP comes from the downward API.
const startScript = `set -e
cp ` + ConfigDir + `/` + ConfigKey + ` ` + DataDir + `/redis.conf
exec redis-server ` + DataDir + `/redis.conf --bind "$POD_IP" --cluster-announce-ip "$POD_IP" --replica-announce-ip "$POD_IP"
`

// readinessScript succeeds when the node answers PING with PONG (not
// LOADING, not an auth error).
const readinessScript = authPrelude + `r="$(redis-cli -h "$POD_IP" -p 6379 ping)" && [ "$r" = PONG ]
`

// preStopScript runs before the container gets SIGTERM. On a master with a
// connected, healthy replica it asks that replica for CLUSTER FAILOVER (a
// planned failover: the replica catches up with the master's offset before
// taking over; Redis Cluster specification, "Manual failover") and waits up
// to 10 s for this node to become a replica. It always exits 0 so a failed
// attempt never blocks the pod's termination. The operator does its own
// planned failover before it deletes a master (rolling updates); this hook
// covers deletions the operator did not start (drains, kubectl delete).
const preStopScript = authPrelude + `cli() { redis-cli -h "$POD_IP" -p 6379 "$@"; }
[ "$(cli ROLE | head -n 1)" = master ] || exit 0
id="$(cli CLUSTER MYID)"
target="$(cli CLUSTER REPLICAS "$id" | awk '$3 !~ /fail/ && $8 == "connected" { split($2, a, "@"); print a[1]; exit }')"
[ -n "$target" ] || exit 0
redis-cli -h "${target%:*}" -p "${target##*:}" CLUSTER FAILOVER >/dev/null 2>&1 || exit 0
i=0
while [ "$i" -lt 20 ]; do
  [ "$(cli ROLE | head -n 1)" = slave ] && exit 0
  sleep 0.5
  i=$((i + 1))
done
exit 0
`
