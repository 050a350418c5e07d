#!/usr/bin/env python3
"""Generates the HuggingFace reference fixture of the Qwen3-Omni audio encoder (run where torch + transformers 5.17
are installed; CPU, fp32, deterministic).

It builds transformers' Qwen3OmniMoeAudioEncoder from thinker_config.audio_config of
configs/model_configs/qwen3_omni_moe_toy/config.json, gives every parameter seeded random values (biases and
LayerNorm parameters too, so that every gradient path carries signal), runs random mel features of several clips
(input_features in transformers' layout [mel, frames]), takes loss = sum(output * fixed random weights) and runs
backward. It writes under tests/fixtures/audio_encoder/:
  config.json           the toy config the fixture was made from
  weights.safetensors   every parameter under its name in Qwen3OmniMoeForConditionalGeneration
                        ("thinker.audio_tower.<name>")
  inputs.safetensors    "input_features" [frames, 128] f32 (the dataset's layout: clips one after another, a row per
                        frame), "feature_lengths" i64 [clips], "loss_weights" [tokens, output_dim] f32
  expected.safetensors  "output" [tokens, output_dim] f32 and "grad.<name>" for every parameter
  expected.json         loss, clip frames, tokens per clip, the attention cu_seqlens, versions
tests/unit/test_audio_encoder.cc (AudioEncoderHfFixture) compares the C++ encoder against these files.
"""
import argparse
import json
import os
import shutil
import sys

import torch
import transformers
from safetensors.torch import save_file
from transformers.models.qwen3_omni_moe import modeling_qwen3_omni_moe as omni
from transformers.models.qwen3_omni_moe.configuration_qwen3_omni_moe import Qwen3OmniMoeConfig

PREFIX = "thinker.audio_tower."
# 230 frames: chunks of 100, 100 and 30 (the short chunk is zero-padded to 100 with the others); 100: one full
# chunk; 900: 9 chunks, 117 tokens, i.e. two attention windows (104 + 13 tokens) with n_window_infer 800.
CLIP_FRAMES = [230, 100, 900]


def seeded_weights(model, generator):
    """Normal weights scaled by 1/sqrt(fan_in); small random biases; LayerNorm weights around 1."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=generator, dtype=torch.float32)
            if name.endswith(".bias"):
                p.copy_(0.1 * noise)
            elif "layer_norm" in name or name.startswith("ln_post"):
                p.copy_(1.0 + 0.1 * noise)
            else:
                fan_in = p[0].numel()
                p.copy_(noise / fan_in ** 0.5)


def check_names_in_full_model(config, model):
    """Our HF names must be those of Qwen3OmniMoeForConditionalGeneration's state_dict."""
    full = omni.Qwen3OmniMoeForConditionalGeneration(config)
    full_names = set(full.state_dict().keys())
    ours = {PREFIX + name for name, _ in model.named_parameters()}
    missing = sorted(ours - full_names)
    if missing:
        sys.exit(f"names not in Qwen3OmniMoeForConditionalGeneration's state_dict: {missing[:5]}")
    extra = sorted(n for n in full_names if n.startswith(PREFIX) and n not in ours)
    if extra:
        sys.exit(f"audio tower tensors of the full model the fixture lacks: {extra[:5]}")


def attention_windows(model, features_hf, lengths):
    """cu_seqlens exactly as the encoder's forward computes them."""
    _, chunk_lengths = omni.chunk_and_pad_features(features_hf, lengths, model.n_window)
    cu = omni.get_audio_cu_seqlens(chunk_lengths, lengths, model.n_window_infer, model.n_window)
    return [int(x) for x in cu.tolist()]


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default=os.path.join(root, "configs/model_configs/qwen3_omni_moe_toy"))
    parser.add_argument("--out", default=os.path.join(root, "tests/fixtures/audio_encoder"))
    parser.add_argument("--seed", type=int, default=1234)
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    generator = torch.Generator().manual_seed(args.seed)

    config = Qwen3OmniMoeConfig.from_pretrained(args.config)
    audio_config = config.thinker_config.audio_config
    model = omni.Qwen3OmniMoeAudioEncoder._from_config(audio_config, attn_implementation="eager")
    model = model.to(torch.float32).eval()
    check_names_in_full_model(config, model)
    seeded_weights(model, generator)

    total = sum(CLIP_FRAMES)
    features = torch.randn(total, audio_config.num_mel_bins, generator=generator, dtype=torch.float32)
    lengths = torch.tensor(CLIP_FRAMES, dtype=torch.long)
    features_hf = features.T.contiguous()  # transformers takes [mel, frames]
    tokens_per_clip = [int(x) for x in omni._get_feat_extract_output_lengths(lengths, model.n_window).tolist()]

    out = model(input_features=features_hf, feature_lens=lengths).last_hidden_state
    if tuple(out.shape) != (sum(tokens_per_clip), audio_config.output_dim):
        sys.exit(f"unexpected output shape {tuple(out.shape)} for tokens {tokens_per_clip}")
    loss_weights = torch.randn(out.shape, generator=generator, dtype=torch.float32) / out.numel() ** 0.5
    loss = (out * loss_weights).sum()
    model.zero_grad()
    loss.backward()

    os.makedirs(args.out, exist_ok=True)
    shutil.copyfile(os.path.join(args.config, "config.json"), os.path.join(args.out, "config.json"))
    params = dict(model.named_parameters())
    save_file({PREFIX + n: p.detach().contiguous() for n, p in params.items()},
              os.path.join(args.out, "weights.safetensors"))
    save_file({"input_features": features.contiguous(), "feature_lengths": lengths,
               "loss_weights": loss_weights.contiguous()}, os.path.join(args.out, "inputs.safetensors"))
    expected = {"output": out.detach().contiguous()}
    for n, p in params.items():
        if p.grad is None:
            sys.exit(f"parameter {n} got no gradient")
        expected["grad." + PREFIX + n] = p.grad.detach().contiguous()
    save_file(expected, os.path.join(args.out, "expected.safetensors"))
    facts = {
        "loss": loss.item(),
        "clip_frames": CLIP_FRAMES,
        "tokens_per_clip": tokens_per_clip,
        "cu_seqlens": attention_windows(model, features_hf, lengths),
        "seed": args.seed,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
    }
    with open(os.path.join(args.out, "expected.json"), "w") as f:
        json.dump(facts, f, indent=2)
        f.write("\n")
    print(f"wrote {args.out}: {len(params)} parameters, tokens {tokens_per_clip}, cu_seqlens {facts['cu_seqlens']}, "
          f"loss {loss.item():.9g}")


if __name__ == "__main__":
    main()
