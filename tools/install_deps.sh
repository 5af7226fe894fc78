#!/usr/bin/env bash
# Installs every Debian 12 package monarch-sim needs to build and test. Idempotent: prints
# nothing and touches nothing when all are present; runs `apt-get update` only when something
# is missing. Works as root or through sudo.
# Not here: the CUDA toolkit (GPU runtime) comes from NVIDIA, not Debian; without nvcc the GPU
# runtime is simply not built (see the feature summary cmake prints).
set -euo pipefail

packages=(
  build-essential cmake pkg-config git           # toolchain (CMake 3.25 in Debian 12)
  nlohmann-json3-dev libcli11-dev                # JSON, command line
  libtomlplusplus-dev                            # TOML (torchtitan job configs)
  libsqlite3-dev sqlite3                         # results store
  libgtest-dev libgmock-dev libbenchmark-dev     # tests, benchmarks
  libsimgrid-dev                                 # SimGrid backend
  qt6-base-dev qt6-charts-dev libgl-dev libqt6opengl6-dev  # Qt 6 GUI (Widgets, Charts, Test, Concurrent; Charts' CMake config needs Qt6OpenGL)
  fonts-dejavu-core                              # the GUI's text offscreen (tests, --screenshot)
  libopenmpi-dev openmpi-bin openssh-client libopenblas-dev  # CPU runtime (MPI + BLAS; mpirun wants an rsh agent)
  jq                                             # tools/gpu_check.sh reads result files
  python3                                        # tools/*.py scripts and the README checks
  time debootstrap                               # tools/bench_scenarios.sh (GNU time), tools/fresh_debian_check.sh
  zlib1g-dev                                     # gzip-compressed profiler traces (measured/)
  python3-torch                                  # tests/pytorch: the reference harness (PyTorch 1.13, CPU)
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

if ! command -v apt-get >/dev/null 2>&1; then
  echo "install_deps.sh: apt-get not found; install these Debian 12 packages by hand: ${missing[*]}" >&2
  exit 1
fi
if [ "$(id -u)" -eq 0 ]; then
  as_root=()
elif command -v sudo >/dev/null 2>&1; then
  as_root=(sudo)
else
  echo "install_deps.sh: need root or sudo to install: ${missing[*]}" >&2
  exit 1
fi

echo "install_deps.sh: installing ${missing[*]}" >&2
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
