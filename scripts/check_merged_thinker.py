#!/usr/bin/env python3
"""Checks a veomni-ckpt-merge output of a Qwen3-Omni thinker in transformers 5.17 (run where torch + transformers are).

Usage: python3 scripts/check_merged_thinker.py MERGED_DIR OURS.safetensors [--stacked STACKED_DIR] [--rtol 1e-4]
  MERGED_DIR        veomni-ckpt-merge output (default per-expert experts): config.json with the whole
                    Qwen3OmniMoeConfig (enable_audio_output false: thinker weights only), *.safetensors
  OURS.safetensors  what tests/fixtures_tools/merged_thinker_logits wrote: our fp32 logits of MERGED_DIR for one
                    sample and that sample's inputs (hf_input_ids with the placeholder tokens, position_ids [3, S],
                    pixel_values + image_grid_thw, pixel_values_videos + video_grid_thw, input_features [frames, mel]
                    + audio_feature_lengths, target_ids)
  --stacked DIR     the same checkpoint merged with --experts stacked (its names must be exactly transformers')

Checks, each reported on its own (the exit status is 1 if any fails):
  names            every tensor name of MERGED_DIR, with the per-expert names mlp.experts.{e}.{gate,up,down}_proj.weight
                   grouped as transformers stacks them (mlp.experts.gate_up_proj [E, 2I, H], mlp.experts.down_proj
                   [E, H, I]), equals "thinker." + a parameter name of Qwen3OmniMoeThinkerForConditionalGeneration
                   built from thinker_config (the module attribute names of transformers' source), same shapes, and
                   every expert index present; with --stacked, that directory's names and shapes equal them directly
                   and its tensors equal the per-expert ones stacked
  thinker_strict   Qwen3OmniMoeThinkerForConditionalGeneration._from_config(thinker_config), the files' tensors with
                   "thinker." stripped and the experts stacked (gate rows before up rows, as transformers'
                   MergeModulelist + Concatenate(dim=1)), load_state_dict: every parameter loaded, nothing
                   unexpected (strict except for persistent buffers, which are no checkpoint weights); logits
                   against ours
  from_pretrained  Qwen3OmniMoeForConditionalGeneration.from_pretrained(MERGED_DIR) (the class of model_type
                   qwen3_omni_moe; its per-expert -> stacked conversion is transformers' own; with
                   enable_audio_output=False it holds only .thinker): no missing / unexpected / mismatched keys, every
                   thinker parameter equal to the file's, logits of .thinker against ours; the same for --stacked
Every forward: eager attention, float32, CPU, no_grad, our position_ids passed explicitly (a hook asserts the
language model received exactly them), attention_mask all ones. Logits error = max|ours - theirs| / max|ours| over
[S, V], must be <= rtol. The loss printed is the mean token cross-entropy over target_ids != -100 (our
normalisation, no MoE aux loss) from each side's logits.
"""
import argparse
import glob
import json
import os
import re
import sys
import traceback

import torch
import transformers
from safetensors import safe_open
from safetensors.torch import load_file

from hf_thinker_util import model_class, set_eager, thinker_kwargs

EXPERT_RE = re.compile(r"^(.*\.mlp\.experts)\.(\d+)\.(gate_proj|up_proj|down_proj)\.weight$")
PREFIX = "thinker."


class CheckFailed(Exception):
    pass


def read_config(merged_dir):
    path = os.path.join(merged_dir, "config.json")
    if not os.path.isfile(path):
        raise CheckFailed(f"{path} does not exist")
    with open(path) as f:
        raw = json.load(f)
    if raw.get("model_type") != "qwen3_omni_moe":
        raise CheckFailed(f"{path}: model_type {raw.get('model_type')!r}, expected 'qwen3_omni_moe'")
    if "thinker_config" not in raw:
        raise CheckFailed(f"{path}: no thinker_config")
    if raw.get("enable_audio_output", True):
        print(f"note: {path} has enable_audio_output {raw.get('enable_audio_output')!r} (transformers' default "
              "is true); the loaders below override it to false: only thinker weights are merged")
    config = transformers.AutoConfig.from_pretrained(merged_dir, enable_audio_output=False)
    set_eager(config)
    return config


