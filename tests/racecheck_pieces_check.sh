#!/usr/bin/env bash
# CI check of scripts/racecheck-pieces.sh's verdicts, with stand-ins for compute-sanitizer and the
# test binary (no GPU here): exit 0 clean, 1 for a hazard or a failed test, 4 for a piece cut,
# skipped or matching nothing; the same one piece at a time and RACECHECK_PARALLEL pieces at once;
# every piece's row and text; a knob reaching its piece; a cut run's leftovers ignored.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/bin"
# The stand-in test binary: what a gtest filter's piece prints, by the filter's name.
cat >"$tmp/test_cuda_aggregate" <<'EOF'
#!/usr/bin/env bash
f=${1#--gtest_filter=}
case "$f" in
  *None*) echo "Running 0 tests from 0 test suites."; exit 0 ;;
  *Skip*) echo "Running 1 test"; echo "[  SKIPPED ] $f (1 ms)"; exit 0 ;;
  *Fail*) echo "Running 1 test"; echo "[  FAILED  ] $f (1 ms)"; exit 1 ;;
  *Slow*) echo "Running 1 test"; sleep 30; exit 0 ;;
  *Killed*) echo "Running 1 test"; sleep 1; kill -9 $$ ;;  # after a sample of the host memory
  *Spin*) echo "Running 1 test"; end=$((SECONDS + 4)); while [ $SECONDS -lt $end ]; do :; done ;;
  # 1.5 s of its own CPU time (utime + stime, clock ticks at 100 Hz), however loaded the machine:
  # a wall-clock loop against a 2 s limit was cut under load (session 47's fresh clone).
  *Busy*) echo "Running 1 test"; while :; do read -r -a st </proc/$$/stat; [ $((st[13] + st[14])) -ge 150 ] && break; done; echo "[       OK ] $f (1500 ms)" ;;
  *) echo "Running 1 test"; sleep 0.2; echo "[       OK ] $f (1 ms) cases=${PIPELINK_TEST_CASES:-all}" ;;
