#!/usr/bin/env python3
"""Generates the HuggingFace reference fixture of Qwen3-Omni's speech stages (run where torch + transformers 5.17
are installed; CPU, fp32, deterministic).

From tests/fixtures/veomni_toy_configs/qwen3omni_toy/config.json with the talker, its code predictor and code2wav
shrunk (widths 32-64, 4 code groups, code predictor vocabulary 256, code2wav sliding window 4) so that the weights
stay a few MB, it builds transformers' Qwen3OmniMoeTalkerForConditionalGeneration and Qwen3OmniMoeCode2Wav (eager
attention), gives every parameter seeded random values, and writes under tests/fixtures/omni_speech/:
  config.json           the whole Qwen3OmniMoeConfig (thinker toy unchanged, speech stages shrunk)
  model.safetensors     every talker and code2wav parameter under its name in Qwen3OmniMoeForConditionalGeneration
                        ("talker.<name>", "code2wav.<name>"; experts stacked as gate_up_proj / down_proj)
  inputs.safetensors    code2wav.codes i64 [T, num_quantizers]; talker.thinker_embeds / talker.thinker_hidden
                        [5, thinker_hidden_size]; talker.inputs_embeds [P, hidden]; talker.trailing_text_hidden
                        [N, hidden]; talker.tts_pad_embed [1, hidden]; code_predictor.inputs_embeds [G, hidden]
                        (talker hidden, talker codec embedding of code 0, residual embeddings of codes 1..G-2)
  expected.safetensors  code2wav.waveform [samples], code2wav.chunked_waveform (chunked_decode with chunk_size 5,
                        left_context_size 3); talker.text_projection, talker.hidden_projection [5, hidden];
                        talker.logits [P, vocab], talker.hidden [P, hidden] (final-normed); code_predictor.logits
                        [G-1, vocab] (row g: lm_head[g] of hidden row g+1); code_predictor.greedy_codes i64 [G-1];
                        talker.greedy_tokens i64 [n], talker.greedy_codes i64 [frames, G], talker.max_new_tokens
  expected.json         facts (shapes, how many waveform samples are clamped, versions)
tests/unit/test_code2wav.cc (Code2WavHfFixture) and tests/unit/test_talker.cc (TalkerHfFixture) compare against them.
Usage: python3 scripts/gen_omni_speech_fixtures.py [--out DIR] [--seed N]
"""
import argparse
import copy
import json
import os
import sys

import torch
import transformers
from safetensors.torch import save_file
from transformers.models.qwen3_omni_moe import modeling_qwen3_omni_moe as omni
from transformers.models.qwen3_omni_moe.configuration_qwen3_omni_moe import Qwen3OmniMoeConfig

CODE2WAV_FRAMES = 12   # > sliding_window, so the window matters
CHUNK_SIZE, LEFT_CONTEXT = 5, 3  # chunked_decode: chunks [0,5), [5,10) after 2..4, [10,12) after 7..9
TALKER_PREFILL = 9
TRAILING_TEXT = 3
TALKER_MAX_NEW_TOKENS = 6
PROJECTION_ROWS = 5


def shrink(config_dict):
    """The toy config with small speech stages (the thinker part is left as it is)."""
    d = copy.deepcopy(config_dict)
    d["dtype"] = "float32"
    talker = d["talker_config"]
    talker["num_code_groups"] = 4
    text = talker["text_config"]
    text.update(hidden_size=64, head_dim=16, num_attention_heads=4, num_key_value_heads=2, intermediate_size=96,
                moe_intermediate_size=32, shared_expert_intermediate_size=48, num_experts=8, num_experts_per_tok=4,
                num_hidden_layers=2)
    for key in ("rope_scaling", "rope_parameters"):  # M-RoPE sections covering head_dim / 2 = 8 frequencies
        if isinstance(text.get(key), dict) and "mrope_section" in text[key]:
            text[key]["mrope_section"] = [4, 2, 2]
    predictor = talker["code_predictor_config"]
    predictor.update(hidden_size=64, head_dim=16, num_attention_heads=4, num_key_value_heads=2,
                     intermediate_size=96, num_hidden_layers=2, vocab_size=256, num_code_groups=4)
    predictor.pop("layer_types", None)  # rebuilt for the new layer count
    code2wav = d["code2wav_config"]
    code2wav.update(hidden_size=32, num_attention_heads=4, num_key_value_heads=4, intermediate_size=48,
                    num_hidden_layers=2, num_quantizers=4, sliding_window=4, decoder_dim=32)
    return d


