#!/usr/bin/env bash
# unit-beside-e2e.sh: make test's last part. The main module's unit and
# envtest suites (make unit), then the short reshard benchmark (make
# bench-short), run in the background, from the moment the e2e suite's plane
# and operator are up (E2E_READY), while the e2e ci tier
# (make test-e2e) runs its one-at-a-time tests, which mostly wait on the
# plane and leave the two cores idle; the e2e side-by-side group, which
# keeps both busy and times failovers, waits for the unit tests to end
# (E2E_AFTER, test/e2e/sidebyside_test.go). Each prints its own timing
# line ("time: unit+envtest ...", "time: e2e-ci ..."); the unit tests'
# output is printed once they end, then the e2e suite's summary line again,
# last, where CI reads it. Exits non-zero when either failed.
set -uo pipefail
cd "$(dirname "$0")/.."
mkdir -p bin
done_file=bin/unit.done
ready_file=bin/e2e.ready
unit_log=bin/unit.log
rm -f "$done_file" "$ready_file" "$unit_log"
(
  {
    # Not before the plane and the operator are up (E2E_READY): a CPU-bound
    # start slowed the API server until the operator, started before its
    # CRDs were served, exited once. At most 20 minutes.
    for _ in $(seq 1200); do [ -e "$ready_file" ] && break; sleep 1; done
    bash hack/timed.sh unit+envtest make --no-print-directory unit; rc=$?
    bash hack/timed.sh bench-short make --no-print-directory bench-short || rc=1
  } >"$unit_log" 2>&1
  echo $rc >"$done_file"
) &
unit_pid=$!
E2E_READY=$PWD/$ready_file E2E_AFTER=$PWD/$done_file bash hack/timed.sh e2e-ci make --no-print-directory test-e2e E2E_TIER=ci | tee bin/e2e-ci.out
e2e_rc=${PIPESTATUS[0]}
wait "$unit_pid"
echo "--- the unit and envtest suites and bench-short, run beside the e2e tests (log $unit_log):"
cat "$unit_log"
unit_rc=$(cat "$done_file" 2>/dev/null || echo 1)
grep -E '^e2e: [0-9]+ passed, [0-9]+ failed, [0-9]+ skipped \(tier [a-z]+\)$' bin/e2e-ci.out | tail -1
if [ "$unit_rc" -ne 0 ] || [ "$e2e_rc" -ne 0 ]; then
  echo "make test: unit+envtest and bench-short exit $unit_rc, e2e-ci exit $e2e_rc"
  exit 1
fi
