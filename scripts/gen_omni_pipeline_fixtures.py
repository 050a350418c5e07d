#!/usr/bin/env python3
"""Generates the HuggingFace reference fixture of Qwen3-Omni's whole speaking pipeline (run where torch +
transformers 5.17 are installed; CPU, fp32, deterministic): thinker -> talker -> code2wav, as
Qwen3OmniMoeForConditionalGeneration.generate(..., return_audio=True) runs them.

The model: the thinker of configs/model_configs/qwen3_omni_moe_toy (hidden 64) with its vocabulary cut to
THINKER_VOCAB and the chat / tts / multimodal special ids moved inside it, plus the talker, code predictor and code2wav
shrunk as scripts/gen_omni_speech_fixtures.py shrinks them (talker thinker_hidden_size set to the thinker's width).
Every parameter gets seeded random values; the code predictor's lm heads are scaled up so that its sampling (generate
always samples it, top_k 50, top_p 0.8) leaves one candidate: the residual codes are the argmax, whatever the random
stream; code2wav's last convolution is scaled so that the waveform stays inside [-1, 1] unclamped. The script
checks that (two runs under different torch seeds and one with a greedy code predictor must give
the same codes) and, if a weight seed misses it, the waveform comes near clamping or the talker stops before
MIN_FRAMES frames, tries the next seed.

For each prompt (ids built as the chat template would: <|im_start|>role\\n ... <|im_end|>\\n, ending with
<|im_start|>assistant\\n), generate runs greedy for the thinker (thinker_do_sample=False, eos <|im_end|>) and the
talker (talker_do_sample=False; repetition penalty 1.05, suppressed tokens, as generate's defaults), with the
prompt's speaker. Written under tests/fixtures/omni_pipeline/:
  model/config.json, model/model.safetensors   the HF directory (state_dict names, experts stacked)
  expected.safetensors   prompt{i}.input_ids i64 [P], prompt{i}.sequences i64 [P + new] (the thinker's output),
                         prompt{i}.codes i64 [frames, num_code_groups], prompt{i}.waveform f32 [samples]
  expected.json          prompts (ids, speaker), thinker/talker settings, the special ids, facts, versions
tests/unit/test_omni_pipeline.cc compares veomni's pipeline against them.
Usage: python3 scripts/gen_omni_pipeline_fixtures.py [--out DIR] [--seed N]
"""
import argparse
import copy
import functools
import json
import os
import sys

import torch
import transformers
from safetensors.torch import save_file
from transformers.models.qwen3_omni_moe import modeling_qwen3_omni_moe as omni
from transformers.models.qwen3_omni_moe.configuration_qwen3_omni_moe import Qwen3OmniMoeConfig

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_omni_speech_fixtures import shrink  # noqa: E402

THINKER_VOCAB = 1024
CODEBOOK = 256
THINKER_MAX_NEW_TOKENS = 6
TALKER_MAX_NEW_TOKENS = 10
MIN_FRAMES = 3
WAVEFORM_PEAK = 0.3  # code2wav's peak on random codes after quiet_code2wav
PREDICTOR_HEAD_SCALE = 300.0
# top_p 0.8 keeps only the top candidate once its probability is above 0.8; the margin covers the temperature.
MIN_TOP_PROB = 0.9
SEED_TRIES = 20
# Special ids inside the small vocabulary (the real model's are 151644...; only their roles matter here).
SPECIAL = {
    "im_start_token_id": 1000, "im_end_token_id": 1001, "system_token_id": 1002, "user_token_id": 1003,
    "assistant_token_id": 1004, "tts_pad_token_id": 1005, "tts_bos_token_id": 1006, "tts_eos_token_id": 1007,
}
THINKER_SPECIAL = {
    "audio_token_id": 1010, "audio_start_token_id": 1011, "audio_end_token_id": 1012, "image_token_id": 1013,
    "video_token_id": 1014, "vision_start_token_id": 1015, "vision_end_token_id": 1016, "user_token_id": 1003,
}
NEWLINE = 198
RECORDED = {}  # what the hooks below saw: the codes handed to code2wav, the code predictor's smallest top probability


