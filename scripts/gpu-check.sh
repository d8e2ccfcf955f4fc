#!/usr/bin/env bash
# One call on the GPU machine: build with CUDA, run every test, run the GPU tests under
# compute-sanitizer (memcheck, racecheck), run the benchmark; full results under $OUT, a short
# table last. The machine cannot download: run scripts/fetch-gpu-deps.sh here first and pass
# `carry: [".deps"]` to the device tool.
#   usage: OUT=/some/dir scripts/gpu-check.sh
#   The device tool's copy of .git is the one of the session's start, so `git describe` there
#   names an old commit: write the hash into the device command literally,
#   PIPELINK_GIT_REVISION=<git rev-parse --short=12 HEAD, run here>. A `$(git rev-parse ...)` in
#   the command runs there and names the stale commit (session 7's calls 4 and 9 were labelled
#   a2cd4a9d2b03 that way).
#   knobs: WORKLOADS, ORDER, COLD=1 (bench --cold-processes), BENCH_ARGS (more options for the main
#          benchmarks, e.g. "--free-sample-us 0": the cold calls without the free-memory sampler), COMPARE (COMPARE_ARGS: options for bench/compare_torch.py; unset, issue 4's
#          form "--rounds 3 --prepare-weights" (session 32's call 3 left it out and judged the planned
#          call's first, table-building call at 16.84 B/edge); set it empty for none; e.g.
#          "--variants pipelink-plan-build,pipelink-planned,eager"), SWEEP, NCU (workloads to profile), SKIP_TESTS, SKIP_PYTEST,
#          MUTANTS (scripts/mutation-check.sh), SKIP_BENCH, SKIP_SANITIZER, VARIANTS and INSTR (A/B of opt-in
#          kernel variants: see below),
#          RACECHECK_FILTER (a gtest filter for the slow racecheck pass), SKIP_RACECHECK, RACECHECK_ARGS,
#          SKIP_CTEST, SKIP_MEMCHECK (with SKIP_TESTS unset: racecheck alone), RACECHECK_PIECES (racecheck of
#          test_cuda_aggregate in pieces with their own limits: "FILTER[|knobs[|options]];..."; PIECE_S;
#          RACECHECK_PARALLEL=k: up to k pieces at once; with pieces given, the whole-binary racecheck
#          of test_cuda_aggregate runs only under RACECHECK_FILTER or RACECHECK_WHOLE=1),
#          CTEST_VARIANTS="tag:VAR=val[,VAR2=val] ..." (the whole CTest again under opt-in knobs),
#          AB="tag:VAR=1[,VAR2=1] ..." (the main benchmarks also build a plan under each variant
#          and time its planned run, the plan build, a one-shot call and a lean call interleaved with the default,
#          in the same process: `pipelink bench --ab`; for the knobs read at plan build,
#          PIPELINK_AGG_SEGMENT, PIPELINK_AGG_BUILD_CHUNKS etc.),
#          RELABEL=1 (each benchmarked workload again with its nodes renamed at random: --relabel; or RELABEL="power-law": the workloads named),
#          TRACE_BUILD=1 (the main benchmarks log each plan build's steps: PIPELINK_LOG_LEVEL=debug),
#          MICRO="file.cu ..." (standalone micro-benchmarks under bench/micro, built and run first),
#          NCU_PY="products-like" (the planned run's kernel under ncu from Python and from C++),
#          NCU_KERNEL, NCU_SKIP, NCU_COUNT, NCU_KNOBS (which launches NCU profiles, under which knobs),
#          COMPARE_ALLOC (torch allocator backends for COMPARE, default "native"),
#          COMPARE_KNOBS="tag:VAR=val[,VAR2=val] ..." (each COMPARE run again under those knobs),
#          DEADLINE_S (see step() below),
#          MATRIX=1 (issue 3's correctness matrix: ORDER and WORKLOADS default to both orders and all four
#          named workloads, arxiv-like seed-40M products-like power-law; ~70 s a pair, so split by ORDER
#          under a 600 s call)
set -uo pipefail
if [ -n "${MATRIX:-}" ]; then
  ORDER=${ORDER:-random dst-sorted}
  WORKLOADS=${WORKLOADS:-arxiv-like seed-40M products-like power-law}
