#!/usr/bin/env python3
"""Microbenchmarks of one GPU through PyTorch: the measured figures behind the cost model's GPU
constants (core/cost_model.cc, core/layer_cost.cc), in one run of a few minutes.

    python3 tools/gpu_microbench.py --out gpu_microbench.json [--quick]

What it measures, each with CUDA events around back-to-back calls after warm-ups:
- gemm: torch.matmul in bf16 and fp16 (cuBLAS, fp32 accumulation) and torch._scaled_mm in fp8
  (e4m3 x e4m3 -> bf16, per-tensor scales) over a grid of shapes: the square MAMF shapes and the
  GEMMs of the validation sets' layers (tokens x hidden, TP-sharded). TFLOP/s = 2 m n k / time.
- sustained: the 8192^3 bf16 (and fp8) product run back to back for tens of seconds while
  nvidia-smi samples the SM clock and the board power: the clock the tensor cores hold at the
  power limit, against the clock the peak is quoted at.
- attention: F.scaled_dot_product_attention, causal, head dim 128, bf16, forward and backward,
  with the backend PyTorch picks and with each fused backend forced; causal FLOPs counted as half
  of 4 b h s^2 d forward and 2.5 x that backward (FlashAttention's convention).
- sustained tf32: the same product with fp32 inputs through the tensor cores, its rate per clock
  against bf16's.
- layers: one transformer block's forward and backward as a TP rank runs it (Llama 3.1 8B at 8192
  tokens, GPT-3 175B at TP 8, a vTrain GPT), held like the sustained product: the clock a
  training mix holds at the power limit, against the pure GEMM's.
- heldattention: causal SDPA forward and backward held at 8192, 4096, 2048 and 512 tokens, with the
  clock.
- dlrm: DeepLearningExamples' DLRM "small" step (batch 65536) in AMP and in TF32, timed and broken
  down per kernel by torch.profiler: which part does not speed up with the precision.
- overlap: Megatron's layer at vTrain's sizes (fp16, hidden 1024 and 2048, micro-batch 1-8, full
  recompute): the wall time per layer against the GPU's busy time and the host's floor.
- alignment: DLRM's 13-wide first layer and 27 x 27 interaction products against padded ones, fp16
  and tf32.
- compile: torchtitan's Llama block held eager and under torch.compile, with the clock.
- dropout: causal SDPA with attention dropout 0.1 against none (FlashAttention-2 and the default).
- headdim: causal SDPA at head dims 64 to 256 and 2048 / 4096 tokens, the same channels a call.
- memory: a device copy (read + write bytes) and an elementwise add (2 reads + 1 write).
- host: tools/host_floor_bench.py's Megatron-LM layer on CUDA tensors too small to cost the GPU
  anything (forward, recompute, backward), with the kernels it launches counted by the profiler;
  one tiny elementwise op; and c10d's all_reduce through ProcessGroupNCCL on a one-rank group,
  the per-call host cost a TP collective adds to the host floor.
The JSON holds every figure with its shape; stdout shows the same as tables. It is rewritten
(through a temporary file and a rename) after each part, so a part that fails or a run that is
stopped keeps the figures before it.

Exit status: 0 measured; 3 no GPU visible (nothing is written).
"""
import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import threading
import time

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def time_call(fn, min_s):
    """Seconds per call of fn: 3 warm-ups, then batches timed with CUDA events until min_s."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    n, per_call = 1, []
    while True:
        start.record()
        for _ in range(n):
            fn()
        end.record()
        end.synchronize()
        elapsed = start.elapsed_time(end) / 1e3
        if elapsed < min_s / 4:
            n *= 4
            continue
        per_call.append(elapsed / n)
        if len(per_call) >= 3:
            return statistics.median(per_call)


def gemm_shapes(quick):
    square = [512, 1024, 2048, 4096, 8192] if not quick else [1024, 4096, 8192]
    shapes = [(s, s, s) for s in square]
    # (m = tokens, n, k) of the layers in the validation sets: Llama 3.1 8B (h 4096, ffn 14336,
    # GQA 8 x 128) at TP 1 and 2, 8192 tokens; Llama 3.1 70B (h 8192, ffn 28672) at TP 4 and 8;
    # GPT-3 175B (h 12288) at TP 4 and 8, 2048 tokens; the vTrain GPTs (h 1024 and 2048, TP 1-8,
    # 1024-8192 tokens); MAMF's H100 shape.
    layers = [
        (8192, 6144, 4096), (8192, 4096, 4096), (8192, 28672, 4096), (8192, 4096, 14336),
        (8192, 3072, 4096), (8192, 14336, 4096), (8192, 4096, 7168),
        (8192, 2560, 8192), (8192, 8192, 2048), (8192, 14336, 8192), (8192, 8192, 7168),
        (8192, 1280, 8192), (8192, 8192, 1024), (8192, 7168, 8192), (8192, 8192, 3584),
        (2048, 9216, 12288), (2048, 12288, 3072), (2048, 12288, 12288), (2048, 12288, 6144),
        (2048, 4608, 12288), (2048, 12288, 1536), (2048, 6144, 12288),
        (4096, 6144, 2048), (4096, 2048, 2048), (4096, 8192, 2048), (4096, 2048, 8192),
        (8192, 6144, 2048), (16384, 8192, 2048), (1024, 3072, 1024), (1024, 4096, 1024),
        (2048, 384, 1024), (2048, 1024, 512), (2048, 768, 2048), (2048, 2048, 256),
        (6144, 17920, 2816),
    ]
    return shapes if quick else shapes + layers


def fp8_pair(m, n, k):
    a = torch.randn(m, k, device="cuda").to(torch.float8_e4m3fn)
    b = torch.randn(n, k, device="cuda").to(torch.float8_e4m3fn).t()  # column-major k x n
    one = torch.ones((), device="cuda")
    return lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)


def matmul_fn(m, n, k, dtype):
    """A call of one m x n x k product in dtype: bf16, fp16, fp32 (tf32 where allowed) or fp8."""
    if dtype == "fp8":
        return fp8_pair(m, n, k)
    t = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32, "tf32": torch.float32}[dtype]
    a = torch.randn(m, k, device="cuda", dtype=t)
    b = torch.randn(k, n, device="cuda", dtype=t)
    return lambda: torch.matmul(a, b)


def bench_gemm(quick, min_s):
    rows = []
    for (m, n, k) in gemm_shapes(quick):
        for dtype in ("bf16", "fp16", "fp8"):
            if dtype == "fp16" and m > 4096 and not m == n == k:
                continue  # fp16 runs the same tensor cores as bf16: the square shapes and vTrain's
            s = time_call(matmul_fn(m, n, k, dtype), min_s)
            rows.append({"dtype": dtype, "m": m, "n": n, "k": k, "time_s": s,
                         "tflops": 2.0 * m * n * k / s / 1e12})
            print(f"gemm {dtype:5s} {m:6d} {n:6d} {k:6d}  {s * 1e6:10.1f} us  {rows[-1]['tflops']:7.1f} TFLOP/s",
                  flush=True)
    return rows


class SmiSampler:
    """nvidia-smi's SM clock, power and throttle reasons every interval, in a thread."""

    FIELDS = "clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu,clocks_event_reasons.active"

    def __init__(self, interval_ms=250):
        self.proc = subprocess.Popen(["nvidia-smi", f"--query-gpu={self.FIELDS}", "--format=csv,noheader,nounits",
                                      f"--loop-ms={interval_ms}"], stdout=subprocess.PIPE, text=True)
        self.samples = []
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        for line in self.proc.stdout:
            parts = [p.strip() for p in line.split(",")]
            if len(parts) == 6:
                self.samples.append({"t": time.time(), "sm_MHz": float(parts[0]), "max_sm_MHz": float(parts[1]),
                                     "power_W": float(parts[2]), "limit_W": float(parts[3]),
                                     "temp_C": float(parts[4]), "throttle": parts[5]})

    def stop(self):
        self.proc.terminate()
        self.proc.wait()


