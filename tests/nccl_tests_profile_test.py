#!/usr/bin/env python3
"""tools/nccl_tests_to_profile.py end to end: nccl-tests output in, a profile the project reads out.

- both input layouts (nccl-tests' standard output, the CSV look-up tables vTrain publishes) give
  the out-of-place times, with bus bandwidth computed by nccl-tests' factors;
- --max-sizes keeps the smallest and the largest size;
- a malformed row exits 2 naming the file and line, and writes nothing;
- monarch-calibrate --show reads the profile back (it checks algbw and busbw against bytes/time);
- monarch-sim takes a TP all-reduce's time from the profile (a relative `cluster.gpu.profile`
  resolves beside the scenario), and a missing profile exits 2 naming /cluster/gpu/profile.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TOOL = os.path.join(HERE, "..", "tools", "nccl_tests_to_profile.py")

# The layout all_reduce_perf prints (nccl-tests 2.13): two device lines, the table, a trailer.
STDOUT_SAMPLE = """\
# nThread 1 nGpus 1 minBytes 1048576 maxBytes 4194304 step: 2(factor) warmup iters: 5 iters: 20
#
# Using devices
#  Rank  0 Group  0 Pid   4242 on   node01 device  0 [0x07] NVIDIA A100-SXM4-80GB
#  Rank  1 Group  0 Pid   4243 on   node01 device  1 [0x0f] NVIDIA A100-SXM4-80GB
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
     1048576        262144     float     sum      -1    44.21   23.72   23.72      0    45.10   23.25   23.25      0
     2097152        524288     float     sum      -1    53.43   39.25   39.25      0    51.13   41.01   41.01      0
     4194304       1048576     float     sum      -1    61.18   68.56   68.56      0    60.26   69.60   69.60      0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 44.26