fi
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/out/gpu-check}
mkdir -p "$OUT"
DEPS=$PWD/.deps/root/usr
[ -d "$DEPS" ] || { echo "no .deps/: run scripts/fetch-gpu-deps.sh and carry .deps"; exit 2; }
export LD_LIBRARY_PATH=$DEPS/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
jobs=$(nproc)
status=()
# The device tool returns at most 8 files: steps append to a few shared logs.
# DEADLINE_S=N: no step starts after N seconds of this script, and a running one is stopped at N
# (status "TIMED OUT"), so the summary still prints inside the device tool's limit. Set it some
# 30 s under that limit: session 8 lost a whole 500 s call whose last step, a mutant's rebuild,
# ran past it and took the summary with it.
# flag VAR: whether a switch is on. "0", "false", "no" and empty are off: SKIP_PYTEST=0 once
# turned pytest off (any value did), with no row to say so (a review, session 46).
flag() { case "${!1:-}" in "" | 0 | false | no) return 1 ;; *) return 0 ;; esac; }
step() {  # name, log, command...: runs, appends to $OUT/log, records pass/fail
  local name=$1 log=$2; shift 2
  local t0=$(date +%s) rc=0
  if [ -n "${DEADLINE_S:-}" ]; then
    local left=$(( DEADLINE_S - SECONDS ))
    if [ "$left" -le 5 ]; then status+=("$name|SKIPPED (DEADLINE_S=$DEADLINE_S)|0s"); return; fi
    set -- timeout --kill-after=10 "$left" "$@"
  fi
  echo "=== $name: $*" >>"$OUT/$log"
  echo "# $name" >>"$OUT/clocks.csv"
  "$@" >>"$OUT/$log" 2>&1 || rc=$?
  local took="$(( $(date +%s) - t0 ))s"
  if [ $rc -eq 0 ]; then status+=("$name|ok|$took")
  elif [ -n "${DEADLINE_S:-}" ] && { [ $rc -eq 124 ] || [ $rc -eq 137 ]; }; then status+=("$name|TIMED OUT (DEADLINE_S)|$took")
  # racecheck-pieces.sh's 4: a piece cut, skipped or matching nothing, no hazard found (it read
  # as FAILED, the same as a hazard: a review, session 46)
  elif [ $rc -eq 4 ] && [[ $name == racecheck* ]]; then status+=("$name|INCOMPLETE (see $log)|$took")
  else status+=("$name|FAILED (see $log)|$took"); fi
}

{ nvidia-smi; nvcc --version; cmake --version; g++ --version; } >"$OUT/env.txt" 2>&1
# The GPU's clocks, power and temperature every 500 ms, with a "# step" line where each step
# starts: the staged run is ~90% issue-bound, so an SM clock that differs between two processes
# (the C++ bench, compare_torch) would show in their times. Summarized per step at the end.
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv,noheader,nounits \
  -lms 500 >>"$OUT/clocks.csv" 2>/dev/null &
clock_pid=$!
trap 'kill $clock_pid 2>/dev/null' EXIT
rev=${PIPELINK_GIT_REVISION:-$(git describe --always --dirty --abbrev=12 2>/dev/null || echo unknown)}
export PIPELINK_GIT_REVISION=$rev  # compare_torch.py reads it; the C++ bench has it stamped from -D below (the copy's .git may be stale)
# The Python module too, when this machine's python3 has nanobind (the H200 machine does).
pyopt=()
if python3 -c "import nanobind, sysconfig, os, sys; sys.exit(not os.path.exists(sysconfig.get_paths()['include'] + '/Python.h'))" 2>/dev/null; then pyopt=(-DPIPELINK_PYTHON=ON -DPython_EXECUTABLE="$(command -v python3)"); fi
step configure tests.log cmake -S . -B build/gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DPIPELINK_CUDA=ON -DPIPELINK_WERROR=ON \
  -DCMAKE_PREFIX_PATH="$DEPS" -DCMAKE_LIBRARY_ARCHITECTURE=x86_64-linux-gnu -DPIPELINK_GIT_REVISION="$rev" "${pyopt[@]}"
# MICRO: standalone micro-benchmarks, built in the background while the project builds.
micro_pids=()
for m in ${MICRO:-}; do
  ( nvcc -O3 -std=c++20 -arch=sm_90 "bench/micro/$m" -o "build/micro-${m%.cu}" >"build/micro-${m%.cu}.log" 2>&1 ) &
  micro_pids+=($!)
done
step build tests.log cmake --build build/gpu -j "$jobs"
# A failed configure or build stops the rest: on a warm machine build/gpu still holds the last
# call's binaries, which the tests and the bench would run (labelled with this call's revision).
if [[ ${status[-1]} != build\|ok\|* || ${status[-2]} != configure\|ok\|* ]]; then
  status+=("everything after the build|SKIPPED (the build failed)|0s")
  SKIP_TESTS=1 SKIP_PYTEST=1 SKIP_BENCH=1 MICRO= INSTR= NCU= SWEEP= MUTANTS= CTEST_VARIANTS= RELABEL= VARIANTS= COMPARE=
