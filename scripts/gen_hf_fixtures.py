#!/usr/bin/env python3
"""Generates HuggingFace reference fixtures for the toy models (run where torch + transformers are installed).

For each toy config under configs/model_configs/<name>/ it builds the model with transformers in fp32 on the CPU
(deterministic), saves it with save_pretrained, and writes under tests/fixtures/hf/<name>/:
  model/               config.json + model.safetensors exactly as transformers saves them
  batch.json           one packed row of 3 samples: input_ids, labels (VeOmni packing: first label of every later
                       sample is -100, prompt tokens -100), position_ids restarting per sample
  expected.safetensors "logits" [S, V] f32 and "grad.<param name>" for every parameter (names of the torch module,
                       i.e. transformers v5 stacked expert names for MoE)
  expected.json        loss, ce_loss, aux_loss, the AdamW hyper-parameters and the losses of 3 AdamW steps (+ the loss
                       after the third), versions of torch/transformers
CI compares our C++ forward/backward/optimizer against these files with no Python.
"""
import argparse
import json
import os
import shutil
import sys

import torch
import transformers
from safetensors.torch import save_file
from transformers import AutoConfig, AutoModelForCausalLM

SAMPLE_LENGTHS = [13, 7, 20]
PROMPT_TOKENS = 3  # the first tokens of every sample are a "prompt": label -100
ADAMW = {"lr": 1e-3, "betas": [0.9, 0.95], "eps": 1e-8, "weight_decay": 0.1}


def make_batch(vocab_size, generator):
    ids, labels, positions = [], [], []
    for index, length in enumerate(SAMPLE_LENGTHS):
        sample = torch.randint(0, vocab_size, (length,), generator=generator).tolist()
        sample_labels = list(sample)
        for j in range(min(PROMPT_TOKENS, length)):
            sample_labels[j] = -100
        if index > 0:
            sample_labels[0] = -100  # VeOmni packing: no prediction across the sample boundary
        ids += sample
        labels += sample_labels
        positions += list(range(length))
    return {"input_ids": ids, "labels": labels, "position_ids": positions}


def no_decay(name):
    # Same rule as veomni's optimizer: no weight decay on norms and biases (HF Trainer convention).
    return "norm" in name or name.endswith(".bias")


def forward(model, batch):
    ids = torch.tensor([batch["input_ids"]])
    pos = torch.tensor([batch["position_ids"]])
    labels = torch.tensor([batch["labels"]])
    # attention_mask=None + restarting position_ids: transformers builds a block-diagonal causal mask.
    # use_cache=False: with a cache transformers skips the packed-sequence detection.
    return model(input_ids=ids, position_ids=pos, labels=labels, use_cache=False)


def check_packing_is_block_diagonal(model, batch, logits):
    """The packed forward must equal running every sample alone (proves the block-diagonal mask was used)."""
    start = 0
    for length in SAMPLE_LENGTHS:
        ids = torch.tensor([batch["input_ids"][start:start + length]])
        with torch.no_grad():
            alone = model(input_ids=ids, use_cache=False).logits[0]
        diff = (alone - logits[start:start + length]).abs().max().item()
        if diff > 1e-4:
            sys.exit(f"packed forward differs from per-sample forward by {diff}: packing not detected")
        start += length


def ce_and_aux(model, out):
    aux = getattr(out, "aux_loss", None)
    if aux is None:
        return out.loss.item(), 0.0
    coef = model.config.router_aux_loss_coef
    return out.loss.item() - coef * aux.item(), aux.item()