def read_tensors(directory):
    """Every tensor of the directory's *.safetensors files (name -> tensor); a name in two files is an error."""
    files = sorted(glob.glob(os.path.join(directory, "*.safetensors")))
    if not files:
        raise CheckFailed(f"{directory}: no *.safetensors files")
    tensors = {}
    for path in files:
        with safe_open(path, framework="pt") as f:
            for name in f.keys():
                if name in tensors:
                    raise CheckFailed(f"{directory}: tensor {name} is in two files")
                tensors[name] = f.get_tensor(name)
    return tensors


def stack_experts(tensors, num_experts, source):
    """Per-expert tensors grouped as transformers 5.17 stores them: gate_up_proj [E, 2I, H] (gate rows first),
    down_proj [E, H, I]. Other names pass through. Every expert of every group must be present."""
    groups, out = {}, {}
    for name, t in tensors.items():
        m = EXPERT_RE.match(name)
        if m:
            groups.setdefault(m.group(1), {}).setdefault(m.group(3), {})[int(m.group(2))] = t
        else:
            out[name] = t
    for base, parts in groups.items():
        for kind in ("gate_proj", "up_proj", "down_proj"):
            have = sorted(parts.get(kind, {}))
            if have != list(range(num_experts)):
                missing = sorted(set(range(num_experts)) - set(have))
                extra = sorted(set(have) - set(range(num_experts)))
                raise CheckFailed(f"{source}: {base}.*.{kind}.weight: experts missing {missing[:10]}, "
                                  f"unexpected {extra[:10]} (num_experts {num_experts})")

        def stacked(kind):
            return torch.stack([parts[kind][e] for e in range(num_experts)], dim=0)

        out[base + ".gate_up_proj"] = torch.cat([stacked("gate_proj"), stacked("up_proj")], dim=1)
        out[base + ".down_proj"] = stacked("down_proj")
    return out


def compare_names(ours, expected_shapes, what):
    missing = sorted(set(expected_shapes) - set(ours))
    unexpected = sorted(set(ours) - set(expected_shapes))
    wrong = sorted(n for n in set(ours) & set(expected_shapes) if tuple(ours[n].shape) != expected_shapes[n])
    if missing or unexpected or wrong:
        lines = [f"{what}: {len(missing)} missing, {len(unexpected)} unexpected, {len(wrong)} mis-shaped names"]
        lines += [f"  missing    {n} {expected_shapes[n]}" for n in missing[:20]]
        lines += [f"  unexpected {n} {tuple(ours[n].shape)}" for n in unexpected[:20]]
        lines += [f"  shape      {n}: ours {tuple(ours[n].shape)}, transformers {expected_shapes[n]}" for n in wrong[:20]]
        raise CheckFailed("\n".join(lines))
    print(f"{what}: all {len(expected_shapes)} names and shapes match transformers' thinker")


def thinker_inputs(ours):
    for key in ("logits", "hf_input_ids", "target_ids", "position_ids"):
        if key not in ours:
            raise CheckFailed(f"our outputs lack {key}")
    positions, s = ours["position_ids"], ours["hf_input_ids"].shape[0]
    if positions.dim() != 2 or positions.shape[0] != 3 or positions.shape[1] != s:
        raise CheckFailed(f"position_ids has shape {tuple(positions.shape)}, expected (3, {s})")
    return thinker_kwargs(ours)


