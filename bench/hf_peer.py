#!/usr/bin/env python3
"""The PyTorch + HuggingFace peer of bench/train_throughput.sh: the same model shapes trained the way a user of
transformers would (bf16 autocast over fp32 parameters, SDPA attention, fused AdamW; dense also under torch.compile;
MoE with experts_implementation="grouped_mm"), one GPU, random tokens, batch 1 x seq. Prints one JSON line per case
with tokens/s, MFU (REFERENCE.md's formula against 989 TFLOP/s) and peak memory, to compare side by side.

torch.nn.functional.grouped_mm is not on autocast's bf16 list, so with fp32 parameters transformers' grouped_mm
experts would run their GEMMs in fp32. The peer casts the grouped GEMM's operands to bf16 under autocast (as autocast
does for every other matmul), so the experts compute in bf16 like ours; --experts-fp32 keeps the uncast behaviour
(the handicapped peer of earlier figures). --dtype bfloat16 runs pure bf16 (parameters, gradients and AdamW state).

usage: bench/hf_peer.py --config configs/model_configs/qwen3_0p6b --seq 4096 [--compile] [--experts grouped_mm]
                        [--dtype bfloat16] [--experts-fp32]
"""
import argparse
import json
import time

import torch
from transformers import AutoConfig, AutoModelForCausalLM

# The peer runs under PyTorch, so it repeats the count of libcommon/metrics/model_flops.h (the trainer's mfu) and
# the H100 SXM / H200 entry of its peak table; keep the two alike.
PEAK_FLOPS = 989.4e12


def model_flops_per_token_params(cfg):
    """N of REFERENCE.md's MFU formula: (3·H·I + H·(2q+2kv))·L + V·H, MoE: router H·E + 3·H·I_moe·topk per layer."""
    h, layers, v = cfg.hidden_size, cfg.num_hidden_layers, cfg.vocab_size
    head_dim = getattr(cfg, "head_dim", None) or h // cfg.num_attention_heads
    q, kv = cfg.num_attention_heads * head_dim, cfg.num_key_value_heads * head_dim
    experts = getattr(cfg, "num_experts", None) or getattr(cfg, "num_local_experts", None)
    if experts:
        mlp = h * experts + 3 * h * cfg.moe_intermediate_size * cfg.num_experts_per_tok
    else:
        mlp = 3 * h * cfg.intermediate_size
    return (mlp + h * (2 * q + 2 * kv)) * layers + v * h


def step_flops(cfg, seq):
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    n = model_flops_per_token_params(cfg)
    return 6 * n * seq + 12 * seq * seq * head_dim * cfg.num_attention_heads * cfg.num_hidden_layers


# dtypes the grouped GEMM's operands had in the last step, to prove which precision the experts ran in.
GROUPED_MM_DTYPES = set()


def grouped_mm_under_autocast(original, cast):
    def grouped_mm(a, b, *args, **kwargs):
        if cast and torch.is_autocast_enabled("cuda"):
            dtype = torch.get_autocast_dtype("cuda")
            a, b = a.to(dtype), b.to(dtype)
        GROUPED_MM_DTYPES.add(str(a.dtype).replace("torch.", ""))
        return original(a, b, *args, **kwargs)
    return grouped_mm


def patch_grouped_mm(cast):
    """Wraps both entry points transformers may call (the public one and the private op it wraps)."""
    import torch.nn.functional as F
    if hasattr(F, "grouped_mm"):
        F.grouped_mm = grouped_mm_under_autocast(F.grouped_mm, cast)
    if hasattr(torch, "_grouped_mm"):
        torch._grouped_mm = grouped_mm_under_autocast(torch._grouped_mm, cast)


def build(config_dir, experts, dtype):
    cfg = AutoConfig.from_pretrained(config_dir)
    kwargs = {"attn_implementation": "sdpa", "dtype": dtype}
    if experts:
        kwargs["experts_implementation"] = experts
    model = AutoModelForCausalLM.from_config(cfg, **kwargs)
    return cfg, model.cuda().train()


def run(args):
    torch.manual_seed(0)
    dtype = getattr(torch, args.dtype)
    if args.experts == "grouped_mm":
        patch_grouped_mm(cast=not args.experts_fp32)
    cfg, model = build(args.config, args.experts, dtype)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.95), weight_decay=0.01, fused=True)
    forward = torch.compile(model) if args.compile else model
    ids = torch.randint(0, 1024, (1, args.seq), device="cuda")
    times = []
    for step in range(args.warmup + args.steps):
        if step == args.warmup:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        start = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = forward(input_ids=ids, labels=ids).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        if step >= args.warmup:
            times.append(time.perf_counter() - start)
        if step < args.warmup + args.steps - 1:
            GROUPED_MM_DTYPES.clear()
    if args.experts == "grouped_mm" and not GROUPED_MM_DTYPES:
        raise SystemExit("the grouped GEMM was never called: the patch missed transformers' entry point")
    seconds = sum(times) / len(times)
    tokens_per_s = args.seq / seconds
    mfu = step_flops(cfg, args.seq) / seconds / PEAK_FLOPS
    print(json.dumps({
        "peer": "pytorch+transformers", "config": args.config, "seq": args.seq,
        "compile": args.compile, "experts": args.experts, "param_dtype": args.dtype,
        "experts_gemm_dtypes": sorted(GROUPED_MM_DTYPES), "tokens_per_s": round(tokens_per_s, 1),
        "mfu": round(mfu, 4), "peak_memory_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2),
        "step_seconds": round(seconds, 4), "loss": round(loss.item(), 4),
        "torch": torch.__version__, "transformers": __import__("transformers").__version__}), flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", required=True, help="directory with config.json")
    parser.add_argument("--seq", type=int, default=4096)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--compile", action="store_true")
    parser.add_argument("--experts", default=None, help="experts_implementation for MoE, e.g. grouped_mm")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"],
                        help="parameter (and AdamW state) dtype; float32 trains under bf16 autocast")
    parser.add_argument("--experts-fp32", action="store_true",
                        help="leave the grouped GEMM uncast (fp32 with fp32 parameters), as before the fix")
    run(parser.parse_args())


if __name__ == "__main__":
    main()
