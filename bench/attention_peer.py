#!/usr/bin/env python3
"""The PyTorch peer of bench/attention_cuda.cc: causal attention fwd/bwd TFLOP/s of torch's SDPA backends (flash,
cuDNN, memory-efficient) on the same shapes (packed sequences of 4096/16384 tokens, Hq 16 / Hkv 8, head_dim 128,
bf16), so our kernel's rate can be compared with what a PyTorch user gets on the same GPU in the same call.
GQA is expanded (K/V repeated to 16 heads) since not every backend takes 8 kv heads; the FLOP count is the same one
bench_attention_cuda uses: 4*S^2*D*Hq/2 forward per sequence (causal), 2.5 times that backward. Prints a markdown
table; a backend that refuses a shape prints its error instead of a rate.

usage: bench/attention_peer.py [--iters 20]
"""
import argparse

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

BACKENDS = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
            "efficient": SDPBackend.EFFICIENT_ATTENTION}
CASES = [(4096, 1), (4096, 4), (16384, 1)]  # (seq, sequences), as bench/attention_cuda.cc
HQ, HKV, D = 16, 8, 128


def timed_ms(fn, iters):
    for _ in range(3):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / iters


def bench(backend, seq, batch, iters):
    gen = torch.Generator(device="cuda").manual_seed(1)
    q = torch.randn(batch, HQ, seq, D, device="cuda", dtype=torch.bfloat16, generator=gen, requires_grad=True)
    k = torch.randn(batch, HKV, seq, D, device="cuda", dtype=torch.bfloat16, generator=gen, requires_grad=True)
    v = torch.randn(batch, HKV, seq, D, device="cuda", dtype=torch.bfloat16, generator=gen, requires_grad=True)
    kx, vx = (t.detach().repeat_interleave(HQ // HKV, dim=1).requires_grad_() for t in (k, v))
    with sdpa_kernel([BACKENDS[backend]]):
        out = F.scaled_dot_product_attention(q, kx, vx, is_causal=True)
        dout = torch.randn_like(out)
        fwd = timed_ms(lambda: F.scaled_dot_product_attention(q, kx, vx, is_causal=True), iters)
        # Backward alone: one forward graph, its backward replayed (retain_graph keeps the saved tensors).
        bwd = timed_ms(lambda: torch.autograd.grad(out, (q, kx, vx), dout, retain_graph=True), iters)
    flops = 4.0 * seq * seq * D * HQ / 2 * batch
    return fwd, flops / fwd / 1e9, bwd, 2.5 * flops / bwd / 1e9


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--iters", type=int, default=20)
    args = ap.parse_args()
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}, cuDNN {torch.backends.cudnn.version()}")
    print("| backend | shape | fwd ms | TFLOP/s | bwd ms | TFLOP/s |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    for backend in BACKENDS:
        for seq, batch in CASES:
            shape = f"{batch}x{seq} Hq={HQ} Hkv={HKV} D={D}"
            try:
                fwd, fwd_rate, bwd, bwd_rate = bench(backend, seq, batch, args.iters)
                print(f"| {backend} | {shape} | {fwd:.3f} | {fwd_rate:.1f} | {bwd:.3f} | {bwd_rate:.1f} |")
            except RuntimeError as e:
                print(f"| {backend} | {shape} | {str(e).splitlines()[0][:80]} | | | |")
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
