#!/usr/bin/env bash
# Installs what building and testing vstack needs on Debian 12 (bookworm):
# the Debian packages, then the Python test tools from PyPI. The CUDA 13
# toolkit is expected under /usr/local/cuda (headers, nvcc, the libcuda stub).
# Idempotent; safe to run again.
set -euo pipefail
sudo=""
if [ "$(id -u)" != 0 ]; then sudo=sudo; fi
packages=(meson ninja-build pkg-config g++ python3 python3-pip
          libspdlog-dev libfmt-dev nlohmann-json3-dev catch2 liburing-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi
# Python test tools (pytest, numpy) for the CPU-side Python tests.
if ! python3 -c "import pytest, numpy" 2>/dev/null; then
  python3 -m pip install -q pytest numpy 2>/dev/null ||
    python3 -m pip install -q --break-system-packages pytest numpy
fi
cuda=${CUDA_HOME:-/usr/local/cuda}
if [ ! -x "$cuda/bin/nvcc" ] || [ ! -f "$cuda/include/cuda.h" ]; then
  echo "setup: the CUDA 13 toolkit was not found under $cuda (set CUDA_HOME); vstack needs its headers and nvcc" >&2
  exit 1
fi
echo "setup: ok (meson $(meson --version), $("$cuda/bin/nvcc" --version | tail -1))"
