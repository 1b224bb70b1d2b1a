#!/usr/bin/env bash
# Installs what normsweep needs to build, test and run, from Debian 12's
# packages. Idempotent: asks apt only for what is missing. Runs apt as root,
# through sudo when called by another user.
set -euo pipefail

packages=(
  # toolchain
  build-essential cmake ninja-build pkg-config git
  # trainer: CPU BLAS (the OpenMP build of OpenBLAS)
  libopenblas-openmp-dev
  # schema, services, storage, metrics
  protobuf-compiler libprotobuf-dev libgrpc++-dev protobuf-compiler-grpc libabsl-dev
  libpq-dev postgresql prometheus-cpp-dev libyaml-cpp-dev
  # TLS: OpenSSL's headers (common/tls.cc checks certificates and keys); the
  # openssl command makes the tests' throwaway certificates (and yours, README "TLS")
  libssl-dev openssl
  # tests
  libgtest-dev libgmock-dev
  # deploy test: a real Prometheus and promtool; python3-yaml and systemd (systemd-analyze) check manifests and units
  prometheus python3-yaml systemd
  # report rendering check (headless screenshot of `normsweep report`)
  chromium
  # the Python client (python/): its stubs come from protoc with
  # protobuf-compiler-grpc's grpc_python_plugin; its tests (label python)
  # compare DataFrames with SQL through psycopg2 and install it with pip
  python3-grpcio python3-protobuf python3-pandas python3-numpy python3-tqdm python3-matplotlib
  python3-pytest python3-psycopg2 python3-pip python3-venv
  # the export benchmark's anchor (tests/bench/export_bench.py): Optuna's RDB
  # storage (SQLAlchemy) on the same PostgreSQL, through psycopg2
  python3-optuna python3-sqlalchemy
)
if [[ "${NORMSWEEP_WITH_TORCH:-0}" == 1 ]]; then
  packages+=(python3-torch python3-numpy)  # benchmarks and fixture regeneration only
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  exit 0
fi
echo "installing: ${missing[*]}"
sudo_cmd=()
if [[ $(id -u) != 0 ]]; then
  command -v sudo >/dev/null || { echo "error: need root or sudo to install ${missing[*]}" >&2; exit 1; }
  sudo_cmd=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -q
"${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