def pipeline_config(thinker_path, speech_path):
    """The thinker toy with a small vocabulary, and the shrunk speech stages fed by it."""
    with open(thinker_path) as f:
        thinker_toy = json.load(f)
    with open(speech_path) as f:
        d = shrink(json.load(f))
    d["thinker_config"] = copy.deepcopy(thinker_toy["thinker_config"])
    d["thinker_config"].update(THINKER_SPECIAL)
    d["thinker_config"]["text_config"]["vocab_size"] = THINKER_VOCAB
    d.update(SPECIAL)
    d["enable_audio_output"] = True
    d["dtype"] = "float32"
    talker = d["talker_config"]
    talker["thinker_hidden_size"] = d["thinker_config"]["text_config"]["hidden_size"]
    talker["accept_hidden_layer"] = 1
    for key in ("audio_token_id", "audio_start_token_id", "audio_end_token_id", "image_token_id", "video_token_id",
                "vision_start_token_id"):
        if key in talker:
            talker[key] = THINKER_SPECIAL[key]
    # Small codec vocabularies keep the fixture small: code2wav's codebooks hold CODEBOOK codes, and the talker's
    # vocabulary those codes plus the 1024 ids generate suppresses, its special ids (codec control tokens, speakers)
    # moved down inside them by one offset. The vision tower's position table shrinks too (text-only prompts).
    shift = talker["text_config"]["vocab_size"] - (CODEBOOK + 1024)
    talker["text_config"]["vocab_size"] = CODEBOOK + 1024
    for key in ("codec_pad_id", "codec_bos_id", "codec_eos_token_id", "codec_nothink_id", "codec_think_bos_id",
                "codec_think_eos_id"):
        talker[key] -= shift
    talker["speaker_id"] = {name: token - shift for name, token in talker["speaker_id"].items()}
    d["code2wav_config"]["codebook_size"] = CODEBOOK
    d["thinker_config"]["vision_config"]["num_position_embeddings"] = 64
    return d


def chat_ids(messages):
    """<|im_start|>role\\n content <|im_end|>\\n per message, then <|im_start|>assistant\\n."""
    roles = {"system": SPECIAL["system_token_id"], "user": SPECIAL["user_token_id"]}
    ids = []
    for role, content in messages:
        ids += [SPECIAL["im_start_token_id"], roles[role], NEWLINE] + content + [SPECIAL["im_end_token_id"], NEWLINE]
    return ids + [SPECIAL["im_start_token_id"], SPECIAL["assistant_token_id"], NEWLINE]


PROMPTS = [
    {"speaker": "Ethan", "messages": [("user", [17, 345, 92, 611, 8])]},
    {"speaker": "Chelsie", "messages": [("system", [40, 41, 42]), ("user", [703, 5, 260, 19, 884, 301, 77])]},
]


def seeded_weights(module, generator):
    """As gen_omni_speech_fixtures.seeded_weights (matrices scaled by 1/sqrt(fan_in), norms around 1, small
    vectors), scalars included."""
    with torch.no_grad():
        for name, p in module.named_parameters():
            noise = torch.randn(p.shape, generator=generator, dtype=torch.float32)
            if p.dim() <= 1 and "norm" in name:
                p.copy_(1.0 + 0.1 * noise)
            elif p.dim() <= 1:
                p.copy_(0.1 * noise)
            else:
                p.copy_(noise / p[0].numel() ** 0.5)


def watch_predictor_confidence(model):
    """Records the smallest top probability any code predictor head gives (our sampler must see one candidate too,
    so the margin must be wide, not just enough for transformers' top-p)."""
    def hook(module, inputs, output):
        top = torch.softmax(output.float(), dim=-1).amax(dim=-1).min().item()
        RECORDED["min_top_prob"] = min(RECORDED.get("min_top_prob", 1.0), top)
    for head in model.talker.code_predictor.lm_head:
        head.register_forward_hook(hook)