def forward_logits(thinker, ours):
    kwargs = thinker_inputs(ours)
    recorded = {}

    def record(module, args_, kw):
        recorded["position_ids"] = kw.get("position_ids")

    handle = thinker.model.register_forward_pre_hook(record, with_kwargs=True)
    try:
        with torch.no_grad():
            logits = thinker(**kwargs).logits[0].float()
    finally:
        handle.remove()
    got = recorded.get("position_ids")
    if got is None:
        raise CheckFailed("the language model was called without position_ids")
    got = got[-3:].reshape(3, -1)  # a leading text-position row, where a version adds one, is not ours
    if not torch.equal(got.to(ours["position_ids"].dtype), ours["position_ids"]):
        raise CheckFailed("the language model did not receive our position_ids")
    return logits


def mean_ce(logits, targets):
    targets = targets.long()
    valid = int((targets != -100).sum())
    if valid == 0:
        raise CheckFailed("no target != -100")
    return (torch.nn.functional.cross_entropy(logits, targets, ignore_index=-100, reduction="sum") / valid).item()


def compare_logits(thinker, ours, meta, rtol, what):
    ref = ours["logits"].float()
    logits = forward_logits(thinker, ours)
    if logits.shape != ref.shape:
        raise CheckFailed(f"{what}: logits shape {tuple(logits.shape)}, ours {tuple(ref.shape)}")
    err = ((logits - ref).abs().max() / ref.abs().max()).item()
    loss_theirs, loss_ours = mean_ce(logits, ours["target_ids"]), mean_ce(ref, ours["target_ids"])
    print(f"{what}: logits [{ref.shape[0]}, {ref.shape[1]}] rel err {err:.3g} (tolerance {rtol:g}); "
          f"loss transformers {loss_theirs:.9g}, ours {loss_ours:.9g} (our tool reported {meta.get('ce_loss')})")
    if not err <= rtol:
        raise CheckFailed(f"{what}: logits differ from ours: rel err {err:.3g} > {rtol:g}")


def expected_shapes(thinker):
    """"thinker." + every parameter name of transformers' thinker (buffers are not checkpoint weights here: the
    thinker's are non-persistent; a persistent one would show up in thinker_strict's report)."""
    return {PREFIX + n: tuple(p.shape) for n, p in thinker.named_parameters()}


def build_thinker(config):
    cls = model_class("Qwen3OmniMoeThinkerForConditionalGeneration")
    torch.manual_seed(0)
    thinker = cls._from_config(config.thinker_config, attn_implementation="eager").float().eval()
    return thinker


def check_names(state, config, merged_dir, stacked_dir):
    thinker = build_thinker(config)
    shapes = expected_shapes(thinker)
    compare_names(state["merged"], shapes, f"{merged_dir} (per-expert names grouped)")
    if stacked_dir:
        stacked = read_tensors(stacked_dir)
        compare_names(stacked, shapes, f"{stacked_dir} (stacked)")
        differ = [n for n in shapes if not torch.equal(stacked[n], state["merged"][n])]
        if differ:
            raise CheckFailed(f"{stacked_dir}: {len(differ)} tensors differ from the per-expert merge stacked, "
                              f"e.g. {differ[:5]}")
        print(f"{stacked_dir}: every tensor equals the per-expert merge's")


def check_thinker_strict(state, config, ours, meta, rtol):
    thinker = build_thinker(config)
    weights = {}
    for name, t in state["merged"].items():
        if not name.startswith(PREFIX):
            raise CheckFailed(f"tensor {name} has no '{PREFIX}' prefix")
        weights[name[len(PREFIX):]] = t
    params = {n for n, _ in thinker.named_parameters()}
    result = thinker.load_state_dict(weights, strict=False)
    missing = [n for n in result.missing_keys if n in params]
    buffers = [n for n in result.missing_keys if n not in params]
    if missing or result.unexpected_keys:
        raise CheckFailed(f"thinker_strict: missing parameters {missing[:10]} ({len(missing)}), unexpected "
                          f"{list(result.unexpected_keys)[:10]} ({len(result.unexpected_keys)})")
    print(f"thinker_strict: load_state_dict of {len(weights)} tensors: every parameter loaded, none unexpected"
          + (f" (persistent buffers kept at their init: {buffers})" if buffers else ""))
    compare_logits(thinker, ours, meta, rtol, "thinker_strict")


