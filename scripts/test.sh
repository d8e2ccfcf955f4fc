#!/usr/bin/env bash
# Every test on a fresh machine: install dependencies, then build and run the suite twice, with
# the CUDA backend off and (when nvcc exists) on. Without a GPU the CUDA tests report SKIPPED.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
jobs=$(nproc)

echo "=== build and test: CUDA off ==="
cmake --preset cpu >/dev/null
cmake --build --preset cpu -j "$jobs"
ctest --preset cpu -j "$jobs"

echo "=== find_package(PipeLink) from a scratch install ==="
prefix=$(mktemp -d)
cmake --install build/cpu --prefix "$prefix" >/dev/null
cmake -S examples/consumer -B build/consumer -G Ninja -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build build/consumer
LD_LIBRARY_PATH="$prefix/lib:${LD_LIBRARY_PATH:-}" build/consumer/consumer
rm -rf "$prefix"

if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
  echo "=== build and test: CUDA on ==="
  cmake --preset cuda >/dev/null
  cmake --build --preset cuda -j "$jobs"
  ctest --preset cuda -j "$jobs"
else
  echo "=== CUDA on: SKIPPED (no nvcc on this machine) ==="
fi
