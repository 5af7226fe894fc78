#!/usr/bin/env bash
# tools/gpu_check.sh: the GPU checks, on one GPU node (target: under 5 minutes on one
# H200). Builds the GPU code, runs the GPU tests (they must run: a skip here is a failure),
# calibrates this node's GPUs with monarch-calibrate --device gpu and prints the profile back, then
# checks the GPU runtime (monarch-run --device gpu) on one GPU:
#   1. loss parity: realrt/testdata/gpu_parity_1gpu.json, 10 steps on the CPU runtime (mpirun -np 1)
#      and on the GPU; every step's loss within PARITY_FP32 (1e-3) relative in fp32 and within
#      PARITY_BF16 (3e-2, bf16 activations: 8-bit mantissa) in bf16;
#   2. MFU of realrt/testdata/gpu_mfu_1gpu.json (24 layers, hidden 2048, 16 heads, S 1024, V 50304,
#      micro-batch 8, bf16), printed with its formula; target MFU_MIN (0.45) on H100 / H200;
#   3. the analytical prediction of that run (monarch-sim --backend analytical with the profile
#      just measured) within PREDICTION_TOL (0.10) of the measured iteration time.
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
command -v jq >/dev/null || { echo "gpu_check: jq is needed (tools/install_deps.sh installs it)" >&2; exit 1; }
step "GPUs"
nvidia-smi -L
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader || true

step "configure ($build)"
mkdir -p "$build"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release \
  -DMONARCH_WITH_GPU=ON -DMONARCH_GPU_CALIBRATE=ON -DMONARCH_WITH_GUI=OFF -DMONARCH_WITH_SIMGRID=OFF \
  >"$build/configure.log" 2>&1 || { tail -40 "$build/configure.log"; fail "cmake configure (log: $build/configure.log)"; }
grep -E '^-- +(ON|OFF) ' "$build/configure.log" || true

step "build monarch-calibrate, monarch-run, monarch-sim and the GPU tests (-j$jobs)"
cmake --build "$build" -j "$jobs" --target monarch-calibrate gpu_calibrate_tests monarch-run monarch-sim \
  gpu_trainer_tests || fail "build"
grep -q 'MONARCH_HAVE_GPU_RUNTIME:INTERNAL=ON' "$build/CMakeCache.txt" || fail "the GPU runtime was not configured (MPI or NCCL missing?)"

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

step "gpu_trainer_tests (the GPU trainer against the CPU reference, in process)"
log=$build/gpu_trainer_tests.log
"$build/realrt/gpu_trainer_tests" 2>&1 | tee "$log" || fail "gpu_trainer_tests"
grep -q '\[  SKIPPED \]' "$log" && fail "gpu_trainer_tests skipped although nvidia-smi lists a GPU"

run=$build/realrt/monarch-run
mpiexec=$(sed -n 's/^MPIEXEC_EXECUTABLE:FILEPATH=//p' "$build/CMakeCache.txt")
parity_fp32=${PARITY_FP32:-1e-3}
parity_bf16=${PARITY_BF16:-3e-2}
# max relative difference of the "step I loss X" lines of two runs; fails when steps differ.
max_rel() {
  awk '/^step [0-9]+ loss /{ if (FILENAME == ARGV[1]) a[$2] = $4; else { b[$2] = $4; nb++ } }
       END { n = 0; m = 0
             for (k in a) { if (!(k in b)) { print "missing step " k; exit 1 }
                            d = (a[k] - b[k]) / a[k]; if (d < 0) d = -d; if (d > m) m = d; n++ }
             if (n != nb || n == 0) { print "step counts differ"; exit 1 }
             printf "%.3g\n", m }' "$1" "$2"
}
step "1. loss parity on realrt/testdata/gpu_parity_1gpu.json (10 steps)"
scen=$root/realrt/testdata/gpu_parity_1gpu.json
as_root=(); [ "$(id -u)" = 0 ] && as_root=(--allow-run-as-root)
"$mpiexec" "${as_root[@]}" -np 1 "$run" "$scen" >"$build/parity_cpu.txt" || fail "monarch-run on the CPU"
"$run" "$scen" --device gpu --precision fp32 >"$build/parity_fp32.txt" || fail "monarch-run --device gpu (fp32)"
"$run" "$scen" --device gpu --precision bf16 >"$build/parity_bf16.txt" || fail "monarch-run --device gpu (bf16)"
paste "$build/parity_cpu.txt" "$build/parity_fp32.txt" "$build/parity_bf16.txt" | grep '^step' | \
  awk -F'\t' 'BEGIN { print "         cpu fp32     gpu fp32     gpu bf16" } { split($1,c," "); split($2,g," "); split($3,h," ");
               printf "step %2d  %-12s %-12s %-12s\n", c[2], c[4], g[4], h[4] }'
