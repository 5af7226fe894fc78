#!/usr/bin/env bash
# tools/gpu_microbench.py where no GPU is visible: exit status 3 and no output file (not an
# empty or partial one). Skipped (77) where PyTorch is missing or a GPU is visible: there the
# script measures for minutes instead (tools/gpu_check.sh's machines).
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
/usr/bin/python3 -c 'import torch, sys; sys.exit(77 if torch.cuda.is_available() else 0)' 2>/dev/null
case $? in 0) ;; 77) echo "a GPU is visible: skipped"; exit 77 ;; *) echo "PyTorch missing: skipped"; exit 77 ;; esac
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
/usr/bin/python3 "$root/tools/gpu_microbench.py" --out "$out/gpu.json" 2>"$out/err"
rc=$?
[ "$rc" -eq 3 ] || { echo "expected exit 3, got $rc"; cat "$out/err"; exit 1; }
grep -q "no GPU visible" "$out/err" || { echo "stderr does not say why:"; cat "$out/err"; exit 1; }
[ ! -e "$out/gpu.json" ] || { echo "wrote $out/gpu.json without a GPU"; exit 1; }
echo "exit 3 and no file, as documented"
