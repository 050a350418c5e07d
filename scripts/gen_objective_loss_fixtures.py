#!/usr/bin/env python3
"""Writes tests/fixtures/objective/objective_losses.json: random inputs -> loss, metrics and gradients of the DPO,
Bradley-Terry reward, clipped value and PPO actor losses, for tests/unit/test_objective_fixtures.cc.

--reference torch (the default; run where torch is installed) takes gradients from torch autograd over formulas that
mirror the reference implementations line for line:
  DPO        VeOmni veomni/trainer/text_dpo_trainer.py TextDPOTrainer.dpo_loss and its metrics (TRL's DPOTrainer form)
  reward     -logsigmoid(r_chosen - r_rejected) (Bradley-Terry, as TRL's RewardTrainer)
  value      verl verl/trainer/ppo/core_algos.py compute_value_loss (verl_F.clip_by_value)
  PPO actor  verl compute_policy_loss_vanilla, kl_penalty_forward and dp_actor's entropy / KL terms
--reference python computes the same formulas with hand-derived gradients in the standard library only.

Normalisation (the project's, not verl's per-micro-batch masked_mean): every loss and metric is summed over the
fixture's items and divided by the global count (global_pairs / global_tokens), which exceeds the local count, as
for one micro-batch of a larger global batch; verl's token-mean agg_loss with batch_num_tokens = global_tokens.
"""
import argparse
import json
import math
import os
import random
import sys

SEED = 20240611


# ---------------------------------------------------------------- inputs

def dpo_cases(rng):
    cases = []
    for name, cfg in [("sigmoid", dict(beta=0.1, label_smoothing=0.0, loss_type="sigmoid", reference_free=False)),
                      ("sigmoid_label_smoothing", dict(beta=0.5, label_smoothing=0.2, loss_type="sigmoid",
                                                       reference_free=False)),
                      ("ipo", dict(beta=0.3, label_smoothing=0.0, loss_type="ipo", reference_free=False)),
                      ("reference_free", dict(beta=0.2, label_smoothing=0.0, loss_type="sigmoid",
                                              reference_free=True))]:
        n = 6
        inputs = {k: [rng.uniform(-60.0, -5.0) for _ in range(n)]
                  for k in ("chosen_logps", "rejected_logps", "ref_chosen_logps", "ref_rejected_logps")}
        cases.append(dict(objective="dpo", name=name, config=cfg, global_pairs=n + 3, inputs=inputs))
    return cases


def reward_cases(rng):
    n = 7
    inputs = {k: [rng.uniform(-3.0, 3.0) for _ in range(n)] for k in ("chosen_rewards", "rejected_rewards")}
    return [dict(objective="reward", name="bradley_terry", config={}, global_pairs=n + 2, inputs=inputs)]


def token_mask(rng, n):
    mask = [1 if rng.random() < 0.8 else 0 for _ in range(n)]
    mask[0] = 1
    return mask


def value_cases(rng):
    n = 16
    values = [rng.uniform(-2.0, 2.0) for _ in range(n)]
    inputs = dict(values=values,
                  returns=[rng.uniform(-2.0, 2.0) for _ in range(n)],
                  old_values=[v + rng.uniform(-0.6, 0.6) for v in values],
                  mask=token_mask(rng, n))
    return [dict(objective="value", name="clipped", config=dict(cliprange_value=0.2), global_tokens=n + 5,
                 inputs=inputs)]


