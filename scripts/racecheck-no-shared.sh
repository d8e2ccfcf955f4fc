#!/usr/bin/env bash
# Checks scripts/racecheck-no-shared.txt against a build: every kernel whose mangled name holds one
# of the file's names must declare and touch no shared memory (no "shared" anywhere in its PTX:
# no .shared variable, no ld/st/atom/red/cp.async on shared, no cvta to or from it) and call no
# function, so leaving it out of racecheck loses nothing. Reads the PTX that every build embeds
# (the sm_90 build keeps a PTX fallback).
#   usage: scripts/racecheck-no-shared.sh [OBJECT_OR_LIBRARY]   (default: build/gpu's library)
#   CUOBJDUMP=path: a cuobjdump other than the toolkit's (e.g. from the nvidia-cuda-cuobjdump wheel).
# Exit 0: every listed name matches at least one kernel and none of them uses shared memory;
# 1: a listed kernel uses shared memory or calls a function (predicated calls too), a name matches
# no kernel, or the object's PTX cannot be read; 2: no cuobjdump or no object (CTest: a skip).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
obj=${1:-build/gpu/src/libpipelink.so}
list=scripts/racecheck-no-shared.txt
# CUOBJDUMP, else the toolkit's, else NVIDIA's wheel as scripts/fetch-gpu-deps.sh (.deps/tools) or
# scripts/test.sh (build/tools) put it.
cuobjdump=${CUOBJDUMP:-$(command -v cuobjdump || ls /usr/local/cuda/bin/cuobjdump 2>/dev/null ||
  find .deps/tools build/tools -name cuobjdump -type f 2>/dev/null | head -n 1)}
[ -n "$cuobjdump" ] && [ -f "$cuobjdump" ] && [ ! -x "$cuobjdump" ] && chmod +x "$cuobjdump"
[ -n "$cuobjdump" ] && [ -x "$cuobjdump" ] || { echo "racecheck-no-shared: no cuobjdump (set CUOBJDUMP)"; exit 2; }
[ -r "$obj" ] || { echo "racecheck-no-shared: no $obj"; exit 2; }
ptx=$(mktemp)
trap 'rm -f "$ptx"' EXIT
"$cuobjdump" -ptx "$obj" >"$ptx" 2>/dev/null || { echo "racecheck-no-shared: cuobjdump -ptx $obj failed"; exit 1; }
# One line per kernel: its mangled name, the lines naming shared memory, the calls. A kernel's text
# ends at the next kernel or at the next PTX module's header (".version"; a library of several
# .cu files holds one module each), whose declarations (an .extern .shared array) are no kernel's.
awk '/^[ \t]*\.version /{if (n != "") print n, s, c; n = ""; next}
     /\.entry /{if (n != "") print n, s, c; n = $0; sub(/.*\.entry /, "", n); sub(/\(.*/, "", n); s = 0; c = 0; next}
     n == "" {next}
     /shared/ {s++} /^[ \t]*(@!?%[A-Za-z0-9_]+[ \t]+)?call/ {c++} END {if (n != "") print n, s, c}' "$ptx" >"$ptx.k"
trap 'rm -f "$ptx" "$ptx.k"' EXIT
kernels=$(wc -l <"$ptx.k")
# Every build embeds PTX (CMake's architectures keep a PTX fallback): none is an error, not a skip.
[ "$kernels" -gt 0 ] || { echo "racecheck-no-shared: no kernel in the PTX of $obj"; exit 1; }
bad=0 names=0
while read -r opt; do
  [[ -z ${opt//[[:space:]]/} || $opt == \#* ]] && continue
  name=${opt##*kns=}
  names=$((names + 1))
  matched=$(awk -v k="$name" 'index($1, k) {m++; if ($2 || $3) b++} END {printf "%d %d", m, b}' "$ptx.k")
  read -r m b <<<"$matched"
  if [ "$m" -eq 0 ]; then
    echo "racecheck-no-shared: $name matches no kernel of $obj (renamed or removed? update $list)"; bad=1
  elif [ "$b" -gt 0 ]; then
    echo "racecheck-no-shared: $name: $b of its $m kernels use shared memory or call a function: it must be checked"
    awk -v k="$name" 'index($1, k) && ($2 || $3) {print "  " $1 " (" $2 " shared lines, " $3 " calls)"}' "$ptx.k"
    bad=1
  fi
done <"$list"
[ $bad -eq 0 ] && echo "racecheck-no-shared: the $names names of $list match only kernels without shared memory ($kernels kernels in $obj)"
exit $bad
