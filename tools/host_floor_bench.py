#!/usr/bin/python3
"""Host time of one eager-PyTorch transformer layer, the way Megatron-LM (and its DeepSpeed fork)
dispatches it: the figure behind the host floor in core/layer_cost.cc.

The layer is the GPT layer of megatron/model/transformer.py (ParallelTransformerLayer with
ParallelAttention, CoreAttention and ParallelMLP) with its Python autograd Functions: apex's
fused LayerNorm, the tensor-parallel region copies and reductions, the linear layers'
LinearWithGradAccumulationAndAsyncCommunication, the fused upper-triangular masked softmax,
bias-GeLU, the scripted bias-dropout-add, the RNG tracker fork around the attention dropout, and
the checkpointed forward of full recompute (CheckpointFunction: restore the RNG states, run the
forward again with grad, backward through it). Tensors are tiny, so the kernels cost next to
nothing and the wall time is the host's: Python, the ATen dispatcher, autograd.

Run on a CPU build of PyTorch (python3-torch), one thread:
    /usr/bin/python3 tools/host_floor_bench.py
    /usr/bin/python3 tools/host_floor_bench.py --torchtitan   # torchtitan's Llama block instead
    python3 tools/host_floor_bench.py --cuda                  # on a GPU: the real dispatch path
It prints the host milliseconds of one layer's forward, its recompute and backward (full
recompute), and of the same layer's forward and backward without recompute. On a GPU (--cuda)
each op also pays cudaLaunchKernel and CUDA's per-op bookkeeping, the path the host floor
models; the CPU build pays the tiny CPU kernels instead, about the same few microseconds.
"""
import statistics
import sys
import time

import torch
import torch.nn.functional as F

torch.set_num_threads(1)

# Where the layer's tensors live: "cpu" (the CPU build) or "cuda" (--cuda). The tensors are tiny
# either way, so the kernels cost next to nothing and the wall time is the host's.
DEVICE = "cuda" if "--cuda" in sys.argv[1:] else "cpu"


def get_rng_state():  # Megatron forks the CUDA generator on a GPU, the CPU one here
    return torch.cuda.get_rng_state() if DEVICE == "cuda" else torch.get_rng_state()


def set_rng_state(state):
    if DEVICE == "cuda":
        torch.cuda.set_rng_state(state)
    else:
        torch.set_rng_state(state)


def sync():  # the host's time includes waiting for the GPU's queue to drain
    if DEVICE == "cuda":
        torch.cuda.synchronize()


class FusedLayerNormAffine(torch.autograd.Function):  # apex FusedLayerNormAffineFunction
    @staticmethod
    def forward(ctx, x, weight, bias, shape, eps):
        out, mean, rstd = torch.ops.aten.native_layer_norm(x, shape, weight, bias, eps)
        ctx.save_for_backward(x, weight, bias, mean, rstd)
        ctx.shape = shape
        return out

    @staticmethod
    def backward(ctx, grad):
        x, weight, bias, mean, rstd = ctx.saved_tensors
        gx, gw, gb = torch.ops.aten.native_layer_norm_backward(grad.contiguous(), x, ctx.shape, mean, rstd, weight, bias,
                                                               [True, True, True])
        return gx, gw, gb, None, None


class ParallelRegion(torch.autograd.Function):
    """Megatron's _CopyToModelParallelRegion and _ReduceFromModelParallelRegion: at TP 1 both are
    identities, and each still costs an autograd Function call forward and backward."""

    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, grad):
        return grad


class LinearWithGradAccumulation(torch.autograd.Function):  # LinearWithGradAccumulationAndAsyncCommunication
    @staticmethod
    def forward(ctx, x, weight, bias):
        ctx.save_for_backward(x, weight)
        ctx.use_bias = bias is not None
        out = torch.matmul(x, weight.t())
        if bias is not None:
            out = out + bias
        return out

    @staticmethod
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        grad_input = grad.matmul(weight)
        grad = grad.contiguous()
        grad2 = grad.view(grad.shape[0] * grad.shape[1], grad.shape[2])
        x2 = x.view(x.shape[0] * x.shape[1], x.shape[2])
        grad_weight = grad2.t().matmul(x2)
        grad_bias = grad2.sum(dim=0) if ctx.use_bias else None
        return grad_input, grad_weight, grad_bias


