#!/usr/bin/env bash
# tools/bench_scenarios.sh [SCENARIO.json ...]: runs monarch-sim on every shipped scenario
# (scenarios/*.json, or the ones named) with its default backends, as a user's first run would,
# and prints one row per scenario: wall time, CPU time (user + system, with the processes it
# waited for: what the wall time would be on an idle core, less any parallelism), peak resident
# memory (GNU time's "Maximum resident set size": the largest of monarch-sim and the processes it
# waited for) and exit status. Rows over the target (TARGET_S, 60 s wall) are marked, and the
# load average is printed before and after (wall times on a loaded machine say little). Each run
# records into a throw-away store.
#
#   tools/bench_scenarios.sh                                   # every shipped scenario
#   BIN=build-rel/app/monarch-sim TIMEOUT_S=3600 tools/bench_scenarios.sh scenarios/default.json
#
# Run from anywhere after building monarch-sim. Needs GNU time (/usr/bin/time, Debian package
# `time`). Exit status: 0 every run exited 0; 1 a run failed or timed out (its row says so).
# A benchmark, not a test: the figures depend on the machine and its load.
set -uo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
bin=$(realpath -m "${BIN:-$root/build/app/monarch-sim}")
target_s=${TARGET_S:-60}
timeout_s=${TIMEOUT_S:-1800}

[ -x /usr/bin/time ] || { echo "bench_scenarios.sh: /usr/bin/time not found; install the Debian package: time" >&2; exit 2; }
[ -x "$bin" ] || { echo "bench_scenarios.sh: $bin not found; build it first: cmake --build build --target monarch-sim" >&2; exit 2; }

if [ $# -gt 0 ]; then
  scenarios=("$@")
else
  scenarios=("$root"/scenarios/*.json)
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/monarch_bench_scenarios.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"
printf '%-36s %8s %8s %9s %5s  %s\n' scenario wall_s cpu_s peak_MiB exit note
status=0
for s in "${scenarios[@]}"; do
  [ -f "$s" ] || { printf '%-36s %8s %8s %9s %5s  %s\n' "$(basename "$s")" - - - - "no such file"; status=1; continue; }
  # The run's own directory: the default store and any file it writes land there.
  run_dir=$work/$(basename "$s" .json)
  mkdir -p "$run_dir"
  scenario=$(realpath "$s")
  (cd "$run_dir" && /usr/bin/time -v -o "$run_dir/time.txt" timeout "$timeout_s" "$bin" "$scenario" --db "$run_dir/bench.db" \
     >"$run_dir/stdout" 2>"$run_dir/stderr" </dev/null)
  rc=$?
  wall=$(sed -n 's/^[[:space:]]*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$run_dir/time.txt" |
         awk -F: '{ s = 0; for (i = 1; i <= NF; i++) s = s * 60 + $i; printf "%.1f", s }')
  cpu=$(awk -F': ' '/^[[:space:]]*(User|System) time \(seconds\)/ { s += $2 } END { printf "%.1f", s }' "$run_dir/time.txt")
  rss_kib=$(sed -n 's/^[[:space:]]*Maximum resident set size (kbytes): //p' "$run_dir/time.txt")
  rss_mib=$(awk -v k="${rss_kib:-0}" 'BEGIN { printf "%.0f", k / 1024 }')
  note=""
  if [ "$rc" -eq 124 ]; then
    note="timed out after ${timeout_s} s"; status=1
  elif [ "$rc" -ne 0 ]; then
    note="failed: $(tail -n 1 "$run_dir/stderr")"; status=1
  fi
  if awk -v w="${wall:-0}" -v t="$target_s" 'BEGIN { exit !(w > t) }'; then
    note="${note:+$note; }over the ${target_s} s target"
  fi
  printf '%-36s %8s %8s %9s %5s  %s\n' "$(basename "$s")" "${wall:--}" "$cpu" "$rss_mib" "$rc" "$note"
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
exit "$status"
