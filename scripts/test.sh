#!/usr/bin/env bash
# Every test on a fresh machine: install dependencies, then build and run the suite twice, with
# the CUDA backend off and (when nvcc exists) on, then `pip install .` the Python package into a
# virtual environment and run its tests (pytest; NumPy always, torch where importable: Debian's
# python3-torch). Without a GPU the CUDA tests report SKIPPED.
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
  # cuobjdump for the racecheck_no_shared_list test (this machine's toolkit has none): NVIDIA's
  # 0.3 MB wheel into build/tools; without it (offline) that test reports a skip.
  if ! command -v cuobjdump >/dev/null 2>&1 && [ ! -x /usr/local/cuda/bin/cuobjdump ]; then
    find build/tools -name cuobjdump -type f 2>/dev/null | grep -q . ||
      python3 -m pip install -q --disable-pip-version-check --target build/tools "nvidia-cuda-cuobjdump>=13,<14" >/dev/null 2>&1 || true
    tool=$(find build/tools -name cuobjdump -type f 2>/dev/null | head -n 1)
    [ -n "$tool" ] && chmod +x "$tool" && export CUOBJDUMP=$PWD/$tool
  fi
  ctest --preset cuda -j "$jobs"
else
  echo "=== CUDA on: SKIPPED (no nvcc on this machine) ==="
fi

echo "=== the GPU mutants' texts still apply (scripts/mutation-check.sh; the mutants run on a GPU) ==="
MUTANT_TEXTS=1 scripts/mutation-check.sh

echo "=== Python package: pip install . into build/pyenv, then pytest ==="
# Debian's python3 sees Debian's torch and NumPy (--system-site-packages); the package builds
# CPU-only here (the CUDA build of the library was tested above) to keep CI inside its budget.
py=/usr/bin/python3
[ -x "$py" ] || py=python3
"$py" -m venv --system-site-packages build/pyenv
# (matplotlib for python/tests/test_plots.py comes from Debian, scripts/install-deps.sh: pip's pulled
# in a NumPy 2 over Debian's, and Debian's torch then found no NumPy.)
build/pyenv/bin/python -m pip install -q --disable-pip-version-check "pytest>=7"
PIPELINK_CUDA=${PIPELINK_PYTHON_CUDA:-OFF} build/pyenv/bin/python -m pip install -q --disable-pip-version-check .
build/pyenv/bin/python -m pytest -q -rs python/tests
