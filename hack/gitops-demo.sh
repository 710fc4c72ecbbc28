#!/usr/bin/env bash
# make demo-gitops: the operator installed and scaled by a real Argo CD on
# the local plane, as test/e2e/argocd_test.go (TestArgoCD) runs it, for
# people to watch:
#   1. Argo CD v3.2.6 core (bin/argocd, from manifests/core-install of its Go
#      module) with our health check (kustomize/components/argocd);
#   2. a Git repository of this checkout's kustomize/ and examples/argocd/,
#      served by git daemon on the plane's gateway (the host address pods
#      reach);
#   3. examples/argocd (AppProject, ApplicationSet) with repoURL pointed at
#      it, and the plane registered as the env=dev cluster: the dev
#      Application syncs the CRDs, the operator and a 3-shard RedisCluster;
#   4. `shards: 4` committed and synced; then the ApplicationSet deleted,
#      its Application cascading (the RedisCluster goes through the
#      operator's finalizer).
# Each step prints the Application's sync and health next to `kubectl get
# rcl`. Ctrl-C stops everything; so does the end. Needs root, Go and git.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/localplane.sh"

APP=redis-dev
EXAMPLE_REPO=https://github.com/redis-operator/redis-operator.git

# render_argocd prints Argo CD's core install from its module (as
# hack/tools/argocd pins it) with our health check and the patches of
# test/e2e/testdata/argocd (no GnuPG; resource health in the Application),
# its Redis from our redis:8.0 image (make images) instead of
# public.ecr.aws/docker/library/redis:8.2.2-alpine, which the plane's
# registry does not have.
render_argocd() {
  local module tmp
  module=$(GOWORK=off go -C "$ROOT/hack/tools/argocd" list -m -f '{{.Dir}}' github.com/argoproj/argo-cd/v3)
  tmp=$(mktemp -d "$DEMO_DIR/argocd-install.XXXXXX")
  cp "$ROOT"/test/e2e/testdata/argocd/*.yaml "$tmp/"
  cat >"$tmp/kustomization.yaml" <<EOK
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: argocd
resources:
- $(realpath --relative-to="$tmp" "$module/manifests/core-install.yaml")
components:
- $(realpath --relative-to="$tmp" "$ROOT/kustomize/components/argocd")
patches:
- path: repo-server-gpg.yaml
- path: cmd-params.yaml
images:
- name: public.ecr.aws/docker/library/redis
  newName: redis
  newTag: "8.0"
EOK
  "$BIN/kustomize" build --load-restrictor LoadRestrictionsNone "$tmp"
}

# show prints the Application's sync and health (with the revision it
# compares to) next to kubectl get rcl.
show() {
  kubectl -n argocd get application "$APP" \
    -o custom-columns='APPLICATION:.metadata.name,SYNC:.status.sync.status,HEALTH:.status.health.status,REVISION:.status.sync.revision,RCL HEALTH:.status.resources[?(@.kind=="RedisCluster")].health.status' 2>/dev/null || true
  kubectl -n redis get rcl 2>/dev/null || true
}

# watch_until WHAT TIMEOUT CMD...: prints a status line (the Application's
# sync and health, then kubectl get rcl without its AGE column) each time
# it changes, until CMD succeeds.
watch_until() {
  local what=$1 timeout=$2 last= line start=$SECONDS
  shift 2
  say "Waiting for $what"
  while ! "$@"; do
    line=$(printf '%s | %s' \
      "$(kubectl -n argocd get application "$APP" -o jsonpath='app {.status.sync.status}/{.status.health.status} at {.status.sync.revision}; RedisCluster health {.status.resources[?(@.kind=="RedisCluster")].health.status}' 2>/dev/null)" \
      "$(kubectl -n redis get rcl demo --no-headers 2>/dev/null | awk '{NF--; print}')")
    if [ "$line" != "$last" ]; then printf '  %3ds  %s\n' $((SECONDS - start)) "$line"; last=$line; fi
    ((SECONDS - start < timeout)) || die "$what: not after ${timeout}s"
    sleep 2
  done
  echo "  done in $((SECONDS - start))s"
}

app_settled() {
  [ "$(kubectl -n argocd get application "$APP" -o jsonpath='{.status.sync.status}/{.status.health.status}/{.status.sync.revision}/{.status.operationState.syncResult.revision}' 2>/dev/null)" = "Synced/Healthy/$1/$1" ]
}
app_gone() { ! kubectl -n argocd get application "$APP" >/dev/null 2>&1; }
rcl_gone() { ! kubectl -n redis get rcl demo >/dev/null 2>&1; }

gitops_demo() {
  DEMO_DIR=${LOCALPLANE_STATE_DIR:-$ROOT/.localplane/gitops}
  local dir=$DEMO_DIR started=$SECONDS
  # Argo CD's binary and the kustomize its repo-server runs, beside the plane's.
  SETUP_EXTRA_TOOLS="kustomize argocd" setup
  setup_real_nodes argocd
  if [ -f "$dir/localplane.pid" ]; then "$BIN/localplane" down --state-dir "$dir"; fi
  rm -rf "$dir"
  mkdir -p "$dir"
  GIT_PID=
  cleanup() {
    trap - INT TERM EXIT
    say "Stopping git daemon and the local plane"
    if [ -n "$GIT_PID" ]; then kill "$GIT_PID" 2>/dev/null || true; fi
    "$BIN/localplane" down --state-dir "$DEMO_DIR"
    echo "Stopped; nothing is left running."
  }
  trap cleanup EXIT
  trap 'cleanup; exit 130' INT TERM
  start_plane "$dir"

  say "Installing Argo CD v3.2.6 core (manifests/core-install of its module) with kustomize/components/argocd"
  kubectl create namespace argocd
  render_argocd | kubectl apply -n argocd --server-side -f - >/dev/null
  # The API server would generate it; core runs none.
  kubectl -n argocd patch secret argocd-secret --type merge \
    -p "{\"stringData\":{\"server.secretkey\":\"$(head -c 32 /dev/urandom | base64)\"}}" >/dev/null
  for d in argocd-redis argocd-repo-server argocd-applicationset-controller; do
    kubectl -n argocd rollout status "deploy/$d" --timeout=3m
  done
  kubectl -n argocd rollout status statefulset/argocd-application-controller --timeout=3m
  kubectl -n argocd get pods -o wide

  local gw git=$dir/git rev port=9418
  gw=$(cat "$dir/netns/gateway")
  say "Serving kustomize/ and examples/argocd/ with git daemon on git://$gw:$port"
  mkdir -p "$git/work/examples"
  git init -q --bare -b main "$git/redis-operator.git"
  cp -a "$ROOT/kustomize" "$git/work/kustomize"
  cp -a "$ROOT/examples/argocd" "$git/work/examples/argocd"
  commit() {
    git -C "$git/work" add -A
    git -C "$git/work" -c user.name=demo -c user.email=demo@localhost commit -q -m "$1"
    git -C "$git/work" push -q "$git/redis-operator.git" main
    rev=$(git -C "$git/work" rev-parse HEAD)
    echo "committed $rev: $1"
  }
  git -C "$git/work" init -q -b main
  commit "kustomize/ and examples/argocd/"
  git daemon --listen="$gw" --port="$port" --base-path="$git" --export-all --reuseaddr >"$dir/logs/git-daemon.log" 2>&1 &
  GIT_PID=$!
  local repo=git://$gw:$port/redis-operator.git

  say "Registering the plane as the env=dev cluster; applying examples/argocd (repoURL $repo)"
  kubectl -n argocd create secret generic in-cluster --from-literal=name=in-cluster \
    --from-literal=server=https://kubernetes.default.svc --from-literal=config='{"tlsClientConfig":{"insecure":false}}'
  kubectl -n argocd label secret in-cluster argocd.argoproj.io/secret-type=cluster env=dev
  kubectl kustomize "$ROOT/examples/argocd" | sed "s#$EXAMPLE_REPO#$repo#" | kubectl apply -f -
  watch_until "the dev Application: CRDs (wave -1), operator (wave 0), RedisCluster (wave 1)" 600 app_settled "$rev"
  show

  say "Committing shards: 3 -> 4 and refreshing the Application"
  sed -i 's/shards: 3/shards: 4/' "$git/work/examples/argocd/rediscluster/rediscluster.yaml"
  commit "demo: 4 shards"
  kubectl -n argocd annotate application "$APP" argocd.argoproj.io/refresh=normal --overwrite >/dev/null
  watch_until "the scale to 4 shards synced and Healthy" 900 app_settled "$rev"
  show

  say "Deleting the ApplicationSet; its Application cascades (resources finalizer)"
  kubectl -n argocd patch application "$APP" --type merge -p '{"metadata":{"finalizers":["resources-finalizer.argocd.argoproj.io"]}}' >/dev/null
  kubectl -n argocd delete applicationset redis --wait=false
  watch_until "the RedisCluster deleted through the operator's finalizer" 600 rcl_gone
  watch_until "the Application and the operator deleted" 600 app_gone
  say "Argo CD never deletes CRDs in a cascade: they stay"
  kubectl get crd redisclusters.cache.redis.io
  say "The GitOps path took $((SECONDS - started))s"
}

gitops_demo
