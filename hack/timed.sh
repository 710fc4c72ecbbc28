#!/usr/bin/env bash
# timed.sh NAME CMD...: runs CMD and prints
#   "time: NAME <seconds>s <result> (cpu <seconds>s)"
# where cpu is the user plus system time of CMD and the processes it waited
# for (bash's times builtin): on these 2-core machines, cpu near twice the
# wall time means the part kept both cores busy, near the wall time or under
# it that it mostly waited. Processes CMD left running (the local plane's)
# are not counted.
set -uo pipefail
name=$1; shift
start=$(date +%s)
"$@"; rc=$?
result=ok; [ $rc -eq 0 ] || result="FAILED (exit $rc)"
# times prints the shell's user and system time, then its children's: "0m1.5s 0m0.2s".
# (Not in a pipe or $(...): a subshell has no children of its own to report.)
times_file=$(mktemp)
times >"$times_file"
cpu=$(awk 'NR == 2 { n = 0; for (i = 1; i <= 2; i++) { split($i, a, /[ms]/); n += a[1] * 60 + a[2] } printf "%d", n }' "$times_file")
rm -f "$times_file"
echo "time: $name $(( $(date +%s) - start ))s $result (cpu ${cpu}s)"
exit $rc
