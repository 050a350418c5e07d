#!/usr/bin/env python3
"""Checks a LoRA run's outputs of veomni-ckpt-merge against transformers + PEFT (run where torch, transformers, peft
and h5py are installed):
  1. peft.PeftModel.from_pretrained(<HF base>, <PEFT dir>) loads the adapter directory (every adapter tensor used:
     no missing or unexpected keys) and its label log-probs on every sample of a dataset equal ours, the
     token_logprobs that `veomni-score --what logprobs` wrote for the same dataset (relative 1e-4 of the largest);
  2. the merged model directory equals the base plus every adapter's delta: merged - base == scale * B A for each
     adapted weight (PEFT's merge_and_unload of the loaded adapters, compared tensor by tensor at 1e-5), and the
     weights without adapters are bit-identical to the base's.
Exit 0 when all hold, 1 with the worst differences otherwise.

usage: scripts/check_peft_adapter.py --base HF_DIR --peft PEFT_DIR --merged MERGED_DIR --data IN.h5 --scores OUT.h5
"""
import argparse
import sys

import h5py
import torch
from peft import PeftModel
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM

REL_TOL = 1e-4


def sample(h5, key, index):
    group = h5["samples"][key]
    begin, end = group["offsets"][index:index + 2]
    where = [slice(None)] * group["data"].ndim
    where[int(group.attrs["var_axis"])] = slice(begin, end)
    return torch.from_numpy(group["data"][tuple(where)])


def merged_weights(directory):
    """The merged directory as transformers loads it (per-expert files become its stacked expert tensors)."""
    model = AutoModelForCausalLM.from_pretrained(directory, dtype=torch.float32, attn_implementation="eager")
    return model.state_dict()


def check_logprobs(model, data_path, scores_path):
    worst, scale = 0.0, 1e-30
    with h5py.File(data_path, "r") as data, h5py.File(scores_path, "r") as scores:
        count = len(data["samples"]["input_ids"]["offsets"]) - 1
        for i in range(count):
            ids = sample(data, "input_ids", i).long()
            labels = sample(data, "labels", i).long()
            ours = sample(scores, "token_logprobs", i).double()
            with torch.no_grad():
                logits = model(input_ids=ids[None], use_cache=False).logits[0].double()
            logp = torch.log_softmax(logits[:-1], dim=-1)
            theirs = torch.zeros_like(ours)
            mask = labels[1:] != -100
            picked = logp.gather(-1, labels[1:].clamp(min=0)[:, None])[:, 0]
            theirs[1:] = torch.where(mask, picked, torch.zeros_like(picked))
            worst = max(worst, (theirs - ours).abs().max().item())
            scale = max(scale, ours.abs().max().item())
    return worst / scale, count


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", required=True)
    parser.add_argument("--peft", required=True)
    parser.add_argument("--merged", required=True)
    parser.add_argument("--data", required=True)
    parser.add_argument("--scores", required=True)
    args = parser.parse_args()
    torch.set_default_dtype(torch.float32)
    base = AutoModelForCausalLM.from_pretrained(args.base, dtype=torch.float32, attn_implementation="eager")
    base_state = {k: v.clone() for k, v in base.state_dict().items()}
    model = PeftModel.from_pretrained(base, args.peft, is_trainable=False)
    loaded = load_file(args.peft + "/adapter_model.safetensors")
    used = {n.replace(".default", "") for n, _ in model.named_parameters() if ".lora_" in n}
    unused = sorted(set(loaded) - used)
    missing = sorted(used - set(loaded))
    failures = []
    if unused or missing:
        failures.append(f"adapter tensors not used by PEFT: {unused[:5]}; PEFT adapters not in the file: {missing[:5]}")
    model.eval()
    rel, count = check_logprobs(model, args.data, args.scores)
    print(f"PEFT model vs veomni-score label log-probs over {count} samples: max relative difference {rel:.3g}")
    if rel > REL_TOL:
        failures.append(f"log-probs differ by {rel:.3g} (> {REL_TOL})")

    expected = model.merge_and_unload().state_dict()
    merged = merged_weights(args.merged)
    worst_delta, changed, worst_name = 0.0, 0, ""
    for name, value in expected.items():
        if name not in merged:
            if name == "lm_head.weight" and base.config.tie_word_embeddings:
                continue
            failures.append(f"the merged directory lacks {name}")
            continue
        ours = merged[name].float()
        if torch.equal(value, base_state[name]):
            if not torch.equal(ours, base_state[name]):
                failures.append(f"{name} has no adapter but differs from the base")
            continue
        changed += 1
        diff = (ours - value).abs().max().item() / max(value.abs().max().item(), 1e-30)
        if diff > worst_delta:
            worst_delta, worst_name = diff, name
    print(f"merged directory vs base + scale * B A: {changed} adapted weights, max relative difference "
          f"{worst_delta:.3g} ({worst_name})")
    if changed == 0:
        failures.append("no weight of the merged directory carries an adapter delta")
    if worst_delta > 1e-5:
        failures.append(f"merged weights differ from base + delta by {worst_delta:.3g}")
    for failure in failures:
        print("FAIL: " + failure, file=sys.stderr)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
