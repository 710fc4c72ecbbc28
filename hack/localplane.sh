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
# Kubernetes binaries into bin/ (hack/build-tools.sh, about 6 minutes on 2
# cores). State lives in .localplane/<demo|dev>/ (LOCALPLANE_STATE_DIR
# overrides it); dev-up keeps it across restarts, demo starts afresh.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=${BIN:-$ROOT/bin}
EXAMPLE=$ROOT/examples/rediscluster.yaml
CRDS=$ROOT/kustomize/base/crd/bases

say() { printf '\n==> %s\n' "$*"; }
die() { printf 'localplane.sh: %s\n' "$*" >&2; exit 1; }

setup() {
  [ "$(id -u)" -eq 0 ] || die "run as root: pods run in their own mount namespaces as their own users"
  command -v go >/dev/null || die "Go 1.26 must be on the PATH"
  say "Debian packages"
  bash "$ROOT/hack/deps.sh"
  say "Kubernetes binaries (first time: about 6 minutes)"
  bash "$ROOT/hack/build-tools.sh"
  say "Building the local plane and the operator"
  go -C "$ROOT/test/localplane" build -o "$BIN/localplane" ./cmd/localplane
  go -C "$ROOT" build -o "$BIN/redis-operator" ./cmd/redis-operator
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
  say "Installing the RedisCluster CRD"
  # The CRD as generated, without the conversion-webhook patch: the operator
  # runs as a local process here, not behind an in-cluster Service.
  kubectl apply --server-side -f "$CRDS"
  kubectl wait --for=condition=Established --timeout=60s crd/redisclusters.cache.redis.io
}

# start_operator DIR [detach]: runs the operator as a local process with
# the plane's kubeconfig; its log is DIR/logs/operator.log.
start_operator() {
  local dir=$1 detach=${2:-}
  say "Starting the operator (log: $dir/logs/operator.log)"
  # No webhooks: the API server could not reach them (no in-cluster Service),
  # and the CRD is installed without the conversion webhook.
  local args=(--kubeconfig "$dir/kubeconfig" --leader-elect=false --webhooks=false
    --metrics-bind-address=0 --health-probe-bind-address=0)
  if [ -n "$detach" ]; then
    setsid "$BIN/redis-operator" "${args[@]}" >"$dir/logs/operator.log" 2>&1 < /dev/null &
  else
    "$BIN/redis-operator" "${args[@]}" >"$dir/logs/operator.log" 2>&1 &
  fi
  OPERATOR_PID=$!
  echo "$OPERATOR_PID" >"$dir/operator.pid"
  sleep 1
  kill -0 "$OPERATOR_PID" 2>/dev/null || { tail -20 "$dir/logs/operator.log" >&2; die "the operator exited at start"; }
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
  trap 'cleanup; exit 130' INT TERM
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

  say "kubectl get redisclusters"
  kubectl get redisclusters
  kubectl get pods -o wide
  local ip
  ip=$(first_pod_ip)
  say "CLUSTER INFO (from $ip)"
  redis-cli -h "$ip" cluster info
  say "CLUSTER NODES"
  redis-cli -h "$ip" cluster nodes
  say "A write and a read through a cluster-aware client (redis-cli -c follows MOVED)"
  redis-cli -c -h "$ip" set demo:greeting "hello from the local plane"
  redis-cli -c -h "$ip" get demo:greeting

  cat <<EOF

The cluster is running. In another shell:
  export KUBECONFIG=$dir/kubeconfig
  kubectl get redisclusters,pods
  redis-cli -c -h $ip            # any pod IP above works
Logs: $dir/logs (operator.log, node.log, kube-apiserver.log, ...).
Press Ctrl-C to stop everything.
EOF
  while kill -0 "$PLANE_PID" 2>/dev/null && kill -0 "$OPERATOR_PID" 2>/dev/null; do sleep 1; done
  die "the plane or the operator exited; see $dir/logs"
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
  export KUBECONFIG=$dir/kubeconfig
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

case ${1:-} in
  demo) demo ;;
  dev-up) dev_up ;;
  dev-down) dev_down ;;
  *) echo "usage: $0 demo|dev-up|dev-down" >&2; exit 2 ;;
esac
