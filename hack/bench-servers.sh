#!/usr/bin/env bash
# bench-servers.sh [NAME...]: puts the servers that the machine's apt does not
# have (redis-8.0, valkey-8.1: Debian trixie's, as `make images` builds their
# images) on the host for the resharding benchmarks, as trees in
#   ${REDIS_OPERATOR_CACHE:-${XDG_CACHE_HOME:-~/.cache}/redis-operator}/servers/NAME
# with wrappers redis-server and redis-cli (Valkey's also valkey-server and
# valkey-cli) that exec the server through the tree's own loader
# (test/localplane/cmd/localplane-servers). The images are built first (a
# no-op when up to date; root, as `make images`), then each tree is taken
# from its image in the registry storage, again only when the image's stamp
# changed.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$PWD/bin
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(redis-8.0 valkey-8.1)
bash hack/images.sh "${names[@]}"
GOWORK=off go -C test/localplane build -o "$bin/localplane-servers" ./cmd/localplane-servers
exec "$bin/localplane-servers" --bin-dir "$bin" "${names[@]}"
