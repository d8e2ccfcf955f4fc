#!/usr/bin/env bash
# Installs what PipeLink needs to build and test, from Debian's packages. Does nothing for
# packages already present, so it is fast (and offline-safe) on a prepared machine.
set -euo pipefail
# What the build uses (libgmock-dev too: Debian's GTest CMake package names the gmock files, and
# fails without them). yaml-cpp and Google Benchmark were listed and used nowhere: dropped in
# session 46, after a newcomer's review.
build_pkgs=(build-essential cmake ninja-build git
            libgtest-dev libgmock-dev
            libfmt-dev libspdlog-dev nlohmann-json3-dev libcli11-dev libsleef-dev)
# What the Python package and its tests use: torch (~130 MB and more) only for them.
python_pkgs=(python3-dev python3-venv python3-pip python3-numpy python3-torch
             python3-matplotlib)  # matplotlib: the plot scripts' tests; Debian's, built on Debian's NumPy
# `install-deps.sh --build-only` (scripts/demo.sh): the C++ build alone.
if [ "${1:-}" = "--build-only" ]; then pkgs=("${build_pkgs[@]}"); else pkgs=("${build_pkgs[@]}" "${python_pkgs[@]}"); fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#pkgs[@]} packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