def bench_held(label, fn, flops_per_call, seconds, calls_per_window=50):
    """fn run back to back for `seconds` while nvidia-smi samples the SM clock and the board power:
    the rate and the clock the GPU holds at its power limit, from the second half of the run."""
    sampler = SmiSampler()
    windows, t_end = [], time.time() + seconds
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    while time.time() < t_end:
        start.record()
        for _ in range(calls_per_window):
            fn()
        end.record()
        end.synchronize()
        s = start.elapsed_time(end) / 1e3 / calls_per_window
        windows.append({"t": time.time(), "s": s})
    sampler.stop()
    last = [w["s"] for w in windows if w["t"] > t_end - seconds / 2] or [windows[-1]["s"]]
    clocks = [x for x in sampler.samples if x["t"] > t_end - seconds / 2]
    per_call_s = statistics.median(last)
    out = {"label": label, "seconds": seconds, "flops_per_call": flops_per_call,
           "first_window_s": windows[0]["s"], "second_half_median_s": per_call_s,
           "first_window_tflops": flops_per_call / windows[0]["s"] / 1e12,
           "second_half_median_tflops": flops_per_call / per_call_s / 1e12,
           "second_half_median_sm_MHz": statistics.median(x["sm_MHz"] for x in clocks) if clocks else None,
           "max_sm_MHz": clocks[0]["max_sm_MHz"] if clocks else None,
           "second_half_median_power_W": statistics.median(x["power_W"] for x in clocks) if clocks else None,
           "power_limit_W": clocks[0]["limit_W"] if clocks else None,
           "throttle_reasons": sorted({x["throttle"] for x in clocks}),
           "samples": sampler.samples}
    print(f"held {label}: {per_call_s * 1e3:.3f} ms per call, first {out['first_window_tflops']:.0f} TFLOP/s, "
          f"second half {out['second_half_median_tflops']:.0f} TFLOP/s at {out['second_half_median_sm_MHz']} MHz "
          f"(max {out['max_sm_MHz']}), {out['second_half_median_power_W']} W of {out['power_limit_W']} W, "
          f"throttle {out['throttle_reasons']}", flush=True)
    return out


