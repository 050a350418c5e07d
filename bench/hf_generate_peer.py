#!/usr/bin/env python3
"""The transformers peer of bench/generate_throughput.sh: `generate` on random-weight models of our bench shapes
(bf16, SDPA, greedy, random prompt ids), one GPU. Prints one JSON line per case: prefill tokens/s, decode tokens/s
(the new tokens of every sequence over the time after the first), and the fraction of the GPU's memory bandwidth the
decode reached counting one read of the bf16 weights per step (the bound at small batch).

usage: bench/hf_generate_peer.py --config configs/model_configs/qwen3_0p6b [--batch 1 32] [--prompt 128]
                                 [--new-tokens 128] [--cache dynamic|static] [--compile] [--static-compile]
                                 [--peak-bw 3.35e12]

--static-compile is transformers' fastest decode: the static cache with the compiled decode step (torch.compile).
A case that fails (compilation included) prints a JSON line with its error instead of figures; the others still run.
"""
import argparse
import json
import time

import torch
from transformers import AutoConfig, AutoModelForCausalLM


def weight_bytes(model):
    return sum(p.numel() * p.element_size() for p in model.parameters())


def timed_generate(model, ids, new_tokens, cache, compile_decode):
    kwargs = {"max_new_tokens": new_tokens, "min_new_tokens": new_tokens, "do_sample": False,
              "attention_mask": torch.ones_like(ids), "pad_token_id": 0}
    if cache == "static":
        kwargs["cache_implementation"] = "static"
        # transformers compiles the static-cache decode step itself unless told not to
        kwargs["disable_compile"] = not compile_decode
    torch.cuda.synchronize()
    start = time.perf_counter()
    out = model.generate(ids, **kwargs)
    torch.cuda.synchronize()
    return time.perf_counter() - start, out.shape[1] - ids.shape[1]


def run_case(model, cfg, batch, args):
    torch.manual_seed(0)
    ids = torch.randint(100, min(cfg.vocab_size, 30000), (batch, args.prompt), device="cuda")
    for _ in range(2):  # warm-up (and compilation)
        timed_generate(model, ids, 4, args.cache, args.compile)
    prefill_s, _ = timed_generate(model, ids, 1, args.cache, args.compile)
    total_s, produced = timed_generate(model, ids, args.new_tokens, args.cache, args.compile)
    decode_s = max(total_s - prefill_s, 1e-9)
    decode_steps = produced - 1
    step_s = decode_s / decode_steps
    return {
        "peer": "transformers.generate", "config": args.config, "batch": batch, "prompt": args.prompt,
        "new_tokens": produced, "cache": args.cache, "compile": args.compile,
        "prefill_tokens_per_s": round(batch * args.prompt / prefill_s, 1),
        "decode_tokens_per_s": round(batch * decode_steps / decode_s, 1),
        "decode_ms_per_step": round(1e3 * step_s, 3),
        "hbm_fraction": round(weight_bytes(model) / step_s / args.peak_bw, 4),
        "weights_gib": round(weight_bytes(model) / 2**30, 3),
        "torch": torch.__version__, "transformers": __import__("transformers").__version__,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", required=True, help="directory with config.json")
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 32])
    parser.add_argument("--prompt", type=int, default=128)
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--cache", choices=["dynamic", "static"], default="dynamic")
    parser.add_argument("--compile", action="store_true", help="with --cache static: compiled decode step")
    parser.add_argument("--static-compile", action="store_true",
                        help="the static cache and the compiled decode step (same as --cache static --compile)")
    parser.add_argument("--experts", default=None, help="experts_implementation for MoE, e.g. grouped_mm")
    parser.add_argument("--peak-bw", type=float, default=3.35e12, help="GPU memory bandwidth, bytes/s (H100 SXM)")
    args = parser.parse_args()
    if args.static_compile:
        args.cache, args.compile = "static", True
    cfg = AutoConfig.from_pretrained(args.config)
    kwargs = {"attn_implementation": "sdpa", "dtype": torch.bfloat16}
    if args.experts:
        kwargs["experts_implementation"] = args.experts
    model = AutoModelForCausalLM.from_config(cfg, **kwargs).cuda().eval()
    with torch.inference_mode():
        for batch in args.batch:
            try:
                print(json.dumps(run_case(model, cfg, batch, args)), flush=True)
            except Exception as e:  # a failing peer case is reported, not hidden (torch.compile's errors are long)
                print(json.dumps({"peer": "transformers.generate", "config": args.config, "batch": batch,
                                  "cache": args.cache, "compile": args.compile,
                                  "error": f"{type(e).__name__}: {str(e).strip().splitlines()[0][:400] if str(e).strip() else ''}",
                                  "torch": torch.__version__,
                                  "transformers": __import__("transformers").__version__}), flush=True)
                torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
