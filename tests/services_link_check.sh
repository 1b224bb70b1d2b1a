#!/usr/bin/env bash
# The services link no BLAS and no OpenMP: normsweep-scheduler,
# normsweep-worker and normsweep use the schema library (proto/schema), not the
# trainer core. Usage: services_link_check.sh BINARY...
set -euo pipefail
status=0
for bin in "$@"; do
  if [[ ! -x $bin ]]; then
    echo "FAIL $bin: not built"
    status=1
    continue
  fi
  found=$(ldd "$bin" | grep -Ei 'openblas|blas|lapack|gomp|libomp' || true)
  if [[ -n $found ]]; then
    echo "FAIL $(basename "$bin") links:"
    echo "$found"
    status=1
  else
    echo "ok   $(basename "$bin"): no BLAS, no OpenMP"
  fi
done
exit $status
