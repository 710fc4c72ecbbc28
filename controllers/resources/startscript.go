package resources

// startScript copies the rendered redis.conf to the data volume (fresh at
// every start: no earlier run's file survives; it holds no password, which
// comes from the Secret's auth.conf it includes, and the operator never runs
// CONFIG REWRITE, which would write the passwords into it), runs
// handoverScript, and execs
// redis-server with the pod's own IP as listen address and as the address
// it announces to the cluster and to its master. POD_IP comes from the
// downward API.
const startScript = `set -e
cp ` + ConfigDir + `/` + ConfigKey + ` ` + DataDir + `/redis.conf
` + authPrelude + handoverScript + `handover || true
exec redis-server ` + DataDir + `/redis.conf --bind "$POD_IP" --cluster-announce-ip "$POD_IP" --replica-announce-ip "$POD_IP"
`

// handoverMaxWaitMs bounds handover's wait for the promotion (a decimal
// string, milliseconds), so that redis-server listens before the
// liveness probe gives up on the container (15 s initial delay + 6 × 10 s).
const handoverMaxWaitMs = "45000"

// handoverScript defines handover, which keeps a master that restarted
// without its data (persistence off; or AOF with appendfsync everysec,
// which loses up to a second, and a new replication ID on a Redis 7.0
// master that restarts, so its replica would full-sync from it) from
// serving or keeping its slots with a partial dataset, and its replica
// from resyncing from it. It runs before redis-server, so the replica
// cannot reach this node meanwhile.
//
// When DataDir/nodes.conf exists and its myself line is a master that owns
// slots, handover asks each replica listed there (lines whose master field
// is this node's ID; address ip:port from ip:port@cport[,hostname]) for
// INFO replication and CLUSTER NODES, with REDISCLI_AUTH from the Secret
// and each call bounded (see authPrelude). Of those that still replicate
// this node, are not in a full sync (master_sync_in_progress:0) and have
// data (master_repl_offset > 0), it picks the one with the highest offset
// and sends it CLUSTER FAILOVER FORCE: the replica starts an election
// without the handshake with its (dead) master, and still needs the votes
// of a majority of masters, so it cannot split the cluster
// (https://redis.io/docs/latest/commands/cluster-failover/; TAKEOVER,
// which needs no votes, is never used). It waits up to 3 ×
// cluster-node-timeout (read from the rendered redis.conf, Redis's 15000
// ms default when absent), at most handoverMaxWaitMs, for the replica to
// report role master, sending FORCE again after 2 × cluster-node-timeout
// + 1 s (a master votes for a replica of the same master at most once in
// 2 × node timeout). Then redis-server starts on the old nodes.conf: the
// promoted replica's higher configEpoch claims the slots, so on the first
// gossip this node turns into its replica ("Configuration change
// detected. Reconfiguring myself as a replica of …") and full-syncs from
// it. That is what Redis 7.0.15 does; TestStartHandsOverAfterKill checks
// it. Until that first gossip (5 ms after "Ready to accept connections"
// there) this node still believes it owns the slots: a client with a
// stale slot map may read or write there, but no write is acknowledged by
// WAIT, as no replica follows it.
//
// Nothing is handed over when this node was a replica (a graceful restart
// after the preStop failover, or a replica restarting), owned no slots, or
// no replica qualifies (none listed, none reachable, all syncing or
// empty); nor when a replica already reports role master (Redis failed
// over by itself). Each case, and an election that did not finish in
// time, is printed on stderr and redis-server starts as before.
const handoverScript = `handover() {
  nodes=` + DataDir + `/nodes.conf
  [ -s "$nodes" ] || return 0
  set -- $(awk '$3 ~ /(^|,)myself(,|$)/ {
    s = 0; for (j = 9; j <= NF; j++) if (substr($j, 1, 1) != "[") s = 1
    print $1, ($3 ~ /(^|,)master(,|$)/ ? "master" : "replica"), s; exit }' "$nodes")
  [ "$2" = master ] && [ "$3" = 1 ] || return 0
  me=$1; best=""; bestoff=0
  for addr in $(awk -v me="$me" '$4 == me && $3 !~ /noaddr/ { split($2, a, "@"); print a[1] }' "$nodes"); do
    set -- $(rcli "${addr%:*}" "${addr##*:}" INFO replication | awk '` + infoAwk + `{ f[k] = v }
      END { if (f["role"] != "") print f["role"], f["master_sync_in_progress"] + 0, f["master_repl_offset"] + 0 }')
    if [ -z "$1" ]; then echo "start: replica $addr of $me does not answer" >&2; continue; fi
    if [ "$1" = master ]; then echo "start: $addr, a replica of $me, is a master already: Redis failed over" >&2; return 0; fi
    m=$(rcli "${addr%:*}" "${addr##*:}" CLUSTER NODES | awk '$3 ~ /myself/ { print $4 }')
    if [ "$m" != "$me" ]; then echo "start: $addr replicates ${m:-nothing}, not $me" >&2; continue; fi
    if [ "$2" != 0 ] || [ "$3" -le 0 ]; then echo "start: replica $addr is in a full sync or has no data (offset $3)" >&2; continue; fi
    if [ -z "$best" ] || [ "$3" -gt "$bestoff" ]; then best=$addr; bestoff=$3; fi
  done
  if [ -z "$best" ]; then echo "start: no replica of $me can take over its slots; starting on the saved nodes.conf" >&2; return 0; fi
  t=$(awk '$1 == "cluster-node-timeout" { print $2 }' ` + DataDir + `/redis.conf)
  t=${t:-15000}
  echo "start: $me restarted as a master of slots; handing them to its replica $best (offset $bestoff) with CLUSTER FAILOVER FORCE" >&2
  w=$((t * 3)); [ "$w" -le ` + handoverMaxWaitMs + ` ] || w=` + handoverMaxWaitMs + `
  i=0; n=$((w / 500)); again=$(((t * 2 + 1000) / 500))
  while [ "$i" -lt "$n" ]; do
    if [ $((i % again)) -eq 0 ]; then
      r=$(rcli "${best%:*}" "${best##*:}" CLUSTER FAILOVER FORCE)
      [ "$r" = OK ] || echo "start: CLUSTER FAILOVER FORCE on $best: ${r:-no answer}" >&2
    fi
    sleep 0.5
    if [ "$(rcli "${best%:*}" "${best##*:}" ROLE | head -n 1)" = master ]; then
      echo "start: $best took over the slots of $me" >&2; return 0
    fi
    i=$((i + 1))
  done
  echo "start: $best did not become master within $w ms; starting on the saved nodes.conf" >&2
}
`
