"""HF fixture for 3-D M-RoPE position ids: transformers' Qwen3-VL and Qwen3-Omni thinker get_rope_index.

Builds synthetic token sequences (real Qwen3 special-token ids, random text ids, a few with VeOmni's -200/-300/-400
placeholders and with attention-mask padding), calls the real get_rope_index unbound on a SimpleNamespace `self`
(no model is built) and writes
  OUT_DIR/positions.safetensors  <case>.input_ids [L] i64, <case>.attention_mask [L] i64,
                                 <case>.position_ids [3, L] (i64 for qwen3_vl, f32 for qwen3_omni),
                                 <case>.rope_delta [1] (same dtype)
  OUT_DIR/positions.json         per case: model, token ids, grids, second_per_grid, audio lengths, flags;
                                 plus the transformers version and its config-class defaults for the record
MEDIA_DIR is not used (the inputs are synthetic); it is accepted for the common fixture-script interface.
Usage: python3 scripts/media_fixtures/positions.py MEDIA_DIR OUT_DIR
"""
import json
import os
import sys
from functools import partial
from types import SimpleNamespace

import numpy as np

VL_IDS = {"image_token_id": 151655, "video_token_id": 151656}
VISION_START, VISION_END = 151652, 151653
# Qwen3-Omni checkpoints' thinker_config (the Qwen3 tokenizer's <|audio_start|>, <|audio_end|>, <|audio_pad|>).
OMNI_IDS = {
    "image_token_id": 151655,
    "video_token_id": 151656,
    "audio_token_id": 151675,
    "vision_start_token_id": VISION_START,
    "audio_start_token_id": 151669,
}
AUDIO_END = 151670
# VeOmni's placeholders for image / video / audio tokens.
PLACEHOLDERS = {"image_token_id": -200, "video_token_id": -300, "audio_token_id": -400}
MERGE = 2

rng = np.random.default_rng(1234)


def text(n):
    return [int(t) for t in rng.integers(100, 5000, size=n)]


def vision_tokens(grid):
    t, h, w = grid
    return t * h * w // (MERGE * MERGE)