def build(config, seed):
    generator = torch.Generator().manual_seed(seed)
    model = omni.Qwen3OmniMoeForConditionalGeneration._from_config(config, attn_implementation="eager")
    model = model.to(torch.float32).eval()
    seeded_weights(model, generator)
    with torch.no_grad():
        for head in model.talker.code_predictor.lm_head:
            head.weight.mul_(PREDICTOR_HEAD_SCALE)
    quiet_code2wav(model.code2wav, generator)
    return model


def quiet_code2wav(code2wav, generator):
    """Scales code2wav's last convolution so that its waveform stays well inside [-1, 1]: random weights give an
    amplitude far beyond it, which clamping flattens to a square wave whose few unclamped samples are steep
    crossings where float32 rounding differences grow to 1e-3."""
    last = code2wav.decoder[-1].conv
    seen = {}
    handle = last.register_forward_hook(lambda module, inputs, output: seen.update(peak=output.abs().max().item()))
    config = code2wav.config
    codes = torch.randint(0, config.codebook_size, (1, config.num_quantizers, 16), generator=generator)
    with torch.no_grad():
        code2wav(codes)
        handle.remove()
        scale = WAVEFORM_PEAK / max(seen["peak"], 1e-6)
        last.weight.mul_(scale)
        if last.bias is not None:
            last.bias.mul_(scale)


def generate(model, prompt, torch_seed, greedy_predictor=False):
    torch.manual_seed(torch_seed)
    input_ids = torch.tensor([chat_ids(prompt["messages"])], dtype=torch.long)
    predictor = model.talker.code_predictor
    original = predictor.generate
    if greedy_predictor:
        def greedy(*args, **kwargs):
            kwargs.update(do_sample=False, top_k=None, top_p=None)
            return original(*args, **kwargs)
        predictor.generate = greedy
    try:
        with torch.no_grad():
            thinker, wav = model.generate(
                input_ids=input_ids, attention_mask=torch.ones_like(input_ids), speaker=prompt["speaker"],
                return_audio=True, thinker_max_new_tokens=THINKER_MAX_NEW_TOKENS, thinker_do_sample=False,
                thinker_eos_token_id=SPECIAL["im_end_token_id"], talker_max_new_tokens=TALKER_MAX_NEW_TOKENS,
                talker_do_sample=False)
    finally:
        predictor.generate = original
    # generate returns the thinker's sequences as a tensor, or its output object with return_dict_in_generate
    sequences = thinker if isinstance(thinker, torch.Tensor) else thinker.sequences
    return input_ids[0], sequences[0], RECORDED["codes"], wav.reshape(-1).float()