class UpperTriangMaskedSoftmax(torch.autograd.Function):  # ScaledUpperTriangMaskedSoftmax
    @staticmethod
    def forward(ctx, x, scale):
        probs = torch.softmax(x * scale, dim=-1)
        ctx.save_for_backward(probs)
        ctx.scale = scale
        return probs

    @staticmethod
    def backward(ctx, grad):
        (probs,) = ctx.saved_tensors
        return torch.ops.aten._softmax_backward_data(grad, probs, -1, probs.dtype) * ctx.scale, None


@torch.jit.script
def bias_gelu(bias, y):
    x = bias + y
    return x * 0.5 * (1.0 + torch.tanh(0.79788456 * x * (1 + 0.044715 * x * x)))


@torch.jit.script
def bias_gelu_back(g, bias, y):
    x = bias + y
    tanh_out = torch.tanh(0.79788456 * x * (1 + 0.044715 * x * x))
    ff = 0.5 * x * ((1 - tanh_out * tanh_out) * (0.79788456 + 0.1070322243 * x * x)) + 0.5 * (1 + tanh_out)
    return ff * g


class GeLUFunction(torch.autograd.Function):  # megatron/model/fused_bias_gelu.py
    @staticmethod
    def forward(ctx, x, bias):
        ctx.save_for_backward(x, bias)
        return bias_gelu(bias, x)

    @staticmethod
    def backward(ctx, grad):
        x, bias = ctx.saved_tensors
        g = bias_gelu_back(grad, bias, x)
        return g, g


@torch.jit.script
def bias_dropout_add_fused_train(x, bias, residual, prob: float):
    out = torch.nn.functional.dropout(x + bias, p=prob, training=True)
    return residual + out


class RngTracker:  # CudaRNGStatesTracker.fork: swap the generator state in and out
    def __init__(self):
        self.state = get_rng_state()

    def fork(self):
        tracker = self

        class Ctx:
            def __enter__(self):
                self.orig = get_rng_state()
                set_rng_state(tracker.state)

            def __exit__(self, *a):
                tracker.state = get_rng_state()
                set_rng_state(self.orig)
        return Ctx()


TRACKER = None  # made in main(), once DEVICE's generator exists


class Layer(torch.nn.Module):
    def __init__(self, h, heads, dtype=torch.float32):
        super().__init__()
        self.h, self.heads = h, heads
        p = lambda *s: torch.nn.Parameter(torch.randn(*s, device=DEVICE, dtype=dtype) * 0.02)
        self.ln1_w, self.ln1_b, self.ln2_w, self.ln2_b = p(h), p(h), p(h), p(h)
        self.qkv_w, self.qkv_b = p(3 * h, h), p(3 * h)
        self.proj_w, self.proj_b = p(h, h), p(h)
        self.fc1_w, self.fc1_b = p(4 * h, h), p(4 * h)
        self.fc2_w, self.fc2_b = p(h, 4 * h), p(h)

    def attention(self, x):  # x: [s, b, h]
        s, b, h = x.shape
        x = ParallelRegion.apply(x)
        mixed = LinearWithGradAccumulation.apply(x, self.qkv_w, self.qkv_b)
        hd = h // self.heads
        mixed = mixed.view(s, b, self.heads, 3 * hd)
        q, k, v = torch.split(mixed, hd, dim=-1)
        q = q.reshape(s, b * self.heads, hd)
        k = k.reshape(s, b * self.heads, hd)
        buf = torch.empty(b * self.heads, s, s, device=DEVICE, dtype=x.dtype)
        scores = torch.baddbmm(buf, q.transpose(0, 1), k.transpose(0, 1).transpose(1, 2), beta=0.0, alpha=1.0 / hd ** 0.5)
        scores = scores.view(b, self.heads, s, s)
        probs = UpperTriangMaskedSoftmax.apply(scores, 1.0)
        with TRACKER.fork():
            probs = F.dropout(probs, p=0.1, training=True)
        v = v.reshape(s, b * self.heads, hd)
        probs = probs.view(b * self.heads, s, s)
        ctx = torch.bmm(probs, v.transpose(0, 1))
        ctx = ctx.view(b, self.heads, s, hd).permute(2, 0, 1, 3).contiguous().view(s, b, h)
        out = LinearWithGradAccumulation.apply(ctx, self.proj_w, None)
        return ParallelRegion.apply(out), self.proj_b

    def mlp(self, x):
        x = ParallelRegion.apply(x)
        y = LinearWithGradAccumulation.apply(x, self.fc1_w, None)
        y = GeLUFunction.apply(y, self.fc1_b)
        out = LinearWithGradAccumulation.apply(y, self.fc2_w, None)
        return ParallelRegion.apply(out), self.fc2_b

    def forward(self, x):
        ln = FusedLayerNormAffine.apply(x, self.ln1_w, self.ln1_b, [self.h], 1e-5)
        att, att_b = self.attention(ln)
        x = bias_dropout_add_fused_train(att, att_b.expand_as(x), x, 0.1)
        ln = FusedLayerNormAffine.apply(x, self.ln2_w, self.ln2_b, [self.h], 1e-5)
        out, out_b = self.mlp(ln)
        return bias_dropout_add_fused_train(out, out_b.expand_as(x), x, 0.1)


