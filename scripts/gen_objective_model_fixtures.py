#!/usr/bin/env python3
"""Generates whole-model reference fixtures of the DPO, reward, value and PPO actor objectives with transformers.

Run where torch + transformers are installed, from the repository root:
    python3 scripts/gen_objective_model_fixtures.py [--out DIR] [--cases a,b,...]
Everything runs in fp32 on the CPU, eager attention, deterministic algorithms, fixed seeds. For each case it writes
tests/fixtures/objective_models/<case>/ (each case is written to <case>.tmp first, then renamed):
  batch.json            {"samples": [...]}: 3 preference pairs or 3 rollout samples (keys below)
  expected.json         objective, config, loss, metrics, AdamW losses, normaliser, model_dir, versions, seeds, and
                        packed_row: the row these samples pack to (ids, positions, shifted targets, cu_seqlens,
                        sequence roles, shifted rollout values, per-sequence reference log-probs)
  expected.safetensors  f32 "grad.<torch parameter name>" for every trainable parameter of the policy
  model/                save_pretrained of a model made here (reward and value cases only; the DPO and actor cases
                        reuse tests/fixtures/hf/qwen3_toy/model and tests/fixtures/hf/qwen3_moe_toy/model)
tests/unit/test_objective_model_fixtures.cc checks the C++ model + objective against these files with no Python.

Cases
  dpo_sigmoid_dense  qwen3_toy policy; the reference is a frozen copy of the start weights (never stepped);
                     dpo_config beta 0.1, label_smoothing 0.1, loss_type sigmoid, refer_model_precision float32
  dpo_ipo_moe        qwen3_moe_toy policy; reference log-probs from the dataset (ref_chosen_logps /
                     ref_rejected_logps: the start model's own sums plus noise); loss_type ipo, beta 0.3
  reward_dense       Qwen3ForSequenceClassification (num_labels 1) from the qwen3_toy config, made here
  reward_moe         Qwen3MoeForSequenceClassification from the qwen3_moe_toy config, made here
  value_dense        Qwen3ForTokenClassification (num_labels 1, score with bias, classifier_dropout 0), made here;
                     critic cliprange_value 0.5 against random returns / old_values
  value_moe          the same with Qwen3MoeForTokenClassification from the qwen3_moe_toy config (router aux loss
                     added, as output_router_logits is on)
  actor_dense        qwen3_toy policy, verl vanilla PPO loss: clip_ratio 0.2, clip_ratio_c 3.0, entropy_coeff 0.01,
  actor_moe          use_kl_loss, kl_loss_coef 0.05, kl_loss_type low_var_kl (qwen3_moe_toy for actor_moe)
  dpo_sigmoid_vl     the Qwen3-VL toy of tests/fixtures/thinker/models/qwen3_vl_toy (its weights.safetensors, our
                     names = transformers' Qwen3VLForConditionalGeneration names), DPO sigmoid as dpo_sigmoid_dense
                     against a frozen reference copy, on 2 multimodal pairs with an image in the prompt (below)
  reward_vl          the same toy's Qwen3VLModel with a reward head (score, no bias, made here: normal(0,
  value_vl           initializer_range) as transformers initialises a classification head; value_vl's has a bias,
                     0); model/ holds config.json and weights.safetensors under transformers' names (model.*,
                     score.*); transformers has no Qwen3-VL classification class, so the value is score(the
                     base model's last_hidden_state), as ...ForSequenceClassification / ...ForTokenClassification
                     compute it; on 2 multimodal pairs (reward) or 2 multimodal rollouts (value, critic as value_dense)
  actor_vl           the Qwen3-VL toy as dpo_sigmoid_vl, PPO actor as actor_dense, on 2 multimodal rollouts
  Multimodal cases have "multimodal": true in expected.json.
  lora_sft_dense     LoRA (model.lora_config in expected.json "lora") on the qwen3_toy causal LM, SFT cross-entropy:
                     PEFT's LoraConfig on q/k/v/o/gate/up/down_proj, rank 4, alpha 8; the base frozen
  lora_sft_moe       the same on qwen3_moe_toy with use_rslora, alpha 4; PEFT 0.21 adapts the experts' fused
                     gate_up_proj / down_proj per expert itself (its target_parameters: A [E*r, in], B [out, E*r],
                     stored here in our layout A [E, r, in], B [E, out, r]; gate_up_proj's rank 2r and alpha 2*alpha
                     through its rank_pattern / alpha_pattern, since it stands for gate_proj and up_proj)
  lora_sft_moe_shared  the same with share_expert_lora, which PEFT has not: PEFT on the attention projections, and
                     one A [r, in], B [out, r] per layer shared by its experts (gate_up_proj's of rank 2r, alpha
                     2*alpha, standing for gate_proj and up_proj as PEFT makes it): the experts run on W + scale * B A
                     and dA, dB follow from the merged tensor's gradient by the chain rule (exact)
  lora_sft_vl        the Qwen3-VL toy with adapters on the language model's q/v/down_proj and the vision tower's
                     attn.qkv and mlp.linear_fc1, on 2 multimodal rollouts (labels on the responses)
  lora_dpo_dense     DPO (as dpo_sigmoid_dense) with a LoRA policy whose reference is the policy with its adapters off
  LoRA cases start from adapter values drawn from LORA_SEED (A uniform in +-1/sqrt(in), B normal(0, 0.02): a zero B,
  PEFT's init, would make every dA zero) and write them to adapters.safetensors under our names (PEFT's saved names
  without base_model.model.); expected.safetensors holds the gradients of the adapters only (the base is frozen)
  and "logits" [S, V] of the start model; AdamW steps update the adapters only. sft: loss = mean cross-entropy over
  the label tokens (+ router_aux_loss_coef * aux for the MoE toy), metric foundation_loss.

Multimodal rollouts (value_vl, actor_vl): one sequence per sample, the prompt as a pair's (below), then the response
  (labels -100 on the prompt); the rollout keys as the text rollouts'; transformers runs each sample alone.

Multimodal pairs (dpo_sigmoid_vl, reward_vl; man veomni-data(5), PREFERENCE PAIRS)
  Each half holds the whole prompt: 3 text tokens, <|vision_start|>, the image's merged tokens, <|vision_end|>, 2
  text tokens; then its answer. The image's patches are stored twice (the chosen half's copy, then the rejected
  half's), image_grid_thw has one row per copy, image_mask marks both runs, input_ids are 0 under the mask, and
  position_ids [3, L] are Qwen3-VL's M-RoPE positions of each half (computed here: text advances all streams by one,
  an image block takes (t, h/2, w/2) grid indices from the block's start, text resumes after its largest index),
  restarting at 0 at chosen_length. These samples go to batch.safetensors ("<k>.<key>", k the sample) instead of
  batch.json. transformers runs each half alone (its own copy of the image; the packed row's block-diagonal mask
  makes the halves independent), and the logits are concatenated in row order: the vision tower's gradient is the
  sum over both halves' copies, as veomni-train computes it on the packed row.

Samples (the project's stored keys, man veomni-data(5))
  input_ids, labels: prompt tokens have label -100. A preference pair is ONE sample: the chosen sequence, then the
  rejected one; chosen_length = the chosen sequence's tokens; position_ids 0..Lc-1 then 0..Lr-1; both halves start
  with the same 2-3 prompt tokens (label -100). The DPO-from-dataset case adds ref_chosen_logps and
  ref_rejected_logps (one float per pair). A rollout sample adds per-token lists of its length: returns and
  old_values (value case), advantages, old_log_probs and ref_log_probs (actor cases), 0 where labels are -100.
  Convention (libcommon/data/collator.h TokenSample, Batch::token_values): rollout entry i of a sample belongs to
  predicting labels[i], i.e. to the logits (or the value) at position i-1 of the sample; the collator shifts these
  lists with the labels. Every float is rounded to f32, as the dataset stores them.

Packing (libcommon/data/collator.cc pack_samples, mirrored by pack() below)
  Samples are concatenated into one row; the first label of every later sample and the first label of a pair's
  rejected half become -100 (nothing is predicted across a boundary); positions restart at 0 for every sample and
  for the rejected half; targets are shifted: target[t] = label[t+1] (the row's last target is -100). The row runs
  through transformers as one sequence with restarting position_ids and attention_mask None, which makes
  transformers build a block-diagonal causal mask; the script checks that the packed forward equals running every
  sequence alone.

Losses (the formulas of libcommon/objective/{preference_losses,token_losses}.h, in float64 over the fp32 model's
per-token values; one micro-batch, so the global normaliser is this row's)
  log-prob of target t  log_softmax(logits[t])[target[t]]; a sequence's log-prob is the sum over its tokens
  dpo      z = (chosen - rejected) - (ref_chosen - ref_rejected); sigmoid -(1-ls) logsig(beta z) - ls logsig(-beta z),
           ipo (z - 1/(2 beta))^2; mean over the pairs; metrics dpo_loss, chosen_rewards, rejected_rewards,
           reward_accuracy, reward_margin
  reward   r = score(final-normed hidden state) at the sequence's last token (computed here from the base model's
           hidden states of the packed row: HF's pad-token pooling does not apply to packed rows);
           mean over pairs of -logsigmoid(r_chosen - r_rejected); metrics rm_loss, reward_accuracy, chosen_reward,
           rejected_reward
  value    v[t] = score(hidden[t]) (+ bias) for target t; verl's clipped value loss, token-mean over the response
           tokens (targets != -100); metrics vf_loss, vf_clipfrac
  actor    verl's compute_policy_loss_vanilla with dual clip, minus entropy_coeff * token-mean softmax entropy of
           logits[t] (gradient flows through it), plus kl_loss_coef * token-mean low_var_kl; metrics pg_loss,
           pg_clipfrac, pg_clipfrac_lower, ppo_kl, entropy, kl_loss
  MoE      the policy forward's router aux loss (transformers' load_balancing_loss_func over the packed row's router
           logits, attention_mask None) adds router_aux_loss_coef * aux to the loss, as TRL's DPOTrainer does with
           output_router_logits; the metric aux_loss reports it. The reference adds none.
  expected.json's loss and metrics are those of the start weights; adamw_losses the loss before each of 3 AdamW steps
  on the same batch plus the loss after the third (the DPO reference stays at the start weights throughout).

Kinks: a token whose PPO ratio or value sits within KINK_MARGIN of a clip boundary (or a pair whose rewards nearly
tie) would make the fp32 comparison depend on rounding, so such data is redrawn (data_seed in expected.json).
"""
import argparse
import contextlib
import copy
import json
import math
import os
import re
import shutil
import sys

