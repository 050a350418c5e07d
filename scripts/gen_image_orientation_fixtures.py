#!/usr/bin/env python3
"""HF reference outputs for the EXIF-orientation and CMYK/YCCK image tests (tests/fixtures/media/orientation/):
every image written by make_exif_cmyk_images (tests/fixtures/media/inputs/image_exif_*, image_xmp_*,
image_png_exif_*, image_cmyk_*, image_ycck_*) opened with transformers' own load_image (PIL's Image.open,
ImageOps.exif_transpose, convert("RGB")) and run through the Qwen2VLImageProcessor (torchvision backend) that
Qwen3-VL uses, built as scripts/media_fixtures/image.py builds it.

Writes to tests/fixtures/media/orientation/:
  decoded.safetensors   one uint8 [H, W, 3] tensor per input: load_image(path) as a numpy array
  <case>.safetensors    pixel_values (float32, every `row_stride`-th row) and image_grid_thw (int64 [1, 3])
  cases.json            the cases, their processor settings, the displayed sizes and the library versions

Usage (from the repository root, on a machine with transformers 5.17, torch, torchvision, PIL >= 11.2.1 (reads
XMP orientation from JPEG), numpy and safetensors):
  python3 scripts/gen_image_orientation_fixtures.py
checked by MediaOrientationFixtures.MatchTransformersLoadImage (tests/unit/test_media_orientation.cc).
Any failure raises: nothing is written unless every case ran.
"""
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MEDIA_DIR = os.path.join(ROOT, "tests", "fixtures", "media", "inputs")
OUT_DIR = os.path.join(ROOT, "tests", "fixtures", "media", "orientation")
sys.path.insert(0, os.path.join(HERE, "media_fixtures"))

from image import QWEN3_VL, SMALL, make_processor  # noqa: E402  (the settings of the existing image fixtures)

SIZE = "40x64"  # displayed height x width of every input
INPUTS = (
    [f"image_exif_orient{k}_{SIZE}.jpg" for k in range(1, 9)]
    + [f"image_exif_be_orient{k}_{SIZE}.jpg" for k in (3, 6, 8)]
    + [
        f"image_exif_cut_orient6_{SIZE}.jpg",
        f"image_exif_badheader_{SIZE}.jpg",
        f"image_xmp_orient6_{SIZE}.jpg",
        f"image_png_exif_orient6_{SIZE}.png",
        f"image_cmyk_adobe_{SIZE}.jpg",
        f"image_cmyk_plain_{SIZE}.jpg",
        f"image_ycck_{SIZE}.jpg",
        f"image_ycck_orient8_{SIZE}.jpg",
    ]
)

# Every input with the small limits (40x64 -> 64x96, 24 rows, every 4th kept), and the rotated JPEG with Qwen3-VL's
# own limits (-> 224x352, 308 rows, every 16th kept): the grid [1, 14, 22], not [1, 22, 14].
CASES = [(os.path.splitext(name)[0].removeprefix("image_") + "_small", name, SMALL, 4) for name in INPUTS] + [
    (f"exif_orient6_{SIZE}_qwen3vl", f"image_exif_orient6_{SIZE}.jpg", QWEN3_VL, 16),
]


def load(name):
    from transformers.image_utils import load_image

    path = os.path.join(MEDIA_DIR, name)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path} is missing: build make_exif_cmyk_images and run it on {MEDIA_DIR}")
    image = load_image(path)
    if image.mode != "RGB":
        raise RuntimeError(f"load_image({name}) gave mode {image.mode}, not RGB")
    return image


def run_case(name, input_name, limits, row_stride):
    processor = make_processor(limits)
    result = processor(images=[load(input_name)], return_tensors="pt")
    pixel_values = result["pixel_values"].numpy().astype(np.float32)
    grid = result["image_grid_thw"].numpy().astype(np.int64)
    tensors = {"pixel_values": np.ascontiguousarray(pixel_values[::row_stride]), "image_grid_thw": grid}
    record = {
        "name": name,
        "input": input_name,
        "min_pixels": limits["min_pixels"],
        "max_pixels": limits["max_pixels"],
        "row_stride": row_stride,
        "rows": int(pixel_values.shape[0]),
        "image_grid_thw": grid.reshape(-1).tolist(),
        "processor_class": type(processor).__name__,
    }
    return tensors, record


def check_versions():
    import PIL
    import torch
    import torchvision
    import transformers

    pil = tuple(int(p) for p in PIL.__version__.split(".")[:3] if p.isdigit())
    if pil < (11, 2, 1):
        raise SystemExit(f"PIL {PIL.__version__} is older than 11.2.1, which reads XMP orientation from JPEG; "
                         "the C++ decoder follows the newer rule")
    if not transformers.__version__.startswith("5."):
        print(f"WARNING: transformers {transformers.__version__}, the fixtures are meant for 5.17", file=sys.stderr)
    return {
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "torchvision": torchvision.__version__,
        "PIL": PIL.__version__,
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
    }


def main():
    from safetensors.numpy import save_file

    versions = check_versions()
    print("versions:", json.dumps(versions))
    decoded, displayed = {}, {}
    for name in INPUTS:
        array = np.ascontiguousarray(np.asarray(load(name), dtype=np.uint8))
        decoded[name] = array
        displayed[name] = list(array.shape[:2])
        if displayed[name] != [40, 64]:
            print(f"WARNING: load_image({name}) is {array.shape[0]}x{array.shape[1]}, not the 40x64 the C++ tests "
                  "expect", file=sys.stderr)
    outputs, records = {}, []
    for case in CASES:
        tensors, record = run_case(*case)
        outputs[record["name"]] = tensors
        records.append(record)
        print(f"{record['name']}: {case[1]} grid {record['image_grid_thw']}, {record['rows']} rows")

    os.makedirs(OUT_DIR, exist_ok=True)
    written = [os.path.join(OUT_DIR, "decoded.safetensors")]
    save_file(decoded, written[0])
    for name, tensors in outputs.items():
        written.append(os.path.join(OUT_DIR, f"{name}.safetensors"))
        save_file(tensors, written[-1])
    meta = dict(format="veomni-media-orientation-fixtures-v1", **versions, inputs=INPUTS, displayed=displayed,
                cases=records)
    written.append(os.path.join(OUT_DIR, "cases.json"))
    with open(written[-1], "w") as f:
        json.dump(meta, f, indent=2)
        f.write("\n")
    total = sum(os.path.getsize(p) for p in written)
    for path in written:
        print("wrote", os.path.relpath(path, ROOT))
    print(f"{len(written)} files, {total / 1e6:.2f} MB")


if __name__ == "__main__":
    main()
