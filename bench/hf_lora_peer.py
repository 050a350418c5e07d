#!/usr/bin/env python3
"""The PyTorch + transformers + PEFT peer of LoRA training (bench/train_throughput.sh with model.lora_config): one
GPU, the base model's weights in bf16 and frozen, PEFT LoRA adapters (float32, PEFT's default upcast) under bf16
autocast, fused AdamW over the adapters, one sample of SEQ random tokens per step, gradient checkpointing on or off
as the veomni-train run it is compared with. Prints one JSON line: tokens/s, MFU (train_throughput.sh's count of a
full model's FLOPs, so that both sides are counted alike), peak memory.

usage: bench/hf_lora_peer.py --config configs/model_configs/qwen3_8b [--seq 4096] [--rank 16] [--alpha 32]
       [--modules q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj] [--checkpointing] [--compile]
"""
import argparse
import json
import time

import torch
from transformers import AutoConfig, AutoModelForCausalLM

# The peer runs under PyTorch, so it repeats the count of libcommon/metrics/model_flops.h (the trainer's mfu) and
# the H100 SXM / H200 entry of its peak table; keep the two alike.
PEAK_FLOPS = 989.4e12


def step_flops(cfg, seq):
    h, layers, v = cfg.hidden_size, cfg.num_hidden_layers, cfg.vocab_size
    hd = getattr(cfg, "head_dim", None) or h // cfg.num_attention_heads
    q, kv = cfg.num_attention_heads * hd, cfg.num_key_value_heads * hd
    experts = getattr(cfg, "num_experts", None) or getattr(cfg, "num_local_experts", None)
    mlp = h * experts + 3 * h * cfg.moe_intermediate_size * cfg.num_experts_per_tok if experts else 3 * h * cfg.intermediate_size
    n = (mlp + h * (2 * q + 2 * kv)) * layers + v * h
    return 6 * n * seq + 12 * seq * seq * hd * cfg.num_attention_heads * layers


def run(args):
    from peft import LoraConfig, get_peft_model
    torch.manual_seed(0)
    cfg = AutoConfig.from_pretrained(args.config)
    with torch.device("cuda"):  # initialised on the GPU: an 8B model's CPU init would take minutes
        model = AutoModelForCausalLM.from_config(cfg, attn_implementation="sdpa", dtype=torch.bfloat16)
    lora = LoraConfig(r=args.rank, lora_alpha=args.alpha, target_modules=args.modules.split(","), lora_dropout=0.0,
                      bias="none")
    model = get_peft_model(model, lora).train()
    if args.checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model.enable_input_require_grads()
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=1e-4, betas=(0.9, 0.95), weight_decay=0.01, fused=True)
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
        torch.nn.utils.clip_grad_norm_(trainable, 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        if step >= args.warmup:
            times.append(time.perf_counter() - start)
    seconds = sum(times) / len(times)
    print(json.dumps({
        "peer": "pytorch+transformers+peft", "config": args.config, "seq": args.seq, "rank": args.rank,
        "modules": args.modules, "checkpointing": args.checkpointing, "compile": args.compile,
        "trainable_params": sum(p.numel() for p in trainable), "tokens_per_s": round(args.seq / seconds, 1),
        "mfu": round(step_flops(cfg, args.seq) / seconds / PEAK_FLOPS, 4),
        "peak_memory_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2), "step_seconds": round(seconds, 4),
        "loss": round(loss.item(), 4), "torch": torch.__version__,
        "transformers": __import__("transformers").__version__, "peft": __import__("peft").__version__}), flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", required=True, help="directory with config.json")
    parser.add_argument("--seq", type=int, default=4096)
    parser.add_argument("--rank", type=int, default=16)
    parser.add_argument("--alpha", type=float, default=32)
    parser.add_argument("--modules", default="q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--checkpointing", action="store_true", help="gradient checkpointing (recompute each layer)")
    parser.add_argument("--compile", action="store_true")
    run(parser.parse_args())


if __name__ == "__main__":
    main()
