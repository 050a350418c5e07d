#!/usr/bin/env python3
"""Generates the HuggingFace reference fixture of the multimodal LM (run where torch + transformers 5.17 are).

For each model of tests/fixtures/thinker/models/ (the toy configs with the
vocabulary cut to 256, special ids at 248..254, vision hidden 16, MoE intermediate 24 so that expert layouts are
unambiguous by shape, router logits off) and each input set of tests/fixtures/thinker/inputs/ (one
veomni-dummy-data sample and one veomni-preprocess sample per family, made by tests/fixtures/thinker/make_inputs.sh
with our own tools and committed), the model is built with seeded weights (norms and biases perturbed), fed the
exported inputs INCLUDING our stored 3-D position_ids (a hook asserts the language model received exactly them),
and writes
  models/<model>/weights.safetensors   every parameter under the name our loader expects (Omni: "thinker." + the
                                       thinker's own names; experts as gate_up_proj [E, 2I, H], down_proj [E, H, I])
  cases/<model>_<set>/outputs.safetensors  logits f32 [S, V]
  cases/<model>_<set>/grads.safetensors    grad.<name> of the loss for every parameter
  cases/<model>_<set>/expected.json        loss (sum of token cross-entropies over the non-ignored shifted targets
                                       divided by their count: our normalisation; no MoE aux loss), the AdamW
                                       hyper-parameters, the losses before each of 3 torch.optim.AdamW steps and after
                                       the third, per-tensor checksums of the final parameters, versions
Usage: python3 scripts/gen_thinker_fixtures.py [--cases all|<model>_<set>,...]
"""
import argparse
import json
import os
import sys
import tempfile
import traceback

import torch
import transformers
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from hf_thinker_util import model_class, set_eager, thinker_kwargs

SEED = 4321


