#!/bin/sh
# Installs packages from NVIDIA's CUDA repository for Debian 12 (used by the
# Dockerfile's build and worker stages), then the /usr/local/cuda link that
# CMake and the loader look for. Usage: cuda-apt.sh PACKAGE...
set -eu
apt-get update -q
apt-get install -y -q --no-install-recommends ca-certificates curl
curl -fsSL -o /tmp/cuda-keyring.deb \
  https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/cuda-keyring_1.1-1_all.deb
dpkg -i /tmp/cuda-keyring.deb
rm /tmp/cuda-keyring.deb
apt-get update -q
apt-get install -y -q --no-install-recommends "$@"
apt-get purge -y curl
apt-get autoremove -y
rm -rf /var/lib/apt/lists/*
[ -e /usr/local/cuda ] || ln -s /usr/local/cuda-* /usr/local/cuda
