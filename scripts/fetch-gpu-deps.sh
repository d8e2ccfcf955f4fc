#!/usr/bin/env bash
# The GPU machine cannot download anything. This fetches the Debian packages PipeLink builds
# against and unpacks them under .deps/ (git-ignored), which scripts/gpu-check.sh uses there:
# pass `carry: [".deps"]` to the device tool.
set -euo pipefail
cd "$(dirname "$0")/.."
pkgs=(libfmt-dev libfmt9 libspdlog-dev libspdlog1.10 nlohmann-json3-dev libcli11-dev
      libsleef-dev libsleef3 libgtest-dev libgmock-dev)
# Built in .deps.new and swapped in at the end: a failed download once left an empty .deps, and
# the next GPU call paid a machine start to exit 2 "no .deps/" (a review, session 46).
rm -rf .deps.new && mkdir -p .deps.new/debs
(cd .deps.new/debs && apt-get download "${pkgs[@]}" >/dev/null)
for d in .deps.new/debs/*.deb; do dpkg -x "$d" .deps.new/root; done
rm -rf .deps.new/debs
# cuobjdump for scripts/racecheck-no-shared.sh, should the machine's toolkit lack one (0.3 MB).
python3 -m pip install -q --disable-pip-version-check --target .deps.new/tools "nvidia-cuda-cuobjdump>=13,<14" >/dev/null
rm -rf .deps && mv .deps.new .deps
du -sh .deps
