package resources

// startScript copies the rendered redis.conf to the data volume (fresh at
// every start: no earlier run's file survives; it holds no password, which
// comes from the Secret's auth.conf it includes, and the operator never runs
// CONFIG REWRITE, which would write the passwords into it), runs
// handoverScript, and execs
// redis-server with the pod's own IP as listen address and as the address
// it announces to the cluster and to its master. POD_IP comes from the
// downward API. When handover returns handoverRefused, the script exits 1
// without starting redis-server, and the kubelet restarts the container.
const startScript = `set -e
cp ` + ConfigDir + `/` + ConfigKey + ` ` + DataDir + `/redis.conf
` + authPrelude + handoverScript + `handover || { s=$?; [ "$s" != ` + handoverRefused + ` ] || exit 1; }
exec redis-server ` + DataDir + `/redis.conf --bind "$POD_IP" --cluster-announce-ip "$POD_IP" --replica-announce-ip "$POD_IP"
`

// handoverMaxWaitMs bounds handover's wait for one of its replicas to be
// elected (a decimal string, milliseconds; the HANDOVER_WAIT_MS variable
// overrides it, which only tests do). The container's startup probe
// (startupProbeBudget) allows a minute more, so the script, not the probe,
// ends a wait that is too long.
const handoverMaxWaitMs = "300000"

// HandoverRefusedMarker is in the line the start script prints when it does
// not start redis-server because no replica won the handover's election;
// the container's termination message (its log's tail, with
// FallbackToLogsOnError) then holds it, and the operator's status names
// the refusal.
const HandoverRefusedMarker = "not starting redis-server"

// handoverRefused is handover's exit status (a decimal string) when it
// refuses to start an empty master over a replica that holds the shard's
// data.
const handoverRefused = "3"

