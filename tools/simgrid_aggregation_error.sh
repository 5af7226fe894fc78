#!/usr/bin/env bash
# tools/simgrid_aggregation_error.sh [GPUS ...]: what the SimGrid backend's aggregations cost in
# accuracy on the Llama-3 405B layout (TP 8, PP 16, DP = GPUS / 128, ZeRO-2, no recompute,
# 8 micro-batches per replica, scenarios/llama3-405b-16384-h100.json resized; default 1024 and
# 4096 GPUs), on two fabrics: rail-optimized 1:1 (as the 131,072-GPU benchmark) and a fat tree
# with 8:1 oversubscribed leaf uplinks (the DP rings contend there). Each row is one
# `monarch-sim --backend simgrid` run of that plan:
#   coarsest       the defaults at scale: one data-parallel replica simulated (lowered alone),
#                  representative DP flows, aggregated ring flows (auto fidelity), TP
#                  collectives inside a node as one timed activity
#   intra flows    the same with the TP collectives as flows on the NVLink ports
#   every DP flow  the same with every DP member's flows (replica_flows=all)
#   every flow     every DP member's flows and the NVLink flows (aggregated rings): the
#                  reference, the finest model that runs at 4096 GPUs
#   per-step       every flow with every ring step its own flows (fidelity=per-step); only up
#                  to PER_STEP_MAX_GPUS GPUs (default 1024: at 4096 it runs for over 15 min,
#                  SimGrid 3.32's cost growing with the flows in flight)
#   every rank     every flow with every rank simulated (symmetry=off; only with EVERY_RANK=1,
#                  minutes at 1024 GPUs)
# and prints the simulated iteration, the error against the every-flow row, and the run's CPU
# seconds. A benchmark-like script: the iteration times are deterministic, the CPU seconds
# depend on the machine.
#
#   tools/simgrid_aggregation_error.sh                 # 1024 and 4096 GPUs
#   EVERY_RANK=1 tools/simgrid_aggregation_error.sh 1024
#
# Needs python3 (reads the result files) and GNU time. Run after building monarch-sim.
set -uo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
bin=$(realpath -m "${BIN:-$root/build/app/monarch-sim}")
[ -x "$bin" ] || { echo "simgrid_aggregation_error.sh: $bin not found; build it first: cmake --build build --target monarch-sim" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "simgrid_aggregation_error.sh: /usr/bin/time not found; install the Debian package: time" >&2; exit 2; }
command -v python3 >/dev/null || { echo "simgrid_aggregation_error.sh: python3 not found" >&2; exit 2; }
work=$(mktemp -d "${TMPDIR:-/tmp}/monarch_aggregation.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT

sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(1024 4096)

run() {  # run NAME GPUS TOPOLOGY OVERSUBSCRIPTION OPTIONS...: prints "iteration_s cpu_s"
  local name=$1 gpus=$2 topology=$3 oversub=$4; shift 4
  local dp=$((gpus / 128))
  /usr/bin/time -f "%U %S" -o "$work/$name.time" "$bin" "$root/scenarios/llama3-405b-16384-h100.json" --backend simgrid \
    --no-db --top-k 1 --output "$work/$name.json" \
    --set cluster.num_gpus="$gpus" --set parallelism.dp="$dp" --set training.global_batch_size=$((8 * dp)) \
    --set parallelism.zero_stage=2 --set parallelism.activation_recompute='"none"' \
    --set cluster.inter_node.topology="\"$topology\"" --set cluster.inter_node.oversubscription="$oversub" \
    "$@" >"$work/$name.out" 2>&1 ||
    { echo "failed: $(tail -n 1 "$work/$name.out")"; return; }
  python3 - "$work/$name.json" "$work/$name.time" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
sim = [e for e in r["results"] if e.get("backend") == "simgrid"][0]
u, s = open(sys.argv[2]).read().split()[-2:]
print("%.6f %.1f" % (sim["iteration_time_s"], float(u) + float(s)))
PY
}

printf '%-6s %-18s %-14s %14s %9s %8s\n' GPUs fabric model iteration_s error cpu_s
for gpus in "${sizes[@]}"; do
for fabric in "rail-optimized 1" "fat-tree 8"; do
  read -r topology oversub <<<"$fabric"
  declare -A it=() cpu=()
  names=(coarsest "intra flows" "every DP flow" "every flow")
  keys=(coarsest intra dp fine)
  every=(--set simgrid.intra_node=flows --set simgrid.replica_flows=all)
  read -r it[coarsest] cpu[coarsest] < <(run coarsest "$gpus" "$topology" "$oversub" --set simgrid.timeline=off)
  read -r it[intra] cpu[intra] < <(run intra "$gpus" "$topology" "$oversub" --set simgrid.timeline=off --set simgrid.intra_node=flows)
  read -r it[dp] cpu[dp] < <(run dp "$gpus" "$topology" "$oversub" --set simgrid.timeline=off --set simgrid.replica_flows=all)
  read -r it[fine] cpu[fine] < <(run fine "$gpus" "$topology" "$oversub" --set simgrid.timeline=off "${every[@]}")
  if [ "$gpus" -le "${PER_STEP_MAX_GPUS:-1024}" ]; then
    read -r it[step] cpu[step] < <(run step "$gpus" "$topology" "$oversub" --set simgrid.timeline=off "${every[@]}" \
                                    --set simgrid.fidelity=per-step)
    names+=(per-step); keys+=(step)
  fi
  if [ "${EVERY_RANK:-0}" = 1 ]; then
    read -r it[all] cpu[all] < <(run all "$gpus" "$topology" "$oversub" --set simgrid.timeline=off "${every[@]}" \
                                  --set simgrid.symmetry=off)
    names+=("every rank"); keys+=(all)
  fi
  for i in "${!keys[@]}"; do
    k=${keys[$i]}
    err=$(awk -v a="${it[$k]}" -v b="${it[fine]}" 'BEGIN { if (b > 0 && a > 0) printf "%+.3f%%", 100 * (a / b - 1); else print "-" }')
    printf '%-6s %-18s %-14s %14s %9s %8s\n' "$gpus" "$topology $oversub:1" "${names[$i]}" "${it[$k]}" "$err" "${cpu[$k]}"
  done
  unset it cpu
done
done