def record_talker_codes(model):
    """Keeps the codes generate hands code2wav ([1, groups, frames] -> [frames, groups])."""
    code2wav = model.code2wav
    original = code2wav.chunked_decode

    @functools.wraps(original)
    def chunked_decode(codes, *args, **kwargs):
        RECORDED["codes"] = codes[0].T.contiguous().clone()
        return original(codes, *args, **kwargs)
    code2wav.chunked_decode = chunked_decode


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--thinker-config",
                        default=os.path.join(root, "configs/model_configs/qwen3_omni_moe_toy/config.json"))
    parser.add_argument("--speech-config",
                        default=os.path.join(root, "tests/fixtures/veomni_toy_configs/qwen3omni_toy/config.json"))
    parser.add_argument("--out", default=os.path.join(root, "tests/fixtures/omni_pipeline"))
    parser.add_argument("--seed", type=int, default=1357)
    args = parser.parse_args()
    torch.set_default_dtype(torch.float32)
    config = Qwen3OmniMoeConfig(**pipeline_config(args.thinker_config, args.speech_config))

    for seed in range(args.seed, args.seed + SEED_TRIES):
        model = build(config, seed)
        record_talker_codes(model)
        watch_predictor_confidence(model)
        RECORDED.pop("min_top_prob", None)
        results, reason = [], None
        for prompt in PROMPTS:
            try:  # generate fails when the thinker says fewer than two tokens (no first text for the talker)
                first = generate(model, prompt, torch_seed=1)
                second = generate(model, prompt, torch_seed=2)
                greedy = generate(model, prompt, torch_seed=3, greedy_predictor=True)
            except (RuntimeError, IndexError, ValueError) as error:
                reason = f"generate failed: {type(error).__name__}: {error}"
                break
            if not all(torch.equal(first[2], other[2]) for other in (second, greedy)):
                reason = "the code predictor's sampling is not deterministic"
            elif RECORDED.get("min_top_prob", 0.0) < MIN_TOP_PROB:
                reason = f"the code predictor's top probability falls to {RECORDED.get('min_top_prob')}"
            elif first[3].abs().max().item() >= 0.95:
                reason = f"the waveform reaches {first[3].abs().max().item():.3f} (clamping near)"
            elif first[2].shape[0] < MIN_FRAMES:
                reason = f"the talker made {first[2].shape[0]} frames"
            elif not torch.equal(first[3], second[3]):
                reason = "waveforms differ between runs"
            if reason:
                break
            results.append(first)
        if reason is None:
            break
        print(f"weight seed {seed}: {reason}; trying the next", file=sys.stderr)
    else:
        sys.exit(f"no weight seed in [{args.seed}, {args.seed + SEED_TRIES}) gives a deterministic fixture")

    model_dir = os.path.join(args.out, "model")
    os.makedirs(model_dir, exist_ok=True)
    config.to_json_file(os.path.join(model_dir, "config.json"))
    weights = {n: t.detach().contiguous() for n, t in model.state_dict().items()}
    save_file(weights, os.path.join(model_dir, "model.safetensors"), metadata={"format": "pt"})
    expected, facts = {}, []
    for i, (input_ids, sequences, codes, wav) in enumerate(results):
        expected[f"prompt{i}.input_ids"] = input_ids.contiguous()
        expected[f"prompt{i}.sequences"] = sequences.contiguous()
        expected[f"prompt{i}.codes"] = codes.contiguous()
        expected[f"prompt{i}.waveform"] = wav.contiguous()
        facts.append({"speaker": PROMPTS[i]["speaker"], "input_ids": input_ids.tolist(),
                      "new_tokens": sequences[input_ids.numel():].tolist(), "frames": int(codes.shape[0]),
                      "first_codebook": codes[:, 0].tolist(), "samples": int(wav.numel()),
                      "max_abs": float(wav.abs().max())})
    save_file(expected, os.path.join(args.out, "expected.safetensors"))
    summary = {
        "prompts": facts, "weight_seed": seed, "thinker_max_new_tokens": THINKER_MAX_NEW_TOKENS,
        "talker_max_new_tokens": TALKER_MAX_NEW_TOKENS, "talker_do_sample": False,
        "talker_repetition_penalty": 1.05, "code_predictor_head_scale": PREDICTOR_HEAD_SCALE,
        "code_predictor_min_top_prob": RECORDED.get("min_top_prob"),
        "special": SPECIAL, "newline": NEWLINE, "torch": torch.__version__, "transformers": transformers.__version__,
    }
    with open(os.path.join(args.out, "expected.json"), "w") as f:
        json.dump(summary, f, indent=2)
        f.write("\n")
    size = sum(os.path.getsize(os.path.join(d, n)) for d, _, names in os.walk(args.out) for n in names)
    print(f"wrote {args.out} ({size / 1e6:.1f} MB), weight seed {seed}: " +
          "; ".join(f"prompt {i}: {f['new_tokens']} -> {f['frames']} frames, {f['samples']} samples"
                    for i, f in enumerate(facts)))


if __name__ == "__main__":
    main()