def bench_sustained(seconds, dtype):
    """The 8192^3 product held: bf16 (the model's ceiling per clock), fp8, and tf32 (fp32 inputs
    through the tensor cores, torch.backends.cuda.matmul.allow_tf32)."""
    m = n = k = 8192
    fn = matmul_fn(m, n, k, dtype)
    torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
    try:
        out = bench_held(f"gemm {dtype} {m}^3", fn, 2.0 * m * n * k, seconds)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = False
    out.update({"dtype": dtype, "m": m, "n": n, "k": k})
    return out


def rms_norm(x, w, eps=1e-5):
    return x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + eps).to(x.dtype) * w


def causal_attention(q, k, v):
    """q [b, heads, s, d], k and v [b, kv_heads, s, d]: the fused SDPA kernel PyTorch picks (the
    KV heads repeated for grouped-query attention, as Megatron-LM does without Transformer Engine);
    the materialized softmax where PyTorch has no SDPA (the CPU self-check under PyTorch 1.x)."""
    if k.shape[1] != q.shape[1]:
        rep = q.shape[1] // k.shape[1]
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
    if hasattr(F, "scaled_dot_product_attention"):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    s = q.shape[2]
    scores = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5
    mask = torch.ones(s, s, dtype=torch.bool, device=q.device).triu(1)
    return scores.masked_fill(mask, float("-inf")).softmax(-1) @ v


def transformer_layer(h, ffn, heads, kv_heads, seq, mbs, tp, gated, device="cuda", dtype=torch.bfloat16):
    """One pre-norm transformer block's forward and backward as one tensor-parallel rank runs it:
    the QKV and fc1 weights split by columns, the projection and fc2 by rows, heads / tp heads, no
    collectives (one GPU). Returns (fn, model FLOPs per call): FLOPs are 2 m n k per GEMM (x3 for
    forward and backward) and causal attention at half of 4 b heads s^2 d forward, 2.5x that
    backward (FlashAttention's convention).
    Shapes: x [mbs * seq, h]; wqkv [h, (heads + 2 kv) d / tp]; wo [heads d / tp, h];
    w1 [h, ffn / tp] (x2 when gated: SwiGLU's gate and up); w2 [ffn / tp, h]."""
    d = h // heads
    hq, hkv, f = heads // tp, max(1, kv_heads // tp), ffn // tp
    T = mbs * seq
    mk = lambda *shape: (torch.randn(*shape, device=device, dtype=dtype) * 0.02).requires_grad_()
    wqkv, wo = mk(h, (hq + 2 * hkv) * d), mk(hq * d, h)
    w1, w2 = mk(h, (2 if gated else 1) * f), mk(f, h)
    n1, n2 = torch.ones(h, device=device, dtype=dtype), torch.ones(h, device=device, dtype=dtype)
    x = torch.randn(T, h, device=device, dtype=dtype, requires_grad=True)
    grad = torch.randn(T, h, device=device, dtype=dtype)
    params = [x, wqkv, wo, w1, w2]

    def forward():
        qkv = rms_norm(x, n1) @ wqkv
        q, k, v = qkv.split([hq * d, hkv * d, hkv * d], dim=-1)
        heads_first = lambda t, n: t.view(mbs, seq, n, d).transpose(1, 2)
        a = causal_attention(heads_first(q, hq), heads_first(k, hkv), heads_first(v, hkv))
        y = x + a.transpose(1, 2).reshape(T, hq * d) @ wo
        u = rms_norm(y, n2) @ w1
        if gated:
            g, up = u.chunk(2, dim=-1)
            u = F.silu(g) * up
        else:
            u = F.gelu(u, approximate="tanh")
        return y + u @ w2

    def step():
        torch.autograd.grad(forward(), params, grad)

    linear = 2.0 * T * (h * (hq + 2 * hkv) * d + hq * d * h + h * (2 if gated else 1) * f + f * h)
    attention = 4.0 * mbs * hq * seq * seq * d / 2
    return step, 3.0 * linear + 3.5 * attention


# Layers held for the training mix's clock: Llama 3.1 8B (DGX Cloud recipe shape, 8192 tokens),
# GPT-3 175B at TP 8 (2048 tokens), a vTrain GPT (h 2048, 4 x 1024 tokens).
HELD_LAYERS = {
    "llama3.1-8b": dict(h=4096, ffn=14336, heads=32, kv_heads=8, seq=8192, mbs=1, tp=1, gated=True),
    "gpt3-175b-tp8": dict(h=12288, ffn=49152, heads=96, kv_heads=96, seq=2048, mbs=1, tp=8, gated=False),
    "vtrain-gpt-h2048": dict(h=2048, ffn=8192, heads=16, kv_heads=16, seq=1024, mbs=4, tp=1, gated=False),
}


