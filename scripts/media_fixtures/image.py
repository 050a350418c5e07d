#!/usr/bin/env python3
"""HF reference outputs for the image tests (tests/fixtures/media/image/), from transformers' Qwen2-VL image
processor (torchvision backend) configured as Qwen3-VL ships it, built offline with explicit arguments.

Writes to OUT_DIR:
  decoded.safetensors   one uint8 [H, W, 3] tensor per input: Image.open(path).convert("RGB") (VeOmni's loader)
  resize.safetensors    torchvision resizes of a seeded random uint8 image (the call the processor makes, on a CHW view
                        of HWC memory as pil_to_tensor gives it), for an exact check of our resampler: "input"
                        [H, W, 3] and "out_<h>x<w>" [h, w, 3]
  <case>.safetensors    pixel_values (float32, every `row_stride`-th row) and image_grid_thw (int64 [1, 3])
  cases.json            the cases, their processor settings and the library versions

Usage: python3 scripts/media_fixtures/image.py MEDIA_DIR OUT_DIR   (MEDIA_DIR: tests/fixtures/media/inputs)
Needs torch, torchvision, transformers 5.x, numpy, PIL, safetensors.
"""
import json
import os
import sys

import numpy as np
from PIL import Image
from safetensors.numpy import save_file

DECODE_INPUTS = [
    "image_rgb_48x64.png",
    "image_rgba_60x80.png",
    "image_grey_33x77.png",
    "image_greyalpha_40x50.png",
    "image_palette_40x50.png",
    "image_mono_40x50.png",
    "image_rgb16_40x50.png",
    "image_grey16_40x50.png",
    "image_photo_100x300.jpg",
    "image_444_40x50.jpg",
]

# Pixel limits small enough to keep the fixtures small, and Qwen3-VL's own (size.shortest_edge / longest_edge).
SMALL = {"min_pixels": 64 * 64, "max_pixels": 128 * 128}
QWEN3_VL = {"min_pixels": 65536, "max_pixels": 16777216}

# name, input, limits, row stride (the Qwen3-VL case upsamples to 224x320: only every 16th row is kept).
CASES = [
    ("rgb_48x64_small", "image_rgb_48x64.png", SMALL, 1),  # 48 -> 64 rows only (48/32 = 1.5 rounds to 2)
    ("rgba_60x80_small", "image_rgba_60x80.png", SMALL, 1),  # 80/32 = 2.5 rounds half to even: 64 wide
    ("grey_33x77_small", "image_grey_33x77.png", SMALL, 1),  # below min_pixels: scaled up to 64x128
    ("photo_100x300_small", "image_photo_100x300.jpg", SMALL, 1),  # above max_pixels: antialiased down to 64x192
    ("rgb_48x64_qwen3vl", "image_rgb_48x64.png", QWEN3_VL, 16),  # Qwen3-VL defaults: up to 224x320
]

# (height, width) targets for the resampler check: up, down by large factors, one axis only, and to one pixel.
RESIZE_INPUT_SHAPE = (37, 53)
RESIZE_TARGETS = [(64, 96), (16, 16), (37, 20), (5, 53), (100, 7), (1, 1)]


def make_processor(limits):
    from transformers import Qwen2VLImageProcessor

    processor = Qwen2VLImageProcessor(
        size={"shortest_edge": limits["min_pixels"], "longest_edge": limits["max_pixels"]},
        patch_size=16,
        temporal_patch_size=2,
        merge_size=2,
        image_mean=[0.5, 0.5, 0.5],
        image_std=[0.5, 0.5, 0.5],
        rescale_factor=1 / 255,
        do_resize=True,
        do_rescale=True,
        do_normalize=True,
        do_convert_rgb=True,
        resample=3,
    )
    backend = getattr(processor, "backend", "torchvision")
    if backend != "torchvision":
        raise SystemExit(f"expected the torchvision backend (what Qwen3-VL's processor loads), got {backend}")
    return processor


def load_rgb(media_dir, name):
    return Image.open(os.path.join(media_dir, name)).convert("RGB")


def write_decoded(media_dir, out_dir):
    tensors = {name: np.ascontiguousarray(np.asarray(load_rgb(media_dir, name), dtype=np.uint8)) for name in DECODE_INPUTS}
    save_file(tensors, os.path.join(out_dir, "decoded.safetensors"))


def write_resizes(out_dir):
    import torch
    from torchvision.transforms.v2 import functional as tvF

    rng = np.random.default_rng(20240917)
    image = rng.integers(0, 256, size=(*RESIZE_INPUT_SHAPE, 3), dtype=np.uint8)
    tensors = {"input": image}
    for height, width in RESIZE_TARGETS:
        resized = tvF.resize(
            torch.from_numpy(image).permute(2, 0, 1),
            [height, width],
            interpolation=tvF.InterpolationMode.BICUBIC,
            antialias=True,
        )
        tensors[f"out_{height}x{width}"] = np.ascontiguousarray(resized.permute(1, 2, 0).numpy())
    save_file(tensors, os.path.join(out_dir, "resize.safetensors"))


def write_case(media_dir, out_dir, name, input_name, limits, row_stride):
    processor = make_processor(limits)
    result = processor(images=[load_rgb(media_dir, input_name)], return_tensors="pt")
    pixel_values = result["pixel_values"].numpy().astype(np.float32)
    grid = result["image_grid_thw"].numpy().astype(np.int64)
    save_file(
        {"pixel_values": np.ascontiguousarray(pixel_values[::row_stride]), "image_grid_thw": grid},
        os.path.join(out_dir, f"{name}.safetensors"),
    )
    return {
        "name": name,
        "input": input_name,
        "min_pixels": limits["min_pixels"],
        "max_pixels": limits["max_pixels"],
        "row_stride": row_stride,
        "rows": int(pixel_values.shape[0]),
        "processor_class": type(processor).__name__,
    }


def generate(media_dir: str, out_dir: str) -> None:
    import torch
    import torchvision
    import transformers

    os.makedirs(out_dir, exist_ok=True)
    write_decoded(media_dir, out_dir)
    write_resizes(out_dir)
    cases = [write_case(media_dir, out_dir, *case) for case in CASES]
    meta = {
        "format": "veomni-media-image-fixtures-v1",
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "torchvision": torchvision.__version__,
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "resize_input_shape": list(RESIZE_INPUT_SHAPE),
        "resize_targets": [list(t) for t in RESIZE_TARGETS],
        "decoded_inputs": DECODE_INPUTS,
        "cases": cases,
    }
    with open(os.path.join(out_dir, "cases.json"), "w") as f:
        json.dump(meta, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    generate(sys.argv[1], sys.argv[2])