import torch
import torch.nn.functional as F
import transformers
from safetensors.torch import save_file
from transformers import (AutoConfig, AutoModelForCausalLM, AutoModelForSequenceClassification,
                          AutoModelForTokenClassification)

IGNORE = -100
ADAMW = {"lr": 1e-3, "betas": [0.9, 0.95], "eps": 1e-8, "weight_decay": 0.1}
# (chosen tokens, rejected tokens, shared prompt tokens) of the 3 pairs: samples of 16, 11 and 18 tokens.
PAIR_SHAPES = [(7, 9, 3), (6, 5, 2), (10, 8, 3)]
# (tokens, prompt tokens) of the 3 rollout samples.
ROLLOUT_SHAPES = [(12, 3), (7, 2), (19, 3)]
KINK_MARGIN = 1e-3
DATA_ATTEMPTS = 20

DPO_SIGMOID = {"beta": 0.1, "label_smoothing": 0.1, "loss_type": "sigmoid", "reference_free": False,
               "refer_model_precision": "float32"}
DPO_IPO = {"beta": 0.3, "label_smoothing": 0.0, "loss_type": "ipo", "reference_free": False,
           "refer_model_precision": "float32"}
ACTOR = {"clip_ratio": 0.2, "clip_ratio_c": 3.0, "entropy_coeff": 0.01, "use_kl_loss": True, "kl_loss_coef": 0.05,
         "kl_loss_type": "low_var_kl", "loss_agg_mode": "token-mean"}
CRITIC = {"cliprange_value": 0.5, "loss_agg_mode": "token-mean"}
# model.lora_config of the LoRA cases (our keys; exclude_modules "" = none).
LORA_ALL = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
LORA_DENSE = {"rank": 4, "alpha": 8.0, "use_rslora": False, "lora_modules": LORA_ALL, "exclude_modules": "",
              "share_expert_lora": False}
LORA_MOE = {"rank": 4, "alpha": 4.0, "use_rslora": True, "lora_modules": LORA_ALL, "exclude_modules": "",
            "share_expert_lora": False}
LORA_VL = {"rank": 4, "alpha": 8.0, "use_rslora": False,
           "lora_modules": ["q_proj", "v_proj", "down_proj", "attn.qkv", "mlp.linear_fc1"], "exclude_modules": "",
           "share_expert_lora": False}
LORA_SEED = 4321
# The adapters' start values change the weights by about a third of their init scale: large enough to matter, small
# enough that the MoE routing keeps the margins of the toy's init (a near-tie would flip with rounding).
LORA_B_STD = 0.02

# head, as train/train_model.h names it: causal_lm (the HF causal LM of tests/fixtures/hf/<base>), sequence_reward
# or token_value (made here from configs/model_configs/<base>).
CASES = {
    "dpo_sigmoid_dense": dict(objective="dpo", base="qwen3_toy", head="causal_lm",
                              config={"dpo_config": DPO_SIGMOID}, reference="model"),
    "dpo_ipo_moe": dict(objective="dpo", base="qwen3_moe_toy", head="causal_lm",
                        config={"dpo_config": DPO_IPO}, reference="dataset"),
    "reward_dense": dict(objective="reward", base="qwen3_toy", head="sequence_reward", config={}),
    "reward_moe": dict(objective="reward", base="qwen3_moe_toy", head="sequence_reward", config={}),
    "value_dense": dict(objective="value", base="qwen3_toy", head="token_value", config={"critic": CRITIC}),
    "actor_dense": dict(objective="ppo_actor", base="qwen3_toy", head="causal_lm", config={"actor": ACTOR}),
    "actor_moe": dict(objective="ppo_actor", base="qwen3_moe_toy", head="causal_lm", config={"actor": ACTOR}),
    "dpo_sigmoid_vl": dict(objective="dpo", base="qwen3_vl_toy", head="causal_lm", multimodal=True,
                           config={"dpo_config": DPO_SIGMOID}, reference="model"),
    "value_moe": dict(objective="value", base="qwen3_moe_toy", head="token_value", config={"critic": CRITIC}),
    "reward_vl": dict(objective="reward", base="qwen3_vl_toy", head="sequence_reward", multimodal=True, config={}),
    "value_vl": dict(objective="value", base="qwen3_vl_toy", head="token_value", multimodal=True,
                     config={"critic": CRITIC}),
    "actor_vl": dict(objective="ppo_actor", base="qwen3_vl_toy", head="causal_lm", multimodal=True,
                     config={"actor": ACTOR}),
    "lora_sft_dense": dict(objective="sft", base="qwen3_toy", head="causal_lm", config={}, lora=LORA_DENSE),
    "lora_sft_moe": dict(objective="sft", base="qwen3_moe_toy", head="causal_lm", config={}, lora=LORA_MOE),
    "lora_sft_moe_shared": dict(objective="sft", base="qwen3_moe_toy", head="causal_lm", config={},
                                lora=dict(LORA_MOE, share_expert_lora=True)),
    "lora_sft_vl": dict(objective="sft", base="qwen3_vl_toy", head="causal_lm", multimodal=True, config={},
                        lora=LORA_VL),
    "lora_dpo_dense": dict(objective="dpo", base="qwen3_toy", head="causal_lm", config={"dpo_config": DPO_SIGMOID},
                           reference="adapters_off", lora=LORA_DENSE),
}
# Multimodal pairs: (chosen answer tokens, rejected answer tokens, image grid (t, h, w) in patches) of the 2 pairs.
VL_PAIR_SHAPES = [(4, 3, (1, 4, 4)), (2, 5, (1, 8, 4))]
# Multimodal rollouts: (response tokens, image grid) of the 2 samples.
VL_ROLLOUT_SHAPES = [(6, (1, 4, 4)), (9, (1, 8, 4))]
VL_TEXT_VOCAB = 240  # random text ids stay below the special ids (248..254) of the toy's 256-token vocabulary


