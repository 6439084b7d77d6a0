#!/usr/bin/env bash
# Installs every Debian package attn needs, then configures and builds it.
# Idempotent: packages already present are not reinstalled and the build is
# incremental. Run as root on Debian 12 (bookworm), or as a user with sudo.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

packages=(
  # compiler: MLIR/LLVM 22 (lit and FileCheck come with llvm-22-tools)
  llvm-22-dev libmlir-22-dev mlir-22-tools llvm-22-tools
  # runtime and tests: LibTorch/PyTorch 1.13 (CPU), OpenBLAS so torch's own
  # matmuls (our baselines) do not fall back to reference BLAS
  libtorch-dev python3-torch libopenblas0-pthread
  # build and test tools
  g++ cmake ninja-build libgtest-dev python3-pytest
  # plots of attention maps, training curves and the reproductions in examples/
  python3-matplotlib
)

missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" ||
    missing+=("$package")
done
if ((${#missing[@]})); then
  echo "attn setup: installing ${missing[*]}"
  sudo=()
  [[ $(id -u) -eq 0 ]] || sudo=(sudo)
  "${sudo[@]}" apt-get update -q
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

build="${ATTN_BUILD_DIR:-$root/build}"
if [[ ! -f "$build/build.ninja" ]]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release
fi
cmake --build "$build"