class CheckpointFunction(torch.autograd.Function):  # megatron tensor_parallel.random.CheckpointFunction
    @staticmethod
    def forward(ctx, run, x):
        ctx.run = run
        ctx.rng = get_rng_state()
        ctx.tracker = TRACKER.state
        with torch.no_grad():
            out = run(x)
        ctx.save_for_backward(x)
        return out

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        rng, tracker = get_rng_state(), TRACKER.state
        set_rng_state(ctx.rng)
        TRACKER.state = ctx.tracker
        x = x.detach()
        x.requires_grad = True
        with torch.enable_grad():
            out = ctx.run(x)
        set_rng_state(rng)
        TRACKER.state = tracker
        torch.autograd.backward(out, grad)
        return None, x.grad


class SdpaStandIn(torch.autograd.Function):
    """F.scaled_dot_product_attention (PyTorch 2; not in the 1.13 build here) dispatches one
    flash-attention op forward and one backward: one op each here."""

    @staticmethod
    def forward(ctx, q, k, v):
        return q * 1.0

    @staticmethod
    def backward(ctx, g):
        return g * 1.0, g, g


class TorchtitanBlock(torch.nn.Module):
    """torchtitan's Llama 3 TransformerBlock in eager PyTorch (torchtitan/models/llama3/model.py,
    the RMSNorm of torchtitan/models/norms.py): separate wq/wk/wv and w1/w3 linears, the rotary
    embedding as a complex multiply, repeat_kv, scaled_dot_product_attention (SdpaStandIn), SwiGLU."""

    attention = SdpaStandIn.apply  # one op each way; tools/gpu_microbench.py puts the real SDPA here

    def __init__(self, h, heads, kv_heads):
        super().__init__()
        self.h, self.heads, self.kv_heads, self.hd = h, heads, kv_heads, h // heads
        lin = lambda i, o: torch.nn.Linear(i, o, bias=False, device=DEVICE)
        self.wq, self.wk, self.wv, self.wo = lin(h, h), lin(h, kv_heads * self.hd), lin(h, kv_heads * self.hd), lin(h, h)
        self.w1, self.w3, self.w2 = lin(h, 4 * h), lin(h, 4 * h), lin(4 * h, h)
        self.n1, self.n2 = (torch.nn.Parameter(torch.ones(h, device=DEVICE)),
                            torch.nn.Parameter(torch.ones(h, device=DEVICE)))

    @staticmethod
    def rms(x, w):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-5)).type_as(x) * w

    def rope(self, xq, xk, freqs):
        xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
        xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
        f = freqs[0:xq.shape[1]].view(1, xq.shape[1], 1, xq_.shape[-1])
        return torch.view_as_real(xq_ * f).flatten(3).type_as(xq), torch.view_as_real(xk_ * f).flatten(3).type_as(xk)

    @staticmethod
    def repeat_kv(x, n):
        bs, s, kvh, hd = x.shape
        return x if n == 1 else torch.unsqueeze(x, dim=3).expand(bs, s, kvh, n, hd).reshape(bs, s, kvh * n, hd)

    def forward(self, x, freqs):  # x: [b, s, h]
        b, s, _ = x.shape
        y = self.rms(x, self.n1)
        xq, xk, xv = self.wq(y), self.wk(y), self.wv(y)
        xq, xk, xv = xq.view(b, s, -1, self.hd), xk.view(b, s, -1, self.hd), xv.view(b, s, -1, self.hd)
        xq, xk = self.rope(xq, xk, freqs)
        n = self.heads // self.kv_heads
        k, v = self.repeat_kv(xk, n), self.repeat_kv(xv, n)
        o = self.attention(xq.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))
        h = x + self.wo(o.transpose(1, 2).contiguous().view(b, s, -1))
        y = self.rms(h, self.n2)
        return h + self.w2(F.silu(self.w1(y)) * self.w3(y))