def audio_tokens(frames):
    # transformers' _get_feat_extract_output_lengths with n_window 50.
    leave = frames % 100
    feat = (leave - 1) // 2 + 1
    return ((feat - 1) // 2 + 1 - 1) // 2 + 1 + (frames // 100) * 13


# ---- Qwen3-VL ------------------------------------------------------------------------------------------------


def vl_image(grid, ids):
    return [VISION_START] + [ids["image_token_id"]] * vision_tokens(grid) + [VISION_END]


def vl_video(grid, ids):
    # One timestamp text ("<0.5 seconds>" stand-in ids) and one vision block per frame.
    out = []
    for _ in range(grid[0]):
        out += text(5) + [VISION_START] + [ids["video_token_id"]] * vision_tokens((1, grid[1], grid[2])) + [VISION_END]
    return out


def vl_cases():
    ids, sentinel = VL_IDS, dict(PLACEHOLDERS)
    del sentinel["audio_token_id"]
    cases = []

    def add(name, parts, images=(), videos=(), pad=(0, 0), token_ids=ids):
        seq = [0] * pad[0] + parts + [0] * pad[1]
        mask = [0] * pad[0] + [1] * len(parts) + [0] * pad[1]
        cases.append(dict(name=name, model="qwen3_vl", input_ids=seq, attention_mask=mask, image_grids=list(images),
                          video_grids=list(videos), token_ids=token_ids))

    add("vl_text_only", text(7))
    add("vl_one_image", text(5) + vl_image((1, 4, 4), ids) + text(3), images=[(1, 4, 4)])
    add("vl_two_images", text(3) + vl_image((1, 4, 8), ids) + text(2) + vl_image((1, 6, 4), ids) + text(4),
        images=[(1, 4, 8), (1, 6, 4)])
    add("vl_video_two_frames", text(4) + vl_video((2, 4, 6), ids) + text(2), videos=[(2, 4, 6)])
    add("vl_image_t2", text(2) + vl_image((2, 4, 4), ids) + text(2), images=[(2, 4, 4)])
    mixed_images, mixed_videos = [(1, 8, 4), (1, 4, 4)], [(3, 4, 6), (2, 6, 4)]
    for name, token_ids in (("vl_mixed_padded", ids), ("vl_mixed_placeholders", sentinel)):
        parts = (text(6) + vl_image(mixed_images[0], token_ids) + text(3) + vl_video(mixed_videos[0], token_ids)
                 + text(2) + vl_image(mixed_images[1], token_ids) + vl_video(mixed_videos[1], token_ids) + text(5))
        add(name, parts, images=mixed_images, videos=mixed_videos, pad=(3, 2), token_ids=token_ids)
    return cases


def run_vl(case):
    import torch
    from transformers import Qwen3VLConfig
    from transformers.models.qwen3_vl.modeling_qwen3_vl import Qwen3VLModel

    config = Qwen3VLConfig()
    assert config.vision_config.spatial_merge_size == MERGE
    me = SimpleNamespace(config=config, get_vision_position_ids=partial(Qwen3VLModel.get_vision_position_ids, None))
    input_ids = torch.tensor([case["input_ids"]], dtype=torch.long)
    # The processor's mm_token_type_ids: 1 on image tokens, 2 on video tokens (VeOmni builds it from -200/-300).
    types = torch.zeros_like(input_ids, dtype=torch.int32)
    types[input_ids == case["token_ids"]["image_token_id"]] = 1
    types[input_ids == case["token_ids"]["video_token_id"]] = 2
    grids = lambda g: torch.tensor(g, dtype=torch.long) if g else None  # noqa: E731
    position_ids, deltas = Qwen3VLModel.get_rope_index(
        me, input_ids, types, image_grid_thw=grids(case["image_grids"]), video_grid_thw=grids(case["video_grids"]),
        attention_mask=torch.tensor([case["attention_mask"]], dtype=torch.long))
    return position_ids[:, 0, :].numpy().astype(np.int64), deltas.reshape(1).numpy().astype(np.int64)


# ---- Qwen3-Omni ----------------------------------------------------------------------------------------------


def omni_image(grid, ids):
    return [ids["vision_start_token_id"]] + [ids["image_token_id"]] * vision_tokens(grid) + [VISION_END]


def omni_video(grid, ids):
    return [ids["vision_start_token_id"]] + [ids["video_token_id"]] * vision_tokens(grid) + [VISION_END]


def omni_audio(frames, ids):
    return [ids["audio_start_token_id"]] + [ids["audio_token_id"]] * audio_tokens(frames) + [AUDIO_END]


def omni_audio_in_video(grid, second_per_grid, frames, pps, ids):
    # The processor's interleaving: video tokens at t = k * second_per_grid * pps, audio at t = i; video first on ties.
    t, h, w = grid
    video_t = np.repeat(np.arange(t), (h // MERGE) * (w // MERGE)) * second_per_grid * pps
    audio_t = np.arange(audio_tokens(frames))
    merged, v, a = [], 0, 0
    while v < len(video_t) and a < len(audio_t):
        if video_t[v] <= audio_t[a]:
            merged.append(ids["video_token_id"])
            v += 1
        else:
            merged.append(ids["audio_token_id"])
            a += 1
    merged += [ids["video_token_id"]] * (len(video_t) - v) + [ids["audio_token_id"]] * (len(audio_t) - a)
    return [ids["vision_start_token_id"], ids["audio_start_token_id"]] + merged + [AUDIO_END, VISION_END]


def omni_cases():
    ids = OMNI_IDS
    placeholder_ids = dict(OMNI_IDS, **PLACEHOLDERS)
    cases = []

    def add(name, parts, images=(), videos=(), second_per_grid=(), audios=(), pad=(0, 0), token_ids=ids,
            use_audio_in_video=False, pps=13):
        seq = [0] * pad[0] + parts + [0] * pad[1]
        mask = [0] * pad[0] + [1] * len(parts) + [0] * pad[1]
        cases.append(dict(name=name, model="qwen3_omni", input_ids=seq, attention_mask=mask, image_grids=list(images),
                          video_grids=list(videos), video_second_per_grid=list(second_per_grid),
                          audio_feature_lengths=list(audios), token_ids=token_ids,
                          use_audio_in_video=use_audio_in_video, position_id_per_seconds=pps))

    add("omni_text_only_padded", text(9), pad=(2, 3))
    add("omni_audio_only", text(4) + omni_audio(230, ids) + text(3), audios=[230])
    add("omni_image_audio", text(5) + omni_image((1, 4, 4), ids) + text(3) + omni_audio(230, ids) + text(2),
        images=[(1, 4, 4)], audios=[230])
    add("omni_video", text(3) + omni_video((3, 4, 4), ids) + text(2), videos=[(3, 4, 4)], second_per_grid=[1.0])
    # fps 24: second_per_grid 2/24 is inexact in float32, so t positions are fractional and rounded.
    add("omni_video_fps24", text(3) + omni_video((4, 4, 6), ids) + text(4) + omni_video((2, 4, 4), ids) + text(1),
        videos=[(4, 4, 6), (2, 4, 4)], second_per_grid=[2 / 24, 2 / 3])
    add("omni_audio_in_video", text(4) + omni_audio_in_video((3, 4, 4), 1.0, 250, 13, ids) + text(3),
        videos=[(3, 4, 4)], second_per_grid=[1.0], audios=[250], use_audio_in_video=True)
    # Audio shorter than the video's height: the audio tail is the last chunk, so the end block starts at its
    # max + 1, below the video's largest h/w position.
    add("omni_audio_in_video_short_audio", text(2) + omni_audio_in_video((1, 8, 8), 1.0, 10, 13, ids) + text(2),
        videos=[(1, 8, 8)], second_per_grid=[1.0], audios=[10], use_audio_in_video=True)
    # Audio longer than the video (the audio tail is the last chunk), fractional seconds, padding, an image first.
    parts = (text(3) + omni_image((1, 4, 8), ids) + text(2) + omni_audio_in_video((2, 4, 4), 2 / 24, 420, 13, ids)
             + text(2) + omni_audio(100, ids) + text(2))
    add("omni_audio_in_video_mixed", parts, images=[(1, 4, 8)], videos=[(2, 4, 4)], second_per_grid=[2 / 24],
        audios=[420, 100], use_audio_in_video=True, pad=(2, 1))
    # VeOmni's transform: image/video/audio pads replaced by -200/-300/-400 before get_rope_index.
    parts = (text(2) + omni_audio_in_video((3, 4, 4), 0.5, 180, 25, placeholder_ids) + text(2)
             + omni_image((1, 4, 4), placeholder_ids) + text(1))
    add("omni_placeholders_pps25", parts, images=[(1, 4, 4)], videos=[(3, 4, 4)], second_per_grid=[0.5],
        audios=[180], use_audio_in_video=True, token_ids=placeholder_ids, pps=25)
    parts = (text(4) + omni_video((2, 8, 4), ids) + text(2) + omni_audio(333, ids) + text(1)
             + omni_image((1, 4, 4), ids) + text(3))
    add("omni_mixed_padded", parts, images=[(1, 4, 4)], videos=[(2, 8, 4)], second_per_grid=[1.0], audios=[333],
        pad=(3, 2))
    return cases


def run_omni(case):
    import torch
    from transformers.models.qwen3_omni_moe.modeling_qwen3_omni_moe import (
        Qwen3OmniMoePreTrainedModelForConditionalGeneration as Omni,
    )

    config = SimpleNamespace(**case["token_ids"], position_id_per_seconds=case["position_id_per_seconds"],
                             audio_config=SimpleNamespace(n_window=50))
    me = SimpleNamespace(config=config, spatial_merge_size=MERGE,
                         get_llm_pos_ids_for_vision=partial(Omni.get_llm_pos_ids_for_vision, None))
    grids = lambda g: torch.tensor(g, dtype=torch.long) if g else None  # noqa: E731
    position_ids, deltas = Omni.get_rope_index(
        me,
        torch.tensor([case["input_ids"]], dtype=torch.long),
        image_grid_thw=grids(case["image_grids"]),
        video_grid_thw=grids(case["video_grids"]),
        attention_mask=torch.tensor([case["attention_mask"]], dtype=torch.long),
        use_audio_in_video=case["use_audio_in_video"],
        audio_seqlens=torch.tensor(case["audio_feature_lengths"], dtype=torch.long) if case["audio_feature_lengths"]
        else None,
        # The processor returns video_second_per_grid as a list of floats; return_tensors="pt" makes it float32.
        second_per_grids=torch.tensor(case["video_second_per_grid"]) if case["video_second_per_grid"] else None)
    return (position_ids[:, 0, :].numpy().astype(np.float32), deltas.reshape(1).numpy().astype(np.float32))


def config_defaults():
    import transformers
    from transformers import Qwen3VLConfig
    from transformers.models.qwen3_omni_moe.configuration_qwen3_omni_moe import Qwen3OmniMoeThinkerConfig

    vl, thinker = Qwen3VLConfig(), Qwen3OmniMoeThinkerConfig()
    keys = ["image_token_id", "video_token_id", "audio_token_id", "vision_start_token_id", "audio_start_token_id",
            "position_id_per_seconds"]
    return {
        "transformers_version": transformers.__version__,
        "qwen3_vl_config_defaults": {k: getattr(vl, k, None) for k in keys[:2] + ["vision_start_token_id"]},
        "qwen3_omni_thinker_config_defaults": {k: getattr(thinker, k, None) for k in keys},
    }


def generate(media_dir, out_dir):
    from safetensors.numpy import save_file

    del media_dir
    os.makedirs(out_dir, exist_ok=True)
    tensors, records = {}, []
    for case in vl_cases() + omni_cases():
        run = run_vl if case["model"] == "qwen3_vl" else run_omni
        position_ids, delta = run(case)
        name = case["name"]
        tensors[f"{name}.input_ids"] = np.asarray(case.pop("input_ids"), dtype=np.int64)
        tensors[f"{name}.attention_mask"] = np.asarray(case.pop("attention_mask"), dtype=np.int64)
        tensors[f"{name}.position_ids"] = np.ascontiguousarray(position_ids)
        tensors[f"{name}.rope_delta"] = delta
        case["image_grids"] = [list(g) for g in case["image_grids"]]
        case["video_grids"] = [list(g) for g in case["video_grids"]]
        records.append(case)
        print(f"{name}: L {tensors[f'{name}.input_ids'].size}, rope_delta {delta[0]}")
    save_file(tensors, os.path.join(out_dir, "positions.safetensors"))
    with open(os.path.join(out_dir, "positions.json"), "w") as f:
        json.dump(dict(config_defaults(), cases=records), f, indent=1)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    generate(sys.argv[1], sys.argv[2])