fi
for p in "${micro_pids[@]}"; do wait "$p"; done
for m in ${MICRO:-}; do
  step "micro $m" micro.log bash -c "cat build/micro-${m%.cu}.log; build/micro-${m%.cu}"
done
if ! flag SKIP_TESTS; then  # SKIP_TESTS=1: benchmarks only (a second pass in the same call)
  # SKIP_CTEST=1 and SKIP_MEMCHECK=1 leave those steps out, so that a call can give its time to
  # racecheck in pieces (RACECHECK_FILTER): issue 3 asks for it, and v33-v40 skipped it whole.
  flag SKIP_CTEST || step ctest tests.log ctest --test-dir build/gpu -j 8 --output-on-failure
  # CTEST_VARIANTS="tag:VAR=val[,VAR2=val] ...": the whole CTest again under opt-in knobs, so a
  # form meant to become the default meets every test before it does (the tests that compare
  # forms against the default skip themselves under a non-default knob). E.g.
  # CTEST_VARIANTS="search:PIPELINK_AGG_ROW_PTR=search late:PIPELINK_AGG_ONESHOT_W=late".
  for v in ${CTEST_VARIANTS:-}; do
    tag=${v%%:*}; vars=${v#*:}
    step "ctest [$tag]" tests.log env ${vars//,/ } ctest --test-dir build/gpu -j 8 --output-on-failure
  done
  source scripts/racecheck-opts.sh  # racecheck_expand_opts: @FILE words in RACECHECK_ARGS
  # Racecheck may leave our kernels without shared memory uninstrumented
  # (@scripts/racecheck-no-shared.txt in RACECHECK_ARGS or a piece's options): where a call asks
  # for it, that list is first checked against this build's PTX, so that a kernel given shared
  # memory since is not left out unseen; if the check does not pass, no racecheck that uses it runs.
  noshared_bad= uses_noshared=
  [[ "${RACECHECK_PIECES:-} ${RACECHECK_ARGS:-}" == *racecheck-no-shared* ]] && uses_noshared=1
  IFS=';' read -ra plist <<<"${RACECHECK_PIECES:-}"
  for p in "${plist[@]}"; do  # a piece list file (@FILE) may name it in a piece's options
    [[ $p == @* ]] && grep -v '^#' "${p#@}" 2>/dev/null | grep -q racecheck-no-shared && uses_noshared=1
  done
  if [ -n "$uses_noshared" ]; then
    step "racecheck no-shared list" sanitizer.log scripts/racecheck-no-shared.sh build/gpu/src/libpipelink.so
    [[ ${status[-1]} == *"|ok|"* ]] || noshared_bad=1
  fi
  for t in $( ! flag SKIP_SANITIZER && find build/gpu/tests -maxdepth 1 -type f -executable -name 'test_cuda_*' | sort); do
    n=$(basename "$t")
    # test_cuda_knobs reads environment knobs on the host and makes no CUDA call, so
    # compute-sanitizer ends it with "terminated before first instrumented API call" (v46).
    [ "$n" = test_cuda_knobs ] && continue
    # The full-device test fills the GPU to 56 MB free, which would squeeze the sanitizer's own
    # device memory; CTest runs it, and OneShotInEdgeRanges takes the same edge-range code here.
    # OutOfMemoryNamesTheBytes fails a 4 PiB cudaMalloc on purpose, and memcheck counts each failed
    # API call as an error (4 at e731a7a; 0 without it); CTest runs it.
    mfilt=()
    [ "$n" = test_cuda_aggregate ] && mfilt=(--gtest_filter=-*OneShotOnAFullDevice*)
    [ "$n" = test_cuda_runtime ] && mfilt=(--gtest_filter=-*OutOfMemoryNamesTheBytes*)
    flag SKIP_MEMCHECK ||
      step "memcheck $n" sanitizer.log compute-sanitizer --tool memcheck --error-exitcode 3 "$t" "${mfilt[@]}"
    # RACECHECK_FILTER (a gtest filter) narrows the slow racecheck pass of test_cuda_aggregate when
    # device time is short (on a binary where it matches no test, compute-sanitizer fails with
    # "terminated before first instrumented API call", so the other binaries run whole).
    # By default racecheck skips the stream-ordering test: it has no shared-memory code of its
    # own, and its busy work (20 planned runs of a 16M-edge graph) did not finish in 8 minutes
    # under racecheck (c02714dc5981); memcheck runs it (the whole binary took 11 s). Even so the
    # default pass ran past 327 s at e731a7a (cut by DEADLINE_S), against 9 s for
    # RACECHECK_FILTER="*StagedAndRegisterWalksGiveTheSameBits*:*RowStrides*" at 828e4e5: give a
    # filter unless the call has ~6 minutes to spare.
    # RACECHECK_FILTER="*StagedIssueVariants*:*CompactPlanSrcColumnWidths*" took 412 s (f0669c6,
    # session 29) and cut that call's bench. SKIP_RACECHECK=1 leaves racecheck out (memcheck
    # still runs); a filter that matches nothing reads as a failed step instead.
    # For the rest of the suite: scripts/racecheck-pieces.sh after a build in the same call (each
    # piece its own filter, knobs and time limit, a table at the end); v42 measured 26-68x CTest's
    # time for most tests (1.2x for one without shared memory); docs/results/h200-v42-racecheck.md
    # lists which tests have run that way, scripts/racecheck-remaining.txt the rest.
    # The two host-thread tests (session 43) are left out too: they launch the kernels the other
    # tests check, from host threads on streams of their own, and shared memory is a block's own,
    # so host concurrency cannot add a shared-memory hazard; memcheck runs them.
    filt=()
    [ "$n" = test_cuda_aggregate ] && filt=(--gtest_filter="${RACECHECK_FILTER:--*PlanBuiltOnOneStreamRunsOnAnother*:*OneShotOnAFullDevice*:*HostThreadsSharingAPlan*:*StatusSlotsPastOnePage*}")
    # RACECHECK_ARGS: more compute-sanitizer options (e.g. "--show-backtrace device").
    # @FILE words in RACECHECK_ARGS (the pieces' option files) become the file's options here too.
    rargs=() rbad=
    if opts_text=$(racecheck_expand_opts ${RACECHECK_ARGS:-} 2>/dev/null); then read -ra rargs <<<"$opts_text"
    else rbad="an option file of RACECHECK_ARGS cannot be read"; fi
    [[ -n "$noshared_bad" && "${RACECHECK_ARGS:-}" == *racecheck-no-shared* ]] && rbad="the no-shared list did not pass its check"
    # With RACECHECK_PIECES given, the whole-binary racecheck of test_cuda_aggregate is left out
    # unless RACECHECK_FILTER or RACECHECK_WHOLE=1 asks for it: session 49's call 3 gave the pieces
    # without SKIP_RACECHECK=1, and the whole binary took all 540 s of it (12 of 49 tests done,
    # no piece run).
    if ! flag SKIP_RACECHECK && [ "$n" = test_cuda_aggregate ] && [ -n "${RACECHECK_PIECES:-}" ] &&
       [ -z "${RACECHECK_FILTER:-}" ] && ! flag RACECHECK_WHOLE; then
      status+=("racecheck $n|SKIPPED (RACECHECK_PIECES given; RACECHECK_WHOLE=1 runs it too)|0s")
    elif ! flag SKIP_RACECHECK && [ -n "$rbad" ]; then status+=("racecheck $n|SKIPPED ($rbad)|0s")
    elif ! flag SKIP_RACECHECK; then
      step "racecheck $n" sanitizer.log compute-sanitizer --tool racecheck --error-exitcode 3 "${rargs[@]}" "$t" "${filt[@]}"
    fi
  done
  # RACECHECK_PIECES="FILTER[|knobs[|options]];...": test_cuda_aggregate under racecheck in pieces
  # (scripts/racecheck-pieces.sh: each piece its own time limit, PIECE_S, default 240 s), inside
  # this call's DEADLINE_S; the table goes to $OUT/racecheck.md and into the summary. Usually with
  # SKIP_RACECHECK=1 (and SKIP_CTEST/SKIP_MEMCHECK when the call is for racecheck alone).
  if [ -n "${RACECHECK_PIECES:-}" ]; then
    IFS=';' read -ra pieces <<<"$RACECHECK_PIECES"
    if [ -n "$noshared_bad" ]; then
      # Only the pieces that use the list are dropped (every piece was, the probe's others too: a
      # review, session 46); @FILE piece lists are read here for that.
      kept=()
      for p in "${pieces[@]}"; do
        if [[ $p == @* ]]; then
          while IFS= read -r line; do
            [[ -z $line || $line == \#* ]] && continue
            [[ $line == *racecheck-no-shared* ]] || kept+=("$line")
          done <"${p#@}"
        elif [[ $p != *racecheck-no-shared* ]]; then
          kept+=("$p")
        fi
      done
      status+=("racecheck pieces naming the no-shared list|SKIPPED (the list did not pass its check)|0s")
      pieces=("${kept[@]}")
    fi
    [ ${#pieces[@]} -gt 0 ] && step "racecheck pieces" sanitizer.log env OUT="$OUT" ${DEADLINE_S:+DEADLINE_S=$((DEADLINE_S - SECONDS - 15))} \
      scripts/racecheck-pieces.sh "${pieces[@]}"
  fi
fi
if flag SKIP_PYTEST; then status+=("pytest|SKIPPED (SKIP_PYTEST)|0s"); fi
# Without the Python module (no nanobind or Python.h here) the Python steps cannot run: say so in
# the table rather than leave them out (a review, session 51: a COMPARE call would have come back
# with nothing and no reason).
if [ ${#pyopt[@]} -eq 0 ]; then
  nopy="SKIPPED (no Python module: python3 lacks nanobind or Python.h)"
  flag SKIP_PYTEST || status+=("pytest|$nopy|0s")
  [ -z "${COMPARE:-}" ] || status+=("compare_torch $COMPARE|$nopy|0s")
  [ -z "${NCU_PY:-}" ] || status+=("ncu python $NCU_PY|$nopy|0s")
fi
if [ ${#pyopt[@]} -gt 0 ] && ! flag SKIP_PYTEST; then  # pytest on the GPU against the machine's torch
  python3 -m pytest --version >/dev/null 2>&1 || python3 -m pip install -q --no-index --find-links .deps/wheels pytest >/dev/null 2>&1
  step "pytest (torch $(python3 -c 'import torch; print(torch.__version__)' 2>/dev/null))" pytest.log \
    env PIPELINK_PYTHON_PATH="$PWD/build/gpu/python" PIPELINK_CLI="$PWD/build/gpu/tools/pipelink/pipelink" \
    python3 -m pytest -q -rs -p no:cacheprovider --durations=12 python/tests
fi
cli=build/gpu/tools/pipelink/pipelink
abopt=()
for v in ${AB:-}; do abopt+=(--ab "$v"); done
# COLD=1: each row's path also called once in a fresh process (--cold-processes: PROTOCOL.md 3.4's
# cold first call with nothing loaded by an earlier row; a workload's generation and copy again
# per row, so ~6 extra processes a workload).
[ -n "${COLD:-}" ] && abopt+=(--cold-processes)
read -ra bench_args <<<"${BENCH_ARGS:-}"
abopt+=("${bench_args[@]}")
# ORDER may list both orders ("random dst-sorted"): each workload runs in each, in that order.
for o in ${ORDER:-random}; do
  for w in $( ! flag SKIP_BENCH && echo ${WORKLOADS:-arxiv-like products-like power-law}); do  # SKIP_BENCH=1: checks only
    step "bench $w $o" bench.log env ${TRACE_BUILD:+PIPELINK_LOG_LEVEL=debug} $cli bench aggregate --workload "$w" --device cuda --order "$o" \
      "${abopt[@]}" --json "$OUT/bench-$w-$o.json" --markdown "$OUT/bench-$w-$o.md"
    # RELABEL=1: each workload again with its nodes renamed at random (--relabel: R-MAT's hubs at
    # random ids, as real graphs have them, instead of the low ids); RELABEL="power-law ...": those only.
    [ -n "${RELABEL:-}" ] && { [ "$RELABEL" = 1 ] || [[ " $RELABEL " == *" $w "* ]]; } && step "bench $w $o relabelled" bench.log env ${TRACE_BUILD:+PIPELINK_LOG_LEVEL=debug} $cli bench aggregate \
      --workload "$w" --device cuda --order "$o" --relabel --no-null-test "${abopt[@]}" \
      --json "$OUT/bench-$w-$o-relabel.json" --markdown "$OUT/bench-$w-$o-relabel.md"
  done
done
# VARIANTS="tag:VAR=1,VAR2=1 ...": the same benchmarks again with opt-in kernel variants set in the
# environment, for A/B in one call (null test skipped); e.g.
# VARIANTS="regs:PIPELINK_AGG_STAGED=0" (v5's register walk: a separate process, so settings read
# once per process work here, unlike AB=).
for v in ${VARIANTS:-}; do
  tag=${v%%:*}; vars=${v#*:}
  for o in ${ORDER:-random}; do
    for w in ${WORKLOADS:-arxiv-like products-like power-law}; do
      md="$OUT/variant-$w-$o-$tag.md"
      step "bench $w $o [$tag]" bench.log env ${vars//,/ } $cli bench aggregate --workload "$w" --device cuda \
        --order "$o" --no-null-test --json "$OUT/variant-$w-$o-$tag.json" --markdown "$md"
      [ -f "$md" ] && { printf '\n### variant %s (%s), null test skipped\n\n' "$tag" "${vars//,/ }"; cat "$md"; } >>"$OUT/variants.md" && rm -f "$md"
    done
  done
done
# INSTR=1: instructions, issue and occupancy of the first staged-kernel launch (the one-shot's run) per workload (and
# variant): ncu's cheap counters, no replay of the full section set. INSTR_COUNT=N profiles the first
# N launches (the bench runs one-shot first, then planned, then planned with w in plan order: each
# kernel line names the launch), INSTR_KERNEL a regex other than staged_rows_kernel.
if [ -n "${INSTR:-}" ]; then
  command -v ncu >/dev/null 2>&1 || status+=("instr|FAILED (no ncu)|0s")
  for v in base:PIPELINK_NONE=1 ${VARIANTS:-}; do
    tag=${v%%:*}; vars=${v#*:}
    for w in ${WORKLOADS:-products-like power-law}; do
      echo "=== $w [$tag]" >>"$OUT/instr.txt"
      env ${vars//,/ } ncu --metrics gpu__time_duration.sum,smsp__inst_executed.sum,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct \
        -k regex:${INSTR_KERNEL:-staged_rows_kernel} -c "${INSTR_COUNT:-1}" $cli bench aggregate --workload "$w" --device cuda --repeats 10 --no-null-test --quiet 2>&1 |
        grep -E "_kernel|gpu__|smsp__|sm__|dram__|lts__" >>"$OUT/instr.txt"
    done
  done
fi
# The main benchmarks as one picture (a panel a workload and order; red where a variant failed the contract).
if compgen -G "$OUT/bench-*.json" >/dev/null; then
  step "plot bench" bench.log python3 bench/plot_bench.py "$OUT"/bench-*.json --out "$OUT/bench.png"
fi
cat "$OUT"/bench-*.md >>"$OUT/bench.md" 2>/dev/null && rm -f "$OUT"/bench-*.md
if [ -n "${COMPARE:-}" ] && [ ${#pyopt[@]} -gt 0 ]; then  # COMPARE="arxiv-like products-like": bench/compare_torch.py
  # COMPARE_ALLOC="native cudaMallocAsync": one run per torch allocator backend
  # (PYTORCH_CUDA_ALLOC_CONF=backend:...), to see whether where torch places x and out (its own
  # cudaMalloc'd segments against a stream-ordered pool, as the C++ bench's) moves PipeLink's rows.
  # COMPARE_KNOBS="tag:VAR=val[,VAR2=val] ...": each compare run again under those knobs (files
  # compare-<workload>-<tag>.*), e.g. a plan-time knob's kernel breakdown with --kernel-profile.
  for w in $COMPARE; do
    for a in ${COMPARE_ALLOC:-native}; do
      for kv in "" ${COMPARE_KNOBS:-}; do
        sfx=$w; [ "$a" = native ] || sfx=$w-$a
        knobs=()
        if [ -n "$kv" ]; then
          sfx=$sfx-${kv%%:*}
          IFS=, read -r -a knobs <<<"${kv#*:}"
        fi
        step "compare_torch $w [$a${kv:+ ${kv%%:*}}]" bench.log env "${knobs[@]}" PIPELINK_PYTHON_PATH="$PWD/build/gpu/python" PYTORCH_CUDA_ALLOC_CONF="${PYTORCH_CUDA_ALLOC_CONF:+$PYTORCH_CUDA_ALLOC_CONF,}backend:$a" \
          python3 bench/compare_torch.py --workload "$w" ${COMPARE_ARGS---rounds 3 --prepare-weights} --json "$OUT/compare-$sfx.json" \
          --markdown "$OUT/compare-$sfx.md" --png "$OUT/compare-$sfx.png"
      done
    done
  done
fi
# NCU_KERNEL (a regex, default staged_rows_kernel) and NCU_SKIP (launches of it to pass over first,
# default 0) pick the kernel, NCU_COUNT how many launches (default 1):
# NCU_KERNEL="wperm_pass[12]_kernel" NCU_SKIP=6 NCU_COUNT=2 profiles the permutation's two passes
# in a warm planned call. NCU_KNOBS="tag:VAR=val[,VAR2=val] ...": each profile again under those
# knobs (files ncu-<workload>-<tag>.*), e.g. the walk under the packed column beside the plain one.
# NCU_NAME_BASE=demangled matches NCU_KERNEL against template arguments too, as ncu demangles
# them, with casts: the planned walk of a compact plan is staged_rows_kernel<(int)1, (int)2,
# (int)2, (int)3> ((int)5 with the packed column), the one-shot's ends (int)2, so
# NCU_KERNEL="staged_rows_kernel<.int.1, .int.2, .int.2, .int.[35]>" skips the one-shot's launches
# (the 24-bit column's walk takes the run-time mode, (int)-1). Without the casts nothing matches
# (session 28: "No kernels were profiled").
if [ -n "${NCU:-}" ]; then  # NCU="power-law products-like": Nsight Compute on one planned run of each
  for w in $NCU; do
    for kv in "" ${NCU_KNOBS:-}; do
      sfx=$w
      knobs=()
      if [ -n "$kv" ]; then
        sfx=$w-${kv%%:*}
        IFS=, read -r -a knobs <<<"${kv#*:}"
      fi
      step "ncu $w${kv:+ ${kv%%:*}}" ncu.log env "${knobs[@]}" ncu --set full --kernel-name-base "${NCU_NAME_BASE:-function}" \
        -k "regex:${NCU_KERNEL:-staged_rows_kernel}" \
        --launch-skip "${NCU_SKIP:-0}" -c "${NCU_COUNT:-1}" -o "$OUT/ncu-$sfx" \
        $cli bench aggregate --workload "$w" --device cuda --repeats 10 --no-null-test --quiet
      ncu --import "$OUT/ncu-$sfx.ncu-rep" --page details >"$OUT/ncu-$sfx.txt" 2>&1 || true
      # Every collected metric as CSV too (the stall reasons, smsp__pcsamp_warps_issue_stalled_*, are
      # not on the details page, and there is no ncu on the machine without a GPU to read the report).
      ncu --import "$OUT/ncu-$sfx.ncu-rep" --page raw --csv >"$OUT/ncu-$sfx-raw.csv" 2>>"$OUT/ncu.log" || true
    done
  done
fi
# NCU_PY="products-like": the planned run's kernel (staged_rows_kernel) timed by ncu from Python
# (compare_torch, w in plan order only) and from C++ (the bench: one-shot launches first, then planned),
# each launch's duration on one line. Why: Python's planned rows have run 0.2-0.4 ms over C++'s
# since v12, with the clock at 1980 MHz in both (v20); the same kernel duration in both would put
# the gap in the event window, a longer one in the data or its placement. Launch counts are capped:
# uncapped, ncu replayed every launch of compare_torch's later steps too and ran past 325 s
# (session 18). Python's first 4 launches are the planned variant's cold call and its first runs;
# the C++ bench's 40 start with the one-shot's (8 of them in session 18; the grid is the same for
# both, so only the launch index tells them apart). Clocks are left to the driver (--clock-control
# none) so that durations compare with the events' 1980 MHz.
if [ -n "${NCU_PY:-}" ] && [ ${#pyopt[@]} -gt 0 ]; then
  m=gpu__time_duration.sum,dram__bytes_read.sum,lts__t_sector_hit_rate.pct,launch__grid_size
  for w in $NCU_PY; do
    step "ncu python $w" ncu.log env PIPELINK_PYTHON_PATH="$PWD/build/gpu/python" ncu --metrics "$m" -k regex:staged_rows_kernel --launch-count 4 --clock-control none \
      python3 bench/compare_torch.py --workload "$w" --no-compile --variants pipelink-planned-w-plan-order --repeats 3 --warmup 0 --settle-s 0
    step "ncu c++ $w" ncu.log ncu --metrics "$m" -k regex:staged_rows_kernel --launch-count 40 --clock-control none \
      $cli bench aggregate --workload "$w" --device cuda --repeats 3 --no-null-test --quiet
  done
fi
if [ -n "${SWEEP:-}" ]; then  # SWEEP=products-like: edge-count sweep to the memory limit, with plots
  # SWEEP_ARGS: more options (e.g. "--index-dtype int64 --repeats 10"); the Markdown table since session 49.
  step "sweep $SWEEP" bench.log $cli bench sweep --workload "$SWEEP" --device cuda --json "$OUT/sweep-$SWEEP.json" \
    --markdown "$OUT/sweep-$SWEEP.md" ${SWEEP_ARGS:-}
  step "plot sweep" bench.log python3 bench/plot_sweep.py "$OUT/sweep-$SWEEP.json"
fi
# MUTANTS=1: break chosen branches on purpose; each must fail its test. Last of the steps: ~100 s
# a mutant (a rebuild of the test binary each), so under DEADLINE_S they are what gets cut, not
# the benchmarks (session 25's third call lost its A/B that way, the mutants running first).
if [ -n "${MUTANTS:-}" ]; then
  step mutants tests.log env OUT="$OUT" scripts/mutation-check.sh
fi

echo
grep -m1 -E "H200|H100|NVIDIA [A-Z]" "$OUT/env.txt" || true
grep -h "^MUTANT" "$OUT/tests.log" 2>/dev/null || true
grep -E "tests passed|tests failed" "$OUT/tests.log" || true
tail -n 3 "$OUT/pytest.log" 2>/dev/null || true
grep -E "^\| |vs three-op|null test|vs default|bitwise|contract" "$OUT/bench.md" 2>/dev/null || true
grep -vE "^=== |^ptxas" "$OUT/micro.log" 2>/dev/null || true
grep -h "plan build N=" "$OUT/bench.log" 2>/dev/null | tail -n 4 || true
cat "$OUT"/compare-*.md 2>/dev/null || true
[ -n "${NCU_PY:-}" ] && grep -E "^=== |gpu__time_duration|dram__bytes_read|lts__t_sector_hit|launch__grid_size" "$OUT/ncu.log" 2>/dev/null | awk '/^===/ {keep = $2 == "ncu" && ($3 == "python" || $3 == "c++"); if (keep) {sub(/:$/, "", $4); printf "\n%s %s %s:", $2, $3, $4}; next} keep && /dram__bytes/ {printf "\n  %s %s", $NF, $(NF-1); next} keep {printf " %s%s", $NF, ($(NF-1) ~ /__/ ? "" : " " $(NF-1))} END {print ""}' || true
grep -h "under torch.profiler" "$OUT/bench.log" 2>/dev/null | cut -c1-400 || true
grep -E "^#|^\| (planned|one-shot|plan-build|lean) |bitwise|null test" "$OUT/variants.md" 2>/dev/null || true
cat "$OUT/instr.txt" 2>/dev/null || true
grep -h "ERROR SUMMARY" "$OUT/sanitizer.log" 2>/dev/null | sort | uniq -c || true
cat "$OUT/racecheck.md" 2>/dev/null || true
kill $clock_pid 2>/dev/null
# Per step, from clocks.csv: samples; those with the SM clock at 1000 MHz or more ("busy": an idle
# H200 sits at 345 MHz, and a bench step idles while the host draws its inputs); their mean and
# lowest SM clock; the highest power and temperature. At 3d5bc29 the C++ bench's busy samples read
# 1980 MHz but for two (1965, 1875).
awk -F', *' '/^# /{name=substr($0,3); next}
  NF>=5 && name!="" {n[name]++; if (!(name in seen)) {seen[name]=1; order[++k]=name; lo[name]=1e9}
    if ($2>=1000) {b[name]++; sm[name]+=$2; if ($2<lo[name]) lo[name]=$2}
    if ($4>pw[name]) pw[name]=$4; if ($5>tmax[name]) tmax[name]=$5}
  END {if (k) printf "%-40s %7s %5s %11s %10s %6s %5s\n", "clocks per step", "samples", "busy", "busy SM MHz", "lowest MHz", "max W", "max C";
       for (i=1;i<=k;i++) {s=order[i]; printf "%-40s %7d %5d %11.0f %10.0f %6.0f %5d\n", s, n[s], b[s], b[s]?sm[s]/b[s]:0, b[s]?lo[s]:0, pw[s], tmax[s]}}' \
  "$OUT/clocks.csv" 2>/dev/null || true
printf '%-40s %-28s %s\n' step result time
for s in "${status[@]}"; do IFS='|' read -r a b c <<<"$s"; printf '%-40s %-28s %s\n' "$a" "$b" "$c"; done
# The device tool brings back at most 8 files: past that, everything also goes into one tarball.
n=$(find "$OUT" -maxdepth 1 -type f | wc -l)
if [ "$n" -gt 7 ]; then tar -C "$OUT" -czf /tmp/gpu-check-all.tgz . && find "$OUT" -maxdepth 1 -type f ! -name 'tests.log' ! -name 'bench.md' -delete && mv /tmp/gpu-check-all.tgz "$OUT/all.tgz"; fi
# Exit 1 where a step failed or was cut (the script exited 0 whatever happened: a review, session
# 46); skipped and incomplete steps are in the table, not in the exit code.
for s in "${status[@]}"; do
  case "$s" in *"|FAILED"* | *"|TIMED OUT"*) exit 1 ;; esac
done
exit 0
