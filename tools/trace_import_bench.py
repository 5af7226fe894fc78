#!/usr/bin/env python3
"""Memory and speed of `monarch-sim runs import` on a large Kineto trace (not a test).

  tools/trace_import_bench.py BUILD/app/monarch-sim [--mb 300]

Writes a synthetic Kineto trace of about MB megabytes of JSON (gzip-compressed on disk): GPU
kernels, NCCL all-reduce kernels with collective metadata, CPU ops with long args, 20 profiler
steps; then imports it into a scratch store under /usr/bin/time and prints the wall time, the
peak resident memory of the importer and its ratio to the JSON size (the streaming reader keeps
a few tens of bytes per kernel, not the JSON).
"""
import argparse
import gzip
import os
import re
import subprocess
import tempfile


def write_trace(path, target_bytes):
    steps = 20
    written = 0
    with gzip.open(path, "wt", compresslevel=1) as f:
        f.write('{"schemaVersion": 1, "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 8},\n'
                '"traceEvents": [\n')
        first = True
        per_step = target_bytes // steps
        for s in range(steps):
            base = s * 1_000_000
            f.write(('' if first else ',\n') + f'{{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#{s}", '
                    f'"pid": 1, "tid": 1, "ts": {base}, "dur": 1000000}}')
            first = False
            t, done = base, 0
            i = 0
            while done < per_step:
                i += 1
                t += 3
                corr = s * 10_000_000 + i
                lines = [
                    f'{{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": {t}, "dur": 2, '
                    f'"args": {{"External id": {corr}, "Input Dims": [[4096, 4096], [4096, 4096]], '
                    f'"Input type": ["c10::BFloat16", "c10::BFloat16"], "Sequence number": {i}}}}}',
                    f'{{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": {t + 1}, '
                    f'"dur": 1, "args": {{"correlation": {corr}, "cbid": 211}}}}',
                    f'{{"ph": "X", "cat": "kernel", "name": "sm90_xmma_gemm_bf16bf16_bf16f32", "pid": 0, "tid": 7, '
                    f'"ts": {t + 2}, "dur": 2, "args": {{"device": 0, "stream": 7, "correlation": {corr}, '
                    f'"grid": [132, 1, 1], "block": [384, 1, 1]}}}}',
                ]
                if i % 50 == 0:
                    lines.append(
                        f'{{"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_bf16_RING_LL", "pid": 0, '
                        f'"tid": 20, "ts": {t + 2}, "dur": 5, "args": {{"device": 0, "stream": 20, "correlation": {corr + 1}, '
                        f'"Collective name": "allreduce", "In msg nelems": 1048576, "Out msg nelems": 1048576, '
                        f'"Group size": 8, "dtype": "BFloat16", "Process Group Ranks": "[0, 1, 2, 3, 4, 5, 6, 7]"}}}}')
                text = ",\n" + ",\n".join(lines)
                f.write(text)
                done += len(text)
            written += done
        f.write('\n]}\n')
    return written


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("monarch_sim")
    ap.add_argument("--mb", type=int, default=300)
    opts = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        trace = os.path.join(tmp, "rank0_trace.json.gz")
        json_bytes = write_trace(trace, opts.mb << 20)
        p = subprocess.run(["/usr/bin/time", "-v", opts.monarch_sim, "runs", "import", trace, "--db",
                            os.path.join(tmp, "runs.db")], capture_output=True, text=True)
        if p.returncode != 0:
            print(p.stdout, p.stderr)
            return 1
        rss_kb = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", p.stderr).group(1))
        wall = re.search(r"Elapsed \(wall clock\) time.*: (\S+)", p.stderr).group(1)
        print(f"trace: {json_bytes / 2**20:.0f} MiB of JSON, {os.path.getsize(trace) / 2**20:.0f} MiB gzip")
        print(f"runs import: wall {wall}, peak RSS {rss_kb / 1024:.0f} MiB "
              f"({rss_kb * 1024 / json_bytes:.2f} x the JSON size)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
