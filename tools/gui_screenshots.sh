#!/usr/bin/env bash
# Regenerates the GUI pictures of README.md and docs/gui.md (docs/img/gui_*.png) from the
# shipped default scenario (GPT-3 175B on 64 A100, an open search space): one screenshot per
# view, scaled to 1000 px wide.
#   tools/gui_screenshots.sh [BUILD_DIR]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
QT_QPA_PLATFORM=offscreen "$build/gui/monarch-gui" --screenshot "$out" --screenshot-width 1000 \
  "$root/scenarios/default.json" > /dev/null
cp "$out/planspace.png" "$root/docs/img/gui_plan_space.png"
cp "$out/whatif.png" "$root/docs/img/gui_whatif.png"
cp "$out/plans.png" "$root/docs/img/gui_plans.png"
cp "$out/timeline.png" "$root/docs/img/gui_timeline.png"
ls -l "$root"/docs/img/gui_*.png