class KinkTooClose(Exception):
    """The data puts a clip boundary or a metric's comparison within rounding reach: draw other data."""


def f32(values):
    """Rounds to f32 (what the dataset stores) and returns Python floats."""
    return torch.tensor(values, dtype=torch.float32).tolist()


def no_decay(name):
    # Same rule as veomni's optimizer: no weight decay on norms and biases (HF Trainer convention).
    return "norm" in name or name.endswith(".bias")


# ---------------------------------------------------------------- data and packing

def random_tokens(vocab_size, n, generator):
    return torch.randint(0, vocab_size, (n,), generator=generator).tolist()


def make_pairs(vocab_size, generator):
    samples = []
    for chosen, rejected, prompt in PAIR_SHAPES:
        shared = random_tokens(vocab_size, prompt, generator)
        halves = [shared + random_tokens(vocab_size, n - prompt, generator) for n in (chosen, rejected)]
        labels = [[IGNORE] * prompt + h[prompt:] for h in halves]
        samples.append({"input_ids": halves[0] + halves[1], "labels": labels[0] + labels[1],
                        "position_ids": list(range(chosen)) + list(range(rejected)), "chosen_length": chosen})
    return samples


def make_rollouts(vocab_size, generator):
    samples = []
    for length, prompt in ROLLOUT_SHAPES:
        ids = random_tokens(vocab_size, length, generator)
        samples.append({"input_ids": ids, "labels": [IGNORE] * prompt + ids[prompt:]})
    return samples


def pack(samples):
    """The collator's packed row (pack_samples): ids, positions, shifted targets, sequences and where samples start."""
    ids, labels, positions, starts = [], [], [], []
    cu, roles = [0], []
    for k, s in enumerate(samples):
        at, length = len(ids), len(s["input_ids"])
        starts.append(at)
        sample_labels = list(s["labels"])
        if k > 0:
            sample_labels[0] = IGNORE  # nothing predicted across the sample boundary
        ids += s["input_ids"]
        positions += s.get("position_ids", list(range(length)))
        chosen = s.get("chosen_length", 0)
        if chosen:
            sample_labels[chosen] = IGNORE  # nor across the pair's boundary
            cu += [at + chosen, at + length]
            roles += ["chosen", "rejected"]
        else:
            cu.append(at + length)
            roles.append("plain")
        labels += sample_labels
    targets = labels[1:] + [IGNORE]
    return {"input_ids": ids, "position_ids": positions, "targets": targets, "cu_seqlens": cu, "roles": roles,
            "starts": starts}


def shift_token_values(samples, row, key):
    """A rollout key over the row as the collator shifts it: value[t] belongs to target t (0 where ignored)."""
    unshifted = [v for s in samples for v in s[key]]
    return [unshifted[t + 1] if row["targets"][t] != IGNORE else 0.0 for t in range(len(row["targets"]))]


def pair_sequences(row):
    """(chosen, rejected) sequence index pairs of the row."""
    return [(b, b + 1) for b, role in enumerate(row["roles"]) if role == "chosen"]


# ---------------------------------------------------------------- models

def moe_aux(model, router_logits):
    """transformers' router load-balancing loss over the packed row (attention_mask None), as its causal LM adds."""
    from transformers.models.qwen3_moe import modeling_qwen3_moe
    config = model.config
    experts = getattr(config, "num_experts", None) or getattr(config, "num_local_experts")
    return modeling_qwen3_moe.load_balancing_loss_func(router_logits, experts, config.num_experts_per_tok, None)


def is_moe(model):
    return model.config.model_type == "qwen3_moe"


def uses_aux(model):
    return is_moe(model) and bool(model.config.output_router_logits)


def run_model(model, head, ids, positions):
    """One forward over a row: {'logits' [S, V] | 'values' [S], 'aux' (MoE)}."""
    ids_t, pos_t = torch.tensor([ids]), torch.tensor([positions])
    # attention_mask None + restarting position_ids: transformers builds a block-diagonal causal mask.
    # use_cache=False: with a cache transformers skips the packed-sequence detection.
    if head == "causal_lm":
        out = model(input_ids=ids_t, position_ids=pos_t, use_cache=False)
        result = {"logits": out.logits[0]}
        if uses_aux(model):
            result["aux"] = out.aux_loss
            if getattr(out, "router_logits", None) is not None:
                again = moe_aux(model, out.router_logits)
                if (again - out.aux_loss).abs().item() > 1e-6 * (1 + out.aux_loss.abs().item()):
                    sys.exit(f"load_balancing_loss_func disagrees with the causal LM's aux_loss: {again} vs "
                             f"{out.aux_loss}")
        return result
    kwargs = {"output_router_logits": True} if uses_aux(model) else {}
    out = model.model(input_ids=ids_t, position_ids=pos_t, use_cache=False, **kwargs)
    hidden = out.last_hidden_state  # after the final norm
    if head == "token_value":
        hidden = model.dropout(hidden)  # p = 0
    result = {"values": model.score(hidden)[0, :, 0]}
    if uses_aux(model):
        if getattr(out, "router_logits", None) is None:
            sys.exit("the MoE base model returned no router_logits with output_router_logits=True")
        result["aux"] = moe_aux(model, out.router_logits)
    return result


def check_packing_is_block_diagonal(model, head, row, packed):
    """The packed forward must equal running every sequence alone (proves the block-diagonal mask was used)."""
    key = "logits" if head == "causal_lm" else "values"
    cu = row["cu_seqlens"]
    for b in range(len(cu) - 1):
        begin, end = cu[b], cu[b + 1]
        with torch.no_grad():
            alone = run_model(model, head, row["input_ids"][begin:end], list(range(end - begin)))[key]
        diff = (alone - packed[key][begin:end]).abs().max().item()
        if diff > 1e-4 and is_moe(model):
            # Rounding differs between the packed and the per-sequence forward; a token whose top-k experts nearly
            # tie can then route differently, which no fp32 comparison survives.
            raise KinkTooClose(f"packed and per-sequence forwards differ by {diff:.3g} (an MoE routing near-tie)")
        if diff > 1e-4:
            sys.exit(f"packed forward differs from the per-sequence forward by {diff}: packing not detected")


def load_model(spec, model_dir):
    model = load_base_model(spec, model_dir)
    return apply_lora(model, spec["lora"]) if spec.get("lora") else model


def load_base_model(spec, model_dir):
    head = spec["head"]
    if spec.get("multimodal"):
        return load_vl_model(model_dir, head)
    cls = {"causal_lm": AutoModelForCausalLM, "sequence_reward": AutoModelForSequenceClassification,
           "token_value": AutoModelForTokenClassification}[head]
    model = cls.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="eager")
    model.train()  # dropout is 0 in these configs; train() keeps router logits output on
    return model


def make_head_model(case, configs_root, model_dir, seed):
    """A reward or value model initialised by transformers from the toy config, saved with save_pretrained."""
    config = AutoConfig.from_pretrained(os.path.join(configs_root, case["base"]))
    config.num_labels = 1
    if case["head"] == "token_value":
        config.classifier_dropout = 0.0
    config._attn_implementation = "eager"
    cls = AutoModelForSequenceClassification if case["head"] == "sequence_reward" else AutoModelForTokenClassification
    torch.manual_seed(seed)
    model = cls.from_config(config, dtype=torch.float32, attn_implementation="eager")
    model.save_pretrained(model_dir)


class VlValueModel(torch.nn.Module):
    """Qwen3VLModel with a value head: what Qwen3ForSequenceClassification / ...ForTokenClassification are for text
    (transformers has no such class for Qwen3-VL); parameter names model.* and score.*."""

    def __init__(self, vl, bias):
        super().__init__()
        self.config = vl.config
        self.model = vl.model
        self.score = torch.nn.Linear(vl.config.text_config.hidden_size, 1, bias=bias)


