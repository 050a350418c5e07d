#!/usr/bin/env python3
"""Loads reward and value models written by veomni-ckpt-merge in transformers and records their numbers (run where
torch + transformers are; scripts/make_value_model_fixtures.sh makes the merged directories and runs this).

For each MERGED_ROOT/<name>/model (<name> = <toy model>_reward or <toy model>_value) it
  - loads the directory with AutoModelForSequenceClassification (reward) or AutoModelForTokenClassification (value),
    fp32, eager attention, CPU: the class must be the one config.json's architectures names, num_labels must be 1, and
    no weight may be missing, unexpected or mismatched;
  - scores the packed toy batch FIXTURES/<toy model>/batch.json (3 sequences in one row, position_ids restarting at
    each sequence) as veomni does on packed rows: the body's hidden states of the packed row (transformers builds the
    block-diagonal causal mask from the restarting position_ids), the class's own `score` on them, and for a reward
    model each sequence's value at its last token;
  - checks that against the class's own forward on each sequence alone (logits: the reward at the last token, or a
    value per token), which must agree to 1e-5;
  - writes MERGED_ROOT/<name>/expected.safetensors ("rewards" [sequences] or "values" [tokens], f32) and
    expected.json (the model, head, batch file, versions).
tests/unit/test_value_models_in_transformers.cc compares our loaded model's numbers with these at 1e-4.
Exit status 1 when a check fails.
"""
import argparse
import json
import os
import sys

import torch
import transformers
from safetensors.torch import save_file
from transformers import AutoModelForSequenceClassification, AutoModelForTokenClassification

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HEADS = {"reward": ("sequence_reward", AutoModelForSequenceClassification, "ForSequenceClassification"),
         "value": ("token_value", AutoModelForTokenClassification, "ForTokenClassification")}


def fail(message):
    sys.exit(f"FAIL: {message}")


def load(model_dir, auto_class, class_suffix):
    with open(os.path.join(model_dir, "config.json")) as f:
        architectures = json.load(f).get("architectures") or []
    if len(architectures) != 1 or not architectures[0].endswith(class_suffix):
        fail(f"{model_dir}/config.json: architectures {architectures}, expected one ...{class_suffix}")
    model, info = auto_class.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="eager",
                                             output_loading_info=True)
    if type(model).__name__ != architectures[0]:
        fail(f"{model_dir}: loaded {type(model).__name__}, config.json names {architectures[0]}")
    for kind in ("missing_keys", "unexpected_keys", "mismatched_keys", "error_msgs"):
        if info.get(kind):
            fail(f"{model_dir}: {kind} {info[kind]}")
    if model.config.num_labels != 1:
        fail(f"{model_dir}: num_labels {model.config.num_labels}, expected 1")
    model.eval()
    return model


def sequence_bounds(positions):
    starts = [i for i, p in enumerate(positions) if p == 0] + [len(positions)]
    return list(zip(starts[:-1], starts[1:]))


def packed_values(model, batch):
    """Every token's value of the packed row: body hidden states (final norm included), then the class's score."""
    ids = torch.tensor([batch["input_ids"]])
    pos = torch.tensor([batch["position_ids"]])
    # attention_mask=None + restarting position_ids: a block-diagonal causal mask; use_cache=False keeps that on.
    hidden = model.model(input_ids=ids, position_ids=pos, use_cache=False).last_hidden_state
    return model.score(hidden)[0, :, 0]


def alone_values(model, batch, bounds, head):
    """The class's own forward on each sequence alone (batch size 1: no pad_token_id needed)."""
    out = []
    for begin, end in bounds:
        logits = model(input_ids=torch.tensor([batch["input_ids"][begin:end]]), use_cache=False).logits
        out.append(logits.reshape(1) if head == "sequence_reward" else logits[0, :, 0])
    return torch.cat(out)


def check(name, merged_root, fixtures_root):
    toy, kind = name.rsplit("_", 1)
    if kind not in HEADS:
        fail(f"{name}: the directory name must end in _reward or _value")
    head, auto_class, class_suffix = HEADS[kind]
    model_dir = os.path.join(merged_root, name, "model")
    batch_file = os.path.join(fixtures_root, toy, "batch.json")
    with open(batch_file) as f:
        batch = json.load(f)
    model = load(model_dir, auto_class, class_suffix)
    bounds = sequence_bounds(batch["position_ids"])
    with torch.no_grad():
        per_token = packed_values(model, batch)
        ours = per_token[[end - 1 for _, end in bounds]] if head == "sequence_reward" else per_token
        reference = alone_values(model, batch, bounds, head)
    diff = (ours - reference).abs().max().item()
    if diff > 1e-5:
        fail(f"{name}: packed values differ from the class's forward on each sequence by {diff}")
    key = "rewards" if head == "sequence_reward" else "values"
    save_file({key: ours.contiguous().float()}, os.path.join(merged_root, name, "expected.safetensors"))
    with open(os.path.join(merged_root, name, "expected.json"), "w") as f:
        json.dump({"model": name, "head": head, "class": type(model).__name__, key: ours.tolist(),
                   "batch": os.path.relpath(batch_file, ROOT),
                   "transformers_version": transformers.__version__, "torch_version": torch.__version__}, f,
                  indent=1)
    print(f"{name}: {type(model).__name__} loads; {len(ours)} {key}, packed vs per-sequence max diff {diff:.3g}")


def main():
    root = ROOT
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("merged_root", nargs="?", default=os.path.join(root, "tests", "fixtures", "merged_value"))
    parser.add_argument("--fixtures", default=os.path.join(root, "tests", "fixtures", "hf"),
                        help="the HF fixtures whose batch.json each model is scored on")
    args = parser.parse_args()
    torch.use_deterministic_algorithms(True)
    names = sorted(n for n in os.listdir(args.merged_root)
                   if os.path.isfile(os.path.join(args.merged_root, n, "model", "config.json")))
    if not names:
        fail(f"{args.merged_root}: no <name>/model/config.json")
    for name in names:
        check(name, args.merged_root, args.fixtures)


if __name__ == "__main__":
    main()
