#!/usr/bin/env bash
# Racecheck of test_cuda_aggregate in pieces, after scripts/gpu-check.sh has built build/gpu in the
# same device call (or on a machine still warm from one). Racecheck runs a test 8-17x slower than
# CTest (v41), so the whole binary (~25-50 minutes) does not fit a call: each piece is one gtest
# filter, optionally under knobs, with its own time limit, and the table at the end gives each
# piece's time, exit status and hazard summary.
#   usage: OUT=dir [PIECE_S=240] [DEADLINE_S=N] [SEGV=1] [RACECHECK_ARGS=...] \
#            scripts/racecheck-pieces.sh 'FILTER[|VAR=val,VAR2=val[|sanitizer options]]' ...
#   or @FILE: one piece a line (# comments), e.g. @scripts/racecheck-remaining.txt
#   e.g. '*FusedFirstRadixPassIsTheSamePlan*|PIPELINK_AGG_MSD_STREAMS=1'
#        '*FusedFirstRadixPassIsTheSamePlan*||--force-blocking-launches' (RACECHECK_ARGS: every piece)
#   Tests with a case table (OneShotMsdSortGivesTheOneSortsBits: 9 cases, FusedFirstRadixPassIsTheSamePlan:
#   16, NodeCountsPastSixteenBits: 4) take PIPELINK_TEST_CASES=i,j (tests/test_util.hpp, CaseFilter) as a
#   knob, so one test can be several pieces: '*OneShotMsdSortGivesTheOneSortsBits*|PIPELINK_TEST_CASES=0,1'.
#   SEGV=1 preloads scripts/segv-backtrace.c (a host backtrace if the test dies of SIGSEGV).
#   PIPELINK_TEST_SEED is passed through, so a piece can be rerun on the seed that failed.
# Output: $OUT/racecheck.log (every piece's full text), the table on stdout and in $OUT/racecheck.md.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
OUT=${OUT:-$PWD/out/racecheck}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.deps/root/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
bin=build/gpu/tests/test_cuda_aggregate
[ -x "$bin" ] || { echo "no $bin: build first (scripts/gpu-check.sh with SKIP_TESTS=1 SKIP_BENCH=1)"; exit 2; }
[ $# -gt 0 ] || { echo "usage: $0 'FILTER[|VAR=val,...]' ... | @FILE"; exit 2; }
# @FILE: the pieces from FILE, one a line; blank lines and lines starting with # are skipped.
args_in=()
for a in "$@"; do
  if [[ $a == @* ]]; then
    [ -r "${a#@}" ] || { echo "no piece list ${a#@}"; exit 2; }
    while IFS= read -r line; do
      [[ -z ${line//[[:space:]]/} || $line == \#* ]] || args_in+=("$line")
    done <"${a#@}"
  else
    args_in+=("$a")
  fi
done
set -- "${args_in[@]}"
pre=()
if [ -n "${SEGV:-}" ]; then
  gcc -shared -fPIC -o "$OUT/segv.so" scripts/segv-backtrace.c || exit 2
  pre=(env LD_PRELOAD="$OUT/segv.so")
fi
rows=("| piece | knobs | options | time | exit | racecheck summary |" "|---|---|---|---|---|---|")
worst=0
for p in "$@"; do
  IFS='|' read -r filt knobs args <<<"$p"
  limit=${PIECE_S:-240}
  if [ -n "${DEADLINE_S:-}" ]; then
    left=$((DEADLINE_S - SECONDS))
    if [ "$left" -le 5 ]; then rows+=("| \`$filt\` | ${knobs:--} | ${args:--} | - | skipped (DEADLINE_S) | |"); continue; fi
    [ "$left" -lt "$limit" ] && limit=$left
  fi
  echo "=== piece $filt [${knobs:-defaults}] [${args:-}] limit ${limit}s" >>"$OUT/racecheck.log"
  t0=$SECONDS
  # Knobs split at a comma that starts the next NAME=, so a value may hold commas (PIPELINK_TEST_CASES=0,1).
  read -ra kv <<<"$(sed -E 's/,([A-Za-z_][A-Za-z0-9_]*=)/ \1/g' <<<"$knobs")"
  env "${kv[@]}" "${pre[@]}" timeout --kill-after=10 "$limit" compute-sanitizer --tool racecheck --error-exitcode 3 \
    ${RACECHECK_ARGS:-} $args "$bin" --gtest_filter="$filt" >"$OUT/piece.txt" 2>&1
  rc=$?
  cat "$OUT/piece.txt" >>"$OUT/racecheck.log"
  summary=$(grep -o 'RACECHECK SUMMARY:.*' "$OUT/piece.txt" | tail -1)
  [ $rc -eq 124 ] || [ $rc -eq 137 ] && summary="timed out at ${limit}s; $summary"
  grep -q '^\[  FAILED  \]' "$OUT/piece.txt" && summary="gtest FAILED; $summary"
  rows+=("| \`$filt\` | ${knobs:--} | ${args:--} | $((SECONDS - t0))s | $rc | $summary |")
  [ $rc -ne 0 ] && worst=1
done
rm -f "$OUT/piece.txt"
printf '%s\n' "${rows[@]}" | tee "$OUT/racecheck.md"
exit $worst