esac
EOF
# The stand-in sanitizer: runs the binary, reports a hazard for pieces named *Hazard*.
cat >"$tmp/bin/compute-sanitizer" <<'EOF'
#!/usr/bin/env bash
[ "${1:-}" = --help ] && { echo "  --kernel-name arg"; exit 0; }
echo "sanitizer options: ${*%% */test_cuda_aggregate*}"
# The tool itself killed (the OOM killer's choice, say) before the piece's limit.
[[ "$*" == *ToolKilled* ]] && { sleep 1; kill -9 $$; }
while [ $# -gt 0 ] && [[ $1 != */test_cuda_aggregate ]]; do shift; done
bin=$1
shift
rc=0
"$bin" "$@" || rc=$?
# A target killed by a signal: the real tool says so and returns the signal's number (session 52).
[ $rc -gt 128 ] && { echo "========= Error: process didn't terminate successfully"; rc=$((rc - 128)); }
if [[ "$*" == *Hazard* ]]; then
  echo "========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)"
  exit 3
fi
echo "========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)"
exit $rc
EOF
# The stand-in nvidia-smi: a GPU 37% busy, a sample every 0.2 s until it is stopped.
cat >"$tmp/bin/nvidia-smi" <<'EOF'
#!/usr/bin/env bash
while :; do echo 37; sleep 0.2; done
EOF
chmod +x "$tmp/test_cuda_aggregate" "$tmp/bin/compute-sanitizer" "$tmp/bin/nvidia-smi"
export PATH="$tmp/bin:$PATH" RACECHECK_BIN="$tmp/test_cuda_aggregate"
unset DEADLINE_S RACECHECK_ARGS SEGV

n=0
check() {  # name, wanted exit, RACECHECK_PARALLEL, pieces...
  local name=$1 want=$2 par=$3 rc=0
  shift 3
  n=$((n + 1))
  local out=$tmp/out$n
  OUT=$out RACECHECK_PARALLEL=$par PIECE_S=${LIMIT:-2} "$root/scripts/racecheck-pieces.sh" "$@" >"$out.txt" 2>&1 || rc=$?
  if [ "$rc" != "$want" ]; then
    echo "FAIL: $name (RACECHECK_PARALLEL=$par): exit $rc, wanted $want"
    cat "$out.txt"
    exit 1
  fi
  local rows
  rows=$(grep -c '^| `' "$out/racecheck.md")
  [ "$rows" -eq $# ] || { echo "FAIL: $name: $rows rows for $# pieces"; cat "$out/racecheck.md"; exit 1; }
  [ "$(grep -c '^=== piece' "$out/racecheck.log")" -eq $# ] || { echo "FAIL: $name: the log lacks a piece"; exit 1; }
  # Nothing per piece is left behind.
  if ls "$out" | grep -Eq '^(flag\.|piece\.|racecheck\.[0-9]|cpu\.|gpu\.)'; then
    echo "FAIL: $name: leftovers in OUT: $(ls "$out")"
    exit 1
  fi
  echo "ok: $name (RACECHECK_PARALLEL=$par, exit $rc)"
}

for par in 1 3; do
  check "clean pieces" 0 "$par" '*A*' '*B*|PIPELINK_TEST_CASES=0,1' '*C*'
  grep -q 'cases=0,1' "$tmp/out$n/racecheck.log" || { echo "FAIL: the piece's knob did not reach its test"; exit 1; }
  check "a hazard" 1 "$par" '*A*' '*Hazard*' '*C*'
  check "a failed test" 1 "$par" '*A*' '*Fail*'
  check "a test killed by a signal" 1 "$par" '*A*' '*Killed*'
  grep -Eq '^\| `\*Killed\*` .* \| 9 \| the test died without a result \(exit 9: SIGKILL\) after 0 test\(s\) OK; the host.s lowest sampled MemAvailable [0-9]+\.[0-9] GiB; the kernel.s OOM kills meanwhile: [0-9]+; ' \
    "$tmp/out$n/racecheck.md" || { echo "FAIL: the killed piece's row does not say so"; cat "$tmp/out$n/racecheck.md"; exit 1; }
  check "a piece cut by its limit" 4 "$par" '*A*' '*Slow*'
  check "a piece matching nothing" 4 "$par" '*None*'
  check "a test that skips itself" 4 "$par" '*A*' '*Skip*'
done
# Options from a file (@FILE: its lines, comments and blank lines left out) reach the sanitizer,
# beside the piece's own.
printf '%s\n' "# a comment" "--kernel-name-exclude kns=one_kernel" "" "--kernel-name-exclude kns=two_kernel" >"$tmp/opts.txt"
check "options from a file" 0 1 "*A*||@$tmp/opts.txt --force-blocking-launches"
grep -q 'sanitizer options: .*--kernel-name-exclude kns=one_kernel --kernel-name-exclude kns=two_kernel --force-blocking-launches' \
  "$tmp/out$n/racecheck.log" || { echo "FAIL: the file's options did not reach the sanitizer"; cat "$tmp/out$n/racecheck.log"; exit 1; }
! grep -q 'a comment' "$tmp/out$n/racecheck.log" || { echo "FAIL: a comment line reached the sanitizer"; exit 1; }
# Each row gives the host CPU seconds the piece took (a busy loop of 1.5 s of CPU: at least 1 s) and the
# GPU's mean utilization while it ran (the stand-in's 37%).
LIMIT=30 check "the host CPU and GPU busy columns" 0 1 '*Busy*'
grep -Eq '^\| `\*Busy\*` \| - \| - \| [0-9]+s \| [1-9][0-9]*\.[0-9]s \([0-9.]+ cores\) \| 37% \| 0 \|' "$tmp/out$n/racecheck.md" ||
  { echo "FAIL: the Busy piece's row lacks its host CPU or GPU figure"; cat "$tmp/out$n/racecheck.md"; exit 1; }
# A piece cut by its limit whose test outlives the tool (not waited for, so bash's `time` misses
# it): the row still counts the test's CPU seconds, from the samples of the piece's session.
check "a cut piece's host CPU" 4 1 '*Spin*'
grep -Eq '^\| `\*Spin\*` \| - \| - \| [0-9]+s \| ([1-9][0-9]*\.[0-9]|0\.[1-9])s \(' "$tmp/out$n/racecheck.md" ||
  { echo "FAIL: the cut piece's row lacks its test's CPU seconds"; cat "$tmp/out$n/racecheck.md"; exit 1; }
# A tool killed before its limit is not a timeout: incomplete, and said so.
LIMIT=30 check "a tool killed before its limit" 4 1 '*ToolKilled*'
grep -Eq '^\| `\*ToolKilled\*` .* \| 137 \| the tool was killed before its limit \(exit 137: SIGKILL\) after 0 test\(s\) OK; the host.s lowest' \
  "$tmp/out$n/racecheck.md" || { echo "FAIL: the killed tool's row does not say so"; cat "$tmp/out$n/racecheck.md"; exit 1; }
# A piece whose option file is missing is not run, and counts as incomplete.
check "a missing option file" 4 1 "*A*||@$tmp/no-such-file.txt"
grep -q 'not run: no option file' "$tmp/out$n/racecheck.md" || { echo "FAIL: a missing option file ran its piece"; exit 1; }
# A run cut earlier left a hazard flag and a log behind in the same OUT: not this run's verdict.
mkdir -p "$tmp/stale"
echo hazard >"$tmp/stale/flag.1"
echo "stale text" >"$tmp/stale/racecheck.1.log"
OUT=$tmp/stale PIECE_S=2 "$root/scripts/racecheck-pieces.sh" '*A*' >/dev/null 2>&1 || {
  echo "FAIL: a stale flag from an earlier run changed the verdict"
  exit 1
}
! grep -q "stale text" "$tmp/stale/racecheck.log" || { echo "FAIL: a stale log reached this run's"; exit 1; }
# A bad RACECHECK_PARALLEL is refused before any piece runs.
rc=0
OUT=$tmp/bad RACECHECK_PARALLEL=x "$root/scripts/racecheck-pieces.sh" '*A*' >/dev/null 2>&1 || rc=$?
[ "$rc" = 2 ] || { echo "FAIL: RACECHECK_PARALLEL=x gave exit $rc, wanted 2"; exit 1; }
echo "racecheck-pieces: every verdict as expected"
