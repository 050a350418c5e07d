#!/usr/bin/env python3
"""Generates the greedy-decoding reference fixtures of veomni-generate (run where torch + transformers are installed).

For each toy config under configs/model_configs/<name>/ it builds the model with transformers in fp32 on the CPU with
random weights (initializer_range raised so that the logits of different tokens differ clearly), saves it with
save_pretrained, and writes under tests/fixtures/generate/<name>/:
  model/         config.json, generation_config.json, model.safetensors as transformers saves them
  expected.json  "prompts": 3 prompts of different lengths (token ids), "max_new_tokens", "expected": the new token
                 ids of model.generate(do_sample=False) over the 3 prompts batched with left padding, and the versions
The batched result is checked against generating every prompt alone (unpadded), so left padding cannot hide in it.
Qwen3-VL (qwen3_vl_toy) generates text-only prompts through Qwen3VLForConditionalGeneration, whose M-RoPE positions
transformers derives from the attention mask; its vocabulary is cut to VL_VOCAB so that the fixture stays small (the
image and video ids, above it, never occur in a text-only prompt).
CI compares veomni's KV-cache decoding against these ids with no Python (tests/unit/test_generate_fixtures.cc).
"""
import argparse
import json
import os
import shutil
import sys

import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM, Qwen3VLForConditionalGeneration

PROMPT_LENGTHS = [7, 3, 12]
MAX_NEW_TOKENS = 12
PAD_TOKEN_ID = 0
INITIALIZER_RANGE = 0.2
VL_VOCAB = 2048


def generate_ids(model, prompts):
    """Greedy new tokens of each prompt, all prompts in one left-padded batch."""
    longest = max(len(p) for p in prompts)
    ids = torch.tensor([[PAD_TOKEN_ID] * (longest - len(p)) + p for p in prompts])
    mask = torch.tensor([[0] * (longest - len(p)) + [1] * len(p) for p in prompts])
    with torch.no_grad():
        out = model.generate(input_ids=ids, attention_mask=mask, do_sample=False, max_new_tokens=MAX_NEW_TOKENS,
                             pad_token_id=PAD_TOKEN_ID, eos_token_id=None)
    return [row[longest:].tolist() for row in out]


def model_class(config):
    return Qwen3VLForConditionalGeneration if config.model_type == "qwen3_vl" else AutoModelForCausalLM


def generate(name, configs_root, out_root, seed):
    torch.manual_seed(seed)
    config = AutoConfig.from_pretrained(os.path.join(configs_root, name))
    config.initializer_range = INITIALIZER_RANGE
    if config.model_type == "qwen3_vl":
        config.text_config.initializer_range = INITIALIZER_RANGE
        config.text_config.vocab_size = VL_VOCAB
    # Generation computes no auxiliary loss; with it on, transformers' MoE forward fails on left-padded batches.
    if hasattr(config, "output_router_logits"):
        config.output_router_logits = False
    cls = model_class(config)
    if cls is AutoModelForCausalLM:
        model = cls.from_config(config, dtype=torch.float32, attn_implementation="eager")
    else:
        model = cls._from_config(config, dtype=torch.float32, attn_implementation="eager")
    out_dir = os.path.join(out_root, name)
    shutil.rmtree(out_dir, ignore_errors=True)
    model_dir = os.path.join(out_dir, "model")
    model.save_pretrained(model_dir)

    # Reload exactly what was saved, so the fixture describes the files CI loads.
    model = cls.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="eager")
    model.eval()
    generator = torch.Generator().manual_seed(seed + 1)
    # Ids from 1 up: 0 is the padding id.
    vocab = config.text_config.vocab_size if config.model_type == "qwen3_vl" else config.vocab_size
    prompts = [torch.randint(1, vocab, (n,), generator=generator).tolist() for n in PROMPT_LENGTHS]
    batched = generate_ids(model, prompts)
    for i, prompt in enumerate(prompts):
        alone = generate_ids(model, [prompt])[0]
        if alone != batched[i]:
            sys.exit(f"{name}: prompt {i} generates {alone} alone but {batched[i]} left-padded in a batch")
    for i, ids in enumerate(batched):
        if len(ids) != MAX_NEW_TOKENS:
            sys.exit(f"{name}: prompt {i} generated {len(ids)} tokens, expected {MAX_NEW_TOKENS}")
    if all(len(set(ids)) == 1 for ids in batched):
        sys.exit(f"{name}: every prompt repeats one token; raise INITIALIZER_RANGE for a meaningful fixture")

    expected = {
        "model": name,
        "prompts": prompts,
        "max_new_tokens": MAX_NEW_TOKENS,
        "expected": batched,
        "initializer_range": INITIALIZER_RANGE,
        "torch_version": torch.__version__,
        "transformers_version": transformers.__version__,
        "seed": seed,
    }
    with open(os.path.join(out_dir, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1)
    size = sum(os.path.getsize(os.path.join(model_dir, f)) for f in os.listdir(model_dir))
    print(f"{name}: {len(prompts)} prompts, greedy ids {batched}; model files {size / 1e6:.2f} MB")


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--configs", default=os.path.join(root, "configs", "model_configs"))
    parser.add_argument("--out", default=os.path.join(root, "tests", "fixtures", "generate"))
    parser.add_argument("--models", default="qwen3_toy,qwen3_moe_toy,qwen3_vl_toy")
    parser.add_argument("--seed", type=int, default=4321)
    args = parser.parse_args()
    torch.use_deterministic_algorithms(True)
    for name in args.models.split(","):
        generate(name, args.configs, args.out, args.seed)


if __name__ == "__main__":
    main()