def one_pass(run, layers, x):
    """A forward and backward through `layers`, each applied as run(layer, y)."""
    y = x
    for layer in layers:
        y = run(layer, y)
    y.sum().backward()


def measure(run, layers, x, repeats):
    """Median host time per layer of one_pass."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        one_pass(run, layers, x)
        sync()
        times.append((time.perf_counter() - start) / len(layers))
    return statistics.median(times)


def forward_only(run, layers, x, repeats):
    """Mean host time per layer of a no-grad forward (as a checkpoint's first forward runs it)."""
    start = time.perf_counter()
    with torch.no_grad():
        for _ in range(repeats):
            y = x
            for layer in layers:
                y = run(layer, y)
        sync()
    return (time.perf_counter() - start) / (repeats * len(layers))


def rope_freqs(s, hd):
    """The rotary embedding's complex frequencies [s, hd / 2] (torchtitan's precompute_freqs_cis)."""
    inv = 1.0 / (10000 ** (torch.arange(0, hd, 2)[: hd // 2].float() / hd))
    return torch.polar(torch.ones(s, hd // 2), torch.outer(torch.arange(s).float(), inv)).to(DEVICE)


def torchtitan_main():
    h, heads, kv_heads, s, b, n_layers = 64, 4, 2, 8, 1, 8
    blocks = [TorchtitanBlock(h, heads, kv_heads) for _ in range(n_layers)]
    x = torch.randn(b, s, h, device=DEVICE, requires_grad=True)
    freqs = rope_freqs(s, h // heads)
    run = lambda blk, y: blk(y, freqs)
    measure(run, blocks, x, 20)  # warm-up
    both = measure(run, blocks, x, 200)
    fwd = forward_only(run, blocks, x, 200)
    print(f"torch {torch.__version__}, one thread, {DEVICE}, torchtitan block")
    print(f"block forward (no grad)                      {fwd * 1e3:.3f} ms")
    print(f"block forward + backward                     {both * 1e3:.3f} ms")
    return 0


def plain(layer, y):
    return layer(y)


def checkpointed(layer, y):  # full recompute
    return CheckpointFunction.apply(layer, y)


def megatron_layers(n_layers=8, h=64, heads=4, s=8, b=1, dtype=torch.float32):
    """n_layers of Megatron's layer and their input [s, b, h] on DEVICE. The defaults (hidden 64,
    4 heads, 8 tokens, batch 1) are too small for their kernels to cost anything."""
    global TRACKER
    TRACKER = RngTracker()
    x = torch.randn(s, b, h, device=DEVICE, dtype=dtype, requires_grad=True)
    return [Layer(h, heads, dtype) for _ in range(n_layers)], x


def megatron_layer_times(layers, x, repeats=200):
    """Host seconds per layer: the no-grad forward (as the recompute and a checkpoint's first
    forward run it), forward and backward, and forward, recompute and backward."""
    for run in (plain, checkpointed):
        measure(run, layers, x, 20)  # warm-up (TorchScript profiling runs)
    return {"layer_forward_no_grad_s": forward_only(plain, layers, x, repeats),
            "layer_forward_backward_s": measure(plain, layers, x, repeats),
            "layer_forward_recompute_backward_s": measure(checkpointed, layers, x, repeats)}


def main():
    t = megatron_layer_times(*megatron_layers())
    print(f"torch {torch.__version__}, one thread, {DEVICE}")
    print(f"layer forward (no grad)                      {t['layer_forward_no_grad_s'] * 1e3:.3f} ms")
    print(f"layer forward + backward, no recompute       {t['layer_forward_backward_s'] * 1e3:.3f} ms")
    print(f"layer forward + recompute + backward (full)  {t['layer_forward_recompute_backward_s'] * 1e3:.3f} ms")
    return 0

if __name__ == "__main__":
    sys.exit(torchtitan_main() if "--torchtitan" in sys.argv[1:] else main())
