#!/usr/bin/env bash
# The local control plane (test/localplane) for people: the demo and a
# plane to explore with kubectl.
#
#   hack/localplane.sh demo      set up, run a 3x1 Redis Cluster, show it, stop everything on Ctrl-C
#   hack/localplane.sh dev-up    start the plane and the operator in the background and return
#   hack/localplane.sh dev-down  stop what dev-up started
#
# Needs root (the real nodes run the kubelet and containerd) and Go. The
# first run installs missing Debian packages (hack/deps.sh), builds the
# Kubernetes binaries the plane runs into bin/ (hack/build-tools.sh, about
# 15 minutes on 2 cores) and the images (hack/images.sh: Redis from Debian
# packages, the operator from this checkout). State lives in
# .localplane/<demo|dev>/ (LOCALPLANE_STATE_DIR overrides it); dev-up keeps
# it across restarts, demo starts afresh.
#
# The plane has three nodes (localplane up --nodes 3), each the real
# kubelet with a containerd of its own: every pod is a container that
# containerd runs from its image. The operator is installed as users
# install it, from its dev overlay (redis-operator manifests --overlay dev
# | kubectl apply), and runs from its image
# (ghcr.io/redis-operator/redis-operator, which the nodes pull from the
# plane's registry); the API server calls its webhooks through their
# Service.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=${BIN:-$ROOT/bin}
EXAMPLE=$ROOT/examples/rediscluster.yaml
# The plane of demo and dev-up: three nodes, one per zone.
PLANE_FLAGS=(--nodes 3)
# The install as the dev overlay renders it.
OPERATOR_NAMESPACE=redis-operator-system
OPERATOR_DEPLOYMENT=redis-operator-controller-manager
OPERATOR_PODS=control-plane=controller-manager
CRDS=(redisclusters.cache.redis.io redisclusterbackups.cache.redis.io redisclusterscheduledbackups.cache.redis.io)

say() { printf '\n==> %s\n' "$*"; }
die() { printf 'localplane.sh: %s\n' "$*" >&2; exit 1; }

