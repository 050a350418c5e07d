#!/usr/bin/env python3
"""Generates the greedy-decoding reference of veomni-generate for prompts with images (run where torch +
transformers are installed; no network).

It loads the Qwen3-VL toy that scripts/gen_generate_fixtures.py saved (tests/fixtures/generate/qwen3_vl_toy/model)
with transformers' Qwen3VLForConditionalGeneration in fp32 on the CPU. The toy's vocabulary is cut to 2048 ids, so
its image, video and vision-start/end ids are moved inside it (IMAGE_TOKEN_ID...): transformers embeds the image ids
before writing the image features over them and finds the images by mm_token_type_ids (which its processor makes
and this script passes: without it the image tokens get text positions); veomni zeroes those rows and finds them by
its image mask, so the ids only have to agree on where the images are. The pixel values are not an
image file: every element of a prompt's pixel values is a formula of its row and column (pixel_values below), which
the consuming test evaluates the same way (float64, then rounded to float32), so both sides see identical patches
without storing them.
It writes tests/fixtures/generate/qwen3_vl_toy/media_expected.json: the token ids, image grids and new token ids of
model.generate(do_sample=False) for 3 prompts, each generated alone (no padding): two with images of different grids,
one text-only. CI decodes the 3 in one batch through the KV cache and compares (tests/unit/
test_generate_media_fixture.cc, GenerateMediaFixture.*).
"""
import argparse
import json
import os
import sys

import numpy as np
import torch
import transformers
from transformers import AutoConfig, Qwen3VLForConditionalGeneration

MAX_NEW_TOKENS = 8
PAD_TOKEN_ID = 0
VIDEO_TOKEN_ID = 2044
IMAGE_TOKEN_ID = 2045
VISION_START_TOKEN_ID = 2046
VISION_END_TOKEN_ID = 2047
TEXT_IDS = 2040  # text ids are drawn from [1, TEXT_IDS)
# (text before, image grid [t, h, w] in patches or None, text after) per prompt.
PROMPTS = [(5, [1, 4, 4], 3), (2, [1, 2, 6], 6), (9, None, 0)]


def pixel_values(grids, patch_dim):
    """A prompt's pixel values [patches, 3 * temporal * patch * patch]: element (row, column) is
    ((row * 131 + column * 31) % 255) / 127.5 - 1 in float64, rounded to float32."""
    rows = sum(t * h * w for t, h, w in grids)
    r = np.arange(rows, dtype=np.float64)[:, None]
    c = np.arange(patch_dim, dtype=np.float64)[None, :]
    return torch.from_numpy((((r * 131 + c * 31) % 255) / 127.5 - 1.0).astype(np.float32))


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fixture", default=os.path.join(root, "tests", "fixtures", "generate", "qwen3_vl_toy"))
    parser.add_argument("--seed", type=int, default=2026)
    args = parser.parse_args()
    torch.use_deterministic_algorithms(True)
    model_dir = os.path.join(args.fixture, "model")
    config = AutoConfig.from_pretrained(model_dir)
    config.image_token_id = IMAGE_TOKEN_ID
    config.video_token_id = VIDEO_TOKEN_ID
    config.vision_start_token_id = VISION_START_TOKEN_ID
    config.vision_end_token_id = VISION_END_TOKEN_ID
    if config.text_config.vocab_size <= VISION_END_TOKEN_ID:
        sys.exit(f"the toy's vocabulary {config.text_config.vocab_size} does not hold the moved image ids")
    model = Qwen3VLForConditionalGeneration.from_pretrained(model_dir, config=config, dtype=torch.float32,
                                                            attn_implementation="eager")
    model.eval()
    vision = config.vision_config
    patch_dim = vision.in_channels * vision.temporal_patch_size * vision.patch_size * vision.patch_size
    merge = vision.spatial_merge_size ** 2

    generator = torch.Generator().manual_seed(args.seed)
    text = lambda n: torch.randint(1, TEXT_IDS, (n,), generator=generator).tolist()
    prompts, expected = [], []
    for before, grid, after in PROMPTS:
        ids = text(before)
        grids = []
        if grid is not None:
            ids += [VISION_START_TOKEN_ID] + [IMAGE_TOKEN_ID] * (grid[0] * grid[1] * grid[2] // merge)
            ids += [VISION_END_TOKEN_ID]
            grids.append(grid)
        ids += text(after)
        inputs = {"input_ids": torch.tensor([ids]), "attention_mask": torch.ones(1, len(ids), dtype=torch.long)}
        # What transformers' processor passes beside the ids (1 at image tokens): Qwen3-VL's get_rope_index finds the
        # images by it, and without it gives the image tokens text positions.
        inputs["mm_token_type_ids"] = (inputs["input_ids"] == IMAGE_TOKEN_ID).to(torch.int32)
        if grids:
            inputs["pixel_values"] = pixel_values(grids, patch_dim)
            inputs["image_grid_thw"] = torch.tensor(grids)
        with torch.no_grad():
            out = model.generate(**inputs, do_sample=False, max_new_tokens=MAX_NEW_TOKENS, pad_token_id=PAD_TOKEN_ID,
                                 eos_token_id=None)
        new = out[0, len(ids):].tolist()
        if len(new) != MAX_NEW_TOKENS:
            sys.exit(f"prompt {len(prompts)} generated {len(new)} tokens, expected {MAX_NEW_TOKENS}")
        prompts.append({"input_ids": ids, "image_grid_thw": grids})
        expected.append(new)
    if all(len(set(ids)) == 1 for ids in expected):
        sys.exit("every prompt repeats one token; the fixture would not tell models apart")

    fixture = {
        "model": "qwen3_vl_toy",
        "image_token_id": IMAGE_TOKEN_ID,
        "video_token_id": VIDEO_TOKEN_ID,
        "vision_start_token_id": VISION_START_TOKEN_ID,
        "vision_end_token_id": VISION_END_TOKEN_ID,
        "pixel_values": "per prompt, element (row, column) = ((row * 131 + column * 31) % 255) / 127.5 - 1 in "
                        "float64, then float32",
        "prompts": prompts,
        "max_new_tokens": MAX_NEW_TOKENS,
        "expected": expected,
        "torch_version": torch.__version__,
        "transformers_version": transformers.__version__,
        "seed": args.seed,
    }
    path = os.path.join(args.fixture, "media_expected.json")
    with open(path, "w") as f:
        json.dump(fixture, f, indent=1)
    print(f"{path}: {len(prompts)} prompts, greedy ids {expected}; {os.path.getsize(path)} bytes")


if __name__ == "__main__":
    main()
