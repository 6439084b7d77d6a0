#!/usr/bin/env bash
# Installs every dependency attn needs, then configures and builds it:
#   - Debian packages: MLIR/LLVM 22 (the compiler), the C++ toolchain, GoogleTest,
#     python3-venv, clang-22 with libFuzzer (scripts/fuzz.sh);
#   - a virtual environment ($ATTN_VENV, default <repo>/.venv) with the Python packages
#     pinned in requirements.lock (PyTorch from PyPI: its LibTorch is what the runtime
#     builds against) and the attn package itself, installed editable from
#     pyproject.toml;
#   - the build ($ATTN_BUILD_DIR, default <repo>/build), whose attn-compile, attn-opt,
#     attn-seal and libattn_runtime.so are then linked into the environment (bin/ and
#     lib/attn/), where `import attn` finds them.
# Idempotent: packages already present are not reinstalled, the environment is only
# updated when requirements.lock or pyproject.toml changed, and the build is incremental.
# Run as root on Debian 12 (bookworm), or as a user with sudo.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv="${ATTN_VENV:-$root/.venv}"
build="${ATTN_BUILD_DIR:-$root/build}"

packages=(
  # compiler: MLIR/LLVM 22 (lit and FileCheck come with llvm-22-tools)
  llvm-22-dev libmlir-22-dev mlir-22-tools llvm-22-tools
  # build and test tools; python3-venv creates the project's environment
  g++ cmake ninja-build libgtest-dev python3-venv
  # the runtime's manifest reader (header-only JSON)
  nlohmann-json3-dev
  # the parser fuzzer: clang and its libFuzzer/AddressSanitizer runtimes (scripts/fuzz.sh)
  clang-22 libclang-rt-22-dev
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

# The environment: Debian's python3 (not whatever python3 is first on PATH), so the
# same interpreter is used on every machine.
if [[ ! -x "$venv/bin/python" ]]; then
  echo "attn setup: creating the virtual environment $venv"
  /usr/bin/python3 -m venv "$venv"
fi
stamp="$venv/.attn-installed"
wanted=$(cat "$root/requirements.lock" "$root/pyproject.toml" | sha256sum | cut -d' ' -f1)
if [[ "$(cat "$stamp" 2>/dev/null)" != "$wanted:$root" ]]; then
  echo "attn setup: installing requirements.lock into $venv"
  # No pip cache: torch's wheels and their CUDA libraries would take several GB twice,
  # and a full disk is what stops a CI machine shared with earlier builds.
  "$venv/bin/python" -m pip install -q --disable-pip-version-check --no-cache-dir \
    -r "$root/requirements.lock"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check --no-deps --no-build-isolation \
    -e "$root"
  echo "$wanted:$root" >"$stamp"
fi
python="$venv/bin/python"
torch_root=$("$python" -c 'import os, torch; print(os.path.dirname(torch.__file__))')

# The runtime builds against the environment's LibTorch. Its root (not only
# torch.utils.cmake_prefix_path) goes first in CMAKE_PREFIX_PATH so CMake takes that
# wheel's libraries even where a system LibTorch is installed too; a build directory
# configured against another LibTorch is configured afresh.
torch_dir="$torch_root/share/cmake/Torch"
mkdir -p "$build"
if [[ -f "$build/CMakeCache.txt" ]] && ! grep -qxF "Torch_DIR:PATH=$torch_dir" "$build/CMakeCache.txt"; then
  echo "attn setup: $build was configured against another LibTorch; configuring it afresh"
  rm -f "$build/CMakeCache.txt"
fi
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$torch_root" -DTorch_DIR:PATH="$torch_dir" \
  -DATTN_TEST_PYTHON="$python" >"$build/configure.log" 2>&1 ||
  { cat "$build/configure.log"; exit 1; }
cmake --build "$build"

# Make the build the environment's attn: its tools on the environment's PATH and the
# runtime library where the attn package looks (attn.paths).
mkdir -p "$venv/lib/attn"
ln -sfn "$build/bin/attn-compile" "$venv/bin/attn-compile"
ln -sfn "$build/bin/attn-opt" "$venv/bin/attn-opt"
ln -sfn "$build/bin/attn-seal" "$venv/bin/attn-seal"
ln -sfn "$build/runtime/libattn_runtime.so" "$venv/lib/attn/libattn_runtime.so"
