#!/usr/bin/env bash
# Installs what PipeLink needs to build and test, from Debian's packages. Does nothing for
# packages already present, so it is fast (and offline-safe) on a prepared machine.
set -euo pipefail
pkgs=(build-essential cmake ninja-build git
      libgtest-dev libgmock-dev libbenchmark-dev
      libfmt-dev libspdlog-dev nlohmann-json3-dev libcli11-dev libyaml-cpp-dev libsleef-dev
      python3-dev python3-venv python3-pip python3-numpy python3-torch
      python3-matplotlib)  # matplotlib: the plot scripts' tests; Debian's, built on Debian's NumPy
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
