#!/usr/bin/env python3
"""The PyTorch + HuggingFace peer of bench/train_throughput.sh: the same model shapes trained the way a user of
transformers would (bf16 autocast over fp32 parameters, SDPA attention, fused AdamW; dense also under torch.compile;
MoE with experts_implementation="grouped_mm"), one GPU, random tokens, batch 1 x seq. Prints one JSON line per case
with tokens/s, MFU (REFERENCE.md's formula against 989 TFLOP/s) and peak memory, to compare side by side.

usage: bench/hf_peer.py --config configs/model_configs/qwen3_0p6b --seq 4096 [--compile] [--experts grouped_mm]
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


def build(config_dir, experts):
    cfg = AutoConfig.from_pretrained(config_dir)
    kwargs = {"attn_implementation": "sdpa", "dtype": torch.float32}
    if experts:
        kwargs["experts_implementation"] = experts
    model = AutoModelForCausalLM.from_config(cfg, **kwargs)
    return cfg, model.cuda().train()


def run(args):
    torch.manual_seed(0)
    cfg, model = build(args.config, args.experts)
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
    seconds = sum(times) / len(times)
    tokens_per_s = args.seq / seconds
    mfu = step_flops(cfg, args.seq) / seconds / PEAK_FLOPS
    print(json.dumps({
        "peer": "pytorch+transformers", "config": args.config, "seq": args.seq,
        "compile": args.compile, "experts": args.experts, "tokens_per_s": round(tokens_per_s, 1),
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
    run(parser.parse_args())


if __name__ == "__main__":
    main()