"""
CSV_SAMPLE = """\
size(B),count,type,time(ns),busbw(GB/s),time(ns),busbw(GB/s)
1048576,262144,float,92790,19.78,92150,19.91
2097152,524288,float,93250,39.36,92970,39.47
3145728,786432,float,92580,59.46,93310,59.00
4194304,1048576,float,95800,76.62,94030,78.06
"""


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True)


def check(cond, what):
    if not cond:
        print("FAILED:", what)
        sys.exit(1)
    print("ok:", what)


def convert(tmp, inputs, out="profile.json", extra=()):
    out_path = os.path.join(tmp, out)
    args = [sys.executable, TOOL, "--out", out_path, "--gpu", "A100"] + list(extra)
    for spec in inputs:
        args += ["--input", spec]
    return run(args), out_path


def test_conversion(tmp):
    with open(os.path.join(tmp, "ar.txt"), "w") as f:
        f.write(STDOUT_SAMPLE)
    with open(os.path.join(tmp, "ar8.csv"), "w") as f:
        f.write(CSV_SAMPLE)
    p, path = convert(tmp, ["all-reduce=" + os.path.join(tmp, "ar.txt"), "all-reduce:8=" + os.path.join(tmp, "ar8.csv")])
    check(p.returncode == 0, "both layouts convert (exit 0): " + p.stderr.strip())
    prof = json.load(open(path))
    two = [c for c in prof["collectives"] if c["ranks"] == 2]
    eight = [c for c in prof["collectives"] if c["ranks"] == 8]
    check(len(two) == 3 and len(eight) == 4, "ranks from the '#  Rank' lines (2) and from KIND:8")
    first = two[0]
    check(first["bytes"] == 1048576 and first["time_us"] == 44.21 and first["dtype"] == "fp32",
          "the out-of-place time of the stdout table, fp32")
    check(abs(eight[0]["time_us"] - 92.79) < 1e-9, "the CSV's time(ns) in microseconds")
    algbw = 1048576 / 92.79e-6 / 1e9
    check(abs(eight[0]["busbw_GBps"] - algbw * 2 * 7 / 8) < 1e-9, "all-reduce busbw = algbw x 2(n-1)/n")
    check(prof["device"]["count"] == 8, "device.count is the largest rank count")
    return path


def test_thinning(tmp):
    p, path = convert(tmp, ["all-reduce:8=" + os.path.join(tmp, "ar8.csv")], "thin.json", ["--max-sizes", "2"])
    sizes = [c["bytes"] for c in json.load(open(path))["collectives"]]
    check(p.returncode == 0 and sizes == [1048576, 4194304], "--max-sizes 2 keeps the smallest and the largest")


def test_bad_input(tmp):
    bad = os.path.join(tmp, "bad.csv")
    with open(bad, "w") as f:
        f.write(CSV_SAMPLE.replace("93250", "fast"))
    p, path = convert(tmp, ["all-reduce:8=" + bad], "bad.json")
    check(p.returncode == 2 and bad + ":3:" in p.stderr, "a malformed row exits 2 naming file:line: " + p.stderr.strip())
    check(not os.path.exists(path), "nothing written on error")
    p, _ = convert(tmp, ["all-reduce=" + os.path.join(tmp, "ar8.csv")], "bad2.json")
    check(p.returncode == 2 and "RANKS" in p.stderr, "a CSV without a rank count asks for KIND:RANKS")
    p, _ = convert(tmp, ["broadcast:8=" + bad], "bad3.json")
    check(p.returncode == 2 and "--input" in p.stderr, "an unknown kind names --input")


def tp2_scenario(profile):
    # One TP all-reduce carries mbs x seq x hidden x 2 bytes = 1 x 512 x 1024 x 2 = 1 MiB, a size the
    # profile measured.
    return {"name": "tp2-profiled",
            "model": {"architecture": "gpt", "num_layers": 2, "hidden_size": 1024, "num_attention_heads": 8,
                      "vocab_size": 1024, "seq_length": 512},
            "cluster": {"gpu": {"name": "A100-80GB", "profile": profile}, "num_gpus": 2, "gpus_per_node": 2},
            "training": {"global_batch_size": 1, "micro_batch_size": 1, "precision": "bf16"},
            "parallelism": {"tp": 2, "pp": 1, "dp": 1, "cp": 1, "sequence_parallel": False,
                            "activation_recompute": "none"},
            "backends": ["analytical"]}


def test_monarch_sim(tmp, monarch_sim):
    sc_dir = os.path.join(tmp, "scen")
    os.makedirs(sc_dir)
    os.replace(os.path.join(tmp, "profile.json"), os.path.join(sc_dir, "profile.json"))
    scen = os.path.join(sc_dir, "tp2.json")
    json.dump(tp2_scenario("profile.json"), open(scen, "w"))
    out = os.path.join(tmp, "result.json")
    p = subprocess.run([monarch_sim, scen, "--no-db", "--output", out], capture_output=True, text=True, cwd=tmp)
    check(p.returncode == 0, "monarch-sim reads a profile named relative to the scenario: " + p.stderr.strip()[-300:])
    res = json.load(open(out))
    ar = [c for c in res["results"][0]["communication"] if c["group"] == "tp" and c["kind"] == "all-reduce"]
    check(len(ar) == 1 and ar[0]["count"] > 0, "the plan has TP all-reduces")
    per_call_us = ar[0]["time_s"] / ar[0]["count"] * 1e6
    check(abs(per_call_us - 44.21) < 1e-6 * 44.21, f"a 1 MiB TP all-reduce takes the measured 44.21 us ({per_call_us:.4f})")
    json.dump(tp2_scenario("missing.json"), open(scen, "w"))
    p = run([monarch_sim, scen, "--no-db"])
    check(p.returncode == 2 and "/cluster/gpu/profile" in p.stderr, "a missing profile exits 2 at /cluster/gpu/profile")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--monarch-sim")
    ap.add_argument("--monarch-calibrate")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = test_conversion(tmp)
        test_thinning(tmp)
        test_bad_input(tmp)
        if a.monarch_calibrate:
            p = run([a.monarch_calibrate, "--show", path])
            check(p.returncode == 0, "monarch-calibrate --show reads the profile: " + p.stderr.strip())
        if a.monarch_sim:
            test_monarch_sim(tmp, a.monarch_sim)
    return 0


if __name__ == "__main__":
    sys.exit(main())
