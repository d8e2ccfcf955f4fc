#!/usr/bin/env bash
# CI check of scripts/gpu-check.sh's control flow, with stand-ins for the GPU machine's tools (no
# GPU here): a failed build stops every later step and the script exits 1; a failed CTest exits
# 1; SKIP_* switches read 0 as off and a skipped pytest has its row; a clean run exits 0; racecheck
# in pieces leaves the whole-binary racecheck out unless asked. What a
# GPU call's device time is spent on, checked before the call (session 46's review found the
# script exited 0 whatever happened, and tested a warm machine's old binaries after a failed build).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/bin" "$tmp/repo/scripts" "$tmp/repo/.deps/root/usr"
cp "$root"/scripts/gpu-check.sh "$root"/scripts/racecheck-*.sh "$root"/scripts/racecheck-*.txt "$tmp/repo/scripts/"
stub() { printf '#!/usr/bin/env bash\n%s\n' "$2" >"$tmp/bin/$1"; chmod +x "$tmp/bin/$1"; }
stub nvidia-smi 'echo "NVIDIA H200 (stand-in)"'
stub nvcc 'echo "Cuda compilation tools, release 13.0 (stand-in)"'
stub cmake 'echo "cmake $*"; [[ "$*" == *--build* ]] && exit ${FAKE_BUILD_RC:-0}; exit 0'
stub ctest 'echo "ctest $*"; exit ${FAKE_CTEST_RC:-0}'
stub python3 'case "$*" in
  *"import nanobind"*) exit ${FAKE_NO_NANOBIND:-0} ;;
  *"import torch"*) echo 2.11.0 ;;
  *"pytest --version"*) echo "pytest 8" ;;
  *"-m pytest"*) echo "1 passed"; exit ${FAKE_PYTEST_RC:-0} ;;
esac
exit 0'
fails=0
# run NAME EXPECTED_RC GREP_FOR... (env assignments in ENV_ARGS): the summary must show each pattern.
check() {
  local name=$1 want=$2; shift 2
  local out rc=0
  out=$(cd "$tmp/repo" && env -i PATH="$tmp/bin:/usr/bin:/bin" HOME="$tmp" PIPELINK_GIT_REVISION=000000000000 \
        OUT="$tmp/out-$name" "${ENV_ARGS[@]}" bash scripts/gpu-check.sh 2>&1) || rc=$?
  if [ "$rc" != "$want" ]; then echo "FAIL $name: exit $rc, expected $want"; echo "$out" | tail -15; fails=$((fails + 1)); fi
  for pat in "$@"; do
    if [[ $pat == !* ]]; then
      if grep -qE "${pat#!}" <<<"$out"; then echo "FAIL $name: found '${pat#!}'"; fails=$((fails + 1)); fi
    elif ! grep -qE "$pat" <<<"$out"; then
      echo "FAIL $name: no '$pat' in:"; echo "$out" | tail -15; fails=$((fails + 1))
    fi
  done
}
ENV_ARGS=(FAKE_BUILD_RC=1)
check build_fails 1 "build +FAILED" "everything after the build +SKIPPED \(the build failed\)" "!^ctest " "!^bench "
ENV_ARGS=(FAKE_CTEST_RC=1 SKIP_BENCH=1 SKIP_PYTEST=1 SKIP_RACECHECK=1)
check ctest_fails 1 "^ctest +FAILED" "pytest +SKIPPED \(SKIP_PYTEST\)"
ENV_ARGS=(SKIP_PYTEST=0 SKIP_BENCH=1 SKIP_RACECHECK=1)
check pytest_zero_is_off 0 "^ctest +ok" "^pytest \(torch 2.11.0\) +ok"
ENV_ARGS=(SKIP_CTEST=1 SKIP_BENCH=1 SKIP_RACECHECK=1 FAKE_PYTEST_RC=1)
check pytest_fails 1 "^pytest \(torch 2.11.0\) +FAILED" "!^ctest "
# Without the Python module the Python steps have SKIPPED rows, not silence (session 51's review).
ENV_ARGS=(FAKE_NO_NANOBIND=1 SKIP_CTEST=1 SKIP_BENCH=1 SKIP_RACECHECK=1 COMPARE=power-law)
check no_python_module 0 "^pytest +SKIPPED \(no Python module" "^compare_torch power-law +SKIPPED \(no Python module" "!^pytest \(torch"
# Racecheck in pieces leaves the whole-binary racecheck of test_cuda_aggregate out unless asked
# (session 49's call 3 spent its 540 s there, with no piece run); test_cuda_runtime's still runs.
mkdir -p "$tmp/repo/build/gpu/tests"
for b in test_cuda_aggregate test_cuda_runtime; do stub_t="$tmp/repo/build/gpu/tests/$b"
  printf '#!/usr/bin/env bash\necho "[  PASSED  ] 1 test."\n' >"$stub_t"; chmod +x "$stub_t"; done
stub compute-sanitizer 'echo "compute-sanitizer $*"; echo "========= ERROR SUMMARY: 0 errors"'
ENV_ARGS=(SKIP_CTEST=1 SKIP_MEMCHECK=1 SKIP_PYTEST=1 SKIP_BENCH=1 DEADLINE_S=60 PIECE_S=5 "RACECHECK_PIECES=*Some*")
check pieces_skip_whole 0 "racecheck test_cuda_aggregate +SKIPPED \(RACECHECK_PIECES given" "racecheck test_cuda_runtime +ok"
ENV_ARGS=(SKIP_CTEST=1 SKIP_MEMCHECK=1 SKIP_PYTEST=1 SKIP_BENCH=1 DEADLINE_S=60 PIECE_S=5 "RACECHECK_PIECES=*Some*" RACECHECK_WHOLE=1)
check pieces_and_whole 0 "racecheck test_cuda_aggregate +ok" "!RACECHECK_PIECES given"
# BENCH_ARGS reach the main benchmark's command line, split into words (session 52's sampler A/B).
mkdir -p "$tmp/repo/build/gpu/tools/pipelink"
printf '#!/usr/bin/env bash\necho "pipelink $*"\n' >"$tmp/repo/build/gpu/tools/pipelink/pipelink"
chmod +x "$tmp/repo/build/gpu/tools/pipelink/pipelink"
ENV_ARGS=(SKIP_CTEST=1 SKIP_MEMCHECK=1 SKIP_PYTEST=1 SKIP_RACECHECK=1 WORKLOADS=products-like "BENCH_ARGS=--free-sample-us 0 --no-null-test")
check bench_args 0 "^bench products-like random +ok"
grep -q -- "pipelink bench aggregate --workload products-like --device cuda --order random --free-sample-us 0 --no-null-test --json" \
  "$tmp/out-bench_args/bench.log" || { echo "FAIL bench_args: the options did not reach the bench:"; cat "$tmp/out-bench_args/bench.log"; fails=$((fails + 1)); }
[ "$fails" -eq 0 ] && echo "gpu_check_check: 8 cases ok"
exit $((fails > 0))
