#!/usr/bin/env bash
# Racecheck of test_cuda_aggregate in pieces, after scripts/gpu-check.sh has built build/gpu in the
# same device call (or on a machine still warm from one). Racecheck ran tests 26-68x slower than
# CTest (v42; 1.2x for one without shared memory), so the whole binary (well over an hour) does not
# fit a call: each piece is one gtest
# filter, optionally under knobs, with its own time limit, and the table at the end gives each
# piece's time, exit status and hazard summary.
#   usage: OUT=dir [PIECE_S=240] [DEADLINE_S=N] [SEGV=1] [RACECHECK_ARGS=...] [RACECHECK_PARALLEL=k] \
#            scripts/racecheck-pieces.sh 'FILTER[|VAR=val,VAR2=val[|sanitizer options]]' ...
#   or @FILE: one piece a line (# comments), e.g. @scripts/racecheck-remaining.txt
#   e.g. '*FusedFirstRadixPassIsTheSamePlan*|PIPELINK_AGG_MSD_STREAMS=1'
#        '*FusedFirstRadixPassIsTheSamePlan*||--force-blocking-launches' (RACECHECK_ARGS: every piece)
#   Options may name a file of options, @FILE: '*A*||@scripts/racecheck-no-shared.txt' leaves our kernels
#   without shared memory (nothing for racecheck to check) uninstrumented; scripts/racecheck-no-shared.sh
#   checks that list against a build.
#   Tests with a case table (OneShotMsdSortGivesTheOneSortsBits: 9 cases, FusedFirstRadixPassIsTheSamePlan:
#   16, NodeCountsPastSixteenBits: 4, CompactPlanSrcColumnWidths: 9, PlanBuiltInDestinationRangesIsTheSamePlan:
#   7, OneShotInEdgeRanges: 6, WeightPermutationGivesTheGatherBits and WeightPermutationCompactPlanGivesTheSameBits:
#   5 each) take PIPELINK_TEST_CASES=i,j (tests/test_util.hpp, CaseFilter) as a
#   knob, so one test can be several pieces: '*OneShotMsdSortGivesTheOneSortsBits*|PIPELINK_TEST_CASES=0,1'.
#   Under the knob each picked case prints "[  CASE    ] case i starts at T s" as it starts, so a cut
#   piece's text shows the cases it finished and their times.
#   The knob reaches every test of the piece: give such a piece one case-table test only (an index
#   past a test's table fails it; a test without a table runs whole).
#   Two of them split a case further with PIPELINK_TEST_VARIANTS=i (OneShotInEdgeRanges: 4 variants;
#   OneShotMsdSortGivesTheOneSortsBits: 2 feature widths), given after the cases:
#   '*OneShotInEdgeRanges*|PIPELINK_TEST_CASES=1,PIPELINK_TEST_VARIANTS=0' (each prints
#   "[  CASE    ] PIPELINK_TEST_VARIANTS i starts at T s"). The MSD test splits a width once more
#   with PIPELINK_TEST_PARTS=0 (its one-shot forms) or 1 (the rest), given after the variants.
#   SEGV=1 preloads scripts/segv-backtrace.c (a host backtrace if the test dies of SIGSEGV).
#   PIPELINK_TEST_SEED is passed through, so a piece can be rerun on the seed that failed.
#   RACECHECK_PARALLEL=k (default 1): up to k pieces at once, each its own process on the one GPU. Whether
#   that shortens a list depends on what bounds racecheck (the instrumented kernels on the GPU,
#   or each launch's round trip to the tool on the host); not measured yet (perf-notes v44).
#   Rows then come in the order the pieces finish. Keep pieces that fill the device
#   (OneShotOnAFullDeviceRunsEdgeRanges) out of a parallel list.
# Output: $OUT/racecheck.log (every piece's full text), the table on stdout and in $OUT/racecheck.md:
# per piece its time, the host CPU seconds of the tool and the test (and the cores that keeps busy),
# the GPU's mean utilization while it ran, the exit status and racecheck's summary. A piece whose
# test died (the tool's "process didn't terminate successfully"), or whose tool was killed before
# its limit, says so, with the host's lowest sampled MemAvailable and the kernel's OOM kills
# meanwhile (/proc/vmstat's oom_kill; host-wide: a piece beside it may be the one killed).
# Exit: 0 every piece complete and clean; 1 a hazard, failed test or tool error; 4 a piece cut,
# skipped or matching nothing (no hazard seen).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
OUT=${OUT:-$PWD/out/racecheck}
mkdir -p "$OUT"
# A cut run's per-piece files must not reach this run's verdict or log.
rm -f "$OUT"/flag.* "$OUT"/racecheck.*.log "$OUT"/piece.*.txt "$OUT"/cpu.* "$OUT"/gpu.*
par=${RACECHECK_PARALLEL:-1}
[[ $par =~ ^[1-9][0-9]*$ ]] || { echo "RACECHECK_PARALLEL='$par' is not a positive integer"; exit 2; }
export LD_LIBRARY_PATH=$PWD/.deps/root/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
bin=${RACECHECK_BIN:-build/gpu/tests/test_cuda_aggregate}  # RACECHECK_BIN: tests/racecheck_pieces_check.sh
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
if [ -n "${SEGV:-}" ]; then  # built outside $OUT (the device tool returns few files)
  segv_so=$(mktemp --suffix=.so) || exit 2
  gcc -shared -fPIC -o "$segv_so" scripts/segv-backtrace.c || exit 2
  pre=(env LD_PRELOAD="$segv_so")
