#!/usr/bin/python3
"""Reference harness: the CPU runtime's small GPT (realrt/gpt.h) trained by real PyTorch.

Trains the GPT (token embedding + learned positions, pre-LayerNorm layers with causal multi-head
attention and a tanh-GeLU MLP, final LayerNorm, output projection tied to the embedding,
cross-entropy) with gloo DistributedDataParallel on WORLD processes, with Adam or with
DDP + ZeroRedundancyOptimizer (ZeRO-1), on the runtime's synthetic token stream
(realrt/gpt.h synthetic_batch, the same sample indices per data-parallel rank as
realrt/reference.h first_sample), under torch.profiler with record_function("ProfilerStep#N")
around each step. Writes into OUT:
  export/rank{R}_trace.json   the profiler's own Chrome trace export of rank R (PyTorch 1.13's
                       bare array; it drops the shapes record_shapes recorded)
  shapes/rank{R}_trace.json   the same events with those shapes as args "Input Dims", as
                       PyTorch >= 2 writes them (for the bytes of each gloo collective)
  train.log            one Megatron-LM style line per step (rank 0): elapsed time, lm loss
  timers.json          the harness's own timers: per rank, per step wall time (perf_counter)

Run with the system interpreter (Debian's python3-torch): /usr/bin/python3 gpt_harness.py ...
"""

import argparse
import json
import math
import os
import sys
import time

MASK64 = (1 << 64) - 1


def splitmix64(state):
    """One step of splitmix64; returns (new state, output), as realrt/gpt.cc."""
    state = (state + 0x9E3779B97F4A7C15) & MASK64
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return state, z ^ (z >> 31)


def hash3(a, b, c):
    s, _ = splitmix64(a)
    s ^= (b * 0xD1342543DE82EF95) & MASK64
    s, _ = splitmix64(s)
    s ^= (c * 0xAF251AF3B0F025B5) & MASK64
    _, out = splitmix64(s)
    return out