def bench_layers(seconds):
    rows = []
    for label, cfg in HELD_LAYERS.items():
        fn, flops = transformer_layer(**cfg)
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        row = bench_held(f"layer {label}", fn, flops, seconds, calls_per_window=10)
        row["config"] = cfg
        rows.append(row)
    return rows


def sdpa_step(b, h, s, d, dropout_p=0.0):
    """One causal scaled_dot_product_attention forward and backward on q, k, v [b, h, s, d] in bf16.
    Returns (fn, FLOPs per call: half of 4 b h s^2 d forward, 2.5x that backward)."""
    q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    g = torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16)
    fn = lambda: torch.autograd.grad(F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p, is_causal=True),
                                     (q, k, v), g)
    return fn, 3.5 * 4.0 * b * h * s * s * d / 2


def sdpa_backend(backend):
    """SDPA restricted to `backend`, or the one PyTorch picks (None)."""
    from torch.nn.attention import sdpa_kernel
    return sdpa_kernel([backend]) if backend is not None else contextlib.nullcontext()


def bench_attention_held(seconds):
    """Causal SDPA forward and backward held at 8192 to 512 tokens (the backend PyTorch picks), the
    same 8192 tokens and 32 heads a call: the short-sequence falloff at a known clock."""
    rows = []
    for (b, h, s) in [(1, 32, 8192), (2, 32, 4096), (4, 32, 2048), (16, 32, 512)]:
        d = 128
        fn, flops = sdpa_step(b, h, s, d)
        row = bench_held(f"attention b{b} h{h} s{s}", fn, flops, seconds)
        row.update({"batch": b, "heads": h, "seq": s, "head_dim": d})
        rows.append(row)
    return rows


def bench_attention(quick, min_s):
    from torch.nn.attention import SDPBackend
    rows = []
    configs = [(1, 32, 2048), (1, 32, 4096), (1, 32, 8192), (4, 16, 2048), (2, 64, 2048), (1, 8, 16384)]
    if quick:
        configs = configs[:2]
    backends = {"default": None, "flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
                "efficient": SDPBackend.EFFICIENT_ATTENTION}
    for (b, h, s) in configs:
        d = 128
        fwd_flops = 4.0 * b * h * s * s * d / 2  # causal: half the score matrix
        for name, backend in backends.items():
            q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
            try:
                with sdpa_backend(backend):
                    fwd = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True)
                    t_fwd = time_call(fwd, min_s)
                    out = fwd()
                    g = torch.randn_like(out)
                    bwd = lambda: torch.autograd.grad(out, (q, k, v), g, retain_graph=True)
                    t_bwd = time_call(bwd, min_s)
            except RuntimeError as e:
                print(f"attention {name}: not available ({str(e).splitlines()[0][:100]})", flush=True)
                continue
            rows.append({"backend": name, "batch": b, "heads": h, "seq": s, "head_dim": d,
                         "forward_s": t_fwd, "backward_s": t_bwd,
                         "forward_tflops": fwd_flops / t_fwd / 1e12, "backward_tflops": 2.5 * fwd_flops / t_bwd / 1e12})
            r = rows[-1]
            print(f"attention {name:9s} b{b} h{h} s{s:5d}  fwd {r['forward_tflops']:6.1f}  bwd {r['backward_tflops']:6.1f} TFLOP/s",
                  flush=True)
    return rows


