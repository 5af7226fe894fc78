#!/usr/bin/env python3
"""Turn nccl-tests measurements into the collectives of a calibration profile (monarch-profile/1).

A cluster measured with nccl-tests (all_reduce_perf, all_gather_perf, reduce_scatter_perf,
alltoall_perf) can be described to monarch-sim without running monarch-calibrate on it: this
script reads the tests' output and writes a profile whose `collectives` hold the out-of-place
times. A scenario names the profile in `cluster.gpu.profile`; the cost model then takes the
bus bandwidth of collectives within a node from it (docs/calibration_profile.md).

Usage:
  nccl_tests_to_profile.py --out PROFILE.json [--gpu NAME] [--notes TEXT] [--max-sizes N]
                           --input KIND[:RANKS]=FILE [--input ...]

KIND is all-reduce, all-gather, reduce-scatter or all-to-all. RANKS is the number of GPUs the
test ran on; without it the `#  Rank N ...` device lines of the output are counted. FILE is
either the tests' standard output (the table under "# size count type redop ...") or a CSV
with the columns size(B),count,type,time(ns),busbw(GB/s)[,...] (the layout of the all-reduce
look-up tables in VIA-Research/vTrain, trace/a100/AR_GPU*_LUT). --max-sizes N keeps at most N
message sizes per input, evenly spaced in log2(size) with the smallest and the largest kept (the
cost model interpolates between sizes in log2, so a sweep in 1 MiB steps needs far fewer).

nccl-tests' output is a plain text table and no library reads it, so it is parsed here.
Exit status: 0 written, 2 bad option or unreadable input (the file and line are named).
"""
import argparse
import json
import math
import os
import re
import sys
import tempfile

KINDS = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all")
DTYPES = {"float": "fp32", "bfloat16": "bf16", "half": "fp16", "fp8_e4m3": "fp8", "fp8_e5m2": "fp8"}


class InputError(Exception):
    pass


def bus_factor(kind, n):
    """nccl-tests' busbw / algbw (doc/PERFORMANCE.md), the factor core/collectives.h applies."""
    if kind == "all-reduce":
        return 2.0 * (n - 1) / n
    return (n - 1) / n


def parse_csv(path, lines):
    samples = []
    for no, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        cols = line.strip().split(",")
        if len(cols) < 4:
            raise InputError(f"{path}:{no}: expected size(B),count,type,time(ns),..., found {line.strip()!r}")
        try:
            size, time_ns = int(cols[0]), float(cols[3])
        except ValueError:
            raise InputError(f"{path}:{no}: size or time(ns) is not a number: {line.strip()!r}")
        samples.append((no, size, cols[2], time_ns / 1000.0))
    return samples


def parse_stdout(path, lines):
    header = None
    samples = []
    for no, line in enumerate(lines, start=1):
        if line.startswith("#"):
            words = line[1:].split()
            if "size" in words and "count" in words and "time" in words:
                header = words
            continue
        if header is None or not line.strip():
            continue
        cols = line.split()
        if len(cols) < header.index("time") + 1 or not cols[0].isdigit():
            continue  # "Out of bounds values", "Avg bus bandwidth" and other trailer lines
        try:
            size = int(cols[header.index("size")])
            time_us = float(cols[header.index("time")])  # the first time: out-of-place
        except ValueError:
            raise InputError(f"{path}:{no}: size or time is not a number: {line.strip()!r}")
        samples.append((no, size, cols[header.index("type")], time_us))
    if header is None:
        raise InputError(f"{path}: no nccl-tests table (a '# size count type ... time' header) found")
    return samples


def count_ranks(lines):
    return sum(1 for line in lines if re.match(r"#\s+Rank\s+\d+\s", line))


def read_input(spec):
    m = re.fullmatch(r"([a-z-]+)(?::(\d+))?=(.+)", spec)
    if not m or m.group(1) not in KINDS:
        raise InputError(f"--input {spec!r}: expected KIND[:RANKS]=FILE with KIND one of {', '.join(KINDS)}")
    kind, ranks, path = m.group(1), m.group(2), m.group(3)
    try:
        with open(path, encoding="utf-8-sig") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise InputError(f"--input {spec!r}: cannot read {path}: {e.strerror}")
    csv = bool(lines) and lines[0].startswith("size(B),")
    samples = parse_csv(path, lines) if csv else parse_stdout(path, lines)
    n = int(ranks) if ranks else count_ranks(lines)
    if n < 2:
        raise InputError(f"--input {spec!r}: the number of GPUs is not in the file; write it as {kind}:RANKS={path}")
    out = []
    for no, size, type_name, time_us in samples:
        if size <= 0 or not time_us > 0:
            continue  # nccl-tests prints 0-byte rows and 0.00 times at the smallest sizes
        if type_name not in DTYPES:
            raise InputError(f"{path}:{no}: data type {type_name!r} is not one of {', '.join(DTYPES)}")
        algbw = size / (time_us * 1e-6) / 1e9
        out.append({"kind": kind, "ranks": n, "bytes": size, "dtype": DTYPES[type_name], "time_us": time_us,
                    "algbw_GBps": algbw, "busbw_GBps": algbw * bus_factor(kind, n)})
    if not out:
        raise InputError(f"{path}: no measurement rows")
    return out


def thin(samples, max_sizes):
    """At most max_sizes samples, the ones nearest to evenly spaced points in log2(bytes)."""
    if max_sizes <= 0 or len(samples) <= max_sizes:
        return samples
    ordered = sorted(samples, key=lambda s: s["bytes"])
    lo, hi = math.log2(ordered[0]["bytes"]), math.log2(ordered[-1]["bytes"])
    keep = set()
    for i in range(max_sizes):
        target = lo + (hi - lo) * i / (max_sizes - 1)
        keep.add(min(range(len(ordered)), key=lambda j: abs(math.log2(ordered[j]["bytes"]) - target)))
    return [ordered[j] for j in sorted(keep)]


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="profile to write (through a temporary file and a rename)")
    ap.add_argument("--input", action="append", required=True, metavar="KIND[:RANKS]=FILE")
    ap.add_argument("--gpu", default="GPU", help="device.name of the profile")
    ap.add_argument("--notes", default="", help="provenance written into the profile's notes")
    ap.add_argument("--max-sizes", type=int, default=0, metavar="N", help="keep at most N sizes per input")
    args = ap.parse_args(argv)
    try:
        if args.max_sizes == 1:
            raise InputError("--max-sizes 1: expected 0 (keep every size) or at least 2")
        collectives = [s for spec in args.input for s in thin(read_input(spec), args.max_sizes)]
    except InputError as e:
        print(f"nccl_tests_to_profile: {e}", file=sys.stderr)
        return 2
    ranks = max(s["ranks"] for s in collectives)
    profile = {"format": "monarch-profile/1", "device": {"kind": "gpu", "name": args.gpu, "count": ranks},
               "tool": "tools/nccl_tests_to_profile.py", "notes": args.notes, "collectives": collectives}
    out_dir = os.path.dirname(os.path.abspath(args.out))
    try:
        fd, tmp = tempfile.mkstemp(dir=out_dir, prefix=".profile-")
        with os.fdopen(fd, "w") as f:
            json.dump(profile, f, indent=1)
            f.write("\n")
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp creates 0600; a profile is an ordinary file
        os.replace(tmp, args.out)
    except OSError as e:
        print(f"nccl_tests_to_profile: --out {args.out}: {e.strerror}", file=sys.stderr)
        return 2
    print(f"wrote {len(collectives)} collective samples to {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
