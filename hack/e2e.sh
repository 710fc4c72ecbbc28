#!/usr/bin/env bash
# e2e.sh LOG [GO TEST FLAGS...]: builds bin/localplane, bin/redis-operator and
# the operator's image (hack/images.sh redis-operator: the plane's real nodes
# run the operator from it), runs the e2e suite (test/e2e) with the given flags on the tier E2E_TIER
# names (ci, the default: what make test runs; all: every scenario), keeps
# the whole output in LOG and prints as it goes only each scenario's start
# and end lines (`e2e: <scenario> start`, `e2e: <scenario> <s>s ok|FAIL|skip`)
# and the test's own lines; on a failure it prints the last 150 lines of LOG
# and then, for each failed test, the last 40 lines it printed.
# It always ends with the suite's summary line, `e2e: N passed, N failed, N
# skipped (tier T)`; when the test binary did not get to print it (a panic,
# the -timeout, a build failure) it counts the same from LOG, a scenario
# that started and never ended counting as failed.
set -uo pipefail
cd "$(dirname "$0")/.."
log=$1; shift
bin=$PWD/bin
export E2E_TIER=${E2E_TIER:-ci}
mkdir -p "$bin"
summary_re='^e2e: [0-9]+ passed, [0-9]+ failed, [0-9]+ skipped \(tier [a-z]+\)$'
# build WHAT GO-ARGS...: go GO-ARGS with progress lines; a failure ends the
# run with its summary (no scenario ran).
build() {
  local what=$1; shift
  bash hack/heartbeat.sh "building bin/$what" go "$@" && return
  echo "e2e: building bin/$what failed; no scenario ran"
  echo "e2e: 0 passed, 1 failed, 0 skipped (tier $E2E_TIER)"
  exit 1
}
build localplane -C test/localplane build -o "$bin/localplane" ./cmd/localplane
build redis-operator build -o "$bin/redis-operator" ./cmd/redis-operator
if ! bash hack/heartbeat.sh "building the operator's image" bash hack/images.sh redis-operator; then
  echo "e2e: building the operator's image failed; no scenario ran"
  echo "e2e: 0 passed, 1 failed, 0 skipped (tier $E2E_TIER)"
  exit 1
fi
E2E_REUSE_BIN=1 go test -tags e2e -v "$@" ./test/e2e/ 2>&1 | tee "$log" |
  grep --line-buffered -E '^\s*(e2e:|--- |ok|FAIL|PASS|panic)|_test\.go:[0-9]+:' |
  grep --line-buffered -vE "$summary_re"
rc=${PIPESTATUS[0]}
if [ "$rc" -ne 0 ]; then
  echo "e2e failed; the last lines of $log:"
  tail -150 "$log"
  # What each failed test printed (its t.Log and t.Error lines, attributed by
  # go test -v's === RUN/CONT/NAME headers), last 40 lines per test, so the
  # cause is in the tail of the output even when the run was long.
  echo "e2e: what the failed tests printed:"
  awk '
    /^=== (RUN|CONT|NAME|PAUSE) / { cur = $3; next }
    /^ *--- (FAIL|PASS|SKIP): / { cur = $3; if ($2 == "FAIL:") failed[$3] = 1; next }
    /_test\.go:[0-9]+:/ && cur != "" { n[cur]++; line[cur, n[cur]] = $0 }
    END {
      for (t in failed) {
        if (!n[t]) continue
        print "--- " t
        from = n[t] > 40 ? n[t] - 39 : 1
        for (i = from; i <= n[t]; i++) print line[t, i]
      }
    }' "$log"
fi

# The summary, last, where CI reads it.
summary=$(grep -E "$summary_re" "$log" | tail -1)
if [ -z "$summary" ]; then
  count() { grep -cE "$1" "$log"; }
  started=$(count '^e2e: [^ ]+ start$')
  passed=$(count '^e2e: [^ ]+ [0-9]+s ok$')
  failed=$(count '^e2e: [^ ]+ ([0-9]+s FAIL$|FAIL \(outside its scenarios\)$)')
  skipped=$(count '^e2e: [^ ]+ ([0-9]+s skip$|skip \(tier )')
  ended=$(count '^e2e: [^ ]+ [0-9]+s (ok|FAIL|skip)$')
  unfinished=$((started > ended ? started - ended : 0))
  failed=$((failed + unfinished))
  # A run that failed before any scenario ended (build, set-up) is one failure.
  if [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then failed=1; fi
  echo "e2e: the test binary ended (exit $rc) before its summary; counted from $log ($unfinished started scenario(s) never ended, counted failed):"
  summary="e2e: $passed passed, $failed failed, $skipped skipped (tier $E2E_TIER)"
fi
echo "$summary"
exit "$rc"