def synthetic_batch(seed, first_sample, batch, seq, vocab):
    """tokens[b][k], targets[b][k] of samples first_sample .. first_sample + batch - 1."""
    tokens, targets = [], []
    for b in range(batch):
        g = first_sample + b
        x = hash3(seed, g, 0) % vocab
        tok, tgt = [], []
        for k in range(seq):
            h = hash3(seed, g, k + 1)
            jump = h % vocab if (h // vocab) % 4 == 0 else 0
            nxt = (5 * x + 3 + jump) % vocab
            tok.append(x)
            tgt.append(nxt)
            x = nxt
        tokens.append(tok)
        targets.append(tgt)
    return tokens, targets


def build_model(torch, cfg):
    nn = torch.nn
    F = torch.nn.functional
    C, NH, S, V, L = cfg["hidden"], cfg["heads"], cfg["seq"], cfg["vocab"], cfg["layers"]

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = nn.LayerNorm(C)
            self.qkv = nn.Linear(C, 3 * C)
            self.proj = nn.Linear(C, C)
            self.ln2 = nn.LayerNorm(C)
            self.fc = nn.Linear(C, 4 * C)
            self.fc_proj = nn.Linear(4 * C, C)

        def forward(self, x):
            B, T, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
            q = q.view(B, T, NH, C // NH).transpose(1, 2)
            k = k.view(B, T, NH, C // NH).transpose(1, 2)
            v = v.view(B, T, NH, C // NH).transpose(1, 2)
            att = (q @ k.transpose(-2, -1)) / math.sqrt(C // NH)
            mask = torch.ones(T, T, dtype=torch.bool).tril()
            att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
            y = (att @ v).transpose(1, 2).reshape(B, T, C)
            x = x + self.proj(y)
            return x + self.fc_proj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))

    class Gpt(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(V, C)
            self.wpe = nn.Embedding(S, C)
            self.blocks = nn.ModuleList([Block() for _ in range(L)])
            self.lnf = nn.LayerNorm(C)

        def forward(self, tokens, targets):
            T = tokens.shape[1]
            x = self.wte(tokens) + self.wpe(torch.arange(T))
            for b in self.blocks:
                x = b(x)
            logits = self.lnf(x) @ self.wte.weight.t()  # tied output projection
            return F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1))

    torch.manual_seed(cfg["seed"])
    model = Gpt()
    # GPT-2 initialisation as the runtime's (kInitStd 0.02, residual projections / sqrt(2 L)).
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias"):
                p.zero_()
            elif ".ln" in name or name.startswith("lnf"):
                p.fill_(1.0)
            elif name.endswith("proj.weight"):
                p.normal_(0, 0.02 / math.sqrt(2 * L))
            else:
                p.normal_(0, 0.02)
    return model


CKPT_MAGIC = b"MNRCKPT1"  # realrt/cpu_runtime.cc kCkptMagic


def runtime_flat_params(model, cfg):
    """The model's parameters in the CPU runtime's flat layout (realrt/gpt.cc make_param_layout,
    tp 1, one chunk): wte, per layer qkv_w qkv_b proj_w fc_w fc_b fcproj_w, wpe, per layer ln1_w
    ln1_b proj_b ln2_w ln2_b fcproj_b, lnf_w lnf_b; matrices as [in, out] (x @ W)."""
    import torch
    parts = [model.wte.weight]
    for b in model.blocks:
        parts += [b.qkv.weight.t(), b.qkv.bias, b.proj.weight.t(), b.fc.weight.t(), b.fc.bias, b.fc_proj.weight.t()]
    parts.append(model.wpe.weight)
    for b in model.blocks:
        parts += [b.ln1.weight, b.ln1.bias, b.proj.bias, b.ln2.weight, b.ln2.bias, b.fc_proj.bias]
    parts += [model.lnf.weight, model.lnf.bias]
    return torch.cat([p.detach().reshape(-1) for p in parts]).to(torch.float32)


def read_checkpoint_sizes(path):
    """(world, rank, [sizes of params, m, v]) of a runtime checkpoint file of one chunk."""
    import struct
    with open(path, "rb") as f:
        if f.read(8) != CKPT_MAGIC:
            raise ValueError(f"{path}: not a monarch-run checkpoint")
        world, rank, _step = struct.unpack("<qqq", f.read(24))
        sizes = []
        for _ in range(3):
            (n,) = struct.unpack("<q", f.read(8))
            sizes.append(n)
            f.seek(4 * n, 1)
    return world, rank, sizes


def write_runtime_checkpoint(cfg, template_dir, out_dir, world):
    """Writes this harness's initial weights as the CPU runtime's step-0 checkpoint
    (rank-R.bin: magic, world, rank, step, then params, Adam m and v, each as int64 size + fp32),
    with m = v = 0, so `monarch-run --resume` starts from the same model. Buffer sizes (ZeRO
    shards m and v) come from a checkpoint the runtime wrote for the same plan."""
    import struct
    import torch
    flat = runtime_flat_params(build_model(torch, cfg), cfg)
    os.makedirs(out_dir, exist_ok=True)
    for rank in range(world):
        w, r, sizes = read_checkpoint_sizes(os.path.join(template_dir, f"rank-{rank}.bin"))
        if w != world or r != rank or sizes[0] != flat.numel():
            raise ValueError(f"template rank-{rank}.bin: world {w}, rank {r}, {sizes[0]} parameters; "
                             f"the harness has {flat.numel()}")
        with open(os.path.join(out_dir, f"rank-{rank}.bin"), "wb") as f:
            f.write(CKPT_MAGIC + struct.pack("<qqq", world, rank, 0))
            f.write(struct.pack("<q", sizes[0]) + flat.numpy().tobytes())
            for n in sizes[1:]:
                f.write(struct.pack("<q", n) + bytes(4 * n))


def write_trace_with_shapes(prof, path):
    """The events export_chrome_trace writes (same selection, times and threads), each with the
    input shapes the profiler recorded as args "Input Dims"."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    events = []
    for evt in prof.events():
        if evt.trace_name is None:
            continue
        events.append({"name": evt.trace_name, "ph": "X", "ts": evt.time_range.start,
                       "dur": evt.time_range.elapsed_us(), "tid": evt.thread, "pid": "CPU functions",
                       "args": {"Input Dims": [list(s) for s in evt.input_shapes]}})
    with open(path, "w") as f:
        json.dump(events, f)


def worker(rank, args, cfg):
    import torch
    import torch.distributed as dist
    from torch.distributed.optim import ZeroRedundancyOptimizer
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(args.port)
    dist.init_process_group("gloo", rank=rank, world_size=args.world)
    model = DDP(build_model(torch, cfg))
    adam = dict(lr=1e-3, betas=(0.9, 0.95), eps=1e-8)  # realrt/gpt.h kAdam*
    if args.mode == "zero1":
        opt = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.Adam, **adam)
    else:
        opt = torch.optim.Adam(model.parameters(), **adam)
    per_rank = cfg["global_batch"] // args.world
    step_s, losses = [], []

    def one_step(step):
        first = step * cfg["global_batch"] + rank * per_rank
        tok, tgt = synthetic_batch(cfg["seed"], first, per_rank, cfg["seq"], cfg["vocab"])
        loss = model(torch.tensor(tok), torch.tensor(tgt))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=False)
        return loss.detach().clone()

    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True) as prof:
        for step in range(args.steps):
            dist.barrier()
            t0 = time.perf_counter()
            with torch.profiler.record_function(f"ProfilerStep#{step}"):
                loss = one_step(step)
            step_s.append(time.perf_counter() - t0)
            # The global mean loss, as the runtime reports it, outside the step's window.
            dist.all_reduce(loss)
            losses.append(loss.item() / args.world)
    os.makedirs(os.path.join(args.out, "export"), exist_ok=True)
    prof.export_chrome_trace(os.path.join(args.out, "export", f"rank{rank}_trace.json"))
    write_trace_with_shapes(prof, os.path.join(args.out, "shapes", f"rank{rank}_trace.json"))
    with open(os.path.join(args.out, f"timers_rank{rank}.json"), "w") as f:
        json.dump({"rank": rank, "step_s": step_s, "losses": losses}, f)
    if rank == 0:
        with open(os.path.join(args.out, "train.log"), "w") as f:
            for i, (t, l) in enumerate(zip(step_s, losses)):
                f.write(f" [harness] iteration {i + 1:8d}/{args.steps:8d} | consumed samples: "
                        f"{(i + 1) * cfg['global_batch']:12d} | elapsed time per iteration (ms): {t * 1000:.3f} | "
                        f"lm loss: {l:.6E} |\n")
    dist.destroy_process_group()


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--mode", choices=["ddp", "zero1"], default="ddp")
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--port", type=int, default=29641)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=256)
    ap.add_argument("--seq", type=int, default=32)
    ap.add_argument("--global-batch", type=int, default=8)
    ap.add_argument("--seed", type=int, default=1)
    return ap.parse_args(argv)


def run(args):
    """Trains and writes OUT; returns the content of timers.json."""
    cfg = dict(layers=args.layers, hidden=args.hidden, heads=args.heads, vocab=args.vocab, seq=args.seq,
               global_batch=args.global_batch, seed=args.seed)
    os.makedirs(args.out, exist_ok=True)
    import torch.multiprocessing as mp  # fork: the children share the parent's loaded torch
    mp.start_processes(worker, args=(args, cfg), nprocs=args.world, start_method="fork")
    timers = [json.load(open(os.path.join(args.out, f"timers_rank{r}.json"))) for r in range(args.world)]
    with open(os.path.join(args.out, "timers.json"), "w") as f:
        json.dump({"mode": args.mode, "world": args.world, "config": cfg,
                   "ranks": timers}, f, indent=1)
    for r in range(args.world):
        os.remove(os.path.join(args.out, f"timers_rank{r}.json"))
    return json.load(open(os.path.join(args.out, "timers.json")))


if __name__ == "__main__":
    run(parse_args())
    sys.exit(0)