def vl_model(model_dir, head):
    from hf_thinker_util import model_class, set_eager
    config = AutoConfig.from_pretrained(model_dir)
    set_eager(config)
    vl = model_class("Qwen3VLForConditionalGeneration")._from_config(config, attn_implementation="eager").float()
    return vl if head == "causal_lm" else VlValueModel(vl, bias=head == "token_value")


def load_vl_model(model_dir, head):
    """A Qwen3-VL model with the weights of model_dir/weights.safetensors (our names are transformers' names)."""
    from safetensors.torch import load_file
    model = vl_model(model_dir, head)
    model.load_state_dict(load_file(os.path.join(model_dir, "weights.safetensors")), strict=True)
    model.train()
    return model


def make_vl_head_model(spec, toy_dir, model_dir, seed):
    """The VL toy's weights with a value head initialised as transformers initialises one: config.json and
    weights.safetensors in model_dir."""
    from safetensors.torch import load_file
    model = vl_model(toy_dir, spec["head"])
    toy = load_file(os.path.join(toy_dir, "weights.safetensors"))
    model.load_state_dict({k: v for k, v in toy.items() if k.startswith("model.")}, strict=False)
    torch.manual_seed(seed)
    torch.nn.init.normal_(model.score.weight, mean=0.0, std=model.config.text_config.initializer_range)
    if model.score.bias is not None:
        torch.nn.init.zeros_(model.score.bias)
    state = {k: v.detach().contiguous() for k, v in model.state_dict().items()}
    missing = set(state) - set(toy) - {k for k in state if k.startswith("score.")}
    if missing:
        sys.exit(f"the VL toy's weights lack {sorted(missing)}")
    os.makedirs(model_dir)
    shutil.copy(os.path.join(toy_dir, "config.json"), os.path.join(model_dir, "config.json"))
    save_file(state, os.path.join(model_dir, "weights.safetensors"))



# ---------------------------------------------------------------- LoRA (the lora_* cases)

class ExpertAdapter:
    """LoRA on a fused expert tensor W [E, out, in]: W + scale * B A per expert (A [E, r, in], B [E, out, r]), as
    PEFT's target_parameters adapter, or shared by the experts (A [r, in], B [out, r]). The experts run on the merged
    tensor (a plain transformers forward); the adapters' gradients follow from the merged tensor's by the chain rule,
    dA = scale * B^T dW and dB = scale * dW A^T (summed over the experts when shared), which is exact."""

    def __init__(self, module, tensor, name, rank, scale, shared):
        weight = getattr(module, tensor)
        experts, out_features, in_features = weight.shape
        lead = () if shared else (experts,)
        self.module, self.tensor, self.name, self.scale = module, tensor, name, scale
        self.base = weight.detach().clone()
        self.lora_A = torch.zeros(*lead, rank, in_features, requires_grad=True)
        self.lora_B = torch.zeros(*lead, out_features, rank, requires_grad=True)
        weight.requires_grad_(True)  # its gradient is what the chain rule reads

    def merge(self, enabled=True):
        with torch.no_grad():
            delta = self.scale * torch.matmul(self.lora_B, self.lora_A) if enabled else 0.0
            getattr(self.module, self.tensor).copy_(self.base + delta)

    def take_gradients(self):
        """The adapters' gradients from the merged tensor's (which is then cleared)."""
        weight = getattr(self.module, self.tensor)
        d = weight.grad if weight.grad is not None else torch.zeros_like(weight)
        grad_a = self.scale * torch.matmul(self.lora_B.detach().transpose(-1, -2), d)
        grad_b = self.scale * torch.matmul(d, self.lora_A.detach().transpose(-1, -2))
        if self.lora_A.dim() == 2:
            grad_a, grad_b = grad_a.sum(0), grad_b.sum(0)
        self.lora_A.grad, self.lora_B.grad = grad_a, grad_b
        weight.grad = None

    def named_tensors(self):
        return [(f"{self.name}.lora_A.weight", self.lora_A), (f"{self.name}.lora_B.weight", self.lora_B)]


def expert_adapters(model):
    return getattr(model, "expert_adapters", [])


def rank_and_scale(cfg, module):
    """An experts' gate_up_proj selected through gate_proj and up_proj stands for both, as PEFT makes it: rank 2r,
    alpha 2*alpha; every other adapter rank r, alpha alpha."""
    fused = module.endswith(".experts.gate_up_proj") and not any(entry_matches(module, e) for e in cfg["lora_modules"])
    factor = 2 if fused else 1
    rank, alpha = factor * cfg["rank"], factor * cfg["alpha"]
    return rank, alpha / (math.sqrt(rank) if cfg["use_rslora"] else rank)


def entry_matches(module, entry):
    """PEFT's list semantics (as model.lora_config.lora_modules): the whole name or its last components."""
    return module == entry or module.endswith("." + entry)


def targets(cfg, module):
    """Whether `module` (our name) gets an adapter; an experts' gate_up_proj needs gate_proj and up_proj."""
    if cfg["exclude_modules"] and re.fullmatch(cfg["exclude_modules"], module):
        return False
    if any(entry_matches(module, e) for e in cfg["lora_modules"]):
        return True
    if module.endswith(".experts.gate_up_proj"):
        experts = module[:-len("gate_up_proj")]
        gate = any(entry_matches(experts + "gate_proj", e) for e in cfg["lora_modules"])
        up = any(entry_matches(experts + "up_proj", e) for e in cfg["lora_modules"])
        if gate != up:
            sys.exit(f"{module}: lora_modules lists only one of gate_proj and up_proj")
        return gate
    return False


def our_param_name(torch_name):
    """PEFT's parameter names as ours (PEFT's saved names without base_model.model.)."""
    name = torch_name.removeprefix("base_model.model.")
    return name.replace(".lora_A.default.weight", ".lora_A.weight").replace(".lora_B.default.weight", ".lora_B.weight")


def apply_lora(model, cfg):
    """PEFT's LoRA: on the linear modules, and (PEFT's target_parameters, which PEFT applies to transformers v5's MoE
    experts when gate_proj / up_proj / down_proj are targeted) one adapter per expert on the experts' fused tensors;
    with share_expert_lora (which PEFT has not) ExpertAdapter on the experts instead. Adapter values drawn from
    LORA_SEED in our layout (A uniform in +-1/sqrt(in) as PEFT's kaiming init, B normal(0, LORA_B_STD): a zero B would
    hide errors in dA)."""
    from peft import LoraConfig, get_peft_model
    shared = cfg["share_expert_lora"] and is_moe(model)
    expert_entries = ("gate_proj", "up_proj", "down_proj")
    peft_modules = [e for e in cfg["lora_modules"] if not (shared and e in expert_entries)]
    peft_config = LoraConfig(r=cfg["rank"], lora_alpha=cfg["alpha"], use_rslora=cfg["use_rslora"],
                             target_modules=peft_modules, exclude_modules=cfg["exclude_modules"] or None,
                             lora_dropout=0.0, bias="none")
    model = get_peft_model(model, peft_config)
    adapters = []
    for name, module in list(model.named_modules()):
        if not shared or not type(module).__name__.endswith("Experts"):
            continue
        for tensor in ("gate_up_proj", "down_proj"):
            ours = our_param_name(name) + "." + tensor
            if targets(cfg, ours):
                rank, scale = rank_and_scale(cfg, ours)
                adapters.append(ExpertAdapter(module, tensor, ours, rank, scale, True))
    model.expert_adapters = adapters
    model.lora_cfg = cfg
    generator = torch.Generator().manual_seed(LORA_SEED)
    with torch.no_grad():
        for entry in sorted(adapter_entries(model, cfg), key=lambda e: e.name):
            value = torch.empty(entry.shape)
            if ".lora_A" in entry.name:
                bound = 1.0 / math.sqrt(entry.shape[-1])
                value.uniform_(-bound, bound, generator=generator)
            else:
                value.normal_(0.0, LORA_B_STD, generator=generator)
            entry.tensor.copy_(entry.from_ours(value))
    for adapter in adapters:
        adapter.merge()
    model.train()
    return model


