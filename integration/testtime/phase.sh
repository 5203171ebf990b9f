#!/usr/bin/env bash
# phase.sh FILE NAME CMD...: runs CMD and appends "NAME START END RC" (Unix
# seconds) to FILE, for testtime's phase table; exits with CMD's status.
file=$1 name=$2
shift 2
t0=$(date +%s.%N)
"$@"
rc=$?
printf '%s %s %s %s\n' "$name" "$t0" "$(date +%s.%N)" "$rc" >> "$file"
exit $rc