def perturb(model, generator):
    """HF init leaves norms at 1 and biases at 0: move them so that their gradients are exercised."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(".bias") or "norm" in name:
                p.add_(0.1 * torch.randn(p.shape, generator=generator))


# ---------------------------------------------------------------------------------------- multi-model cases (#10)

# model -> (transformers class, input family, prefix of our names before the class's own parameter names)
MODELS = {
    "qwen3_vl_toy": ("Qwen3VLForConditionalGeneration", "qwen3vl", ""),
    "qwen3_vl_moe_toy": ("Qwen3VLMoeForConditionalGeneration", "qwen3vl", ""),
    "qwen3_omni_moe_toy": ("Qwen3OmniMoeThinkerForConditionalGeneration", "qwen3omni", "thinker."),
}
INPUT_SETS = ("dummy", "preprocess")
# Our AdamW (libcommon/optim/adamw.*): torch.optim.AdamW semantics; betas and eps are train_config's defaults, a
# larger lr and a non-zero decay so that three steps move every parameter measurably. No gradient clipping.
ADAMW = {"lr": 1e-3, "betas": [0.9, 0.95], "eps": 1e-8, "weight_decay": 0.1}
ADAMW_STEPS = 3


def no_decay(name):
    """optim/adamw.cc parameter_uses_weight_decay: no decay on names containing 'norm' or ending in '.bias'."""
    return "norm" in name or name.endswith(".bias")


def build_model(model_name, fixtures):
    class_name, _, _ = MODELS[model_name]
    config = transformers.AutoConfig.from_pretrained(os.path.join(fixtures, "models", model_name))
    if hasattr(config, "thinker_config"):
        config = config.thinker_config
    set_eager(config)
    torch.manual_seed(SEED)
    model = model_class(class_name)._from_config(config, attn_implementation="eager").float()
    model.train()  # dropout is 0 everywhere; train() is the training path
    perturb(model, torch.Generator().manual_seed(SEED + 1))
    return model, config


def text_config_of(config):
    return config.text_config


def to_our_layout(name, tensor, text_config):
    """Our layout of a parameter (or its gradient): experts as gate_up_proj [E, 2I, H] and down_proj [E, H, I].
    The fixture configs make 2I, I and H distinct, so a transposed layout is recognised by its shape."""
    e = getattr(text_config, "num_experts", None) or getattr(text_config, "num_local_experts", None)
    h, i = text_config.hidden_size, getattr(text_config, "moe_intermediate_size", None)
    shape = tuple(tensor.shape)
    if name.endswith("mlp.experts.gate_up_proj") and shape == (e, h, 2 * i):
        return tensor.transpose(1, 2).contiguous()
    if name.endswith("mlp.experts.down_proj") and shape == (e, i, h):
        return tensor.transpose(1, 2).contiguous()
    return tensor.detach().contiguous()


def language_model_of(model):
    inner = model.model
    return inner.language_model if hasattr(inner, "language_model") else inner


def forward_logits(model, inputs, check_positions):
    kwargs = thinker_kwargs(inputs)
    recorded = {}

    def record(module, args_, kw):
        recorded["position_ids"] = kw.get("position_ids")

    handle = language_model_of(model).register_forward_pre_hook(record, with_kwargs=True)
    try:
        logits = model(**kwargs).logits[0].float()
    finally:
        handle.remove()
    if check_positions:
        got = recorded.get("position_ids")
        if got is None:
            raise RuntimeError("the language model was called without position_ids")
        got = got[-3:].reshape(3, -1)  # a leading text-position row, where a version adds one, is not ours
        if not torch.equal(got.to(inputs["position_ids"].dtype), inputs["position_ids"]):
            raise RuntimeError("the language model did not receive our stored position_ids")
    return logits


def mean_ce(logits, targets):
    """Our loss: the sum of token cross-entropies over the non-ignored (shifted) targets divided by their count."""
    valid = int((targets != -100).sum())
    return torch.nn.functional.cross_entropy(logits, targets, ignore_index=-100, reduction="sum") / valid, valid


def fill_missing_grads(model):
    """torch's AdamW skips a parameter whose grad is None (no decay either); ours updates every slot with its (zero)
    gradient, so a parameter that no input reaches gets an explicit zero gradient."""
    missing = []
    for name, p in model.named_parameters():
        if p.grad is None:
            p.grad = torch.zeros_like(p)
            missing.append(name)
    return missing


def generate_case(model_name, input_set, fixtures):
    _, family, prefix = MODELS[model_name]
    inputs = load_file(os.path.join(fixtures, "inputs", f"{family}_{input_set}.safetensors"))
    targets = inputs["target_ids"]

    model, config = build_model(model_name, fixtures)
    text_config = text_config_of(config)
    initial = {prefix + n: p.detach().clone() for n, p in model.named_parameters()}
    ours = {name: to_our_layout(name, t, text_config) for name, t in initial.items()}
    weights_path = os.path.join(fixtures, "models", model_name, "weights.safetensors")
    if os.path.exists(weights_path):  # written by the other input set's case: the seeded weights must agree
        saved = load_file(weights_path)
        if saved.keys() != ours.keys() or any(not torch.equal(saved[k], ours[k]) for k in ours):
            raise RuntimeError(f"{weights_path}: the seeded weights differ between the input sets' builds")
    else:
        save_file(ours, weights_path)

    model.zero_grad(set_to_none=True)
    logits = forward_logits(model, inputs, check_positions=True)
    loss, valid = mean_ce(logits, targets)
    loss.backward()
    without_grad = fill_missing_grads(model)
    out_dir = os.path.join(fixtures, "cases", f"{model_name}_{input_set}")
    os.makedirs(out_dir, exist_ok=True)
    save_file({"logits": logits.detach().contiguous()}, os.path.join(out_dir, "outputs.safetensors"))
    save_file({"grad." + prefix + n: to_our_layout(prefix + n, p.grad, text_config)
               for n, p in model.named_parameters()}, os.path.join(out_dir, "grads.safetensors"))

    # AdamW from the same initial weights.
    model, _ = build_model(model_name, fixtures)
    named = list(model.named_parameters())
    optimizer = torch.optim.AdamW(
        [{"params": [p for n, p in named if not no_decay(prefix + n)], "weight_decay": ADAMW["weight_decay"]},
         {"params": [p for n, p in named if no_decay(prefix + n)], "weight_decay": 0.0}],
        lr=ADAMW["lr"], betas=tuple(ADAMW["betas"]), eps=ADAMW["eps"], foreach=False)
    losses = []
    for _ in range(ADAMW_STEPS):
        optimizer.zero_grad(set_to_none=True)
        step_loss, _ = mean_ce(forward_logits(model, inputs, check_positions=False), targets)
        losses.append(step_loss.item())
        step_loss.backward()
        fill_missing_grads(model)
        optimizer.step()
    with torch.no_grad():
        losses.append(mean_ce(forward_logits(model, inputs, check_positions=False), targets)[0].item())
    final = {}
    for n, p in named:
        name = prefix + n
        value = to_our_layout(name, p.detach(), text_config).double()
        delta = value - ours[name].double()
        final[name] = {"sum": value.sum().item(), "abs_sum": value.abs().sum().item(),
                       "delta_sum": delta.sum().item(), "delta_abs_sum": delta.abs().sum().item()}

    expected = {
        "model": model_name, "inputs": f"inputs/{family}_{input_set}.safetensors", "class": MODELS[model_name][0],
        "loss": loss.item(), "valid_tokens": valid, "seq_len": int(targets.numel()),
        "loss_normalisation": "sum of CE over targets != -100 divided by their count; no MoE aux loss",
        "params_without_grad": without_grad,
        "adamw": dict(ADAMW, no_decay="parameters whose name contains 'norm' or ends with '.bias'",
                      grad_clipping="none"),
        "adamw_losses": losses,
        "final_params": final,
        "seed": SEED, "torch": torch.__version__, "transformers": transformers.__version__,
    }
    with open(os.path.join(out_dir, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1)
        f.write("\n")
    print(f"{model_name}_{input_set}: S={targets.numel()}, loss {loss.item():.6f}, AdamW losses {losses}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser.add_argument("--fixtures", default=os.path.join(root, "tests/fixtures/thinker"),
                        help="the directory holding models/, inputs/ and cases/")
    parser.add_argument("--cases", default="all", help="all, or a comma list of <model>_<set>")
    args = parser.parse_args()
    print(f"torch {torch.__version__}, transformers {transformers.__version__}")
    torch.use_deterministic_algorithms(True)

    cases = [(m, s) for m in MODELS for s in INPUT_SETS]
    if args.cases != "all":
        wanted = set(args.cases.split(","))
        cases = [c for c in cases if f"{c[0]}_{c[1]}" in wanted]
        if not cases:
            sys.exit(f"no case matches --cases {args.cases}")
    # Both input sets of a model share models/<model>/weights.safetensors: start from a clean slate.
    for model_name in {m for m, s in cases}:
        path = os.path.join(args.fixtures, "models", model_name, "weights.safetensors")
        if os.path.exists(path):
            os.remove(path)
    failed = []
    for model_name, input_set in cases:
        label = f"{model_name}_{input_set}"
        try:
            generate_case(model_name, input_set, args.fixtures)
        except Exception as error:  # one case's failure must not hide the others'
            traceback.print_exc()
            print(f"FAILED {label}: {type(error).__name__}: {error}", file=sys.stderr)
            failed.append(label)
    if failed:
        sys.exit(f"{len(failed)} case(s) failed: {', '.join(failed)}")
    print(f"all {len(cases)} case(s) written")


if __name__ == "__main__":
    main()
