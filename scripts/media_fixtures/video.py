#!/usr/bin/env python3
"""Expected Qwen video preprocessing from transformers (5.17) for the test videos, and tables of its sampling and
resize arithmetic. Run on the GPU machine, which cannot decode video in Python: the frames come from the raw RGB24
dumps that scripts/media_fixtures/make_video_media.sh writes beside each video (with ffprobe's fps and frame count),
and HF samples them itself from that metadata.

Usage: python3 scripts/media_fixtures/video.py MEDIA_DIR OUT_DIR   (MEDIA_DIR: tests/fixtures/media/inputs)
Writes OUT_DIR/case_<name>.safetensors (pixel_values_videos as float16, video_grid_thw, frame_indices),
OUT_DIR/case_<name>.json (metadata, timestamps, texts) and OUT_DIR/tables.json.
"""
import json
import math
import os
import sys

import numpy as np
import transformers
from safetensors.numpy import save_file
from transformers.models.qwen2_vl.video_processing_qwen2_vl import Qwen2VLVideoProcessor
from transformers.models.qwen3_vl.processing_qwen3_vl import Qwen3VLProcessor
from transformers.models.qwen3_vl.video_processing_qwen3_vl import Qwen3VLVideoProcessor
from transformers.models.qwen3_vl.video_processing_qwen3_vl import smart_resize as qwen3_vl_video_smart_resize
from transformers.video_utils import VideoMetadata

# name -> (input video stem, Qwen3VLVideoProcessor constructor arguments)
CASES = {
    # class defaults: 30 frames at 10 fps -> 6 sampled, upscaled to the 131072-pixel minimum over t*h*w
    "h264_default": ("video_h264", {}),
    # 25 frames -> 5 sampled (patchify repeats the last), shrunk under a small longest_edge (antialiased bicubic)
    "vp9_small": ("video_vp9", {"size": {"shortest_edge": 1024, "longest_edge": 6144}}),
}

SAMPLING_FRAME_COUNTS = [1, 2, 3, 4, 5, 7, 10, 11, 25, 29, 30, 31, 59, 61, 100, 997, 1800, 5000, 20000]
SAMPLING_VIDEO_FPS = [10.0, 24000 / 1001, 25.0, 30000 / 1001, 60.0]
SAMPLING_TARGET_FPS = [2.0, 1.0, 3.0]
SAMPLING_FRAME_LIMITS = [(4, 768), (4, 16)]

RESIZE_CASES = [  # (num_frames, height, width, min_pixels, max_pixels)
    (t, h, w, lo, hi)
    for t in (2, 3, 5, 6, 16, 64, 768)
    for (h, w) in ((48, 64), (40, 56), (360, 640), (1080, 1920), (20, 300), (31, 33), (720, 1280), (17, 4000))
    for (lo, hi) in ((128 * 32 * 32, 768 * 32 * 32), (4096, 25165824), (1024, 6144))
] + [(1, 64, 64, 4096, 786432), (4, 10, 2500, 4096, 786432)]

TIMESTAMP_CASES = [  # (frame indices, video fps)
    ([0, 6, 12, 17, 23, 29], 10.0),
    ([0, 6, 12, 18, 24], 10.0),
    ([0, 1, 2, 3, 4, 5, 6], 30000 / 1001),
    ([0, 5, 10, 15], 24.0),
    ([3], 4.0),
    ([0, 12, 25, 37, 50, 62, 75, 87, 99], 25.0),
    (list(range(0, 1500, 7)), 24000 / 1001),
]


def read_frames(media_dir, stem):
    with open(os.path.join(media_dir, stem + ".json")) as f:
        meta = json.load(f)
    raw = np.fromfile(os.path.join(media_dir, meta["raw_rgb"]), dtype=np.uint8)
    frames = raw.reshape(meta["num_frames"], meta["height"], meta["width"], 3)
    return frames, meta


def video_metadata(meta):
    """HF's VideoMetadata for a clip described by its .json dump (the decoder's frame count, rate and size)."""
    return VideoMetadata(
        total_num_frames=meta["num_frames"],
        fps=meta["fps"],
        width=meta["width"],
        height=meta["height"],
        duration=meta["num_frames"] / meta["fps"],
    )