def seeded_weights(module, generator):
    """Normal matrices scaled by 1/sqrt(fan_in); norms around 1; small random vectors (biases, layer scales,
    SnakeBeta's log-scale parameters) so that every path carries signal."""
    with torch.no_grad():
        for name, p in module.named_parameters():
            noise = torch.randn(p.shape, generator=generator, dtype=torch.float32)
            if p.dim() == 1 and "norm" in name:
                p.copy_(1.0 + 0.1 * noise)
            elif p.dim() == 1:
                p.copy_(0.1 * noise)
            else:
                p.copy_(noise / p[0].numel() ** 0.5)


def check_names_in_full_model(config, named):
    """Our names must be those of Qwen3OmniMoeForConditionalGeneration's state_dict, and cover its speech stages."""
    with torch.device("meta"):
        full = omni.Qwen3OmniMoeForConditionalGeneration(config)
    full_names = set(full.state_dict().keys())
    missing = sorted(n for n in named if n not in full_names)
    if missing:
        sys.exit(f"names not in Qwen3OmniMoeForConditionalGeneration's state_dict: {missing[:5]}")
    extra = sorted(n for n in full_names if n.startswith(("talker.", "code2wav.")) and n not in named)
    if extra:
        sys.exit(f"speech tensors of the full model the fixture lacks: {extra[:5]}")


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config",
                        default=os.path.join(root, "tests/fixtures/veomni_toy_configs/qwen3omni_toy/config.json"))
    parser.add_argument("--out", default=os.path.join(root, "tests/fixtures/omni_speech"))
    parser.add_argument("--seed", type=int, default=2468)
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    torch.set_default_dtype(torch.float32)
    generator = torch.Generator().manual_seed(args.seed)
    with open(args.config) as f:
        config = Qwen3OmniMoeConfig(**shrink(json.load(f)))
    talker_config, code2wav_config = config.talker_config, config.code2wav_config
    talker = omni.Qwen3OmniMoeTalkerForConditionalGeneration._from_config(talker_config, attn_implementation="eager")
    code2wav = omni.Qwen3OmniMoeCode2Wav._from_config(code2wav_config, attn_implementation="eager")
    talker, code2wav = talker.to(torch.float32).eval(), code2wav.to(torch.float32).eval()
    seeded_weights(talker, generator)
    seeded_weights(code2wav, generator)
    weights = {"talker." + n: p.detach().contiguous() for n, p in talker.named_parameters()}
    weights.update({"code2wav." + n: p.detach().contiguous() for n, p in code2wav.named_parameters()})
    check_names_in_full_model(config, weights)

    hidden = talker_config.text_config.hidden_size
    groups = talker_config.num_code_groups
    inputs, expected = {}, {}
    with torch.no_grad():
        # code2wav: codes [1, num_quantizers, T] -> waveform [1, 1, samples].
        codes = torch.randint(0, code2wav_config.codebook_size, (1, code2wav_config.num_quantizers, CODE2WAV_FRAMES),
                              generator=generator)
        wav = code2wav(codes)
        inputs["code2wav.codes"] = codes[0].T.contiguous()
        expected["code2wav.waveform"] = wav.reshape(-1).contiguous()
        chunked = code2wav.chunked_decode(codes, chunk_size=CHUNK_SIZE, left_context_size=LEFT_CONTEXT)
        expected["code2wav.chunked_waveform"] = chunked.reshape(-1).contiguous()

        # The projections of thinker embeddings and hidden states.
        thinker_embeds = torch.randn(PROJECTION_ROWS, talker_config.thinker_hidden_size, generator=generator)
        thinker_hidden = torch.randn(PROJECTION_ROWS, talker_config.thinker_hidden_size, generator=generator)
        inputs["talker.thinker_embeds"] = thinker_embeds
        inputs["talker.thinker_hidden"] = thinker_hidden
        expected["talker.text_projection"] = talker.text_projection(thinker_embeds).contiguous()
        expected["talker.hidden_projection"] = talker.hidden_projection(thinker_hidden).contiguous()

        # The talker forward over input embeddings at positions 0..P-1.
        embeds = torch.randn(1, TALKER_PREFILL, hidden, generator=generator)
        last_hidden = talker.model(inputs_embeds=embeds, use_cache=False).last_hidden_state
        inputs["talker.inputs_embeds"] = embeds[0].contiguous()
        expected["talker.hidden"] = last_hidden[0].contiguous()
        expected["talker.logits"] = talker.codec_head(last_hidden)[0].contiguous()

        # The code predictor, teacher-forced: [talker hidden, embed(code 0), embed_0(code 1), ...].
        predictor = talker.code_predictor
        first = torch.tensor([[5]])
        residual = torch.randint(0, predictor.config.vocab_size, (groups - 2,), generator=generator)
        rows = [last_hidden[:, -1:], talker.get_input_embeddings()(first)]
        rows += [predictor.get_input_embeddings()[g](residual[g].view(1, 1)) for g in range(groups - 2)]
        sequence = torch.cat(rows, dim=1)
        predictor_hidden = predictor.model(inputs_embeds=sequence, use_cache=False).last_hidden_state
        inputs["code_predictor.inputs_embeds"] = sequence[0].contiguous()
        expected["code_predictor.logits"] = torch.stack(
            [predictor.lm_head[g](predictor_hidden[0, g + 1]) for g in range(groups - 1)]).contiguous()
        greedy = predictor.generate(inputs_embeds=sequence[:, :2], max_new_tokens=groups - 1, do_sample=False)
        expected["code_predictor.greedy_codes"] = greedy.reshape(-1)[-(groups - 1):].contiguous()

        # Greedy codec generation as Qwen3OmniMoeForConditionalGeneration.generate runs the talker, without
        # sampling and repetition penalty.
        vocab = talker_config.text_config.vocab_size
        eos = talker_config.codec_eos_token_id
        suppressed = [i for i in range(vocab - 1024, vocab) if i != eos]
        trailing = torch.randn(1, TRAILING_TEXT, hidden, generator=generator)
        tts_pad = torch.randn(1, 1, hidden, generator=generator)
        result = talker.generate(
            inputs_embeds=embeds, trailing_text_hidden=trailing, tts_pad_embed=tts_pad,
            talker_input_ids=torch.full((1, TALKER_PREFILL), config.tts_pad_token_id, dtype=torch.long),
            attention_mask=torch.ones(1, TALKER_PREFILL, dtype=torch.long), max_new_tokens=TALKER_MAX_NEW_TOKENS,
            do_sample=False, repetition_penalty=1.0, suppress_tokens=suppressed, eos_token_id=eos,
            output_hidden_states=True, return_dict_in_generate=True)
        frames = [hid[-1] for hid in result.hidden_states if hid[-1] is not None]
        talker_codes = torch.stack(frames, dim=1)[0] if frames else torch.zeros(0, groups, dtype=torch.long)
        tokens = result.sequences[0, -len(result.hidden_states):]
        inputs["talker.trailing_text_hidden"] = trailing[0].contiguous()
        inputs["talker.tts_pad_embed"] = tts_pad[0].contiguous()
        expected["talker.greedy_tokens"] = tokens.contiguous()
        expected["talker.greedy_codes"] = talker_codes.contiguous()
        expected["talker.max_new_tokens"] = torch.tensor([TALKER_MAX_NEW_TOKENS])

    os.makedirs(args.out, exist_ok=True)
    config.to_json_file(os.path.join(args.out, "config.json"))
    save_file(weights, os.path.join(args.out, "model.safetensors"))
    save_file(inputs, os.path.join(args.out, "inputs.safetensors"))
    save_file(expected, os.path.join(args.out, "expected.safetensors"))
    waveform = expected["code2wav.waveform"]
    facts = {
        "code2wav_frames": CODE2WAV_FRAMES,
        "waveform_samples": int(waveform.numel()),
        "waveform_clamped_samples": int((waveform.abs() >= 1.0).sum()),
        "waveform_max_abs": float(waveform.abs().max()),
        "talker_greedy_tokens": [int(t) for t in expected["talker.greedy_tokens"].tolist()],
        "code_predictor_greedy_codes": [int(t) for t in expected["code_predictor.greedy_codes"].tolist()],
        "seed": args.seed,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
    }
    with open(os.path.join(args.out, "expected.json"), "w") as f:
        json.dump(facts, f, indent=2)
        f.write("\n")
    size = sum(os.path.getsize(os.path.join(args.out, n)) for n in os.listdir(args.out))
    print(f"wrote {args.out} ({size / 1e6:.1f} MB): {len(weights)} tensors, {facts['waveform_samples']} samples "
          f"({facts['waveform_clamped_samples']} clamped), talker tokens {facts['talker_greedy_tokens']}")


if __name__ == "__main__":
    main()
