#!/usr/bin/env bash
# heartbeat.sh WHAT CMD...: runs CMD, printing "  ... WHAT: Ns" every 30 s
# while it runs, so a long build never looks hung; exits with CMD's status.
set -uo pipefail
what=$1; shift
start=$(date +%s)
( while sleep 30; do echo "  ... ${what}: $(( $(date +%s) - start ))s"; done ) &
ticker=$!
"$@"; rc=$?
kill "$ticker" 2>/dev/null
wait "$ticker" 2>/dev/null
exit $rc
