#!/usr/bin/env python3
"""Generates the HuggingFace reference fixture of the multimodal LM (run where torch + transformers 5.17 are).

tests/fixtures/thinker/qwen3_vl_toy/: Qwen3VLForConditionalGeneration built from configs/model_configs/qwen3_vl_toy
with the vocabulary cut to 512 rows (so that the fixture stays small) and the vision token ids moved into it, on one
sample with the real token layout: text, <vision_start>, image pads, <vision_end>, text, a second image, text.
transformers computes the M-RoPE positions itself (get_rope_index); a hook on the language model records the
positions it used, so the C++ test feeds exactly those.
  config.json          the HF config (our loader reads the thinker config from it)
  weights.safetensors  every parameter under its save_pretrained name (seeded init; norms and biases perturbed)
  inputs.safetensors   input_ids i64 [S] (image pads zeroed, as the dataset stores them), hf_input_ids (with the
                       pads), target_ids i64 [S] (labels shifted left, -100 ignored), position_ids i64 [3, S],
                       image_mask bool [S], pixel_values f32 [N, 1536], image_grid_thw i64 [2, 3]
  outputs.safetensors  logits f32 [S, V]
  grads.safetensors    grad.<name> of the mean cross-entropy for every parameter
  expected.json        loss, valid tokens, versions
CPU, fp32, eager attention: CI compares our C++ forward/backward against these with no Python.
"""
import argparse
import copy
import json
import os
import tempfile

import torch
import transformers
from safetensors import safe_open
from safetensors.torch import save_file

SEED = 4321
VOCAB = 512
TOKENS = {"vision_start_token_id": 500, "vision_end_token_id": 501, "image_token_id": 502, "video_token_id": 503}
GRIDS = [[1, 4, 4], [1, 4, 6]]
MERGE = 2


def perturb(model, generator):
    """HF init leaves norms at 1 and biases at 0: move them so that their gradients are exercised."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(".bias") or "norm" in name:
                p.add_(0.1 * torch.randn(p.shape, generator=generator))


def token_layout(generator):
    """ids with image pads, labels (HF convention, unshifted; -100 on the prompt)."""
    def text(n):
        return torch.randint(1, 500, (n,), generator=generator).tolist()

    ids, labels = [], []
    prompt = text(3)
    ids += prompt
    for k, (t, h, w) in enumerate(GRIDS):
        pads = t * h * w // (MERGE * MERGE)
        ids += [TOKENS["vision_start_token_id"]] + [TOKENS["image_token_id"]] * pads + [TOKENS["vision_end_token_id"]]
        if k == 0:
            ids += text(2)
    labels = [-100] * len(ids)
    answer = text(8)
    ids += answer
    labels += answer
    return ids, labels


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser.add_argument("--config", default=os.path.join(root, "configs/model_configs/qwen3_vl_toy/config.json"))
    parser.add_argument("--out", default=os.path.join(root, "tests/fixtures/thinker/qwen3_vl_toy"))
    args = parser.parse_args()

    with open(args.config) as f:
        config_json = json.load(f)
    config_json = copy.deepcopy(config_json)
    config_json["text_config"]["vocab_size"] = VOCAB
    config_json.update(TOKENS)
    config = transformers.Qwen3VLConfig(**{k: v for k, v in config_json.items() if k != "architectures"})
    config._attn_implementation = "eager"
    config.text_config._attn_implementation = "eager"
    config.vision_config._attn_implementation = "eager"

    torch.manual_seed(SEED)
    model = transformers.Qwen3VLForConditionalGeneration(config).float().eval()
    generator = torch.Generator().manual_seed(SEED + 1)
    perturb(model, generator)

    hf_ids, labels = token_layout(generator)
    s = len(hf_ids)
    vcfg = config.vision_config
    patch_dim = vcfg.in_channels * vcfg.temporal_patch_size * vcfg.patch_size * vcfg.patch_size
    patches = sum(t * h * w for t, h, w in GRIDS)
    pixel_values = torch.randn(patches, patch_dim, generator=generator)
    grid_thw = torch.tensor(GRIDS, dtype=torch.long)
    input_ids = torch.tensor([hf_ids], dtype=torch.long)

    recorded = {}

    def record_positions(module, args_, kwargs):
        recorded["position_ids"] = kwargs.get("position_ids")

    language_model = model.model.language_model
    handle = language_model.register_forward_pre_hook(record_positions, with_kwargs=True)
    model.zero_grad(set_to_none=True)
    out = model(input_ids=input_ids, attention_mask=torch.ones_like(input_ids), pixel_values=pixel_values,
                image_grid_thw=grid_thw, labels=torch.tensor([labels]), use_cache=False)
    handle.remove()
    out.loss.backward()

    positions = recorded["position_ids"]
    if positions is None:
        raise SystemExit("the language model was called without position_ids: cannot record the M-RoPE positions")
    positions = positions.detach()
    if positions.ndim == 3 and positions.shape[0] == 4:  # newer layouts prepend the text positions
        positions = positions[1:]
    positions = positions.reshape(3, s).to(torch.long)

    params = dict(model.named_parameters())
    with tempfile.TemporaryDirectory() as tmp:
        model.save_pretrained(tmp, safe_serialization=True)
        saved = set()
        for name in os.listdir(tmp):
            if name.endswith(".safetensors"):
                with safe_open(os.path.join(tmp, name), "pt") as f:
                    saved.update(f.keys())
    if saved != set(params):
        raise SystemExit(f"save_pretrained names differ from named_parameters: {sorted(saved ^ set(params))}")

    image_mask = input_ids[0] == TOKENS["image_token_id"]
    ids_zeroed = input_ids[0].clone()
    ids_zeroed[image_mask] = 0
    targets = torch.tensor(labels[1:] + [-100], dtype=torch.long)
    valid = int((targets != -100).sum())

    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(config_json, f, indent=2, sort_keys=True)
        f.write("\n")
    save_file({n: p.detach().contiguous() for n, p in params.items()}, os.path.join(args.out, "weights.safetensors"))
    save_file({"input_ids": ids_zeroed.contiguous(), "hf_input_ids": input_ids[0].contiguous(),
               "target_ids": targets, "position_ids": positions.contiguous(), "image_mask": image_mask.contiguous(),
               "pixel_values": pixel_values.contiguous(), "image_grid_thw": grid_thw},
              os.path.join(args.out, "inputs.safetensors"))
    save_file({"logits": out.logits[0].detach().float().contiguous()}, os.path.join(args.out, "outputs.safetensors"))
    missing = [n for n, p in params.items() if p.grad is None]
    if missing:
        raise SystemExit(f"parameters without a gradient: {missing}")
    save_file({"grad." + n: p.grad.detach().contiguous() for n, p in params.items()},
              os.path.join(args.out, "grads.safetensors"))
    with open(os.path.join(args.out, "expected.json"), "w") as f:
        json.dump({"loss": float(out.loss), "valid_tokens": valid, "seq_len": s, "torch": torch.__version__,
                   "transformers": transformers.__version__}, f, indent=2)
        f.write("\n")
    print(f"wrote {args.out}: S={s}, loss={float(out.loss):.6f}, {len(params)} parameters")


if __name__ == "__main__":
    main()