// handoverScript defines handover (and handover_none, its give-up line),
// which keeps a master that restarted without its data (persistence off;
// or AOF with appendfsync everysec, which loses up to a second, and a new
// replication ID on a Redis 7.0 master that restarts, so its replica would
// full-sync from it) from serving or keeping its slots with a partial
// dataset, and its replica from resyncing from it. It runs before
// redis-server, so the replica cannot reach this node meanwhile.
//
// When DataDir/nodes.conf exists and its myself line is a master that owns
// slots, handover asks each replica listed there (lines whose master field
// is this node's ID; address ip:port from ip:port@cport[,hostname]), and
// each node listed as a master without slots, for INFO replication and
// CLUSTER NODES, with REDISCLI_AUTH from the Secret and each call bounded
// (see authPrelude). The second kind matters: a master learns that a node
// became its replica only from a packet that node sends, up to half a node
// timeout after CLUSTER REPLICATE, and saves nodes.conf then, so a master
// killed right after its replica synced (at once with
// repl-diskless-sync-max-replicas) still lists it as an empty master.
// When nodes.conf lists no replica of this node, handover also asks each
// other master with slots listed there for CLUSTER NODES and takes every
// node without slots it names as a candidate too: a node saves nodes.conf
// without the peers whose handshake is not done, and a replica syncs from
// its master before that, while the other masters may not have heard yet
// that it is a replica (seen under CI load three seconds after the cluster
// formed: the start went on without the replica, and 520 acknowledged
// writes were lost). Of
// those whose own CLUSTER NODES says they replicate this node, are not in
// a full sync (master_sync_in_progress:0) and have
// data (master_repl_offset > 0), it picks the one with the highest offset
// and sends it CLUSTER FAILOVER FORCE: the replica starts an election
// without the handshake with its (dead) master, and still needs the votes
// of a majority of masters, so it cannot split the cluster
// (https://redis.io/docs/latest/commands/cluster-failover/; TAKEOVER,
// which needs no votes, is never used). Every 0.5 s it asks each of those
// replicas for ROLE, and it is done as soon as one reports master: the one
// it asked, or another that Redis elected by itself once the cluster
// flagged this node as failed. Before each FORCE it waits, at most one
// node timeout, until every other master with slots that answers lists
// the replica as a replica in its CLUSTER NODES: a master still seeing a
// master there refuses its vote ("it is a master node"), and the replica
// then does not stand again for 2 × max(2 × node timeout, 2 s), its
// failover retry time in Redis 7.0's cluster.c (measured: 20 s lost with
// the 5 s timeout). Every retry time plus 0.5 s it picks again and sends
// FORCE again (the node timeout is read from the rendered redis.conf,
// Redis's 15000 ms default when absent); it picks again at once when FORCE
// got no answer at all: the replica is gone (a pod restarting on a new
// address, as when every pod of the cluster is deleted at once), and
// asking its old address again would only wait. Every wait is measured by
// the clock (date +%s), not by counting polls, since a poll of an address
// that does not answer takes rcli's 3 s, and counts towards
// handoverMaxWaitMs, so the whole handover stays within it.
// Then redis-server starts on the old nodes.conf: the promoted replica's
// higher configEpoch claims the slots, so on the first gossip this node
// turns into its replica ("Configuration change detected. Reconfiguring
// myself as a replica of …") and full-syncs from it. That is what Redis
// 7.0.15 does; TestStartHandsOverAfterKill checks it. Until that first
// gossip (5 ms after "Ready to accept connections" there) this node still
// believes it owns the slots: a client with a stale slot map may read or
// write there, but no write is acknowledged by WAIT, as no replica
// follows it.
//
// No replica is elected while a majority of the masters is down (two of
// three masters restarting at once): then, after handoverMaxWaitMs, it
// says so and returns handoverRefused, and redis-server does not start:
// starting would make the replica, the only copy of the shard's
// acknowledged writes, full-sync this node's empty dataset. The kubelet
// restarts the container and the handover runs again; the way out when
// the masters cannot come back is CLUSTER FAILOVER TAKEOVER on the
// replica (docs/troubleshooting.md).
//
// When no candidate qualifies but one did not answer (INFO, or CLUSTER
// NODES, within rcli's 3 s), it asks all of them again every second for
// up to twice the node timeout (at least 2 s, at most handoverMaxWaitMs),
// counted from its start, and says so once (each candidate's own line is
// printed in the first round only): a replica starved on a loaded node
// answers late, and starting on the saved nodes.conf then would make it
// full-sync this node's empty dataset. The wait also gives the cluster a
// node timeout to flag this node failed and elect a live replica by
// itself; that replica then has the higher configEpoch, and this node
// turns into its replica on the first gossip. A replica in a full sync is
// not waited for: its source is this node, which is down. The price: a
// node listed as a master without slots (it may be this node's replica,
// which it had not heard of yet) that is gone for good delays this start
// by that wait, though no replica holds the data then.
//
// Nothing is handed over when this node was a replica (a graceful restart
// after the preStop failover, or a replica restarting), owned no slots, or
// no replica qualifies after that wait (none listed, none reachable, all
// syncing or empty): the data this node lost exists nowhere else; nor when
// a replica already reports role master (Redis failed over by itself). Each
// case is printed on stderr, ending with one line that names every
// candidate skipped and why (unanswered, a master, a replica of another
// node, in a full sync or no data), and redis-server starts as before.
const handoverScript = `handover_none() {
  echo "start: no replica of $me can take over its slots${unsure:+ (unanswered:$unsure)}${others:+ (skipped:$others)}; starting on the saved nodes.conf" >&2
}
handover() {
  nodes=` + DataDir + `/nodes.conf
  [ -s "$nodes" ] || return 0
  set -- $(awk '$3 ~ /(^|,)myself(,|$)/ {
    s = 0; for (j = 9; j <= NF; j++) if (substr($j, 1, 1) != "[") s = 1
    print $1, ($3 ~ /(^|,)master(,|$)/ ? "master" : "replica"), s; exit }' "$nodes")
  [ "$2" = master ] && [ "$3" = 1 ] || return 0
  me=$1
  cands=$(awk -v me="$me" '$3 !~ /myself|noaddr|handshake/ && ($4 == me || ($3 ~ /master/ && NF == 8)) {
    split($2, a, "@"); print a[1] "," ($4 == me) }' "$nodes")
  t=$(awk '$1 == "cluster-node-timeout" { print $2 }' ` + DataDir + `/redis.conf)
  t=${t:-15000}
  w=${HANDOVER_WAIT_MS:-` + handoverMaxWaitMs + `}
  retry=$((t * 2)); [ "$retry" -ge 2000 ] || retry=2000
  patience=$(((t * 2 + 999) / 1000)); [ "$patience" -ge 2 ] || patience=2; [ "$patience" -le $((w / 1000)) ] || patience=$((w / 1000))
  i=0; n=$((w / 500)); again=$(((retry * 2 + 500) / 500)); pick=0; best=""; said=""; handed=""; unsure=""; others=""; t0=$(date +%s)
  masters=$(awk '$3 ~ /master/ && $3 !~ /myself|fail|noaddr|handshake/ && NF > 8 { split($2, a, "@"); print a[1] }' "$nodes")
  if ! printf '%s\n' $cands | grep -q ',1$'; then
    added=""
    for a in $masters; do
      for r in $(rcli "${a%:*}" "${a##*:}" CLUSTER NODES | awk -v me="$me" '$1 != me && $3 !~ /fail|noaddr|handshake/ && NF == 8 {
        split($2, x, "@"); print x[1] "," ($4 == me) }'); do
        printf '%s\n' $cands | grep -q "^${r%,*}," && continue
        cands="$cands $r"; added="$added ${r%,*}"
      done
    done
    [ -z "$added" ] || echo "start: nodes.conf lists no replica of $me; asking the nodes without slots that the other masters know:$added" >&2
  fi
  while [ "$i" -lt "$n" ]; do
    if [ "$i" -ge "$pick" ]; then
      best=""; bestoff=0; followers=""; unsure=""; others=""
      for c in $cands; do
        addr=${c%,*}; listed=${c##*,}
        set -- $(rcli "${addr%:*}" "${addr##*:}" INFO replication | awk '` + infoAwk + `{ f[k] = v }
          END { if (f["role"] != "") print f["role"], f["master_sync_in_progress"] + 0, f["master_repl_offset"] + 0 }')
        if [ -z "$1" ]; then
          unsure="$unsure $addr (no answer)"
          [ "$listed" = 0 ] || [ -n "$said" ] || echo "start: replica $addr of $me does not answer" >&2; continue
        fi
        if [ "$1" = master ]; then
          if [ "$listed" = 0 ]; then others="$others $addr (a master)"; continue; fi
          echo "start: $addr, a replica of $me, is a master already: Redis failed over" >&2; return 0
        fi
        m=$(rcli "${addr%:*}" "${addr##*:}" CLUSTER NODES | awk '$3 ~ /myself/ { print $4 }')
        if [ -z "$m" ]; then unsure="$unsure $addr (no CLUSTER NODES)"; fi
        if [ "$m" != "$me" ]; then
          [ -z "$m" ] || others="$others $addr (replicates $m)"
          [ "$listed" = 0 ] || [ -n "$said" ] || echo "start: $addr replicates ${m:-nothing}, not $me" >&2; continue
        fi
        followers="$followers $addr"
        if [ "$2" != 0 ] || [ "$3" -le 0 ]; then
          others="$others $addr (in a full sync or no data)"
          [ -n "$said" ] || echo "start: replica $addr is in a full sync or has no data (offset $3)" >&2; continue
        fi
        if [ -z "$best" ] || [ "$3" -gt "$bestoff" ]; then best=$addr; bestoff=$3; fi
      done
      if [ -z "$best" ] && [ -n "$unsure" ] && [ "$(($(date +%s) - t0))" -lt "$patience" ]; then
        [ -n "$said" ] || echo "start: no replica of $me qualifies yet:$unsure; asking again for up to $patience s" >&2
        said=1; sleep 1; i=$((($(date +%s) - t0) * 2)); continue
      fi
      if [ -z "$best" ]; then handover_none; return 0; fi
      if [ -z "$handed" ]; then
        handed=1; echo "start: $me restarted as a master of slots; handing them to its replica $best (offset $bestoff) with CLUSTER FAILOVER FORCE" >&2
      fi
      j=0; jend=$(($(date +%s) + (t + 999) / 1000))
      while [ "$(date +%s)" -lt "$jend" ]; do
        unaware=""
        for a in $masters; do
          f=$(rcli "${a%:*}" "${a##*:}" CLUSTER NODES | awk -v b="$best" 'index($2, b "@") == 1 { print $3 }')
          case "$f" in *slave*|"") ;; *) unaware="$unaware $a" ;; esac
        done
        [ -n "$unaware" ] || break
        [ "$j" -gt 0 ] || echo "start: waiting up to $t ms for$unaware to learn that $best is a replica (a master that sees it as a master refuses its election)" >&2
        sleep 0.5; j=$((j + 1))
      done
      ok=$(rcli "${best%:*}" "${best##*:}" CLUSTER FAILOVER FORCE)
      i=$((($(date +%s) - t0) * 2)); pick=$((i + again))
      if [ "$ok" != OK ]; then
        echo "start: CLUSTER FAILOVER FORCE on $best: ${ok:-no answer}" >&2
        [ -n "$ok" ] || pick=$i
      fi
    fi
    sleep 0.5
    for addr in $followers; do
      if [ "$(rcli "${addr%:*}" "${addr##*:}" ROLE | head -n 1)" = master ]; then
        echo "start: $addr took over the slots of $me" >&2; return 0
      fi
    done
    i=$((($(date +%s) - t0) * 2))
  done
  if [ -z "$best" ]; then handover_none; return 0; fi
  echo "start: no replica of $me was elected within $w ms (a majority of the masters must vote), and $best holds the shard's data: ` + HandoverRefusedMarker + `, which would make it full-sync an empty dataset; the container exits and the handover runs again at its restart" >&2
  return ` + handoverRefused + `
}
`
