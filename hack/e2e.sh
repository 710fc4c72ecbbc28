#!/usr/bin/env bash
# e2e.sh LOG [GO TEST FLAGS...]: builds bin/localplane and bin/redis-operator,
# runs the e2e suite (test/e2e) with the given flags, keeps the whole output in
# LOG and prints only one line per scenario and the test's own lines; on a
# failure it prints the last 150 lines of LOG.
set -uo pipefail
cd "$(dirname "$0")/.."
log=$1; shift
bin=$PWD/bin
mkdir -p "$bin"
bash hack/heartbeat.sh "building bin/localplane" go -C test/localplane build -o "$bin/localplane" ./cmd/localplane || exit
bash hack/heartbeat.sh "building bin/redis-operator" go build -o "$bin/redis-operator" ./cmd/redis-operator || exit
E2E_REUSE_BIN=1 go test -tags e2e -v "$@" ./test/e2e/ 2>&1 | tee "$log" |
  grep --line-buffered -E '^\s*(e2e:|--- |ok|FAIL|PASS|panic)|_test\.go:[0-9]+:'
rc=${PIPESTATUS[0]}
if [ "$rc" -ne 0 ]; then
  echo "e2e failed; the last lines of $log:"
  tail -150 "$log"
fi
exit "$rc"
