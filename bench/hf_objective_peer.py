#!/usr/bin/env python3
"""The PyTorch + transformers peer of bench/objective_throughput.sh: DPO (a trained policy and a frozen reference copy
of the same start weights) or a Bradley-Terry reward model (AutoModelForSequenceClassification, num_labels 1), one GPU,
one preference pair per step as a batch of two sequences of seq/2 random tokens (chosen, rejected: no padding, so
the peer runs plain causal attention), as TRL's trainers batch a pair. fp32 master weights under bf16 autocast and
fused AdamW (the same numerical recipe as veomni-train's bf16 runs), or --dtype bfloat16 for pure bf16 parameters
and optimizer state. Prints one JSON line: tokens/s (pair tokens), MFU (as objective_throughput.sh counts it), peak
memory.

usage: bench/hf_objective_peer.py --config configs/model_configs/qwen3_0p6b --objective dpo|reward [--seq 4096]
       [--dtype float32|bfloat16] [--compile]
"""
import argparse
import copy
import json
import time

import torch
import torch.nn.functional as F
from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForSequenceClassification

PEAK_FLOPS = 989e12


def step_flops(cfg, seq, objective):
    h, layers, v = cfg.hidden_size, cfg.num_hidden_layers, cfg.vocab_size
    hd = getattr(cfg, "head_dim", None) or h // cfg.num_attention_heads
    q, kv = cfg.num_attention_heads * hd, cfg.num_key_value_heads * hd
    experts = getattr(cfg, "num_experts", None) or getattr(cfg, "num_local_experts", None)
    mlp = h * experts + 3 * h * cfg.moe_intermediate_size * cfg.num_experts_per_tok if experts else 3 * h * cfg.intermediate_size
    n = (mlp + h * (2 * q + 2 * kv)) * layers + (v * h if objective == "dpo" else h)
    half = seq // 2
    attn = 2 * 12 * half * half * hd * cfg.num_attention_heads * layers
    return 6 * n * seq + attn + ((2 * n * seq + attn / 3) if objective == "dpo" else 0)


def sequence_logps(logits, ids):
    """Sum over each row of log p(token t+1 | prefix) (every token after the first is a label, as in the bench data)."""
    logp = torch.log_softmax(logits[:, :-1].float(), dim=-1)
    return torch.gather(logp, 2, ids[:, 1:].unsqueeze(-1)).squeeze(-1).sum(-1)


def run(args):
    torch.manual_seed(0)
    cfg = AutoConfig.from_pretrained(args.config)
    dtype = getattr(torch, args.dtype)
    kwargs = {"attn_implementation": "sdpa", "dtype": dtype}
    if args.objective == "reward":
        cfg.num_labels = 1
        cfg.pad_token_id = cfg.vocab_size - 1  # never in the data: the last token of each row is pooled
        model = AutoModelForSequenceClassification.from_config(cfg, **kwargs).cuda().train()
        reference = None
    else:
        model = AutoModelForCausalLM.from_config(cfg, **kwargs).cuda().train()
        reference = copy.deepcopy(model).eval().requires_grad_(False)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-6, betas=(0.9, 0.95), weight_decay=0.01, fused=True)
    forward = torch.compile(model) if args.compile else model
    ref_forward = torch.compile(reference) if (args.compile and reference is not None) else reference
    ids = torch.randint(0, 1024, (2, args.seq // 2), device="cuda")
    beta = 0.1
    times = []
    for step in range(args.warmup + args.steps):
        if step == args.warmup:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        start = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            if args.objective == "dpo":
                with torch.no_grad():
                    ref = sequence_logps(ref_forward(input_ids=ids).logits, ids)
                policy = sequence_logps(forward(input_ids=ids).logits, ids)
                z = (policy[0] - policy[1]) - (ref[0] - ref[1])
                loss = -F.logsigmoid(beta * z)
            else:
                rewards = forward(input_ids=ids).logits.float().squeeze(-1)
                loss = -F.logsigmoid(rewards[0] - rewards[1])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        if step >= args.warmup:
            times.append(time.perf_counter() - start)
    seconds = sum(times) / len(times)
    print(json.dumps({
        "peer": "pytorch+transformers", "objective": args.objective, "config": args.config, "seq": args.seq,
        "dtype": args.dtype, "compile": args.compile, "tokens_per_s": round(args.seq / seconds, 1),
        "mfu": round(step_flops(cfg, args.seq, args.objective) / seconds / PEAK_FLOPS, 4),
        "peak_memory_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2), "step_seconds": round(seconds, 4),
        "loss": round(loss.item(), 4), "torch": torch.__version__,
        "transformers": __import__("transformers").__version__}), flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", required=True, help="directory with config.json")
    parser.add_argument("--objective", choices=["dpo", "reward"], required=True)
    parser.add_argument("--seq", type=int, default=4096, help="tokens of one pair (two sequences of seq/2)")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")
    parser.add_argument("--compile", action="store_true")
    run(parser.parse_args())


if __name__ == "__main__":
    main()