def actor_cases(rng):
    base = dict(clip_ratio=0.2, clip_ratio_c=3.0, entropy_coeff=0.0, use_kl_loss=False, kl_loss_coef=0.001,
                kl_loss_type="low_var_kl")
    variants = [("vanilla", {}),
                ("asymmetric_clip_entropy", dict(clip_ratio_low=0.2, clip_ratio_high=0.28, entropy_coeff=0.01)),
                ("kl_low_var_kl", dict(use_kl_loss=True, kl_loss_coef=0.05, entropy_coeff=0.001)),
                ("kl_kl", dict(use_kl_loss=True, kl_loss_coef=0.1, kl_loss_type="kl")),
                ("kl_abs", dict(use_kl_loss=True, kl_loss_coef=0.1, kl_loss_type="abs")),
                ("kl_mse", dict(use_kl_loss=True, kl_loss_coef=0.1, kl_loss_type="mse")),
                ("zero_advantages", dict(use_kl_loss=True, kl_loss_coef=0.02)),
                ("all_clipped", {})]
    cases = []
    for name, extra in variants:
        n = 24
        lp = [rng.uniform(-6.0, -0.05) for _ in range(n)]
        adv = [0.0] * n if name == "zero_advantages" else [rng.uniform(-2.0, 2.0) for _ in range(n)]
        if name == "all_clipped":
            # every ratio beyond the clip range on the side the advantage pushes it (e^0.5 > 1.2 for A > 0,
            # e^-0.5 < 0.8 for A < 0): the clipped term is active everywhere
            old = [x - math.copysign(rng.uniform(0.5, 2.0), a) for x, a in zip(lp, adv)]
        else:
            old = [x + rng.uniform(-1.5, 1.5) for x in lp]
        ref = [x + rng.uniform(-3.5, 3.5) for x in lp]
        ent = [rng.uniform(0.0, 4.0) for _ in range(n)]
        cfg = dict(base, **extra)
        inputs = dict(log_probs=lp, old_log_probs=old, advantages=adv, ref_log_probs=ref, entropy=ent,
                      mask=token_mask(rng, n))
        cases.append(dict(objective="ppo_actor", name=name, config=cfg, global_tokens=n + 4, inputs=inputs))
    return cases


# ---------------------------------------------------------------- pure-Python reference

def log_sigmoid(x):
    return -math.log1p(math.exp(-x)) if x >= 0 else x - math.log1p(math.exp(x))


def sigmoid(x):
    return 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))


def clamp(x, lo, hi):
    return max(lo, min(x, hi))


def inside(x, lo, hi):
    return 1.0 if lo <= x <= hi else 0.0


def max_split(a, b):
    """torch.maximum's backward: all to the larger input, half each on a tie."""
    return (1.0, 0.0) if a > b else (0.0, 1.0) if b > a else (0.5, 0.5)


def dpo_python(case):
    cfg, x, g = case["config"], case["inputs"], case["global_pairs"]
    beta, ls = cfg["beta"], cfg["label_smoothing"]
    loss, dc, dr, cr_sum, rr_sum, acc = 0.0, [], [], 0.0, 0.0, 0.0
    for c, r, rc, rr in zip(x["chosen_logps"], x["rejected_logps"], x["ref_chosen_logps"], x["ref_rejected_logps"]):
        z = (c - r) - (0.0 if cfg["reference_free"] else (rc - rr))
        if cfg["loss_type"] == "ipo":
            li, dz = (z - 1 / (2 * beta)) ** 2, 2 * (z - 1 / (2 * beta))
        else:
            li = -log_sigmoid(beta * z) * (1 - ls) - log_sigmoid(-beta * z) * ls
            dz = -(1 - ls) * beta * sigmoid(-beta * z) + ls * beta * sigmoid(beta * z)
        loss += li / g
        dc.append(dz / g)
        dr.append(-dz / g)
        cr, rw = beta * (c - rc), beta * (r - rr)
        cr_sum, rr_sum, acc = cr_sum + cr, rr_sum + rw, acc + (1.0 if cr > rw else 0.0)
    metrics = dict(dpo_loss=loss, chosen_rewards=cr_sum / g, rejected_rewards=rr_sum / g, reward_accuracy=acc / g,
                   reward_margin=(cr_sum - rr_sum) / g)
    return loss, metrics, dict(chosen_logps=dc, rejected_logps=dr)


def reward_python(case):
    x, g = case["inputs"], case["global_pairs"]
    loss, dc, dr, acc = 0.0, [], [], 0.0
    for c, r in zip(x["chosen_rewards"], x["rejected_rewards"]):
        loss += -log_sigmoid(c - r) / g
        d = -sigmoid(-(c - r)) / g
        dc.append(d)
        dr.append(-d)
        acc += 1.0 if c > r else 0.0
    metrics = dict(rm_loss=loss, reward_accuracy=acc / g, chosen_reward=sum(x["chosen_rewards"]) / g,
                   rejected_reward=sum(x["rejected_rewards"]) / g)
    return loss, metrics, dict(chosen_rewards=dc, rejected_rewards=dr)


