#!/usr/bin/env bash
# images.sh [NAME...]: builds the images of the local plane's real nodes
# (pause, redis-7.0, redis-8.0, valkey-8.1, redis-operator, argocd and
# redis-exporter; test/localplane/internal/images)
# into the registry storage of the per-user images cache
#   ${REDIS_OPERATOR_CACHE:-${XDG_CACHE_HOME:-~/.cache}/redis-operator}/images
# with no registry outside this machine: Debian rootfs trees made by
# debootstrap from the archive the machine's apt sources name, pushed into a
# CNCF Distribution registry (bin/registry, `make tools`). An image whose
# stamp is unchanged is not rebuilt; a cold build makes two at a time.
# The operator's image is this checkout's static binary (bin/images/
# redis-operator) on the Dockerfile's distroless layout, named as the dev
# overlay's Deployment names it: a source change rebuilds it in seconds.
# Argo CD's image (bookworm with git, GnuPG, ssh and tini, plus bin/argocd
# and bin/kustomize) is named as the core install of hack/tools/argocd's
# Argo CD module names it (quay.io/argoproj/argocd:v3.2.6); redis_exporter's
# is oliver006/redis_exporter:v1.45.0, Debian bookworm's
# prometheus-redis-exporter. Needs root.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$PWD/bin
if ! command -v debootstrap >/dev/null 2>&1; then
  echo "images: installing debootstrap"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
fi
# Argo CD's image needs bin/argocd and bin/kustomize: built (or found up to
# date) when all images or argocd are asked for.
argocd=$(( $# == 0 ))
for n in "$@"; do [ "$n" != argocd ] || argocd=1; done
if ((argocd)); then bash hack/build-tools.sh registry argocd kustomize; else bash hack/build-tools.sh registry; fi
export GOWORK=off
CGO_ENABLED=0 go -C test/localplane build -trimpath -o "$bin/pause" ./cmd/pause
go -C test/localplane build -o "$bin/localplane-images" ./cmd/localplane-images
# Static, as the Dockerfile builds it (bin/redis-operator may be cgo-linked).
CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o "$bin/images/redis-operator" ./cmd/redis-operator
operator_image=$("$bin/images/redis-operator" manifests --overlay dev |
  awk '/^kind: Deployment$/ { d = 1 } d && $1 == "image:" { print $2; exit }')
[ -n "$operator_image" ] || { echo "images: no image in the dev overlay's Deployment" >&2; exit 1; }
argocd_flags=()
if ((argocd)); then
  argocd_module=$(go -C hack/tools/argocd list -m -f '{{.Dir}}' github.com/argoproj/argo-cd/v3)
  argocd_image=$(awk '$1 == "image:" && $2 ~ /\/argoproj\/argocd:/ { print $2; exit }' "$argocd_module/manifests/core-install.yaml")
  [ -n "$argocd_image" ] || { echo "images: no Argo CD image in $argocd_module/manifests/core-install.yaml" >&2; exit 1; }
  argocd_flags=(--argocd "$bin/argocd" --kustomize "$bin/kustomize" --argocd-image "$argocd_image")
fi
exec "$bin/localplane-images" --bin-dir "$bin" --pause "$bin/pause" \
  --operator "$bin/images/redis-operator" --operator-image "$operator_image" "${argocd_flags[@]}" "$@"
