"""HF fixture for audio features: transformers' WhisperFeatureExtractor as the Qwen3-Omni processor calls it.

Reads tests/fixtures/media/inputs/audio_speech_16k_mono.wav with Python's wave module (the GPU machine has no audio
decoding libraries), runs the feature extractor once per clip with the processor's audio kwargs and writes
  OUT_DIR/whisper_features.safetensors  mel_filters [128, 201] and <case>.input_features [frames, 128] (f32)
  OUT_DIR/whisper_features.json         per case: samples, feature length (attention-mask sum), audio tokens
Usage: python3 scripts/media_fixtures/audio.py MEDIA_DIR OUT_DIR
"""
import json
import os
import sys
import wave

import numpy as np

CLIP = "audio_speech_16k_mono.wav"
# (case name, leading samples taken from the clip; None = all): the whole clip (not a multiple of the hop length),
# an exact number of hops, and a short odd length.
CASES = [("speech_full", None), ("speech_16000", 16000), ("speech_4321", 4321)]


def read_wav_16k_mono(path):
    with wave.open(path, "rb") as w:
        if (w.getnchannels(), w.getsampwidth(), w.getframerate()) != (1, 2, 16000):
            raise ValueError(f"{path}: expected 16 kHz mono 16-bit PCM")
        pcm = w.readframes(w.getnframes())
    # libsndfile's float conversion of 16-bit PCM: sample / 32768.
    return np.frombuffer(pcm, dtype="<i2").astype(np.float32) / np.float32(32768.0)


def qwen3_omni_feature_extractor():
    from transformers import WhisperFeatureExtractor

    # Qwen3-Omni's preprocessor_config.json: Whisper features with 128 mel bins, 300 s chunks, no dither.
    return WhisperFeatureExtractor(
        feature_size=128,
        sampling_rate=16000,
        hop_length=160,
        chunk_length=300,
        n_fft=400,
        padding_value=0.0,
        dither=0.0,
        return_attention_mask=True,
    )


def processor_audio_kwargs():
    from transformers.models.qwen3_omni_moe.processing_qwen3_omni_moe import Qwen3OmniMoeProcessorKwargs

    # What Qwen3OmniMoeProcessor.__call__ passes to the feature extractor (no user overrides); it pops n_window
    # (the audio encoder's window, for the token count) first.
    audio_kwargs = dict(Qwen3OmniMoeProcessorKwargs._defaults["audio_kwargs"])
    n_window = audio_kwargs.pop("n_window", 50)
    return audio_kwargs, n_window


def audio_token_count(feature_length, n_window):
    from transformers.models.qwen3_omni_moe.processing_qwen3_omni_moe import _get_feat_extract_output_lengths

    return int(_get_feat_extract_output_lengths(np.array([feature_length]), n_window)[0])


def features_of(extractor, clips, audio_kwargs):
    """input_features [frames, 128] of each clip, cut to its attention-mask length, from one extractor call."""
    out = extractor(clips, return_tensors="np", **audio_kwargs)
    lengths = out["attention_mask"].sum(-1)
    return [np.ascontiguousarray(f[:, :n].T.astype(np.float32)) for f, n in zip(out["input_features"], lengths)]


def generate(media_dir, out_dir):
    import transformers
    from safetensors.numpy import save_file

    os.makedirs(out_dir, exist_ok=True)
    samples = read_wav_16k_mono(os.path.join(media_dir, CLIP))
    extractor = qwen3_omni_feature_extractor()
    audio_kwargs, n_window = processor_audio_kwargs()

    tensors = {"mel_filters": np.ascontiguousarray(extractor.mel_filters.T.astype(np.float32))}
    cases = []
    clips = {}
    for name, count in CASES:
        clip = samples if count is None else samples[:count]
        clips[name] = clip
        (features,) = features_of(extractor, clip, audio_kwargs)  # one clip per call, as we preprocess
        tensors[f"{name}.input_features"] = features
        cases.append(
            {
                "name": name,
                "num_samples": int(clip.shape[0]),
                "feature_length": int(features.shape[0]),
                "audio_tokens": audio_token_count(features.shape[0], n_window),
            }
        )

    # For the record only (our features are per clip): a padded batch of two clips, and the NumPy path.
    short = clips["speech_4321"]
    batched = features_of(extractor, [samples, short], audio_kwargs)
    single = tensors["speech_4321.input_features"]
    numpy_path = extractor._np_extract_fbank_features(samples[None, :], "cpu")[0].T
    common = min(batched[1].shape[0], single.shape[0])
    checks = {
        "batched_short_clip_length": int(batched[1].shape[0]),
        "single_short_clip_length": int(single.shape[0]),
        "batched_short_clip_max_abs_diff_vs_single": float(np.abs(batched[1][:common] - single[:common]).max()),
        "batched_short_clip_max_abs_diff_vs_single_but_last_2_frames": float(
            np.abs(batched[1][: common - 2] - single[: common - 2]).max()
        ),
        "numpy_path_max_abs_diff_vs_torch_path": float(
            np.abs(numpy_path - tensors["speech_full.input_features"]).max()
        ),
    }

    save_file(tensors, os.path.join(out_dir, "whisper_features.safetensors"))
    meta = {
        "format": "veomni-media-audio-fixture/1",
        "transformers_version": transformers.__version__,
        "source": CLIP,
        "audio_kwargs": audio_kwargs,
        "n_window": n_window,
        "cases": cases,
        "checks": checks,
    }
    with open(os.path.join(out_dir, "whisper_features.json"), "w") as f:
        json.dump(meta, f, indent=2, sort_keys=True)
        f.write("\n")
    print(json.dumps(meta, indent=2, sort_keys=True))


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    generate(sys.argv[1], sys.argv[2])
