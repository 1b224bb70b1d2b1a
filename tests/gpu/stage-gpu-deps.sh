#!/usr/bin/env bash
# Copies what tests/gpu/run-on-gpu.sh needs and a bare GPU machine may lack
# into .gpu-deps/ (git-ignored): GoogleTest's sources from Debian's
# libgtest-dev. Carry .gpu-deps to the GPU machine with the working tree.
set -euo pipefail
cd "$(dirname "$0")/../.."
[[ -f /usr/src/googletest/CMakeLists.txt ]] || { echo "error: /usr/src/googletest missing: apt-get install libgtest-dev libgmock-dev" >&2; exit 1; }
rm -rf .gpu-deps/googletest
mkdir -p .gpu-deps
cp -r /usr/src/googletest .gpu-deps/googletest
echo "staged .gpu-deps/googletest ($(du -sh .gpu-deps | cut -f1))"