setup() {
  [ "$(id -u)" -eq 0 ] || die "run as root: the real nodes run the kubelet and containerd"
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

# setup_real_nodes [IMAGE...]: what a plane of real nodes needs besides
# setup's: the kubelet, and the images with the registry they go to
# (no-ops when up to date): those the demo and dev-up run (not Argo CD's
# or redis_exporter's, so a first demo does not build bin/argocd), and the
# IMAGEs named (hack/images.sh's names: argocd for demo-gitops).
setup_real_nodes() {
  bash "$ROOT/hack/build-tools.sh" kubelet
  say "Images: pause, redis 7.0, redis 8.0, valkey 8.1, the operator${1:+ and $*} (first time: a few minutes)"
  bash "$ROOT/hack/images.sh" pause redis-7.0 redis-8.0 valkey-8.1 redis-operator "$@"
}

# start_plane DIR [detach [FLAG...]]: starts `localplane up` on DIR with
# FLAGs and waits until it is ready. Detached, it outlives this script
# (dev-up).
start_plane() {
  local dir=$1 detach=${2:-}
  shift $(($# < 2 ? $# : 2))
  mkdir -p "$dir/logs"
  say "Starting the local control plane in $dir"
  if [ -n "$detach" ]; then
    setsid "$BIN/localplane" up --state-dir "$dir" --bin-dir "$BIN" "$@" >"$dir/logs/localplane.out" 2>&1 < /dev/null &
  else
    "$BIN/localplane" up --state-dir "$dir" --bin-dir "$BIN" "$@" >"$dir/logs/localplane.out" 2>&1 &
  fi
  PLANE_PID=$!
  "$BIN/localplane" wait --state-dir "$dir" --timeout 5m || { cat "$dir/logs/localplane.out" >&2; return 1; }
  export KUBECONFIG=$dir/kubeconfig
  kubectl get nodes -o wide
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

# operator_image prints the image the dev overlay's Deployment names.
operator_image() {
  "$BIN/redis-operator" manifests --overlay dev |
    awk '/^kind: Deployment$/ { d = 1 } d && $1 == "image:" { print $2; exit }'
}

# refresh_operator_image DIR: dev-up resumes a plane whose nodes keep the
# images they pulled, and the overlay's tag does not change with the code:
# each node pulls the operator's image again (as `kind load` replaces it),
# and when that changed the image of some node, the operator's pods are
# deleted, so that its Deployment starts them from the image just built.
refresh_operator_image() {
  local dir=$1 image node sock before after changed=
  image=$(operator_image)
  for node in "$dir"/nodes/*/; do
    sock=$node/run/containerd.sock
    before=$(ctr -n k8s.io --address "$sock" images ls "name==$image" | awk 'NR == 2 { print $3 }')
    ctr -n k8s.io --address "$sock" images pull --hosts-dir "$node/certs.d" "$image" >/dev/null ||
      die "node $(basename "$node") could not pull $image"
    after=$(ctr -n k8s.io --address "$sock" images ls "name==$image" | awk 'NR == 2 { print $3 }')
    if [ -n "$before" ] && [ "$before" != "$after" ]; then changed=1; fi
  done
  if [ -n "$changed" ]; then
    echo "The nodes had an older $image: restarting the operator's pods on the new one."
    kubectl -n "$OPERATOR_NAMESPACE" delete pods -l "$OPERATOR_PODS" --wait=false
  fi
}

# install_operator DIR: applies the dev overlay as a user does and waits
# until the operator's Deployment has rolled out and the API server admits
# a RedisCluster through its webhooks (a server-side dry run of the
# example: the operator has issued its certificate and injected its CA).
install_operator() {
  local dir=$1 crd
  say "Installing the operator: redis-operator manifests --overlay dev | kubectl apply --server-side -f -"
  "$BIN/redis-operator" manifests --overlay dev | kubectl apply --server-side --force-conflicts -f -
  for crd in "${CRDS[@]}"; do wait_established "$crd" 60; done
  say "Waiting for the operator's pod (image $(operator_image)) and its webhooks"
  if ! kubectl -n "$OPERATOR_NAMESPACE" rollout status "deployment/$OPERATOR_DEPLOYMENT" --timeout=5m; then
    kubectl -n "$OPERATOR_NAMESPACE" describe pods -l "$OPERATOR_PODS" | tail -30 >&2
    die "the operator's Deployment did not roll out"
  fi
  for _ in $(seq 240); do
    if kubectl apply --dry-run=server -f "$EXAMPLE" >/dev/null 2>"$dir/logs/webhook-check.err"; then
      kubectl -n "$OPERATOR_NAMESPACE" get pods -o wide
      echo "The operator is ready; the API server reaches its webhooks through their Service."
      return 0
    fi
    sleep 0.5
  done
  cat "$dir/logs/webhook-check.err" >&2
  kubectl -n "$OPERATOR_NAMESPACE" logs "deployment/$OPERATOR_DEPLOYMENT" --tail=20 >&2 || true
  die "the API server cannot reach the operator's webhooks"
}

# first_pod_ip prints the IP of the example's first running Redis pod.
first_pod_ip() {
  kubectl get pods -l app.kubernetes.io/instance=example -o jsonpath='{.items[0].status.podIP}'
}

# show_runtime: the containers containerd runs on the node of the
# example's first pod, and the server version inside each Redis pod.
show_runtime() {
  local dir=$1 pod node
  node=$(kubectl get pods -l app.kubernetes.io/instance=example -o jsonpath='{.items[0].spec.nodeName}')
  say "Containers on node $node, as its containerd lists them (ctr -n k8s.io containers ls)"
  ctr -n k8s.io --address "$dir/nodes/$node/run/containerd.sock" containers ls
  say "The server inside each pod (kubectl exec POD -c redis -- redis-cli INFO server | grep redis_version)"
  for pod in $(kubectl get pods -l app.kubernetes.io/instance=example -o jsonpath='{.items[*].metadata.name}'); do
    # The password from the pod's own Secret mount, through the
    # environment: never on a command line.
    printf '%s: %s\n' "$pod" "$(kubectl exec "$pod" -c redis -- sh -c \
      'REDISCLI_AUTH=$(cat /etc/redis-auth/password) redis-cli -h "$POD_IP" INFO server' | tr -d '\r' | grep redis_version)"
  done
}

demo() {
  # Global: the traps run after this function has returned.
  DEMO_DIR=${LOCALPLANE_STATE_DIR:-$ROOT/.localplane/demo}
  local dir=$DEMO_DIR
  trap 'stopped_on_request "Ctrl-C"' INT TERM
  setup
  setup_real_nodes
  if [ -f "$dir/localplane.pid" ]; then "$BIN/localplane" down --state-dir "$dir"; fi
  rm -rf "$dir"
  cleanup() {
    trap - INT TERM EXIT
    say "Stopping the local plane"
    "$BIN/localplane" down --state-dir "$DEMO_DIR"
    echo "Stopped; nothing is left running."
  }
  trap cleanup EXIT
  start_plane "$dir" "" "${PLANE_FLAGS[@]}"
  install_operator "$dir"

  say "Creating the example RedisCluster (3 shards x 1 replica)"
  kubectl apply -f "$EXAMPLE"
  if ! kubectl wait --for=condition=Ready --timeout=10m rediscluster/example; then
    kubectl get rediscluster example -o yaml >&2 || true
    kubectl -n "$OPERATOR_NAMESPACE" logs "deployment/$OPERATOR_DEPLOYMENT" --tail=30 >&2 || true
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
  echo "(${SECONDS} s since the demo started)"
  show_runtime "$dir"

  cat <<EOF

The cluster is running. In another shell:
  export KUBECONFIG=$dir/kubeconfig PATH=$BIN:\$PATH   # bin/kubectl matches the API server
  kubectl get redisclusters,pods -o wide
  kubectl -n $OPERATOR_NAMESPACE logs deploy/$OPERATOR_DEPLOYMENT
  export REDISCLI_AUTH=\$(kubectl get secret example-auth -o jsonpath='{.data.password}' | base64 -d)
  redis-cli -c -h $ip            # any pod IP above works
Logs: $dir/logs (kube-apiserver.log, <node>-kubelet.log, <node>-containerd.log, ...).
Press Ctrl-C to stop everything.
EOF
  await_demo_end "$dir"
}

# stopped_on_request WHAT: the user stopped the demo (an interrupt is a
# clean stop): stops the plane quietly (its output to logs/stop.log), says
# so in one line and exits 0.
stopped_on_request() {
  trap - INT TERM EXIT
  mkdir -p "$DEMO_DIR/logs"
  if [ -x "$BIN/localplane" ]; then
    "$BIN/localplane" down --state-dir "$DEMO_DIR" >>"$DEMO_DIR/logs/stop.log" 2>&1 || true
  fi
  printf '\n%s: the demo stopped everything it started (the local plane, its nodes and pods); nothing is left running.\n' "$1"
  exit 0
}

# await_demo_end DIR: returns only by exiting, once the plane has stopped.
# It exits 0 only when told to stop (SIGINT or SIGTERM): a Ctrl-C that
# reached it but not this shell (started with SIGINT ignored, it cannot
# trap it) or a `localplane down` is a clean stop. Any other exit is
# unexpected: an error naming the logs.
await_demo_end() {
  local dir=$1 status=0
  wait "$PLANE_PID" 2>/dev/null || status=$?
  if [ "$status" -eq 0 ]; then stopped_on_request "Ctrl-C (or localplane down)"; fi
  die "the local plane exited unexpectedly (status $status); see $dir/logs"
}

dev_up() {
  local dir=${LOCALPLANE_STATE_DIR:-$ROOT/.localplane/dev}
  setup
  setup_real_nodes
  if "$BIN/localplane" wait --state-dir "$dir" --timeout 1s >/dev/null 2>&1; then
    die "a plane already runs in $dir; stop it with hack/localplane.sh dev-down"
  fi
  start_plane "$dir" detach "${PLANE_FLAGS[@]}"
  refresh_operator_image "$dir"
  install_operator "$dir"
  cat <<EOF

The local plane and the operator run in the background.
  export KUBECONFIG=$dir/kubeconfig PATH=$BIN:\$PATH   # bin/kubectl matches the API server
  kubectl apply -f examples/rediscluster.yaml
  kubectl get redisclusters,pods -o wide
Logs: $dir/logs; the operator's: kubectl -n $OPERATOR_NAMESPACE logs deploy/$OPERATOR_DEPLOYMENT.
After a change to the operator: make dev-down dev-up (its image is rebuilt and its pod restarted).
Stop with: make dev-down (or hack/localplane.sh dev-down).
EOF
}

dev_down() {
  local dir=${LOCALPLANE_STATE_DIR:-$ROOT/.localplane/dev}
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
    demo)
      if [ -t 0 ] && [ -z "${LOCALPLANE_DEMO_JOB:-}" ]; then
        # Ctrl-C interrupts the terminal's foreground process group: with
        # make's own, make would end by it (status 130) whatever the demo
        # does. With job control, the demo runs as a job of its own that
        # takes the terminal: Ctrl-C reaches only it, and its clean stop
        # is everyone's exit status.
        set -m
        LOCALPLANE_DEMO_JOB=1 bash "${BASH_SOURCE[0]}" demo
      else
        demo
      fi
      ;;
    dev-up) dev_up ;;
    dev-down) dev_down ;;
    *) echo "usage: $0 demo|dev-up|dev-down" >&2; exit 2 ;;
  esac
fi