def value_python(case):
    x, g, eps = case["inputs"], case["global_tokens"], case["config"]["cliprange_value"]
    total, clipfrac, dv = 0.0, 0.0, []
    for v, ret, old, m in zip(x["values"], x["returns"], x["old_values"], x["mask"]):
        lo, hi = old - eps, old + eps
        vc = clamp(v, lo, hi)
        l1, l2 = (v - ret) ** 2, (vc - ret) ** 2
        s1, s2 = max_split(l1, l2)
        d = s1 * 2 * (v - ret) + s2 * 2 * (vc - ret) * inside(v, lo, hi)
        dv.append(0.5 * d / g * m)
        total += max(l1, l2) * m
        clipfrac += (1.0 if l2 > l1 else 0.0) * m
    loss = 0.5 * total / g
    return loss, dict(vf_loss=loss, vf_clipfrac=clipfrac / g), dict(values=dv)


def kl_python(kind, lp, ref):
    if kind in ("kl", "k1"):
        return lp - ref, 1.0
    if kind == "abs":
        return abs(lp - ref), (1.0 if lp > ref else -1.0 if lp < ref else 0.0)
    if kind in ("mse", "k2"):
        return 0.5 * (lp - ref) ** 2, lp - ref
    k_raw = ref - lp
    k = clamp(k_raw, -20.0, 20.0)
    kld = math.exp(k) - k - 1
    return clamp(kld, -10.0, 10.0), inside(kld, -10.0, 10.0) * (math.exp(k) - 1) * -inside(k_raw, -20.0, 20.0)


def actor_python(case):
    cfg, x, g = case["config"], case["inputs"], case["global_tokens"]
    low = cfg.get("clip_ratio_low", cfg["clip_ratio"])
    high = cfg.get("clip_ratio_high", cfg["clip_ratio"])
    c = cfg["clip_ratio_c"]
    pg, clipfrac, lower, ppo_kl, ent_sum, kl_sum = 0.0, 0.0, 0.0, 0.0, 0.0, 0.0
    dlp, dent = [], []
    for lp, old, a, ref, ent, m in zip(x["log_probs"], x["old_log_probs"], x["advantages"], x["ref_log_probs"],
                                       x["entropy"], x["mask"]):
        raw = lp - old
        nkl = clamp(raw, -20.0, 20.0)
        ratio = math.exp(nkl)
        dratio = ratio * inside(raw, -20.0, 20.0)
        l1, l2 = -a * ratio, -a * clamp(ratio, 1 - low, 1 + high)
        s1, s2 = max_split(l1, l2)
        m1 = max(l1, l2)
        d = s1 * -a * dratio + s2 * -a * dratio * inside(ratio, 1 - low, 1 + high)
        term = m1
        if a < 0:
            l3 = -a * c
            t3, t1 = max_split(-l3, -m1)  # min(l3, m1) = -max(-l3, -m1)
            term, d = min(l3, m1), t1 * d
            lower += (1.0 if m1 > l3 else 0.0) * m
        pg += term * m
        clipfrac += (1.0 if l2 > l1 else 0.0) * m
        ppo_kl += -nkl * m
        ent_sum += ent * m
        dent.append(-cfg["entropy_coeff"] / g * m)
        if cfg["use_kl_loss"]:
            kv, kd = kl_python(cfg["kl_loss_type"], lp, ref)
            kl_sum += kv * m
            d += cfg["kl_loss_coef"] * kd
        dlp.append(d / g * m)
    loss = pg / g - cfg["entropy_coeff"] * ent_sum / g
    metrics = dict(pg_loss=pg / g, pg_clipfrac=clipfrac / g, pg_clipfrac_lower=lower / g, ppo_kl=ppo_kl / g,
                   entropy=ent_sum / g)
    if cfg["use_kl_loss"]:
        loss += cfg["kl_loss_coef"] * kl_sum / g
        metrics["kl_loss"] = kl_sum / g
    return loss, metrics, dict(log_probs=dlp, entropy=dent)


# ---------------------------------------------------------------- torch reference

