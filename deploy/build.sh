#!/usr/bin/env bash
# Configures and builds normsweep into build/ (incremental). Usage: deploy/build.sh [ninja targets...]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${NORMSWEEP_BUILD_DIR:-$root/build}
jobs=${NORMSWEEP_JOBS:-$(nproc)}
if [[ ! -f $build/build.ninja ]]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release
fi
cmake --build "$build" -j "$jobs" ${1:+--target "$@"}
