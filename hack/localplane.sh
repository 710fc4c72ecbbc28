#!/usr/bin/env bash
# The local control plane (test/localplane) for people: the demo and a
# plane to explore with kubectl.
#
#   hack/localplane.sh demo      set up, run a 3x1 Redis Cluster, show it, stop everything on Ctrl-C
#   hack/localplane.sh dev-up    start the plane and the operator in the background and return
#   hack/localplane.sh dev-down  stop what dev-up started
#
# Needs root (pods get their own mount namespaces and users) and Go. The
# first run installs missing Debian packages (hack/deps.sh) and builds the
# Kubernetes binaries the plane runs into bin/ (hack/build-tools.sh, about 15
# minutes on 2 cores). State lives in .localplane/<demo|dev>/ (LOCALPLANE_STATE_DIR
# overrides it); dev-up keeps it across restarts, demo starts afresh.
#
# The operator serves its conversion and validating webhooks on
# 127.0.0.1:9443 (LOCALPLANE_WEBHOOK_PORT) and its health probes on
# 127.0.0.1:8081 (LOCALPLANE_PROBE_PORT); the API server calls the webhooks
# at https://localhost:<port> (test/localplane/manifests/webhooks).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=${BIN:-$ROOT/bin}
EXAMPLE=$ROOT/examples/rediscluster.yaml
# The CRD with its conversion webhook and the ValidatingWebhookConfiguration,
# both with url clientConfigs on https://localhost:9443.
WEBHOOK_MANIFESTS=$ROOT/test/localplane/manifests/webhooks
WEBHOOK_PORT=${LOCALPLANE_WEBHOOK_PORT:-9443}
PROBE_PORT=${LOCALPLANE_PROBE_PORT:-8081}
# The operator's namespace: its self-managed webhook certificate Secret
# lives there (the operator's default --webhook-namespace).
OPERATOR_NAMESPACE=redis-operator-system

say() { printf '\n==> %s\n' "$*"; }
die() { printf 'localplane.sh: %s\n' "$*" >&2; exit 1; }

setup() {
  [ "$(id -u)" -eq 0 ] || die "run as root: pods run in their own mount namespaces as their own users"
  command -v go >/dev/null || die "Go 1.26 must be on the PATH"
  say "Debian packages"
  bash "$ROOT/hack/deps.sh"
  say "Kubernetes binaries (first time: about 15 minutes on 2 cores)"
  # Only what the plane runs (make tools builds the test-only tools too).
  bash "$ROOT/hack/build-tools.sh" etcd kube-apiserver kube-controller-manager kube-proxy kube-scheduler kubectl ${SETUP_EXTRA_TOOLS:-}
  # bin/kubectl matches the API server's release (Debian's warns about the skew).
  export PATH="$BIN:$PATH"
  say "Building the local plane and the operator"
  bash "$ROOT/hack/heartbeat.sh" "building bin/localplane" go -C "$ROOT/test/localplane" build -o "$BIN/localplane" ./cmd/localplane
  bash "$ROOT/hack/heartbeat.sh" "building bin/redis-operator" go -C "$ROOT" build -o "$BIN/redis-operator" ./cmd/redis-operator
}

# start_plane DIR [detach]: starts `localplane up` on DIR and waits until it
# is ready. Detached, it outlives this script (dev-up).
start_plane() {
  local dir=$1 detach=${2:-}
  mkdir -p "$dir/logs"
  say "Starting the local control plane in $dir"
  if [ -n "$detach" ]; then
    setsid "$BIN/localplane" up --state-dir "$dir" --bin-dir "$BIN" >"$dir/logs/localplane.out" 2>&1 < /dev/null &
  else
    "$BIN/localplane" up --state-dir "$dir" --bin-dir "$BIN" >"$dir/logs/localplane.out" 2>&1 &
  fi
  PLANE_PID=$!
  "$BIN/localplane" wait --state-dir "$dir" --timeout 3m || { cat "$dir/logs/localplane.out" >&2; return 1; }
  export KUBECONFIG=$dir/kubeconfig
  kubectl get nodes
}

install_crds() {
  say "Installing the RedisCluster CRD and the webhooks (at https://localhost:$WEBHOOK_PORT)"
  # The operator runs as a local process, not behind an in-cluster Service
  # (Services have no endpoints on the plane): the API server calls it at
  # https://localhost:<port>. The operator injects its CA into both objects;
  # a server-side apply leaves that caBundle alone.
  kubectl kustomize "$WEBHOOK_MANIFESTS" |
    sed "s#https://localhost:9443/#https://localhost:$WEBHOOK_PORT/#" |
    kubectl apply --server-side -f -
  wait_established redisclusters.cache.redis.io 60
  kubectl create namespace "$OPERATOR_NAMESPACE" --dry-run=client -o yaml | kubectl apply --server-side -f -
}

