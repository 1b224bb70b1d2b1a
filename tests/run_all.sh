#!/usr/bin/env bash
# The whole test suite, from a fresh Debian 12 machine: installs what is
# missing, builds, and runs every ctest (unit, postgres, prometheus, e2e; the
# gpu tests skip with a message where there is no GPU).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/deploy/install-deps.sh"
"$root/deploy/build.sh"
cd "${NORMSWEEP_BUILD_DIR:-$root/build}"
ctest --output-on-failure -j "${NORMSWEEP_JOBS:-$(nproc)}" "$@"