class AdapterEntry:
    """One adapter tensor under our name and layout (shape), and how its torch tensor maps to ours and back."""

    def __init__(self, name, tensor, shape, to_ours=lambda t: t, from_ours=lambda t: t):
        self.name, self.tensor, self.shape, self.to_ours, self.from_ours = name, tensor, tuple(shape), to_ours, from_ours


def peft_expert_entries(name, module):
    """PEFT's adapter of an experts' fused tensor [E, out, in]: A [E*r, in] (row e*r + k), B [out, E*r] (column
    k*E + e), as ours A [E, r, in] and B [E, out, r]."""
    experts = re.sub(r"(\.base_layer)+$", "", our_param_name(name))
    ours = f"{experts}.{module.parameter_name}"
    a, b = module.lora_A["default"].weight, module.lora_B["default"].weight
    rank = module.r["default"]  # 2r for a gate_up_proj that stands for gate_proj and up_proj
    count = a.shape[0] // rank
    out_features, in_features = b.shape[0], a.shape[1]
    return [AdapterEntry(ours + ".lora_A.weight", a, (count, rank, in_features),
                         lambda t: t.reshape(count, rank, in_features),
                         lambda t: t.reshape(count * rank, in_features)),
            AdapterEntry(ours + ".lora_B.weight", b, (count, out_features, rank),
                         lambda t: t.reshape(out_features, rank, count).permute(2, 0, 1),
                         lambda t: t.permute(1, 2, 0).reshape(out_features, rank * count))]


def adapter_entries(model, cfg):
    """Every adapter: PEFT's on linear modules and on the experts' tensors, and the shared experts' ExpertAdapter."""
    entries, expert_params = [], set()
    for name, module in model.named_modules():
        if hasattr(module, "parameter_name") and hasattr(module, "lora_A"):  # PEFT's ParamWrapper
            found = peft_expert_entries(name, module)
            expert_params |= {id(e.tensor) for e in found}
            entries += found
    merged = {id(getattr(a.module, a.tensor)) for a in expert_adapters(model)}
    for n, p in model.named_parameters():
        if p.requires_grad and id(p) not in merged and id(p) not in expert_params:
            entries.append(AdapterEntry(our_param_name(n), p, p.shape))
    for adapter in expert_adapters(model):
        entries += [AdapterEntry(n, t, t.shape) for n, t in adapter.named_tensors()]
    return entries


def adapter_named_tensors(model):
    """(our name, tensor in our layout) of every adapter."""
    return [(e.name, e.to_ours(e.tensor)) for e in adapter_entries(model, model.lora_cfg)]


@contextlib.contextmanager
def adapters_disabled(model):
    """The base model: PEFT's adapters off and the experts' tensors unmerged."""
    with model.disable_adapter():
        for adapter in expert_adapters(model):
            adapter.merge(enabled=False)
        try:
            yield
        finally:
            for adapter in expert_adapters(model):
                adapter.merge()


def adapter_tensors(model):
    return {name: t.detach().float().contiguous() for name, t in adapter_named_tensors(model)}


# ---------------------------------------------------------------- multimodal samples (the *_vl cases)

def mrope_positions(ids, image_token, grids, merge):
    """Qwen3-VL's M-RoPE positions [3, L] of one sequence whose image runs (ids == image_token) follow `grids`."""
    streams = [[], [], []]
    next_text, i, image = 0, 0, 0
    while i < len(ids):
        if ids[i] != image_token:
            for st in streams:
                st.append(next_text)
            next_text += 1
            i += 1
            continue
        t, h, w = grids[image]
        gh, gw = h // merge, w // merge
        for ti in range(t):
            for hi in range(gh):
                for wi in range(gw):
                    streams[0].append(next_text + ti)
                    streams[1].append(next_text + hi)
                    streams[2].append(next_text + wi)
        next_text += max(t, gh, gw)
        i += t * gh * gw
        image += 1
    return streams


def vl_prompt(config, grid, generator):
    """3 text tokens, <|vision_start|>, the image's merged tokens, <|vision_end|>, 2 text tokens; the image's patches."""
    vision = config.vision_config
    merge = vision.spatial_merge_size
    patch_dim = vision.in_channels * vision.temporal_patch_size * vision.patch_size ** 2
    t, h, w = grid
    image_tokens = t * h * w // (merge * merge)
    prompt = (random_tokens(VL_TEXT_VOCAB, 3, generator) + [config.vision_start_token_id] +
              [config.image_token_id] * image_tokens + [config.vision_end_token_id] +
              random_tokens(VL_TEXT_VOCAB, 2, generator))
    pixels = torch.randn(t * h * w, patch_dim, generator=generator, dtype=torch.float32)
    return prompt, pixels


def vl_unit(config, ids, pixels, grid):
    """transformers' inputs of one sequence run alone (its own copy of the image)."""
    positions = mrope_positions(ids, config.image_token_id, [grid], config.vision_config.spatial_merge_size)
    return {"hf_input_ids": torch.tensor(ids), "position_ids": torch.tensor(positions), "pixel_values": pixels,
            "image_grid_thw": torch.tensor([grid])}


def vl_sample(config, ids, labels, units, pixels, grids):
    """The stored sample (our layout): ids 0 under the image mask, [3, L] positions of its sequences in a row."""
    is_image = [x == config.image_token_id for x in ids]
    return {"input_ids": torch.tensor([0 if m else x for x, m in zip(ids, is_image)]), "labels": torch.tensor(labels),
            "position_ids": torch.cat([u["position_ids"] for u in units], dim=1),
            "image_mask": torch.tensor(is_image, dtype=torch.uint8), "pixel_values": torch.cat(pixels),
            "image_grid_thw": torch.tensor(grids)}


def make_vl_pairs(config, generator):
    """The stored pairs (tensors, our layout) and, per half, transformers' inputs."""
    samples, units = [], []
    for chosen_answer, rejected_answer, grid in VL_PAIR_SHAPES:
        prompt, pixels = vl_prompt(config, grid, generator)
        ids, labels, pair_units = [], [], []
        for n in (chosen_answer, rejected_answer):
            answer = random_tokens(VL_TEXT_VOCAB, n, generator)
            pair_units.append(vl_unit(config, prompt + answer, pixels, grid))
            ids += prompt + answer
            labels += [IGNORE] * len(prompt) + answer
        sample = vl_sample(config, ids, labels, pair_units, [pixels, pixels], [grid, grid])
        sample["chosen_length"] = torch.tensor([len(prompt) + chosen_answer])
        samples.append(sample)
        units += pair_units
    return samples, units


def make_vl_rollouts(config, generator):
    """The stored rollouts (tensors, our layout; the rollout keys are added later) and transformers' inputs."""
    samples, units = [], []
    for response_tokens, grid in VL_ROLLOUT_SHAPES:
        prompt, pixels = vl_prompt(config, grid, generator)
        response = random_tokens(VL_TEXT_VOCAB, response_tokens, generator)
        unit = vl_unit(config, prompt + response, pixels, grid)
        samples.append(vl_sample(config, prompt + response, [IGNORE] * len(prompt) + response, [unit], [pixels],
                                 [grid]))
        units.append(unit)
    return samples, units


def pack_vl(samples):
    """The multimodal collator's row: ours ids, [3, S] positions, shifted targets, sequences, sample starts."""
    ids, labels, positions, cu, roles, starts = [], [], [[], [], []], [0], [], []
    for k, s in enumerate(samples):
        at = len(ids)
        starts.append(at)
        sample_labels = s["labels"].tolist()
        if k > 0:
            sample_labels[0] = IGNORE
        ids += s["input_ids"].tolist()
        if "chosen_length" in s:
            chosen = int(s["chosen_length"][0])
            sample_labels[chosen] = IGNORE
            cu += [at + chosen, len(ids)]
            roles += ["chosen", "rejected"]
        else:
            cu.append(len(ids))
            roles.append("plain")
        labels += sample_labels
        for st in range(3):
            positions[st] += s["position_ids"][st].tolist()
    return {"input_ids": ids, "position_ids": positions, "targets": labels[1:] + [IGNORE], "cu_seqlens": cu,
            "roles": roles, "starts": starts}


