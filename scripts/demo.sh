#!/usr/bin/env bash
# The main job on a fresh machine: install dependencies, build, run `pipelink demo`
# (the CUDA backend is built when a CUDA toolkit is found).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --build-only  # the demo is C++: no torch, no Python packages
cmake --preset default >/dev/null
cmake --build --preset default --target pipelink_cli
exec build/default/tools/pipelink/pipelink demo "$@"