def run_case(media_dir, out_dir, name, stem, init_kwargs):
    frames, meta = read_frames(media_dir, stem)
    processor = Qwen3VLVideoProcessor(**init_kwargs)
    metadata = video_metadata(meta)
    out = processor(
        videos=[frames],
        video_metadata=[metadata],
        do_sample_frames=True,
        return_metadata=True,
        cap_pixels_per_frame=False,
        return_tensors="pt",
    )
    sampled = out["video_metadata"][0]
    indices = [int(i) for i in np.asarray(sampled.frames_indices).tolist()]
    timestamps = Qwen3VLProcessor._calculate_timestamps(None, list(indices), meta["fps"], processor.temporal_patch_size)
    pixel_values = out["pixel_values_videos"].numpy()
    save_file(
        {
            "pixel_values_videos": pixel_values.astype(np.float16),
            "video_grid_thw": out["video_grid_thw"].numpy().astype(np.int64),
            "frame_indices": np.asarray(indices, dtype=np.int64),
        },
        os.path.join(out_dir, f"case_{name}.safetensors"),
    )
    info = {
        "input": meta["file"],
        "processor_kwargs": init_kwargs,
        "size": dict(processor.size) if not isinstance(processor.size, dict) else processor.size,
        "fps": processor.fps,
        "min_frames": processor.min_frames,
        "max_frames": processor.max_frames,
        "temporal_patch_size": processor.temporal_patch_size,
        "video_fps": meta["fps"],
        "num_frames": meta["num_frames"],
        "frame_indices": indices,
        "timestamps": timestamps,
        "timestamp_texts": [f"<{t:.1f} seconds>" for t in timestamps],
        "pixel_values_shape": list(pixel_values.shape),
        "pixel_values_dtype_stored": "float16",
    }
    with open(os.path.join(out_dir, f"case_{name}.json"), "w") as f:
        json.dump(info, f, indent=1)
    print(name, "grid", out["video_grid_thw"].tolist(), "indices", indices, "pixel_values", pixel_values.shape)


def sampled_or_none(sample):
    try:
        return [int(i) for i in np.asarray(sample()).tolist()]
    except (ValueError, ZeroDivisionError):
        return None


def sampling_table():
    rows = []
    for rule in ("qwen3_vl", "qwen2_vl"):
        for min_frames, max_frames in SAMPLING_FRAME_LIMITS:
            if rule == "qwen3_vl":
                processor = Qwen3VLVideoProcessor(min_frames=min_frames, max_frames=max_frames)
            else:
                processor = Qwen2VLVideoProcessor(
                    patch_size=16, merge_size=2, temporal_patch_size=2, min_frames=min_frames, max_frames=max_frames
                )
            for n in SAMPLING_FRAME_COUNTS:
                if n > 1800 and max_frames > 16:  # long index lists would bloat the fixture
                    continue
                for video_fps in SAMPLING_VIDEO_FPS:
                    for fps in SAMPLING_TARGET_FPS:
                        metadata = VideoMetadata(total_num_frames=n, fps=video_fps)
                        indices = sampled_or_none(lambda: processor.sample_frames(metadata, fps=fps))
                        rows.append(
                            {
                                "rule": rule,
                                "num_frames": n,
                                "video_fps": video_fps,
                                "fps": fps,
                                "min_frames": min_frames,
                                "max_frames": max_frames,
                                "temporal_patch_size": 2,
                                "indices": indices,
                            }
                        )
    return rows


def resize_table():
    rows = []
    for t, h, w, lo, hi in RESIZE_CASES:
        try:
            resized = qwen3_vl_video_smart_resize(t, h, w, temporal_factor=2, factor=32, min_pixels=lo, max_pixels=hi)
            shape = list(resized)
        except ValueError:
            shape = None
        rows.append({"num_frames": t, "height": h, "width": w, "min_pixels": lo, "max_pixels": hi, "resized": shape})
    return rows


def timestamp_table():
    rows = []
    for indices, video_fps in TIMESTAMP_CASES:
        timestamps = Qwen3VLProcessor._calculate_timestamps(None, list(indices), video_fps, 2)
        rows.append(
            {
                "indices": indices,
                "video_fps": video_fps,
                "merge_size": 2,
                "timestamps": timestamps,
                "texts": [f"<{t:.1f} seconds>" for t in timestamps],
            }
        )
    for t in (0.0, 0.05, 0.15, 0.25, 0.35, 0.45, 1.25, 2.55, 9.95, 12.345, 99.99, 100.05, 1234.5678, math.pi):
        rows.append({"seconds": t, "text": f"<{t:.1f} seconds>"})
    return rows


def generate(media_dir: str, out_dir: str):
    os.makedirs(out_dir, exist_ok=True)
    for name, (stem, init_kwargs) in CASES.items():
        run_case(media_dir, out_dir, name, stem, init_kwargs)
    tables = {
        "transformers_version": transformers.__version__,
        "sampling": sampling_table(),
        "video_smart_resize": resize_table(),
        "timestamps": timestamp_table(),
    }
    with open(os.path.join(out_dir, "tables.json"), "w") as f:
        json.dump(tables, f)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: video.py MEDIA_DIR OUT_DIR")
    generate(sys.argv[1], sys.argv[2])