rel32=$(max_rel "$build/parity_cpu.txt" "$build/parity_fp32.txt") || fail "fp32 parity: $rel32"
rel16=$(max_rel "$build/parity_cpu.txt" "$build/parity_bf16.txt") || fail "bf16 parity: $rel16"
echo "max relative loss difference: fp32 $rel32 (limit $parity_fp32), bf16 $rel16 (limit $parity_bf16)"
awk -v r="$rel32" -v l="$parity_fp32" 'BEGIN { exit !(r <= l) }' || fail "fp32 losses differ from the CPU runtime by $rel32 > $parity_fp32"
awk -v r="$rel16" -v l="$parity_bf16" 'BEGIN { exit !(r <= l) }' || fail "bf16 losses differ from the CPU runtime by $rel16 > $parity_bf16"

step "2. MFU: GPT 24 x 2048 (1.3B), S 1024, micro-batch 8, bf16, one GPU"
mfu_min=${MFU_MIN:-0.45}
mscen=$build/gpu_mfu_1gpu.json
sed "s|@PROFILE@|$out|" "$root/realrt/testdata/gpu_mfu_1gpu.json" >"$mscen"
"$run" "$mscen" --device gpu --output "$build/gpu_mfu_result.json" | tail -3 || fail "monarch-run --device gpu (MFU model)"
read -r iter mfu tflops < <(jq -r '.result | "\(.iteration_time_s) \(.mfu) \(.model_tflops_per_gpu)"' "$build/gpu_mfu_result.json")
cat <<FORMULA
MFU = F / t / P with
  F = 3 x (L x (2 B S h (4 h + 2 F) + 4 B S^2 h) + 2 B S h V)   model FLOPs per step (Megatron's
      accounting, as the CPU runtime: 6 x matrix-product parameters x tokens + causal-unaware
      attention 12 L B S^2 h), L 24, h 2048, F 8192, V 50304, S 1024, B 8 -> F = $(awk -v t="$tflops" -v i="$iter" 'BEGIN{printf "%.4g", t*i*1e12}') FLOP
  t = measured step time (CUDA events, mean of steps 2..10) = $iter s
  P = dense bf16 peak of the scenario's GPU (H200-SXM / H100-SXM: 989.5 TFLOP/s)
  -> $tflops TFLOP/s, MFU = $mfu (target >= $mfu_min)
FORMULA
awk -v m="$mfu" -v l="$mfu_min" 'BEGIN { exit !(m >= l) }' || fail "MFU $mfu below the target $mfu_min"

step "3. analytical prediction with this GPU's profile against the measured step"
tol=${PREDICTION_TOL:-0.10}
"$build/app/monarch-sim" "$mscen" --backend analytical --no-db --quiet --output "$build/gpu_mfu_analytical.json" \
  || fail "monarch-sim --backend analytical"
pred=$(jq -r '.results[0].iteration_time_s' "$build/gpu_mfu_analytical.json")
err=$(awk -v p="$pred" -v m="$iter" 'BEGIN { d = (p - m) / m; printf "%.3f", d }')
echo "predicted $pred s, measured $iter s: error $err (limit +-$tol)"
awk -v e="$err" -v t="$tol" 'BEGIN { if (e < 0) e = -e; exit !(e <= t) }' || fail "prediction off by $err"

printf '\ngpu_check: PASSED in %ds; profile: %s\n' "$SECONDS" "$out"