def check_from_pretrained(state, directory, ours, meta, rtol, what):
    cls = model_class("Qwen3OmniMoeForConditionalGeneration")
    model, info = cls.from_pretrained(directory, dtype=torch.float32, attn_implementation="eager",
                                      enable_audio_output=False, output_loading_info=True)
    set_eager(model.config)
    model = model.float().eval()
    problems = {}
    for key in ("missing_keys", "unexpected_keys", "mismatched_keys"):  # a dict, or an object in some versions
        value = info.get(key) if isinstance(info, dict) else getattr(info, key, None)
        if value:
            problems[key] = sorted(str(v) for v in value)
    if problems:
        raise CheckFailed(f"{what}: from_pretrained loading info: " +
                          "; ".join(f"{k}: {v[:10]} ({len(v)})" for k, v in problems.items()))
    if not hasattr(model, "thinker") or getattr(model, "has_talker", False):
        raise CheckFailed(f"{what}: the model has no thinker, or built a talker although enable_audio_output=False")
    thinker = model.thinker
    print(f"{what}: {type(model).__name__}.from_pretrained -> .thinker is {type(thinker).__name__}")
    named = dict(thinker.named_parameters())
    differ = [n for n, t in named.items()
              if PREFIX + n not in state["merged"] or not torch.equal(t.float(), state["merged"][PREFIX + n].float())]
    if differ:
        raise CheckFailed(f"{what}: {len(differ)} loaded thinker tensors differ from the files "
                          f"(left at their init?), e.g. {differ[:5]}")
    print(f"{what}: all {len(named)} thinker parameters equal the merged files")
    compare_logits(thinker, ours, meta, rtol, what)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("merged_dir")
    parser.add_argument("ours")
    parser.add_argument("--stacked", default=None, help="the same checkpoint merged with --experts stacked")
    parser.add_argument("--rtol", type=float, default=1e-4)
    args = parser.parse_args()
    print(f"torch {torch.__version__}, transformers {transformers.__version__}")
    torch.set_num_threads(max(1, min(16, os.cpu_count() or 1)))

    try:
        config = read_config(args.merged_dir)
        if not os.path.isfile(args.ours):
            raise CheckFailed(f"{args.ours} does not exist")
        ours = load_file(args.ours)
        with safe_open(args.ours, framework="pt") as f:
            meta = f.metadata() or {}
        num_experts = config.thinker_config.text_config.num_experts
        state = {"merged": stack_experts(read_tensors(args.merged_dir), num_experts, args.merged_dir)}
    except Exception as error:
        traceback.print_exc()
        sys.exit(f"FAILED setup: {type(error).__name__}: {error}")

    checks = [("names", lambda: check_names(state, config, args.merged_dir, args.stacked)),
              ("thinker_strict", lambda: check_thinker_strict(state, config, ours, meta, args.rtol)),
              ("from_pretrained", lambda: check_from_pretrained(state, args.merged_dir, ours, meta, args.rtol,
                                                                "from_pretrained"))]
    if args.stacked:
        checks.append(("from_pretrained_stacked",
                       lambda: check_from_pretrained(state, args.stacked, ours, meta, args.rtol,
                                                     "from_pretrained_stacked")))
    failed = []
    for label, check in checks:
        print(f"-- {label}")
        try:
            check()
            print(f"PASSED {label}")
        except Exception as error:  # one check's failure must not hide the others'
            if not isinstance(error, CheckFailed):
                traceback.print_exc()
            print(f"FAILED {label}: {type(error).__name__}: {error}", file=sys.stderr)
            failed.append(label)
    if failed:
        sys.exit(f"{len(failed)} of {len(checks)} check(s) failed: {', '.join(failed)}")
    print(f"all {len(checks)} checks passed")


if __name__ == "__main__":
    main()
