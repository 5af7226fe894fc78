#!/usr/bin/env bash
# Records or compares the predictions of every shipped scenario, to show that a refactoring
# changes no prediction.
#
#   tools/compare_predictions.sh record BUILD_DIR OUT_DIR   # run monarch-sim, keep its outputs
#   tools/compare_predictions.sh compare DIR_A DIR_B        # diff two recordings
#
# record runs, with --no-db: the analytical backend on every scenarios/*.json, SimGrid as well
# on the scenarios of at most SIMGRID_MAX_GPUS GPUs (default 8), and `validate` on
# tests/data/validation/calibration.json. For each it keeps the result file (--output), stdout
# and the exit status. compare diffs the result files exactly (every digit) and the stdout of
# validate; stdout of the runs is diffed as well but reported separately, since table layout
# may change without a prediction changing.
set -euo pipefail

usage() { echo "usage: $0 record BUILD_DIR OUT_DIR | compare DIR_A DIR_B" >&2; exit 2; }
[[ $# -eq 3 ]] || usage
mode=$1
here=$(cd "$(dirname "$0")/.." && pwd)

case "$mode" in
record)
  exe="$2/app/monarch-sim"
  out=$3
  [[ -x "$exe" ]] || { echo "$0: no monarch-sim at $exe" >&2; exit 2; }
  mkdir -p "$out"
  max_gpus=${SIMGRID_MAX_GPUS:-8}
  for f in "$here"/scenarios/*.json; do
    name=$(basename "$f" .json)
    gpus=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["cluster"]["num_gpus"])' "$f")
    backends=(analytical)
    if [[ $gpus -le $max_gpus ]]; then backends+=(simgrid); fi
    for b in "${backends[@]}"; do
      set +e
      "$exe" "$f" --no-db --backend "$b" --output "$out/$name.$b.json" >"$out/$name.$b.stdout" 2>"$out/$name.$b.stderr"
      echo $? >"$out/$name.$b.rc"
      set -e
      echo "$name $b: exit $(cat "$out/$name.$b.rc")"
    done
  done
  set +e
  "$exe" validate "$here/tests/data/validation/calibration.json" >"$out/validate-calibration.stdout" 2>"$out/validate-calibration.stderr"
  echo $? >"$out/validate-calibration.rc"
  set -e
  echo "validate calibration: exit $(cat "$out/validate-calibration.rc")"
  ;;
compare)
  a=$2
  b=$3
  status=0
  for fa in "$a"/*.json "$a"/*.rc "$a"/validate-*.stdout; do
    fb="$b/$(basename "$fa")"
    if [[ ! -e "$fb" ]]; then
      echo "only in $a: $(basename "$fa")"
      status=1
    elif ! cmp -s "$fa" "$fb"; then
      echo "differs: $(basename "$fa")"
      diff <(python3 -m json.tool --sort-keys "$fa" 2>/dev/null || cat "$fa") \
           <(python3 -m json.tool --sort-keys "$fb" 2>/dev/null || cat "$fb") | head -20 || true
      status=1
    fi
  done
  for fa in "$a"/*.stdout; do
    [[ $(basename "$fa") == validate-* ]] && continue
    fb="$b/$(basename "$fa")"
    if [[ -e "$fb" ]] && ! cmp -s "$fa" "$fb"; then echo "table text differs: $(basename "$fa")"; fi
  done
  [[ $status -eq 0 ]] && echo "same predictions: every result file and validate output identical"
  exit $status
  ;;
*) usage ;;
esac
