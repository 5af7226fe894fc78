#!/usr/bin/env bash
# tools/gpu_check.sh: the GPU checks of issue 8, on one GPU node (target: under 5 minutes on one
# H200). Builds the GPU code, runs the GPU test (it must run: a skip here is a failure), calibrates
# this node's GPUs with monarch-calibrate --device gpu and prints the profile back from the file.
#
#   tools/gpu_check.sh                 # full calibration grid
#   QUICK=1 tools/gpu_check.sh         # --quick grid (smoke test, ~1 minute with the build)
#   BUILD_DIR=/tmp/b JOBS=8 OUT_PROFILE=/tmp/h200.json tools/gpu_check.sh
#
# Exit status: 0 all checks passed; 1 a check failed; 3 no GPU visible (nothing was checked).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${BUILD_DIR:-$root/build-gpu}
jobs=${JOBS:-$(nproc)}
out=${OUT_PROFILE:-$build/gpu_profile.json}
quick=${QUICK:-}

step() { printf '\n== %s  (t=%ds)\n' "$1" "$SECONDS"; }
fail() { printf '\ngpu_check: FAILED: %s\n' "$1" >&2; exit 1; }

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "gpu_check: SKIPPED: no GPU visible (nvidia-smi -L fails or is missing); nothing was checked" >&2
  exit 3
fi
step "GPUs"
nvidia-smi -L
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader || true

step "configure ($build)"
mkdir -p "$build"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release \
  -DMONARCH_WITH_GPU=ON -DMONARCH_GPU_CALIBRATE=ON -DMONARCH_WITH_GUI=OFF -DMONARCH_WITH_SIMGRID=OFF \
  >"$build/configure.log" 2>&1 || { tail -40 "$build/configure.log"; fail "cmake configure (log: $build/configure.log)"; }
grep -E '^-- +(ON|OFF) ' "$build/configure.log" || true

step "build monarch-calibrate and gpu_calibrate_tests (-j$jobs)"
cmake --build "$build" -j "$jobs" --target monarch-calibrate gpu_calibrate_tests || fail "build"

step "gpu_calibrate_tests"
log=$build/gpu_calibrate_tests.log
"$build/realrt/gpu_calibrate_tests" 2>&1 | tee "$log" || fail "gpu_calibrate_tests"
if grep -q '\[  SKIPPED \]' "$log"; then
  fail "gpu_calibrate_tests skipped although nvidia-smi lists a GPU (see the reason above)"
fi

step "monarch-calibrate --device gpu ${quick:+--quick}"
"$build/realrt/monarch-calibrate" --device gpu ${quick:+--quick} --out "$out" || fail "monarch-calibrate"

step "profile $out (read back through core/profile_io; all tables in $build/gpu_profile.txt)"
"$build/realrt/monarch-calibrate" --show "$out" >"$build/gpu_profile.txt" || fail "monarch-calibrate --show"
grep -E '^# (profile|sm_|memory|fp32:|tf32:|bf16:|fp16:|fp8:|collectives)' "$build/gpu_profile.txt"
sed -n '/ over [0-9]* ranks/,$p' "$build/gpu_profile.txt"

printf '\ngpu_check: PASSED in %ds; profile: %s\n' "$SECONDS" "$out"
