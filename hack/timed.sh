#!/usr/bin/env bash
# timed.sh NAME CMD...: runs CMD and prints "time: NAME <seconds>s <result>".
set -uo pipefail
name=$1; shift
start=$(date +%s)
"$@"; rc=$?
result=ok; [ $rc -eq 0 ] || result="FAILED (exit $rc)"
echo "time: $name $(( $(date +%s) - start ))s $result"
exit $rc