def dlrm_step(tables, batch, amp, device="cuda", pad=False):
    """One training step of DeepLearningExamples' PyTorch DLRM "small" (Criteo 1TB, dot
    interaction) in stock PyTorch: fp32 tables as one sparse-gradient nn.Embedding (SGD), bottom
    MLP 13-512-256-128, the 27 x 27 dot interaction's 351 pairs beside the bottom output, top MLP
    479-1024-1024-512-256-1, BCE loss; AMP (fp16 autocast, loss scaling) or TF32. pad: the dense
    input and the top MLP's input zero-padded to multiples of 8 (16 and 480), so cuBLAS can pick
    its aligned tensor-core kernels (DeepLearningExamples pads the top MLP's input to 480,
    dlrm/nn/interactions.py padding_size, and keeps 13 dense inputs).
    Shapes: dense [B, 13]; ids [B, 26]; feats [B, 27, 128]; z [B, 27, 27]; top input [B, 479]."""
    nn = torch.nn
    rows = [t["rows"] for t in tables]
    dim = tables[0]["dim"]
    offsets = torch.tensor([sum(rows[:i]) for i in range(len(rows))], device=device)
    emb = nn.Embedding(sum(rows), dim, sparse=True, device=device)

    def mlp(widths, last_relu):
        mods = []
        for i in range(len(widths) - 1):
            mods.append(nn.Linear(widths[i], widths[i + 1], device=device))
            if i < len(widths) - 2 or last_relu:
                mods.append(nn.ReLU())
        return nn.Sequential(*mods)

    n_feat = len(rows) + 1
    li, lj = torch.tril_indices(n_feat, n_feat, -1, device=device)
    dense_in, pad_top = (16, (-(dim + len(li))) % 8) if pad else (13, 0)
    bottom = mlp([dense_in, 512, 256, dim], True)
    top = mlp([dim + len(li) + pad_top, 1024, 1024, 512, 256, 1], False)
    dense = torch.randn(batch, dense_in, device=device)
    ids = torch.stack([torch.randint(0, r, (batch,), device=device) for r in rows], 1) + offsets
    labels = torch.randint(0, 2, (batch,), device=device).float()
    opt = torch.optim.SGD(list(emb.parameters()) + list(bottom.parameters()) + list(top.parameters()), lr=0.01)
    scaler = torch.amp.GradScaler(device, enabled=amp) if hasattr(torch, "amp") and hasattr(torch.amp, "GradScaler") else None

    def step():
        with torch.autocast(device, dtype=torch.float16) if amp else contextlib.nullcontext():
            b = bottom(dense)
            feats = torch.cat([b.unsqueeze(1), emb(ids).to(b.dtype)], 1)
            z = torch.bmm(feats, feats.transpose(1, 2))
            parts = [b, z[:, li, lj]] + ([b.new_zeros(batch, pad_top)] if pad_top else [])
            out = top(torch.cat(parts, 1))
            loss = F.binary_cross_entropy_with_logits(out.squeeze(1).float(), labels)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
        opt.zero_grad(set_to_none=True)
    return step


def kernel_table(fn, steps=3):
    """GPU time per kernel name over `steps` calls of fn, from torch.profiler, largest first."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            fn()
        torch.cuda.synchronize()
    gpu_us = lambda e: max(getattr(e, name, 0) or 0 for name in
                           ("device_time_total", "self_device_time_total", "cuda_time_total", "self_cuda_time_total"))
    rows = [{"kernel": e.key[:160], "calls_per_step": e.count / steps, "gpu_s_per_step": gpu_us(e) / 1e6 / steps}
            for e in prof.key_averages()]
    rows = [r for r in rows if r["gpu_s_per_step"] > 0]
    return sorted(rows, key=lambda r: -r["gpu_s_per_step"])


def bench_dlrm(min_s):
    """DLRM "small" on one GPU, AMP against TF32: step time and where the GPU time goes, to find
    the part of DeepLearningExamples' runs that does not speed up with the precision."""
    path = os.path.join(HERE, "..", "tests", "data", "validation", "dlrm-published.json")
    data = json.load(open(path))
    cases = data["cases"] if isinstance(data, dict) else data
    case = next(c for c in cases if c["id"] == "dle-dlrm-1xA100-80GB-small-amp")
    tables, batch = case["scenario"]["model"]["embedding_tables"], case["scenario"]["training"]["global_batch_size"]
    out = {"batch": batch, "tables": len(tables)}
    for mode in ("amp", "tf32", "amp_padded", "tf32_padded"):
        torch.backends.cuda.matmul.allow_tf32 = mode.startswith("tf32")
        try:
            step = dlrm_step(tables, batch, amp=mode.startswith("amp"), pad=mode.endswith("padded"))
            s = time_call(step, min_s)
            kernels = kernel_table(step)
        finally:
            torch.backends.cuda.matmul.allow_tf32 = False
        out[mode] = {"step_s": s, "samples_per_s": batch / s,
                     "kernel_gpu_s_per_step": sum(k["gpu_s_per_step"] for k in kernels), "kernels": kernels[:40]}
        print(f"dlrm {mode}: {s * 1e3:.2f} ms per step, {batch / s / 1e6:.2f} M samples/s; kernels "
              f"{out[mode]['kernel_gpu_s_per_step'] * 1e3:.2f} ms per step", flush=True)
        for k in kernels[:12]:
            print(f"   {k['gpu_s_per_step'] * 1e3:7.3f} ms  x{k['calls_per_step']:4.0f}  {k['kernel'][:110]}", flush=True)
        del step
        torch.cuda.empty_cache()
    for suffix in ("", "_padded"):
        out["amp_speedup_over_tf32" + suffix] = out["tf32" + suffix]["step_s"] / out["amp" + suffix]["step_s"]
        print(f"dlrm{suffix}: AMP {out['amp_speedup_over_tf32' + suffix]:.2f}x faster than TF32", flush=True)
    return out


def bench_memory(min_s):
    n = 1 << 29  # 1 GiB of bf16... as 2-byte elements: 2^29 x 2 B
    a = torch.empty(n, device="cuda", dtype=torch.bfloat16).normal_()
    b = torch.empty_like(a).normal_()
    c = torch.empty_like(a)
    t_copy = time_call(lambda: c.copy_(a), min_s)
    t_add = time_call(lambda: torch.add(a, b, out=c), min_s)
    out = {"bytes_per_tensor": 2 * n, "copy_GBps": 2 * 2 * n / t_copy / 1e9, "add_GBps": 3 * 2 * n / t_add / 1e9}
    print(f"memory: copy {out['copy_GBps']:.0f} GB/s, add {out['add_GBps']:.0f} GB/s", flush=True)
    return out