def generate(name, configs_root, out_root, seed):
    torch.manual_seed(seed)
    # "<model>_tied" is <model> with tied input/output embeddings (as real Qwen3-0.6B has).
    tied = name.endswith("_tied")
    config = AutoConfig.from_pretrained(os.path.join(configs_root, name[:-len("_tied")] if tied else name))
    if tied:
        config.tie_word_embeddings = True
    config._attn_implementation = "eager"
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32, attn_implementation="eager")
    model.train()  # dropout is 0 in these configs; train() keeps router logits output on
    out_dir = os.path.join(out_root, name)
    shutil.rmtree(out_dir, ignore_errors=True)
    model_dir = os.path.join(out_dir, "model")
    model.save_pretrained(model_dir)

    generator = torch.Generator().manual_seed(seed + 1)
    batch = make_batch(config.vocab_size, generator)
    with open(os.path.join(out_dir, "batch.json"), "w") as f:
        json.dump(batch, f)

    # Reload exactly what we saved, so the fixture describes the files CI loads.
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="eager")
    model.train()
    out = forward(model, batch)
    logits = out.logits[0].detach()
    check_packing_is_block_diagonal(model, batch, logits)
    out.loss.backward()
    tensors = {"logits": logits.contiguous()}
    for pname, p in model.named_parameters():
        tensors["grad." + pname] = p.grad.detach().contiguous()
    save_file(tensors, os.path.join(out_dir, "expected.safetensors"))
    ce, aux = ce_and_aux(model, out)

    # Three AdamW steps on the same batch from the saved weights.
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="eager")
    model.train()
    decay = [p for n, p in model.named_parameters() if not no_decay(n)]
    plain = [p for n, p in model.named_parameters() if no_decay(n)]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": ADAMW["weight_decay"]}, {"params": plain, "weight_decay": 0.0}],
        lr=ADAMW["lr"], betas=tuple(ADAMW["betas"]), eps=ADAMW["eps"], foreach=False)
    losses = []
    for _ in range(3):
        optimizer.zero_grad()
        step_out = forward(model, batch)
        losses.append(step_out.loss.item())
        step_out.loss.backward()
        optimizer.step()
    with torch.no_grad():
        losses.append(forward(model, batch).loss.item())

    expected = {
        "model": name,
        "loss": out.loss.item(),
        "ce_loss": ce,
        "aux_loss": aux,
        "valid_tokens": sum(1 for i in range(1, len(batch["labels"])) if batch["labels"][i] != -100),
        "adamw": dict(ADAMW, no_decay="parameters whose name contains 'norm' or ends with '.bias'"),
        "adamw_losses": losses,
        "torch_version": torch.__version__,
        "transformers_version": transformers.__version__,
        "seed": seed,
    }
    with open(os.path.join(out_dir, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1)
    print(f"{name}: loss {expected['loss']:.6f} (ce {ce:.6f}, aux {aux:.6f}), adamw losses {losses}")


def check_merged(merged_root, fixtures_root, stacked_dir=None):
    """Loads models written by veomni-ckpt-merge with transformers and records their logits on the toy batch.

    For each merged_root/<name>/model (a trained toy checkpoint merged to HF layout) it writes
    merged_root/<name>/expected.safetensors ("logits") and expected.json (loss); CI checks that our loader and forward
    give the same numbers. A stacked-expert merge of the same checkpoint (stacked_dir) must load to the same logits.
    """
    for name in sorted(os.listdir(merged_root)):
        model_dir = os.path.join(merged_root, name, "model")
        if not os.path.isfile(os.path.join(model_dir, "config.json")):
            continue
        with open(os.path.join(fixtures_root, name, "batch.json")) as f:
            batch = json.load(f)
        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="eager")
        model.eval()
        with torch.no_grad():
            out = forward(model, batch)
        logits = out.logits[0].contiguous()
        if stacked_dir:
            other = AutoModelForCausalLM.from_pretrained(stacked_dir, dtype=torch.float32, attn_implementation="eager")
            other.eval()
            with torch.no_grad():
                diff = (forward(other, batch).logits[0] - logits).abs().max().item()
            if diff != 0.0:
                sys.exit(f"{name}: stacked-expert merge loads to different logits (max diff {diff})")
            print(f"{name}: stacked-expert merge loads to identical logits")
        save_file({"logits": logits}, os.path.join(merged_root, name, "expected.safetensors"))
        with open(os.path.join(merged_root, name, "expected.json"), "w") as f:
            json.dump({"model": name, "loss": out.loss.item(), "batch": f"tests/fixtures/hf/{name}/batch.json",
                       "transformers_version": transformers.__version__, "torch_version": torch.__version__}, f, indent=1)
        print(f"{name}: merged model loads in transformers; loss {out.loss.item():.6f}")


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--configs", default=os.path.join(root, "configs", "model_configs"))
    parser.add_argument("--out", default=os.path.join(root, "tests", "fixtures", "hf"))
    parser.add_argument("--models", default="qwen3_toy,qwen3_moe_toy,qwen3_toy_tied")
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--check-merged", metavar="DIR",
                        help="instead: load veomni-ckpt-merge outputs DIR/<name>/model and record their logits")
    parser.add_argument("--stacked", metavar="DIR", help="with --check-merged: a stacked-expert merge to compare")
    args = parser.parse_args()
    torch.use_deterministic_algorithms(True)
    if args.check_merged:
        check_merged(args.check_merged, args.out, args.stacked)
        return
    for name in args.models.split(","):
        generate(name, args.configs, args.out, args.seed)


if __name__ == "__main__":
    main()