# wait_established CRD [SECONDS]: polls until the CRD's Established
# condition is True (60 s by default), and fails naming what it last saw.
# Not `kubectl wait --for=condition=Established`: right after the apply the
# API server may not have written the CRD's status yet, and kubectl wait
# then fails at once (".status.conditions accessor error: <nil>").
wait_established() {
  local crd=$1 timeout=${2:-60} start=$SECONDS seen=
  while :; do
    if seen=$(kubectl get "crd/$crd" -o jsonpath='{.status.conditions[?(@.type=="Established")].status}' 2>&1); then
      [ "$seen" = True ] && return 0
      seen="Established is ${seen:-not reported yet}"
    fi
    ((SECONDS - start < timeout)) || die "CRD $crd is not Established after ${timeout}s ($seen)"
    sleep 0.5
  done
}

# start_operator DIR [detach]: runs the operator as a local process with
# the plane's kubeconfig; its log is DIR/logs/operator.log.
start_operator() {
  local dir=$1 detach=${2:-}
  say "Starting the operator (log: $dir/logs/operator.log)"
  # Webhooks on loopback, with a self-managed certificate for localhost
  # (the name in the webhooks' url clientConfigs).
  local args=(--kubeconfig "$dir/kubeconfig" --leader-elect=false
    --webhook-host=localhost --webhook-bind-address="127.0.0.1:$WEBHOOK_PORT"
    --webhook-namespace="$OPERATOR_NAMESPACE"
    --metrics-bind-address=0 --health-probe-bind-address="127.0.0.1:$PROBE_PORT")
  if [ -n "$detach" ]; then
    setsid "$BIN/redis-operator" "${args[@]}" >"$dir/logs/operator.log" 2>&1 < /dev/null &
  else
    "$BIN/redis-operator" "${args[@]}" >"$dir/logs/operator.log" 2>&1 &
  fi
  OPERATOR_PID=$!
  echo "$OPERATOR_PID" >"$dir/operator.pid"
  wait_operator_ready "$dir"
}

# readyz prints the HTTP status line of the operator's /readyz (bash's
# /dev/tcp: no HTTP client needed).
readyz() {
  local line
  exec 3<>"/dev/tcp/127.0.0.1/$PROBE_PORT" || return 1
  printf 'GET /readyz HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3
  IFS= read -r -t 5 line <&3 || true
  exec 3>&- 3<&-
  printf '%s\n' "${line%$'\r'}"
}

# wait_operator_ready DIR: waits until the operator's /readyz passes (its
# webhook certificate issued and its CA injected into the CRD and the
# ValidatingWebhookConfiguration), then until the API server admits a
# RedisCluster through both webhooks (a server-side dry run of the
# example: validation, and conversion to the stored v1beta1).
wait_operator_ready() {
  local dir=$1 status=
  say "Waiting for the operator's webhooks (readiness on 127.0.0.1:$PROBE_PORT/readyz)"
  for _ in $(seq 240); do
    kill -0 "$OPERATOR_PID" 2>/dev/null || { tail -20 "$dir/logs/operator.log" >&2; die "the operator exited at start"; }
    status=$(readyz 2>/dev/null) || status=
    case $status in *" 200"*) break ;; esac
    sleep 0.5
  done
  case $status in *" 200"*) ;; *)
    tail -20 "$dir/logs/operator.log" >&2
    die "the operator is not ready after 2 minutes (/readyz: ${status:-no answer})" ;;
  esac
  for _ in $(seq 60); do
    if kubectl apply --dry-run=server -f "$EXAMPLE" >/dev/null 2>"$dir/logs/webhook-check.err"; then
      echo "The operator is ready; the API server reaches its webhooks."
      return 0
    fi
    sleep 0.5
  done
  cat "$dir/logs/webhook-check.err" >&2
  die "the API server cannot reach the operator's webhooks"
}

# stop_operator DIR: SIGTERM to the operator recorded in DIR, SIGKILL after 30 s.
stop_operator() {
  local dir=$1 pid
  [ -f "$dir/operator.pid" ] || return 0
  pid=$(cat "$dir/operator.pid")
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$dir/operator.pid"
}

# first_pod_ip prints the IP of the example's first running Redis pod.
first_pod_ip() {
  kubectl get pods -l app.kubernetes.io/instance=example -o jsonpath='{.items[0].status.podIP}'
}