def kernels_launched(fn):
    """Kernel launches fn makes, counted by the profiler's CUDA runtime events."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    names = [e.name for e in prof.events()]
    return sum(1 for x in names if x.startswith(("cudaLaunchKernel", "cuLaunchKernel")))


def bench_host():
    import host_floor_bench as hfb
    hfb.DEVICE = "cuda"
    layers, x = hfb.megatron_layers()
    out = {"torch": torch.__version__, **hfb.megatron_layer_times(layers, x)}
    for key, run in (("kernels_per_layer_forward_backward", hfb.plain),
                     ("kernels_per_layer_full_recompute", hfb.checkpointed)):
        out[key] = kernels_launched(lambda: hfb.one_pass(run, layers, x)) / len(layers)
    # One tiny elementwise op: Python, the dispatcher and cudaLaunchKernel, nothing else.
    t = torch.ones(16, device="cuda")
    torch.cuda.synchronize()
    reps = 20000
    start = time.perf_counter()
    for _ in range(reps):
        t.add_(1.0)
    torch.cuda.synchronize()
    out["tiny_op_s"] = (time.perf_counter() - start) / reps
    out["host_cpu"] = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                            if line.startswith("model name")), "unknown")
    print(f"host ({out['host_cpu']}, torch {out['torch']}): layer fwd {out['layer_forward_no_grad_s'] * 1e3:.3f} ms, "
          f"fwd+bwd {out['layer_forward_backward_s'] * 1e3:.3f} ms ({out['kernels_per_layer_forward_backward']:.0f} kernels), "
          f"fwd+recompute+bwd {out['layer_forward_recompute_backward_s'] * 1e3:.3f} ms "
          f"({out['kernels_per_layer_full_recompute']:.0f} kernels); tiny op {out['tiny_op_s'] * 1e6:.1f} us", flush=True)
    return out


def bench_compile(seconds):
    """tools/host_floor_bench.py's torchtitan Llama block (separate projections, fp32 RMSNorm,
    complex rotary embedding, repeat_kv, SwiGLU; FFN 4 h) with the real SDPA, hidden 4096, 32 heads,
    8 KV heads, 8192 tokens, bf16: forward and backward held eager and under torch.compile, with
    the clock. What Inductor's fusion takes off the eager block, against the model's fused cost."""
    import host_floor_bench as hfb
    hfb.DEVICE = "cuda"
    h, heads, kv, s = 4096, 32, 8, 8192
    hd = h // heads
    blk = hfb.TorchtitanBlock(h, heads, kv).to(torch.bfloat16)
    blk.attention = lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True)
    freqs = hfb.rope_freqs(s, hd)
    x = torch.randn(1, s, h, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    g = torch.randn(1, s, h, device="cuda", dtype=torch.bfloat16)
    params = [x] + list(blk.parameters())
    linear = 2.0 * s * (h * h + 2 * h * kv * hd + h * h + 3 * h * 4 * h)
    flops = 3.0 * linear + 3.5 * 4.0 * heads * s * s * hd / 2
    rows = []
    for label, fwd in (("eager", blk), ("compiled", torch.compile(blk))):
        fn = lambda fwd=fwd: torch.autograd.grad(fwd(x, freqs), params, g)
        t0 = time.time()
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        row = bench_held(f"torchtitan block {label}", fn, flops, seconds, calls_per_window=10)
        row.update({"mode": label, "warmup_s": time.time() - t0, "hidden": h, "heads": heads, "kv_heads": kv,
                    "ffn": 4 * h, "seq": s})
        rows.append(row)
    return rows


def bench_attention_dropout(min_s):
    """Causal SDPA forward and backward with attention dropout 0.1 against none, head dim 128,
    bf16, at 2048 and 8192 tokens (16384 tokens and 32 heads a call), with FlashAttention-2
    forced and with the backend PyTorch picks: what the in-kernel dropout (a Philox draw per score)
    costs a fused attention kernel. Each pair is timed back to back, so both see the same clock."""
    from torch.nn.attention import SDPBackend
    rows = []
    for name, backend in (("flash", SDPBackend.FLASH_ATTENTION), ("default", None)):
        for s in (2048, 8192):
            b, h, d = 16384 // s, 32, 128
            steps = {p: sdpa_step(b, h, s, d, dropout_p=p)[0] for p in (0.0, 0.1)}
            times = {}
            try:
                with sdpa_backend(backend):
                    for p in (0.0, 0.1, 0.0, 0.1):
                        times.setdefault(p, []).append(time_call(steps[p], min_s))
            except RuntimeError as e:
                print(f"dropout {name} s{s}: not available ({str(e).splitlines()[0][:100]})", flush=True)
                continue
            t0, t1 = min(times[0.0]), min(times[0.1])
            rows.append({"backend": name, "batch": b, "heads": h, "seq": s, "head_dim": d,
                         "no_dropout_s": t0, "dropout_0.1_s": t1, "dropout_over_none": t1 / t0})
            print(f"dropout {name:8s} s{s:5d}: {t0 * 1e3:.3f} ms without, {t1 * 1e3:.3f} ms with 0.1 ({t1 / t0:.3f}x)",
                  flush=True)
    return rows


def bench_attention_head_dim(min_s):
    """Causal SDPA forward and backward at head dims 64 to 256 (the models of the validation sets
    and of common recipes: 64 small GPTs, 80 GPT-3 2.7B, 96 GPT 22B, 112 MPT-30B, 128 GPT-3 and
    Llama, 160 GPT 530B / 1T, 192 Nemotron-4 340B, 256), at 2048 and 4096 tokens, the same 16384
    tokens and about 4096 channels a call (heads = 4096 // d), with FlashAttention-2 forced and
    with the backend PyTorch picks: the rate per head dim against d = 128's. Every dim is timed
    twice, in rounds that run the dims in turn, so a clock that drifts during the part shows as
    a spread between the rounds rather than as a bias against one dim."""
    from torch.nn.attention import SDPBackend
    rows = []
    b_tokens = 16384
    for s in (2048, 4096):
        b = b_tokens // s
        for name, backend in (("flash", SDPBackend.FLASH_ATTENTION), ("default", None)):
            for rnd in (0, 1):
                for d in (64, 80, 96, 112, 128, 160, 192, 256):
                    h = 4096 // d
                    fn, flops = sdpa_step(b, h, s, d)
                    try:
                        with sdpa_backend(backend):
                            t = time_call(fn, min_s)
                    except RuntimeError as e:
                        print(f"head dim {name} d{d}: not available ({str(e).splitlines()[0][:100]})", flush=True)
                        continue
                    rows.append({"backend": name, "round": rnd, "batch": b, "heads": h, "seq": s, "head_dim": d,
                                 "forward_backward_s": t, "tflops": flops / t / 1e12})
                    print(f"head dim {name:8s} s{s} round {rnd} d{d:4d} x {h:3d} heads: {t * 1e3:.3f} ms, "
                          f"{flops / t / 1e12:.0f} TFLOP/s", flush=True)
                    del fn
    return rows


def bench_alignment(min_s):
    """GEMMs whose sizes are not multiples of 16 bytes, against the padded ones: DLRM's first
    bottom-MLP layer (65536 samples x 13 dense inputs -> 512, forward and both gradients) and its
    dot interaction (65536 batched 27 x 128 products, forward and backward), in fp16 and tf32."""
    rows = []
    batch = 65536
    for dtype in ("fp16", "tf32"):
        t = torch.float16 if dtype == "fp16" else torch.float32
        torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
        try:
            for k in (13, 16):
                x = torch.randn(batch, k, device="cuda", dtype=t, requires_grad=True)
                w = torch.randn(512, k, device="cuda", dtype=t, requires_grad=True)
                g = torch.randn(batch, 512, device="cuda", dtype=t)
                fn = lambda x=x, w=w, g=g: torch.autograd.grad(x @ w.t(), (x, w), g)
                s = time_call(fn, min_s)
                rows.append({"op": "linear", "dtype": dtype, "m": batch, "n": 512, "k": k, "forward_backward_s": s,
                             "tflops": 3 * 2.0 * batch * 512 * k / s / 1e12})
            for f in (27, 32):
                z = torch.randn(batch, f, 128, device="cuda", dtype=t, requires_grad=True)
                g = torch.randn(batch, f, f, device="cuda", dtype=t)
                fn = lambda z=z, g=g: torch.autograd.grad(torch.bmm(z, z.transpose(1, 2)), (z,), g)
                s = time_call(fn, min_s)
                rows.append({"op": "interaction_bmm", "dtype": dtype, "batch": batch, "features": f, "dim": 128,
                             "forward_backward_s": s, "tflops": 3 * 2.0 * batch * f * f * 128 / s / 1e12})
        finally:
            torch.backends.cuda.matmul.allow_tf32 = False
        for r in rows[-4:]:
            size = r.get("k", r.get("features"))
            print(f"alignment {r['op']:16s} {dtype} {size:3d}: {r['forward_backward_s'] * 1e6:9.1f} us, "
                  f"{r['tflops']:6.1f} TFLOP/s", flush=True)
    return rows


def bench_overlap(min_passes=40):
    """Megatron's layer at vTrain's sizes (fp16, 16 heads, 1024 tokens, hidden 1024 and 2048,
    micro-batch 1-8, full recompute) on one GPU: the wall time of a forward, recompute and
    backward per layer, against the GPU's busy time in it (the profiler's kernel time) and the
    host's floor (the same layer too small to cost the GPU anything): whether a pass takes
    max(host, GPU), as the model composes them, or more."""
    import host_floor_bench as hfb
    hfb.DEVICE = "cuda"
    floor = hfb.megatron_layer_times(*hfb.megatron_layers(), repeats=50)["layer_forward_recompute_backward_s"]
    rows = []
    for h in (1024, 2048):
        for mbs in (1, 2, 4, 8):
            layers, x = hfb.megatron_layers(8, h=h, heads=16, s=1024, b=mbs, dtype=torch.float16)
            pass_fn = lambda layers=layers, x=x: hfb.one_pass(hfb.checkpointed, layers, x)
            hfb.measure(hfb.checkpointed, layers, x, 3)  # warm-up
            wall = hfb.measure(hfb.checkpointed, layers, x, min_passes)
            gpu = sum(k["gpu_s_per_step"] for k in kernel_table(pass_fn, steps=2)) / len(layers)
            rows.append({"hidden": h, "micro_batch": mbs, "tokens": 1024, "heads": 16, "dtype": "fp16",
                         "wall_s_per_layer": wall, "gpu_busy_s_per_layer": gpu, "host_floor_s_per_layer": floor})
            print(f"overlap h{h} mbs{mbs}: wall {wall * 1e3:.3f} ms a layer, GPU busy {gpu * 1e3:.3f} ms, host floor "
                  f"{floor * 1e3:.3f} ms; max {max(gpu, floor) * 1e3:.3f}, sum {(gpu + floor) * 1e3:.3f}", flush=True)
            del layers, x
            torch.cuda.empty_cache()
    return rows


def bench_c10d():
    """ProcessGroupNCCL's all_reduce on a one-rank group: the host time of one call (c10d's
    work object, stream and event bookkeeping, NCCL's enqueue), against a tiny op's."""
    import torch.distributed as dist
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda", 0))
    t = torch.ones(1024, device="cuda")
    for _ in range(50):
        dist.all_reduce(t)
    torch.cuda.synchronize()
    reps = 5000
    start = time.perf_counter()
    for _ in range(reps):
        dist.all_reduce(t)
    host = (time.perf_counter() - start) / reps
    torch.cuda.synchronize()
    wall = (time.perf_counter() - start) / reps
    dist.destroy_process_group()
    out = {"all_reduce_host_s": host, "all_reduce_wall_s": wall, "bytes": 4096}
    print(f"c10d NCCL all_reduce (1 rank, 4 KiB): host {host * 1e6:.1f} us per call, wall {wall * 1e6:.1f} us", flush=True)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--sustained-s", type=float, default=30.0)
    ap.add_argument("--only", default="gemm,sustained,attention,memory,host,c10d,layers,heldattention,dlrm,overlap,alignment,compile,dropout,headdim")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("gpu_microbench: no GPU visible", file=sys.stderr)
        return 3
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    min_s = 0.01 if args.quick else 0.05
    props = torch.cuda.get_device_properties(0)
    result = {"device": props.name, "sm_count": props.multi_processor_count, "torch": torch.__version__,
              "cuda": torch.version.cuda, "cublas": torch.backends.cuda.preferred_blas_library().name}
    print(f"{props.name}, {props.multi_processor_count} SMs, torch {torch.__version__}, CUDA {torch.version.cuda}", flush=True)
    parts = args.only.split(",")

    def save():
        tmp = args.out + ".tmp"
        with open(tmp, "w") as f:
            json.dump(result, f, indent=1)
        os.replace(tmp, args.out)

    steps = [("memory", lambda: bench_memory(min_s)), ("gemm", lambda: bench_gemm(args.quick, min_s)),
             ("attention", lambda: bench_attention(args.quick, min_s)), ("host", bench_host), ("c10d", bench_c10d),
             ("sustained_bf16", lambda: bench_sustained(args.sustained_s, "bf16")),
             ("sustained_fp8", lambda: bench_sustained(args.sustained_s / 2, "fp8")),
             ("sustained_tf32", lambda: bench_sustained(args.sustained_s / 2, "tf32")),
             ("layers", lambda: bench_layers(args.sustained_s * 2 / 3)),
             ("heldattention", lambda: bench_attention_held(args.sustained_s / 4)),
             ("dlrm", lambda: bench_dlrm(min_s)), ("overlap", bench_overlap),
             ("alignment", lambda: bench_alignment(min_s)), ("compile", lambda: bench_compile(args.sustained_s / 3)),
             ("dropout", lambda: bench_attention_dropout(min_s)), ("headdim", lambda: bench_attention_head_dim(min_s))]
    for name, fn in steps:
        if name not in parts and name.split("_")[0] not in parts:
            continue
        t0 = time.time()
        try:
            result[name] = fn()
        except Exception as e:  # one failed part must not lose the others' figures
            result[name] = {"error": f"{type(e).__name__}: {e}"}
            print(f"{name}: FAILED {type(e).__name__}: {e}", flush=True)
        print(f"-- {name} took {time.time() - t0:.1f} s", flush=True)
        save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