def dpo_torch(case):
    import torch
    import torch.nn.functional as F
    cfg, x, g = case["config"], case["inputs"], case["global_pairs"]
    t = {k: torch.tensor(v, dtype=torch.float64) for k, v in x.items()}
    pc, pr = t["chosen_logps"].requires_grad_(), t["rejected_logps"].requires_grad_()
    rc, rr = t["ref_chosen_logps"], t["ref_rejected_logps"]
    beta, ls = cfg["beta"], cfg["label_smoothing"]
    # VeOmni TextDPOTrainer.dpo_loss
    pi_logratios = pc - pr
    ref_logratios = rc - rr
    if cfg["reference_free"]:
        ref_logratios = 0
    logits = pi_logratios - ref_logratios
    if cfg["loss_type"] == "ipo":
        losses = (logits - 1 / (2 * beta)) ** 2
    else:
        losses = -F.logsigmoid(beta * logits) * (1 - ls) - F.logsigmoid(-beta * logits) * ls
    chosen_rewards = beta * (pc - rc).detach()
    rejected_rewards = beta * (pr - rr).detach()
    loss = losses.sum() / g
    loss.backward()
    metrics = dict(dpo_loss=loss.item(), chosen_rewards=(chosen_rewards.sum() / g).item(),
                   rejected_rewards=(rejected_rewards.sum() / g).item(),
                   reward_accuracy=((chosen_rewards > rejected_rewards).double().sum() / g).item(),
                   reward_margin=((chosen_rewards - rejected_rewards).sum() / g).item())
    return loss.item(), metrics, dict(chosen_logps=pc.grad.tolist(), rejected_logps=pr.grad.tolist())


def reward_torch(case):
    import torch
    import torch.nn.functional as F
    x, g = case["inputs"], case["global_pairs"]
    c = torch.tensor(x["chosen_rewards"], dtype=torch.float64, requires_grad=True)
    r = torch.tensor(x["rejected_rewards"], dtype=torch.float64, requires_grad=True)
    loss = -F.logsigmoid(c - r).sum() / g
    loss.backward()
    metrics = dict(rm_loss=loss.item(), reward_accuracy=((c > r).double().sum() / g).item(),
                   chosen_reward=(c.detach().sum() / g).item(), rejected_reward=(r.detach().sum() / g).item())
    return loss.item(), metrics, dict(chosen_rewards=c.grad.tolist(), rejected_rewards=r.grad.tolist())


def value_torch(case):
    import torch
    x, g, eps = case["inputs"], case["global_tokens"], case["config"]["cliprange_value"]
    vpreds = torch.tensor(x["values"], dtype=torch.float64, requires_grad=True)
    returns = torch.tensor(x["returns"], dtype=torch.float64)
    values = torch.tensor(x["old_values"], dtype=torch.float64)
    mask = torch.tensor(x["mask"], dtype=torch.float64)
    # verl compute_value_loss; clip_by_value = max(min(x, hi), lo); agg_loss token-mean over the global tokens
    vpredclipped = torch.max(torch.min(vpreds, values + eps), values - eps)
    vf_losses1 = (vpreds - returns) ** 2
    vf_losses2 = (vpredclipped - returns) ** 2
    clipped_vf_losses = torch.max(vf_losses1, vf_losses2)
    vf_loss = 0.5 * (clipped_vf_losses * mask).sum() / g
    vf_clipfrac = (torch.gt(vf_losses2, vf_losses1).double() * mask).sum() / g
    vf_loss.backward()
    return vf_loss.item(), dict(vf_loss=vf_loss.item(), vf_clipfrac=vf_clipfrac.item()), dict(values=vpreds.grad.tolist())


def kl_torch(logprob, ref_logprob, kind):
    import torch
    # verl kl_penalty_forward
    if kind in ("kl", "k1"):
        return logprob - ref_logprob
    if kind == "abs":
        return (logprob - ref_logprob).abs()
    if kind in ("mse", "k2"):
        return 0.5 * (logprob - ref_logprob).square()
    kl = torch.clamp(ref_logprob - logprob, min=-20, max=20)
    ratio = torch.exp(kl)
    kld = ratio - kl - 1
    return torch.clamp(kld, min=-10, max=10)


