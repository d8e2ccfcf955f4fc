#!/usr/bin/env bash
# CI check of the racecheck piece lists (scripts/racecheck-remaining.txt, scripts/racecheck-probe.txt)
# against the test binary's own test names, so that a renamed test or a typo in a filter is found
# here and not after a GPU call has spent minutes on a piece that matches nothing (racecheck-pieces.sh
# then exits 4). No GPU needed: --gtest_list_tests runs no test.
#   usage: tests/racecheck_lists_check.sh TEST_BINARY LIST...
# Each piece's filter must match at least one test. A piece with PIPELINK_TEST_CASES must match
# exactly one (the knob reaches every test of the piece; racecheck-pieces.sh says why), and its case
# indices must be non-negative integers (and PIPELINK_TEST_VARIANTS's and PIPELINK_TEST_PARTS's,
# where a piece gives them).
set -uo pipefail
bin=$1; shift
[ -x "$bin" ] || { echo "no test binary $bin"; exit 2; }
[ $# -gt 0 ] || { echo "usage: $0 TEST_BINARY LIST..."; exit 2; }
bad=0; pieces=0
for list in "$@"; do
  [ -r "$list" ] || { echo "FAIL: no piece list $list"; bad=1; continue; }
  n=0
  while IFS= read -r line; do
    n=$((n + 1))
    [[ -z ${line//[[:space:]]/} || $line == \#* ]] && continue
    pieces=$((pieces + 1))
    IFS='|' read -r filter knobs _ <<<"$line"
    # gtest prints "Suite." lines and "  Test" lines; count the tests.
    matched=$("$bin" --gtest_filter="$filter" --gtest_list_tests 2>/dev/null | grep -c '^  ')
    if [ "$matched" -eq 0 ]; then
      echo "FAIL: $list:$n: '$filter' matches no test of $bin"; bad=1; continue
    fi
    if [[ ${knobs:-} == *PIPELINK_TEST_CASES=* ]]; then
      cases=${knobs#*PIPELINK_TEST_CASES=}; cases=${cases%%,[A-Z]*}
      if [ "$matched" -ne 1 ]; then
        echo "FAIL: $list:$n: '$filter' with PIPELINK_TEST_CASES matches $matched tests, not one"; bad=1
      fi
      if ! [[ $cases =~ ^[0-9]+(,[0-9]+)*$ ]]; then
        echo "FAIL: $list:$n: PIPELINK_TEST_CASES='$cases' is not a list of case indices"; bad=1
      fi
    fi
    for knob in PIPELINK_TEST_VARIANTS PIPELINK_TEST_PARTS; do
      [[ ${knobs:-} == *$knob=* ]] || continue
      picks=${knobs#*"$knob"=}; picks=${picks%%,[A-Z]*}
      if ! [[ $picks =~ ^[0-9]+(,[0-9]+)*$ ]]; then
        echo "FAIL: $list:$n: $knob='$picks' is not a list of indices"; bad=1
      fi
    done
  done <"$list"
done
[ "$pieces" -gt 0 ] || { echo "FAIL: no piece in $*"; bad=1; }
[ $bad -eq 0 ] && echo "ok: $pieces pieces, each matching a test of $(basename "$bin")"
exit $bad