fi
# This compute-sanitizer's kernel filters (--kernel-name, --kernel-regex or the like, if it has them),
# for pieces that instrument only their own kernels (perf-notes v43 Next 2): a second, not a call.
compute-sanitizer --help 2>&1 | grep -i -A4 'kernel' >"$OUT/sanitizer-kernel-filter.txt" || true
# The table is written row by row, so a piece cut by an outer limit leaves the rows before it.
printf '%s\n' "| piece | knobs | options | time | host CPU | GPU busy | exit | racecheck summary |" \
  "|---|---|---|---|---|---|---|---|" | tee "$OUT/racecheck.md"
row() { printf '%s\n' "$1" | tee -a "$OUT/racecheck.md"; }
hazard=0 incomplete=0
source scripts/racecheck-opts.sh  # racecheck_expand_opts: @FILE words
# One piece: its text to $OUT/piece.$i.txt, its row to the table, and a flag file for the verdict
# ($OUT/flag.$i: "hazard", "incomplete" or "clean"; a missing one counts as incomplete), so that
# pieces can run as jobs.
run_piece() {
  local i=$1 p=$2 limit=$3 filt knobs args t0 rc summary ran skipped txt=$OUT/piece.$1.txt
  IFS='|' read -r filt knobs args <<<"$p"
  filt=$(echo "$filt" | xargs)  # gtest keeps a filter's spaces: " *A*" would match nothing
  # The header first, so that a piece cut by an outer limit still shows which it was.
  echo "=== piece $filt [${knobs:-defaults}] [${args:-}] limit ${limit}s" >>"$OUT/racecheck.$i.log"
  t0=$SECONDS
  # Knobs split at a comma that starts the next NAME=, so a value may hold commas (PIPELINK_TEST_CASES=0,1).
  read -ra kv <<<"$(sed -E 's/,([A-Za-z_][A-Za-z0-9_]*=)/ \1/g' <<<"$knobs")"
  # Where the piece's time goes (perf-notes v47 Next 2): the host CPU seconds of the tool and the
  # test together, over the wall time the cores they kept busy, and the GPU's mean utilization
  # while it ran (nvidia-smi, once a second). Many cores busy and an idle GPU: the tool's
  # host-side analysis bounds it; a busy GPU: the instrumented kernels do. With
  # RACECHECK_PARALLEL > 1 the GPU figure is shared by the pieces running at once. The CPU
  # seconds are the larger of bash's `time` (every process waited for: a piece cut by its limit
  # may leave its test unwaited, review of session 45) and a sample of the piece's session twice a
  # second (`setsid`: the tool, the test and their children; what they had used by the last sample).
  local opts_text missing
  if ! opts_text=$(racecheck_expand_opts ${RACECHECK_ARGS:-} $args 2>"$OUT/cpu.$i"); then
    missing=$(cat "$OUT/cpu.$i"); rm -f "$OUT/cpu.$i"
    echo "$missing" >>"$OUT/racecheck.$i.log"
    echo incomplete >"$OUT/flag.$i"
    row "| \`$filt\` | ${knobs:--} | ${args:--} | - | - | - | - | not run: $missing |"
    return
  fi
  local gpu_pid=
  if command -v nvidia-smi >/dev/null 2>&1; then
    # Bounded by the piece's own limit, so that a run cut from outside leaves no sampler for long.
    timeout $((limit + 15)) nvidia-smi -i "${RACECHECK_GPU:-0}" --query-gpu=utilization.gpu --format=csv,noheader,nounits \
      -lms 1000 >"$OUT/gpu.$i" 2>/dev/null &
    gpu_pid=$!
  fi
  local TIMEFORMAT='%U %S' opts pid sampled=0 c m mem_low= oom0 oom1
  oom0=$(awk '$1 == "oom_kill" {print $2}' /proc/vmstat 2>/dev/null)
  read -ra opts <<<"$opts_text" || true
  {
    time {
      setsid env "${kv[@]}" "${pre[@]}" timeout --kill-after=10 "$limit" compute-sanitizer --tool racecheck \
        --error-exitcode 3 "${opts[@]}" "$bin" --gtest_filter="$filt" >"$txt" 2>&1 &
      pid=$!
      while kill -0 "$pid" 2>/dev/null; do
        # Clock ticks (utime + stime) of every process in the piece's session, from /proc (the
        # fields after the command name's closing parenthesis: session 4th, utime 12th, stime 13th).
        c=$(awk -v sid="$pid" '{sub(/^.*\) /, ""); if ($4 == sid) t += $12 + $13} END {print t + 0}' /proc/[0-9]*/stat 2>/dev/null)
        [ "${c:-0}" -gt "$sampled" ] && sampled=$c
        # The host's lowest MemAvailable (kB) sampled while the piece ran: a test killed without a
        # word (session 52: exit 9 after 271 s, two MSD halves at once) may be the OOM killer's.
        m=$(awk '$1 == "MemAvailable:" {print $2}' /proc/meminfo 2>/dev/null)
        [ -n "$m" ] && { [ -z "$mem_low" ] || [ "$m" -lt "$mem_low" ]; } && mem_low=$m
        sleep 0.5
      done
      wait "$pid"
    }
  } 2>"$OUT/cpu.$i"
  rc=$?
  oom1=$(awk '$1 == "oom_kill" {print $2}' /proc/vmstat 2>/dev/null)
  [ -n "$gpu_pid" ] && { kill "$gpu_pid" 2>/dev/null; wait "$gpu_pid" 2>/dev/null; }
  local wall=$((SECONDS - t0)) host gpu=-
  host=$(awk -v w="$wall" -v p="$sampled" -v hz="$(getconf CLK_TCK 2>/dev/null || echo 100)" \
    'NF == 2 && $1 ~ /^[0-9.]+$/ {c = $1 + $2} END {if (p / hz > c) c = p / hz;
    printf "%.1fs (%.1f cores)", c, (w > 0 ? c / w : 0)}' "$OUT/cpu.$i")
  [ -s "$OUT/gpu.$i" ] && gpu=$(awk '$1 ~ /^[0-9]+$/ {s += $1; n++} END {if (n) printf "%.0f%%", s / n; else print "-"}' "$OUT/gpu.$i")
  rm -f "$OUT/cpu.$i" "$OUT/gpu.$i"
  summary=$(grep -o 'RACECHECK SUMMARY:.*' "$txt" | tail -1)
  ran=$(grep -c '^\[       OK \]' "$txt")
  skipped=$(grep -c '^\[  SKIPPED \] .* ([0-9]* ms)$' "$txt")
  local flag=clean
  # A test that skips itself (a knob it refuses, another device) is not checked: say so.
  [ "$skipped" -gt 0 ] && { summary="$skipped test(s) SKIPPED; $summary"; flag=incomplete; }
  [ "$ran" -eq 0 ] && [ "$skipped" -eq 0 ] && grep -q 'Running 0 tests' "$txt" && { summary="no test matched; $summary"; flag=incomplete; }
  # What the host's memory did meanwhile, for a piece that died.
  local memory=
  [ -n "$mem_low" ] && memory=$(awk -v k="$mem_low" 'BEGIN {printf "; the host'"'"'s lowest sampled MemAvailable %.1f GiB", k / 1048576}')
  [ -n "$oom0" ] && [ -n "$oom1" ] && memory="$memory; the kernel's OOM kills meanwhile: $((oom1 - oom0))"
  if { [ $rc -eq 124 ] || [ $rc -eq 137 ]; } && [ "$wall" -ge "$limit" ]; then
    summary="timed out at ${limit}s after $ran test(s) OK; $summary"
    flag=incomplete
  elif [ $rc -eq 137 ]; then
    # timeout's own status for a tool killed by SIGKILL before the limit: not a timeout (a
    # reviewing helper's catch, session 52: the OOM killer may pick the tool, not the test).
    summary="the tool was killed before its limit (exit 137: SIGKILL) after $ran test(s) OK$memory; $summary"
    flag=incomplete
  elif [ $rc -ne 0 ]; then
    flag=hazard
    # The tool's word for a target that died (it then returns the signal's number: 9 is SIGKILL),
    # after however many tests passed; not a hazard, nor a test that failed.
    if grep -q "process didn't terminate successfully" "$txt"; then
      summary="the test died without a result (exit $rc$([ $rc -eq 9 ] && echo ': SIGKILL')) after $ran test(s) OK$memory; $summary"
    fi
  fi
  grep -q '^\[  FAILED  \]' "$txt" && { summary="gtest FAILED; $summary"; flag=hazard; }
  echo "$flag" >"$OUT/flag.$i"
  cat "$txt" >>"$OUT/racecheck.$i.log"
  row "| \`$filt\` | ${knobs:--} | ${args:--} | ${wall}s | ${host:--} | $gpu | $rc | $summary |"
  rm -f "$txt"
}
# Piece k's text into racecheck.log and its flag into the verdict. A run cut by an outer limit
# leaves racecheck.k.log (the piece's header, and its text if it finished) and piece.k.txt (the
# text of one still running) behind in $OUT, and in parallel mode up to k sanitizer processes
# until their own timeouts end them.
merge() {
  [ -f "$OUT/racecheck.$1.log" ] && { cat "$OUT/racecheck.$1.log" >>"$OUT/racecheck.log"; rm -f "$OUT/racecheck.$1.log"; }
  local f=incomplete
  [ -f "$OUT/flag.$1" ] && f=$(cat "$OUT/flag.$1")
  case $f in
    clean) ;;
    hazard) hazard=1 ;;
    *) incomplete=1 ;;
  esac
  rm -f "$OUT/flag.$1"
  return 0
}
i=0
for p in "$@"; do
  i=$((i + 1))
  [ "$par" -gt 1 ] && while [ "$(jobs -rp | wc -l)" -ge "$par" ]; do wait -n; done
  limit=${PIECE_S:-240}
  if [ -n "${DEADLINE_S:-}" ]; then
    left=$((DEADLINE_S - SECONDS - 10))  # the piece's timeout may take 10 s more to kill it
    if [ "$left" -le 5 ]; then
      IFS='|' read -r filt knobs args <<<"$p"
      row "| \`$(echo "$filt" | xargs)\` | ${knobs:--} | ${args:--} | - | - | - | skipped (DEADLINE_S) | |"
      incomplete=1
      continue
    fi
    [ "$left" -lt "$limit" ] && limit=$left
  fi
  if [ "$par" -gt 1 ]; then
    run_piece "$i" "$p" "$limit" &
  else
    run_piece "$i" "$p" "$limit"
    merge "$i"  # at once: a call cut by an outer limit keeps the pieces before it in the log
  fi
done
wait
# Parallel pieces' text in the order given (a piece skipped by the deadline has no flag: incomplete,
# as its row says).
[ "$par" -gt 1 ] && for ((k = 1; k <= i; k++)); do merge "$k"; done
rm -f ${segv_so:+"$segv_so"}
# 0: every piece ran to completion, no hazard; 1: a hazard, a failed test or a tool error;
# 4: nothing wrong seen, but a piece was cut, skipped, or checked nothing.
[ $hazard -ne 0 ] && exit 1
[ $incomplete -ne 0 ] && exit 4
exit 0
