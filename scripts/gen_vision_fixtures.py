#!/usr/bin/env python3
"""Generates HuggingFace reference fixtures for the vision tower (run where torch + transformers 5.17 are installed).

Two fixtures under tests/fixtures/vision/:
  qwen3_vl_toy/           the .visual of Qwen3VLForConditionalGeneration built from configs/model_configs/qwen3_vl_toy
                          (parameter names as save_pretrained writes them: model.visual.*)
  qwen3_omni_vision_toy/  Qwen3OmniMoeVisionEncoder from the same vision sizes, named as inside
                          Qwen3OmniMoeForConditionalGeneration (thinker.visual.*; mergers ln_q / mlp.0 / mlp.2, merger_list)
Each holds:
  config.json         the HF config the C++ test reads the vision config from
  weights.safetensors every vision parameter under its HF name (seeded init, LayerNorms and biases perturbed)
  io.safetensors      pixel_values [N, 1536] f32, grid_thw i64 [[1,4,4],[2,4,6]], merged [N/4, out] and deepstack.k
                      outputs, the loss weights loss_weight.merged and loss_weight.deepstack.k
  grads.safetensors   grad.<name> for every parameter, of loss = sum(merged * loss_weight.merged)
                      + sum_k sum(deepstack.k * loss_weight.deepstack.k)
  meta.json           loss, torch / transformers versions, grids, names
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

GRIDS = [[1, 4, 4], [2, 4, 6]]
SEED = 1234


def perturb(module, generator):
    """HF init leaves LayerNorms at 1/0 and biases at 0: move them so that their gradients are exercised."""
    with torch.no_grad():
        for name, p in module.named_parameters():
            is_norm = ".norm" in name or "norm1" in name or "norm2" in name or "ln_q" in name
            if name.endswith(".bias") or is_norm:
                p.add_(0.1 * torch.randn(p.shape, generator=generator))


def vision_outputs(out):
    """transformers 5.x returns BaseModelOutputWithDeepstackFeatures (pooler_output = merged); older a tuple."""
    if hasattr(out, "pooler_output") and out.pooler_output is not None:
        return out.pooler_output, list(out.deepstack_features or [])
    merged, deepstack = out[0], out[1]
    return merged, list(deepstack)


def run_and_save(visual, prefix, saved_names, config_json, out_dir):
    generator = torch.Generator().manual_seed(SEED + 1)
    perturb(visual, generator)
    vcfg = visual.config
    patch_dim = vcfg.in_channels * vcfg.temporal_patch_size * vcfg.patch_size * vcfg.patch_size
    grid_thw = torch.tensor(GRIDS, dtype=torch.long)
    patches = int(sum(t * h * w for t, h, w in GRIDS))
    pixel_values = torch.randn(patches, patch_dim, generator=generator)

    visual.zero_grad(set_to_none=True)
    merged, deepstack = vision_outputs(visual(pixel_values, grid_thw=grid_thw))
    weight_merged = torch.randn(merged.shape, generator=generator)
    weights_deepstack = [torch.randn(d.shape, generator=generator) for d in deepstack]
    loss = (merged * weight_merged).sum()
    for d, w in zip(deepstack, weights_deepstack):
        loss = loss + (d * w).sum()
    loss.backward()

    params = dict(visual.named_parameters())
    names = {prefix + n: n for n in params}
    if saved_names is not None and set(saved_names) != set(names):
        raise SystemExit(f"save_pretrained names differ from the module's: {sorted(set(saved_names) ^ set(names))}")
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(config_json, f, indent=2, sort_keys=True)
        f.write("\n")
    save_file({full: params[n].detach().contiguous() for full, n in names.items()},
              os.path.join(out_dir, "weights.safetensors"))
    grads = {}
    for full, n in names.items():
        g = params[n].grad
        grads["grad." + full] = (torch.zeros_like(params[n]) if g is None else g).detach().contiguous()
    save_file(grads, os.path.join(out_dir, "grads.safetensors"))
    io = {"pixel_values": pixel_values, "grid_thw": grid_thw, "merged": merged.detach().contiguous(),
          "loss_weight.merged": weight_merged}
    for k, (d, w) in enumerate(zip(deepstack, weights_deepstack)):
        io[f"deepstack.{k}"] = d.detach().contiguous()
        io[f"loss_weight.deepstack.{k}"] = w
    save_file(io, os.path.join(out_dir, "io.safetensors"))
    meta = {"loss": loss.item(), "grids": GRIDS, "deepstack_features": len(deepstack), "names": sorted(names),
            "torch": torch.__version__, "transformers": transformers.__version__}
    with open(os.path.join(out_dir, "meta.json"), "w") as f:
        json.dump(meta, f, indent=2)
        f.write("\n")
    print(f"{out_dir}: loss {loss.item():.6f}, merged {tuple(merged.shape)}, {len(deepstack)} deepstack features, "
          f"{len(names)} parameters")


def qwen3_vl_fixture(source_dir, out_dir):
    from transformers import AutoConfig, Qwen3VLForConditionalGeneration

    config_path = os.path.join(source_dir, "configs/model_configs/qwen3_vl_toy")
    config = AutoConfig.from_pretrained(config_path)
    config._attn_implementation = "eager"
    config.vision_config._attn_implementation = "eager"
    torch.manual_seed(SEED)
    model = Qwen3VLForConditionalGeneration(config).float().eval()
    # The names a checkpoint holds: what save_pretrained writes (it may convert module names).
    with tempfile.TemporaryDirectory() as tmp:
        model.save_pretrained(tmp, safe_serialization=True)
        saved = []
        for fname in sorted(os.listdir(tmp)):
            if fname.endswith(".safetensors"):
                with safe_open(os.path.join(tmp, fname), "pt") as f:
                    saved += [k for k in f.keys() if ".visual." in "." + k]
    with open(os.path.join(config_path, "config.json")) as f:
        config_json = json.load(f)
    run_and_save(model.model.visual, "model.visual.", saved, config_json, out_dir)


def qwen3_omni_vision_fixture(source_dir, out_dir):
    from transformers.models.qwen3_omni_moe.configuration_qwen3_omni_moe import Qwen3OmniMoeVisionEncoderConfig
    from transformers.models.qwen3_omni_moe.modeling_qwen3_omni_moe import Qwen3OmniMoeVisionEncoder

    with open(os.path.join(source_dir, "configs/model_configs/qwen3_vl_toy/config.json")) as f:
        vision = copy.deepcopy(json.load(f)["vision_config"])
    vision["model_type"] = "qwen3_omni_moe_vision_encoder"
    kwargs = {k: v for k, v in vision.items() if k != "model_type"}
    config = Qwen3OmniMoeVisionEncoderConfig(**kwargs)
    config._attn_implementation = "eager"
    torch.manual_seed(SEED)
    visual = Qwen3OmniMoeVisionEncoder(config).float().eval()
    config_json = {"model_type": "qwen3_omni_moe", "thinker_config": {"vision_config": vision}}
    rope = getattr(config, "rope_parameters", None)
    if isinstance(rope, dict) and "rope_theta" in rope:
        config_json["thinker_config"]["vision_config"]["rope_parameters"] = {"rope_theta": rope["rope_theta"]}
    run_and_save(visual, "thinker.visual.", None, config_json, out_dir)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--source-dir", default=os.path.dirname(here), help="the veomni checkout")
    parser.add_argument("--out", default=None, help="default: <source-dir>/tests/fixtures/vision")
    args = parser.parse_args()
    out = args.out or os.path.join(args.source_dir, "tests/fixtures/vision")
    torch.use_deterministic_algorithms(True)
    qwen3_vl_fixture(args.source_dir, os.path.join(out, "qwen3_vl_toy"))
    qwen3_omni_vision_fixture(args.source_dir, os.path.join(out, "qwen3_omni_vision_toy"))


if __name__ == "__main__":
    main()