def actor_torch(case):
    import torch
    cfg, x, g = case["config"], case["inputs"], case["global_tokens"]
    log_prob = torch.tensor(x["log_probs"], dtype=torch.float64, requires_grad=True)
    entropy = torch.tensor(x["entropy"], dtype=torch.float64, requires_grad=True)
    old_log_prob = torch.tensor(x["old_log_probs"], dtype=torch.float64)
    advantages = torch.tensor(x["advantages"], dtype=torch.float64)
    ref_log_prob = torch.tensor(x["ref_log_probs"], dtype=torch.float64)
    mask = torch.tensor(x["mask"], dtype=torch.float64)
    cliprange_low = cfg.get("clip_ratio_low", cfg["clip_ratio"])
    cliprange_high = cfg.get("clip_ratio_high", cfg["clip_ratio"])
    clip_ratio_c = cfg["clip_ratio_c"]

    def agg(v):  # agg_loss token-mean with batch_num_tokens = the global tokens
        return (v * mask).sum() / g

    # verl compute_policy_loss_vanilla
    negative_approx_kl = torch.clamp(log_prob - old_log_prob, min=-20.0, max=20.0)
    ratio = torch.exp(negative_approx_kl)
    ppo_kl = agg(-negative_approx_kl)
    pg_losses1 = -advantages * ratio
    pg_losses2 = -advantages * torch.clamp(ratio, 1 - cliprange_low, 1 + cliprange_high)
    clip_pg_losses1 = torch.maximum(pg_losses1, pg_losses2)
    pg_clipfrac = agg(torch.gt(pg_losses2, pg_losses1).double())
    pg_losses3 = -advantages * clip_ratio_c
    clip_pg_losses2 = torch.min(pg_losses3, clip_pg_losses1)
    pg_clipfrac_lower = agg(torch.gt(clip_pg_losses1, pg_losses3) * (advantages < 0).double())
    pg_losses = torch.where(advantages < 0, clip_pg_losses2, clip_pg_losses1)
    pg_loss = agg(pg_losses)
    # dp_actor: entropy bonus and KL loss
    entropy_agg = agg(entropy)
    policy_loss = pg_loss - entropy_agg * cfg["entropy_coeff"]
    metrics = dict(pg_loss=pg_loss.item(), pg_clipfrac=pg_clipfrac.item(), pg_clipfrac_lower=pg_clipfrac_lower.item(),
                   ppo_kl=ppo_kl.item(), entropy=entropy_agg.item())
    if cfg["use_kl_loss"]:
        kl_loss = agg(kl_torch(log_prob, ref_log_prob, cfg["kl_loss_type"]))
        policy_loss = policy_loss + kl_loss * cfg["kl_loss_coef"]
        metrics["kl_loss"] = kl_loss.item()
    policy_loss.backward()
    return policy_loss.item(), metrics, dict(log_probs=log_prob.grad.tolist(), entropy=entropy.grad.tolist())


REFERENCES = {
    "python": dict(dpo=dpo_python, reward=reward_python, value=value_python, ppo_actor=actor_python),
    "torch": dict(dpo=dpo_torch, reward=reward_torch, value=value_torch, ppo_actor=actor_torch),
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reference", choices=sorted(REFERENCES), default="torch")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser.add_argument("--out", default=os.path.join(root, "tests", "fixtures", "objective", "objective_losses.json"))
    args = parser.parse_args()
    rng = random.Random(SEED)
    cases = dpo_cases(rng) + reward_cases(rng) + value_cases(rng) + actor_cases(rng)
    fns = REFERENCES[args.reference]
    for case in cases:
        loss, metrics, grads = fns[case["objective"]](case)
        case.update(loss=loss, metrics=metrics, grads=grads)
    if args.reference == "torch":
        import torch
        producer = f"torch {torch.__version__} autograd (float64)"
    else:
        producer = "pure-Python reference (float64, hand-derived gradients)"
    doc = dict(producer=producer, generator="scripts/gen_objective_loss_fixtures.py", seed=SEED, cases=cases)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    tmp = args.out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    os.replace(tmp, args.out)
    print(f"wrote {len(cases)} cases to {args.out} ({producer})", file=sys.stderr)


if __name__ == "__main__":
    main()