demo() {
  # Global: the EXIT trap runs after this function has returned.
  DEMO_DIR=${LOCALPLANE_STATE_DIR:-$ROOT/.localplane/demo}
  local dir=$DEMO_DIR
  setup
  if [ -f "$dir/localplane.pid" ]; then "$BIN/localplane" down --state-dir "$dir"; fi
  rm -rf "$dir"
  cleanup() {
    trap - INT TERM EXIT
    say "Stopping the operator and the local plane"
    stop_operator "$DEMO_DIR"
    "$BIN/localplane" down --state-dir "$DEMO_DIR"
    echo "Stopped; nothing is left running."
  }
  trap cleanup EXIT
  trap 'stopped_on_request "Ctrl-C"' INT TERM
  start_plane "$dir"
  install_crds
  start_operator "$dir"

  say "Creating the example RedisCluster (3 shards x 1 replica)"
  kubectl apply -f "$EXAMPLE"
  if ! kubectl wait --for=condition=Ready --timeout=10m rediscluster/example; then
    kubectl get rediscluster example -o yaml >&2 || true
    tail -30 "$dir/logs/operator.log" >&2
    die "the RedisCluster did not become Ready"
  fi

  say "kubectl get redisclusters, and where each shard's pods run (status.shards)"
  kubectl get redisclusters
  kubectl get rediscluster example -o jsonpath='{range .status.shards[*]}{.name}: master {.masterPod} on {.masterNode}, replicas {.replicaPods} on {.replicaNodes}{"\n"}{end}'
  kubectl get pods -o wide
  local ip
  ip=$(first_pod_ip)
  # The operator generated the password (no spec.auth): clients read it from
  # the Secret it owns; REDISCLI_AUTH keeps it off redis-cli's command line.
  REDISCLI_AUTH=$(kubectl get secret example-auth -o jsonpath='{.data.password}' | base64 -d)
  export REDISCLI_AUTH
  say "The password is in Secret example-auth (generated by the operator)"
  say "CLUSTER INFO (from $ip)"
  redis-cli -h "$ip" cluster info
  say "CLUSTER NODES"
  redis-cli -h "$ip" cluster nodes
  say "A write and a read through a cluster-aware client (redis-cli -c follows MOVED)"
  redis-cli -c -h "$ip" set demo:greeting "hello from the local plane"
  redis-cli -c -h "$ip" get demo:greeting

  cat <<EOF

The cluster is running. In another shell:
  export KUBECONFIG=$dir/kubeconfig PATH=$BIN:\$PATH   # bin/kubectl matches the API server
  kubectl get redisclusters,pods
  export REDISCLI_AUTH=\$(kubectl get secret example-auth -o jsonpath='{.data.password}' | base64 -d)
  redis-cli -c -h $ip            # any pod IP above works
Logs: $dir/logs (operator.log, node.log, kube-apiserver.log, ...).
Press Ctrl-C to stop everything.
EOF
  await_demo_end "$dir"
}

# stopped_on_request WHAT: the user stopped the demo (an interrupt is a
# clean stop): stops the operator and the plane quietly (their output to
# logs/stop.log), says so in one line and exits 0.
stopped_on_request() {
  trap - INT TERM EXIT
  mkdir -p "$DEMO_DIR/logs"
  stop_operator "$DEMO_DIR" >>"$DEMO_DIR/logs/stop.log" 2>&1 || true
  "$BIN/localplane" down --state-dir "$DEMO_DIR" >>"$DEMO_DIR/logs/stop.log" 2>&1 || true
  printf '\n%s: stopped everything the demo started (the operator, the local plane); nothing is left running.\n' "$1"
  exit 0
}

# await_demo_end DIR: returns only by exiting, once the plane or the
# operator has stopped. Both exit 0 only when told to stop (SIGINT or
# SIGTERM): a Ctrl-C that reached them but not this shell (started with
# SIGINT ignored, it cannot trap it) or a `localplane down` is a clean stop.
# Any other exit is unexpected: an error naming the logs.
await_demo_end() {
  local dir=$1 which pid status=0
  while kill -0 "$PLANE_PID" 2>/dev/null && kill -0 "$OPERATOR_PID" 2>/dev/null; do sleep 1; done
  if kill -0 "$PLANE_PID" 2>/dev/null; then
    which="the operator" pid=$OPERATOR_PID
  else
    which="the local plane" pid=$PLANE_PID
  fi
  wait "$pid" 2>/dev/null || status=$?
  if [ "$status" -eq 0 ]; then stopped_on_request "Stopped ($which was told to stop)"; fi
  die "$which exited unexpectedly (status $status); see $dir/logs"
}

dev_up() {
  local dir=${LOCALPLANE_STATE_DIR:-$ROOT/.localplane/dev}
  setup
  if "$BIN/localplane" wait --state-dir "$dir" --timeout 1s >/dev/null 2>&1; then
    die "a plane already runs in $dir; stop it with hack/localplane.sh dev-down"
  fi
  start_plane "$dir" detach
  install_crds
  stop_operator "$dir"
  start_operator "$dir" detach
  cat <<EOF

The local plane and the operator run in the background.
  export KUBECONFIG=$dir/kubeconfig PATH=$BIN:\$PATH   # bin/kubectl matches the API server
  kubectl apply -f examples/rediscluster.yaml
  kubectl get redisclusters,pods -o wide
Logs: $dir/logs. Stop with: make dev-down (or hack/localplane.sh dev-down).
EOF
}

dev_down() {
  local dir=${LOCALPLANE_STATE_DIR:-$ROOT/.localplane/dev}
  stop_operator "$dir"
  if [ -x "$BIN/localplane" ]; then
    "$BIN/localplane" down --state-dir "$dir"
  else
    go -C "$ROOT/test/localplane" run ./cmd/localplane down --state-dir "$dir"
  fi
  echo "Stopped the plane in $dir (its state stays; dev-up resumes it)."
}

# Sourced (hack/gitops-demo.sh), it only defines the functions above.
if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
  case ${1:-} in
    demo) demo ;;
    dev-up) dev_up ;;
    dev-down) dev_down ;;
    *) echo "usage: $0 demo|dev-up|dev-down" >&2; exit 2 ;;
  esac
fi