def run_vl_units(model, head, units):
    """Each sequence alone through transformers, in the packed row's order: {'logits' [S, V] | 'values' [S]}."""
    from hf_thinker_util import thinker_kwargs
    if head == "causal_lm":
        return {"logits": torch.cat([model(**thinker_kwargs(u)).logits[0] for u in units])}
    values = [model.score(model.model(**thinker_kwargs(u)).last_hidden_state)[0, :, 0] for u in units]
    return {"values": torch.cat(values)}


# ---------------------------------------------------------------- per-token values of a forward

def token_logprobs(logits, targets):
    """log_softmax(logits[t])[target[t]] (0 where ignored) and the mask of the predicted targets."""
    t = torch.tensor(targets)
    mask = t != IGNORE
    logp = torch.log_softmax(logits, dim=-1).gather(-1, t.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    return torch.where(mask, logp, torch.zeros_like(logp)), mask


def softmax_entropy(logits):
    """verl's entropy_from_logits: logsumexp - sum softmax * logits, per position."""
    return torch.logsumexp(logits, dim=-1) - (torch.softmax(logits, dim=-1) * logits).sum(-1)


def sequence_sums(values, cu):
    return torch.stack([values[cu[b]:cu[b + 1]].sum() for b in range(len(cu) - 1)])


# ---------------------------------------------------------------- objectives (float64 over the model's f32 values)

def check_margin(what, distance):
    if distance < KINK_MARGIN:
        raise KinkTooClose(f"{what} within {distance:.2e}")


def dpo_objective(cfg, policy_logps, ref_logps, pairs, with_metrics):
    beta, ls = cfg["beta"], cfg["label_smoothing"]
    chosen = torch.stack([policy_logps[c] for c, _ in pairs])
    rejected = torch.stack([policy_logps[r] for _, r in pairs])
    ref_chosen = torch.stack([ref_logps[c] for c, _ in pairs])
    ref_rejected = torch.stack([ref_logps[r] for _, r in pairs])
    z = (chosen - rejected) - (ref_chosen - ref_rejected)
    if cfg["loss_type"] == "ipo":
        losses = (z - 1 / (2 * beta)) ** 2
    else:
        losses = -F.logsigmoid(beta * z) * (1 - ls) - F.logsigmoid(-beta * z) * ls
    n = len(pairs)
    loss = losses.sum() / n
    metrics = {}
    if with_metrics:
        chosen_rewards = beta * (chosen - ref_chosen).detach()
        rejected_rewards = beta * (rejected - ref_rejected).detach()
        for c, r in zip(chosen_rewards.tolist(), rejected_rewards.tolist()):
            if c != r:  # an exact tie (policy == reference) is the same in any implementation
                check_margin("chosen vs rejected DPO reward", abs(c - r))
        metrics = {"dpo_loss": loss.item(), "chosen_rewards": (chosen_rewards.sum() / n).item(),
                   "rejected_rewards": (rejected_rewards.sum() / n).item(),
                   "reward_accuracy": ((chosen_rewards > rejected_rewards).double().sum() / n).item(),
                   "reward_margin": ((chosen_rewards - rejected_rewards).sum() / n).item()}
    return loss, metrics


def reward_objective(values, row, with_metrics):
    cu = row["cu_seqlens"]
    last = values.double()[torch.tensor([cu[b + 1] - 1 for b in range(len(cu) - 1)])]
    pairs = pair_sequences(row)
    chosen = torch.stack([last[c] for c, _ in pairs])
    rejected = torch.stack([last[r] for _, r in pairs])
    n = len(pairs)
    loss = -F.logsigmoid(chosen - rejected).sum() / n
    metrics = {}
    if with_metrics:
        for c, r in zip(chosen.tolist(), rejected.tolist()):
            check_margin("chosen vs rejected reward", abs(c - r))
        metrics = {"rm_loss": loss.item(), "reward_accuracy": ((chosen > rejected).double().sum() / n).item(),
                   "chosen_reward": (chosen.detach().sum() / n).item(),
                   "rejected_reward": (rejected.detach().sum() / n).item()}
    return loss, metrics


def value_objective(cfg, values, inputs, mask):
    eps = cfg["cliprange_value"]
    vpreds = values.double()
    returns, old = inputs["returns"], inputs["old_values"]
    m = mask.double()
    g = m.sum()
    for v, o, r, keep in zip(vpreds.tolist(), old.tolist(), returns.tolist(), mask.tolist()):
        if keep:
            check_margin("value vs its clip range", min(abs(v - (o - eps)), abs(v - (o + eps))))
            clipped = min(max(v, o - eps), o + eps)
            if clipped != v:
                check_margin("clipped vs unclipped value loss", abs((v - r) ** 2 - (clipped - r) ** 2))
    # verl compute_value_loss (clip_by_value = max(min(x, hi), lo)), agg_loss token-mean
    vpredclipped = torch.max(torch.min(vpreds, old + eps), old - eps)
    vf_losses1 = (vpreds - returns) ** 2
    vf_losses2 = (vpredclipped - returns) ** 2
    loss = 0.5 * (torch.max(vf_losses1, vf_losses2) * m).sum() / g
    clipfrac = (torch.gt(vf_losses2, vf_losses1).double() * m).sum() / g
    return loss, {"vf_loss": loss.item(), "vf_clipfrac": clipfrac.item()}


def low_var_kl(logprob, ref_logprob):
    kl = torch.clamp(ref_logprob - logprob, min=-20, max=20)
    return torch.clamp(torch.exp(kl) - kl - 1, min=-10, max=10)


def actor_objective(cfg, logprobs, entropy, inputs, mask):
    lp, ent = logprobs.double(), entropy.double()
    old, adv, ref = inputs["old_log_probs"], inputs["advantages"], inputs["ref_log_probs"]
    m = mask.double()
    g = m.sum()
    low = high = cfg["clip_ratio"]
    c = cfg["clip_ratio_c"]
    for x, o, a, keep in zip(lp.tolist(), old.tolist(), adv.tolist(), mask.tolist()):
        if keep:
            ratio = math.exp(max(-20.0, min(20.0, x - o)))
            check_margin("PPO ratio vs its clip range", min(abs(ratio - (1 - low)), abs(ratio - (1 + high))))
            if a < 0:
                check_margin("PPO ratio vs the dual clip", abs(max(ratio, 1 - low) - c))

    def agg(v):  # agg_loss token-mean over the response tokens
        return (v * m).sum() / g

    # verl compute_policy_loss_vanilla
    negative_approx_kl = torch.clamp(lp - old, min=-20.0, max=20.0)
    ratio = torch.exp(negative_approx_kl)
    ppo_kl = agg(-negative_approx_kl)
    pg_losses1 = -adv * ratio
    pg_losses2 = -adv * torch.clamp(ratio, 1 - low, 1 + high)
    clip_pg_losses1 = torch.maximum(pg_losses1, pg_losses2)
    pg_clipfrac = agg(torch.gt(pg_losses2, pg_losses1).double())
    pg_losses3 = -adv * c
    clip_pg_losses2 = torch.min(pg_losses3, clip_pg_losses1)
    pg_clipfrac_lower = agg(torch.gt(clip_pg_losses1, pg_losses3).double() * (adv < 0).double())
    pg_loss = agg(torch.where(adv < 0, clip_pg_losses2, clip_pg_losses1))
    # dp_actor: entropy bonus and KL loss
    entropy_agg = agg(ent)
    kl_loss = agg(low_var_kl(lp, ref))
    loss = pg_loss - entropy_agg * cfg["entropy_coeff"] + kl_loss * cfg["kl_loss_coef"]
    metrics = {"pg_loss": pg_loss.item(), "pg_clipfrac": pg_clipfrac.item(),
               "pg_clipfrac_lower": pg_clipfrac_lower.item(), "ppo_kl": ppo_kl.item(), "entropy": entropy_agg.item(),
               "kl_loss": kl_loss.item()}
    return loss, metrics


# ---------------------------------------------------------------- one case

class Case:
    """A case's batch and how its loss is computed from the policy (and, for DPO, the frozen reference)."""

    def __init__(self, name, spec, model_dir, data_seed):
        self.name, self.spec, self.model_dir, self.data_seed = name, spec, model_dir, data_seed
        self.head, self.objective = spec["head"], spec["objective"]
        start = load_model(spec, model_dir)
        self.aux_coef = start.config.router_aux_loss_coef if uses_aux(start) else 0.0
        generator = torch.Generator().manual_seed(data_seed)
        self._make_samples(start, generator)
        self.mask = torch.tensor(self.row["targets"]) != IGNORE
        with torch.no_grad():
            packed = self.forward(start)
        self._check_packing(start, packed)
        self.reference = None
        self.ref_logps = None
        self.inputs = {}
        if self.objective == "dpo":
            self._dpo_data(start, packed, generator)
        elif self.objective == "value":
            self._value_data(packed, generator)
        elif self.objective == "ppo_actor":
            self._actor_data(packed, generator)

    def _make_samples(self, start, generator):
        vocab = start.config.vocab_size
        pairs = self.objective in ("dpo", "reward")
        self.samples = make_pairs(vocab, generator) if pairs else make_rollouts(vocab, generator)
        self.row = pack(self.samples)

    def forward(self, model):
        """One forward of the packed row: {'logits' [S, V] | 'values' [S], 'aux' (MoE)}."""
        return run_model(model, self.head, self.row["input_ids"], self.row["position_ids"])

    def _check_packing(self, start, packed):
        check_packing_is_block_diagonal(start, self.head, self.row, packed)

    # -- the dataset keys that depend on the start model

    def _per_sample(self, shifted_values, noise, overrides=None):
        """Per-sample lists (entry i belongs to labels[i]) from a per-target row quantity plus noise, f32, 0 on -100."""
        out = []
        for k, s in enumerate(self.samples):
            at = self.row["starts"][k]
            entries = []
            labels = s["labels"].tolist() if torch.is_tensor(s["labels"]) else s["labels"]
            for i, label in enumerate(labels):
                t = at + i - 1  # entry i predicts labels[i]: target t = at + i - 1 of the row
                if label == IGNORE or t < at or self.row["targets"][t] == IGNORE:
                    entries.append(0.0)
                else:
                    entries.append(shifted_values[t] + noise[t] + (overrides or {}).get(t, 0.0))
            out.append(f32(entries))
        return out

    def _set_token_key(self, key, lists):
        for s, values in zip(self.samples, lists):
            s[key] = values
        self.inputs[key] = torch.tensor(shift_token_values(self.samples, self.row, key), dtype=torch.float64)

    def _dpo_data(self, start, packed, generator):
        logp, _ = token_logprobs(packed["logits"], self.row["targets"])
        sums = sequence_sums(logp, self.row["cu_seqlens"]).double()
        if self.spec["reference"] == "adapters_off":
            return  # the policy itself with its adapters off (a LoRA policy needs no reference copy)
        if self.spec["reference"] == "model":
            # Same mode as the policy, so that at the start both give bit-identical log-probs (rewards exactly 0).
            self.reference = copy.deepcopy(start)
            for p in self.reference.parameters():
                p.requires_grad_(False)
            return
        noise = torch.randn(len(sums), generator=generator, dtype=torch.float64)
        ref = f32((sums + noise).tolist())
        for k, (c, r) in enumerate(pair_sequences(self.row)):
            self.samples[k]["ref_chosen_logps"] = ref[c]
            self.samples[k]["ref_rejected_logps"] = ref[r]
        self.ref_logps = torch.tensor(ref, dtype=torch.float64)

    def _value_data(self, packed, generator):
        n = len(self.row["targets"])
        values = packed["values"].double().tolist()
        returns = torch.randn(n, generator=generator, dtype=torch.float64).tolist()
        old_noise = ((torch.rand(n, generator=generator, dtype=torch.float64) * 2 - 1) * 0.8).tolist()
        self._set_token_key("returns", self._per_sample([0.0] * n, returns))
        self._set_token_key("old_values", self._per_sample(values, old_noise))

    def _actor_data(self, packed, generator):
        n = len(self.row["targets"])
        logp, _ = token_logprobs(packed["logits"], self.row["targets"])
        logp = logp.double().tolist()
        zeros = [0.0] * n
        advantages = torch.randn(n, generator=generator, dtype=torch.float64).tolist()
        old_noise = (torch.randn(n, generator=generator, dtype=torch.float64) * 0.15).tolist()
        ref_noise = (torch.randn(n, generator=generator, dtype=torch.float64) * 0.3).tolist()
        # Two response tokens with a negative advantage get a stale old log-prob (ratio e^1.5 > clip_ratio_c), so
        # the dual clip is exercised.
        negative = [t for t in range(n) if self.mask[t] and advantages[t] < 0][:2]
        stale = {t: -1.5 - old_noise[t] for t in negative}
        self._set_token_key("advantages", self._per_sample(zeros, advantages))
        self._set_token_key("old_log_probs", self._per_sample(logp, old_noise, stale))
        self._set_token_key("ref_log_probs", self._per_sample(logp, ref_noise))

    # -- the loss of the policy on this batch

    def config(self):
        return next(iter(self.spec["config"].values()), {})

    def loss(self, policy, with_metrics):
        """The loss (a scalar with autograd to the policy) and, with_metrics, the metrics dict."""
        out = self.forward(policy)
        if self.objective == "dpo":
            logp, _ = token_logprobs(out["logits"], self.row["targets"])
            policy_logps = sequence_sums(logp, self.row["cu_seqlens"]).double()
            ref_logps = self.ref_logps
            if self.reference is not None or self.spec.get("reference") == "adapters_off":
                reference = self.reference if self.reference is not None else policy
                off = adapters_disabled(policy) if self.reference is None else contextlib.nullcontext()
                with torch.no_grad(), off:
                    ref_out = self.forward(reference)
                    ref_logp, _ = token_logprobs(ref_out["logits"], self.row["targets"])
                    ref_logps = sequence_sums(ref_logp, self.row["cu_seqlens"]).double()
            loss, metrics = dpo_objective(self.config(), policy_logps, ref_logps, pair_sequences(self.row),
                                          with_metrics)
        elif self.objective == "reward":
            loss, metrics = reward_objective(out["values"], self.row, with_metrics)
        elif self.objective == "value":
            loss, metrics = value_objective(self.config(), out["values"], self.inputs, self.mask)
        elif self.objective == "sft":
            logp, _ = token_logprobs(out["logits"], self.row["targets"])
            loss = -logp.double().sum() / self.mask.sum()
            metrics = {"foundation_loss": loss.item()} if with_metrics else {}
        else:
            logp, _ = token_logprobs(out["logits"], self.row["targets"])
            loss, metrics = actor_objective(self.config(), logp, softmax_entropy(out["logits"]), self.inputs,
                                            self.mask)
        if "aux" in out:
            loss = loss + self.aux_coef * out["aux"].double()
            metrics["aux_loss"] = out["aux"].item()
        return loss, metrics

    def normaliser(self):
        if self.objective in ("dpo", "reward"):
            return {"global_pairs": len(pair_sequences(self.row))}
        return {"global_tokens": int(self.mask.sum().item())}

    def batch(self):
        return {"samples": self.samples}

    def packed_row(self):
        """The row as the collator packs these samples (the C++ test checks its collator against it)."""
        row = {"input_ids": self.row["input_ids"], "position_ids": self.row["position_ids"],
               "target_ids": self.row["targets"], "cu_seqlens": self.row["cu_seqlens"],
               "sequence_roles": self.row["roles"],
               "token_values": {key: values.tolist() for key, values in self.inputs.items()}}
        if self.ref_logps is not None:
            row["ref_logps"] = self.ref_logps.tolist()
        return row


class VlCase(Case):
    """A case on the Qwen3-VL toy: multimodal pairs or rollouts (tensors, batch.safetensors), every sequence run alone
    through transformers (the packed row's block-diagonal mask makes them independent)."""

    def _make_samples(self, start, generator):
        pairs = self.objective in ("dpo", "reward")
        self.samples, self.units = (make_vl_pairs if pairs else make_vl_rollouts)(start.config, generator)
        self.row = pack_vl(self.samples)

    def forward(self, model):
        return run_vl_units(model, self.head, self.units)

    def _check_packing(self, start, packed):
        pass  # nothing is packed on this side: each sequence ran alone

    def write_batch(self, out_dir):
        tensors = {}
        for k, s in enumerate(self.samples):
            for key, value in s.items():
                value = value if torch.is_tensor(value) else torch.tensor(value, dtype=torch.float32)
                tensors[f"{k}.{key}"] = value.contiguous()
        save_file(tensors, os.path.join(out_dir, "batch.safetensors"))

    def packed_row(self):
        row = super().packed_row()
        row["position_ids"] = [p for st in self.row["position_ids"] for p in st]
        row["samples"] = len(self.samples)
        return row


def gradients_and_metrics(case):
    policy = load_model(case.spec, case.model_dir)
    loss, metrics = case.loss(policy, True)
    loss.backward()
    for adapter in expert_adapters(policy):
        adapter.take_gradients()
    grads = {}
    for entry in trainable_entries(case, policy):
        grad = entry.tensor.grad if entry.tensor.grad is not None else torch.zeros_like(entry.tensor)
        grads["grad." + entry.name] = entry.to_ours(grad).detach().float().contiguous()
    return loss.item(), metrics, grads


def trainable_entries(case, policy):
    """What the optimizer steps, under our names: the adapters under LoRA, else every trainable parameter."""
    if case.spec.get("lora"):
        return adapter_entries(policy, case.spec["lora"])
    return [AdapterEntry(n, p, p.shape) for n, p in policy.named_parameters() if p.requires_grad]


def adamw_losses(case):
    """The loss before each of 3 AdamW steps on the same batch, and after the third."""
    policy = load_model(case.spec, case.model_dir)
    named = [(e.name, e.tensor) for e in trainable_entries(case, policy)]
    groups = [{"params": [p for n, p in named if not no_decay(n)], "weight_decay": ADAMW["weight_decay"]},
              {"params": [p for n, p in named if no_decay(n)], "weight_decay": 0.0}]
    optimizer = torch.optim.AdamW([g for g in groups if g["params"]], lr=ADAMW["lr"], betas=tuple(ADAMW["betas"]),
                                  eps=ADAMW["eps"], foreach=False)
    losses = []
    for _ in range(3):
        optimizer.zero_grad()
        loss, _ = case.loss(policy, False)
        losses.append(loss.item())
        loss.backward()
        for adapter in expert_adapters(policy):
            adapter.take_gradients()
        optimizer.step()
        for adapter in expert_adapters(policy):
            adapter.merge()
    with torch.no_grad():
        losses.append(case.loss(policy, False)[0].item())
    return losses


def write_case(name, spec, args, index):
    out_dir = os.path.join(args.out, name)
    tmp_dir = out_dir + ".tmp"
    shutil.rmtree(tmp_dir, ignore_errors=True)
    os.makedirs(tmp_dir)
    multimodal = bool(spec.get("multimodal"))
    toy_dir = os.path.join(args.thinker_fixtures, "models", spec["base"])
    if multimodal and spec["head"] == "causal_lm":
        model_dir = toy_dir
        model_dir_entry = f"thinker/models/{spec['base']}"
    elif multimodal:
        make_vl_head_model(spec, toy_dir, os.path.join(tmp_dir, "model"), args.seed + index)
        model_dir = os.path.join(tmp_dir, "model")
        model_dir_entry = f"objective_models/{name}/model"
    elif spec["head"] == "causal_lm":
        model_dir = os.path.join(args.hf_fixtures, spec["base"], "model")
        model_dir_entry = f"hf/{spec['base']}/model"
    else:
        make_head_model(spec, args.configs, os.path.join(tmp_dir, "model"), args.seed + index)
        model_dir = os.path.join(tmp_dir, "model")
        model_dir_entry = f"objective_models/{name}/model"

    for attempt in range(DATA_ATTEMPTS):
        data_seed = args.seed + 101 * (index + 1) + 100003 * attempt
        try:
            case = (VlCase if multimodal else Case)(name, spec, model_dir, data_seed)
            loss, metrics, grads = gradients_and_metrics(case)
            losses = adamw_losses(case)
            break
        except KinkTooClose as why:
            print(f"{name}: data seed {data_seed}: {why}; drawing other data", file=sys.stderr)
    else:
        sys.exit(f"{name}: no data without near-kinks in {DATA_ATTEMPTS} attempts")

    if spec.get("lora"):
        start = load_model(spec, model_dir)
        save_file(adapter_tensors(start), os.path.join(tmp_dir, "adapters.safetensors"))
        with torch.no_grad():
            grads["logits"] = case.forward(start)["logits"].float().contiguous()
    save_file(grads, os.path.join(tmp_dir, "expected.safetensors"))
    if hasattr(case, "write_batch"):
        case.write_batch(tmp_dir)
    else:
        with open(os.path.join(tmp_dir, "batch.json"), "w") as f:
            json.dump(case.batch(), f)
    expected = dict(
        case=name, objective=spec["objective"], head=spec["head"], multimodal=multimodal, config=spec["config"],
        lora=spec.get("lora"),
        reference=spec.get("reference"), loss=loss, metrics=metrics,
        aux_loss_coef=case.aux_coef, packed_row=case.packed_row(),
        adamw=dict(ADAMW, no_decay="parameters whose name contains 'norm' or ends with '.bias'"),
        adamw_losses=losses, model_dir=model_dir_entry, torch_version=torch.__version__,
        transformers_version=transformers.__version__, seed=args.seed, data_seed=data_seed, **case.normaliser())
    with open(os.path.join(tmp_dir, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1)
        f.write("\n")
    shutil.rmtree(out_dir, ignore_errors=True)
    os.replace(tmp_dir, out_dir)
    shown = ", ".join(f"{k} {v:.6g}" for k, v in metrics.items())
    print(f"{name}: loss {loss:.9g} ({shown}); adamw losses {losses}")


def directory_bytes(path):
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path) for f in files)


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=os.path.join(root, "tests", "fixtures", "objective_models"))
    parser.add_argument("--cases", default=",".join(CASES), help="comma-separated subset of: " + ", ".join(CASES))
    parser.add_argument("--hf-fixtures", default=os.path.join(root, "tests", "fixtures", "hf"),
                        help="where the toy causal LMs are (<dir>/<qwen3_toy|qwen3_moe_toy>/model)")
    parser.add_argument("--thinker-fixtures", default=os.path.join(root, "tests", "fixtures", "thinker"),
                        help="where the multimodal toys are (<dir>/models/qwen3_vl_toy: config.json, weights)")
    parser.add_argument("--configs", default=os.path.join(root, "configs", "model_configs"),
                        help="toy configs the reward and value models are made from")
    parser.add_argument("--seed", type=int, default=1234)
    args = parser.parse_args()
    names = [n for n in args.cases.split(",") if n]
    unknown = [n for n in names if n not in CASES]
    if unknown:
        parser.error(f"unknown case(s) {', '.join(unknown)}; known: {', '.join(CASES)}")
    torch.use_deterministic_algorithms(True)
    torch.set_default_dtype(torch.float32)
    transformers.utils.logging.disable_progress_bar()
    os.makedirs(args.out, exist_ok=True)
    for name in names:
        write_case(name, CASES[name], args, list(CASES).index(name))
    print(f"{args.out}: {directory_bytes(args.out) / 1e6:.2f} MB")


if __name__ == "__main__":
    main()
