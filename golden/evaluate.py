"""Policies measured side by side: traffic from greedy decoding of the bundled prompts, quality
against the exact float model on held-out text (docs/policies.md).

Quality is measured teacher-forced through the policy's own speculative machinery: on a held-out
window (prompt, then continuation), each step drafts a tree with the policy's draft and verifies
it with the policy's verification pass, as in decoding; the walk then follows the *true*
continuation: while the next true token is a child in the tree, the node's verification logits
are the policy's prediction for it and the walk moves on; the first true token off the tree is
predicted by the last node reached and becomes the next root. Every continuation token is thus
predicted exactly once, by logits the policy really computed (with its routing, its channel
choices and the depth groups of real trees), and compared with the exact float model's
teacher-forced logits at the same position: top-1 agreement, mean KL(exact || policy), and the
perplexity ratio of the true tokens.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ..contracts.config import ConfigError, check_prefill_budgets
from .decode import (DecodeResult, FloatEngine, PassCost, _pass, decode_ar, decode_speculative,
                     draft_and_verify, keep_path, prefill, summarize)
from .model import KVCache
from .policy import Policy

__all__ = ["teacher_forced", "exact_logits", "quality", "run_policy", "measure", "against_naive",
           "build_policies", "on_chip_slots", "pruned_edgexpert", "compare"]


def teacher_forced(engine, policy: Policy, tokens: list[int],
                   prompt_len: int) -> tuple[torch.Tensor, list[PassCost], list[int]]:
    """The policy's prediction logits [len(tokens) - prompt_len, V] for every continuation
    token, the passes it ran, and the draft tokens accepted per step (against the true text)."""
    policy.start(tokens[:prompt_len])
    cache, cost = prefill(engine, tokens[:prompt_len], policy)
    passes, accepted = [cost], []
    rows: list[torch.Tensor] = []
    root, j = tokens[prompt_len - 1], prompt_len
    while j < len(tokens):
        prefix = len(cache)
        if not policy.speculative:
            logits, _, cost = _pass(engine, policy, "ar", torch.tensor([root]),
                                    torch.tensor([prefix]), cache,
                                    torch.ones(1, prefix + 1, dtype=torch.bool),
                                    torch.zeros(1, dtype=torch.long))
            passes.append(cost)
            rows.append(logits[0])
            root, j = tokens[j], j + 1
            accepted.append(0)
            continue
        tree, logits = draft_and_verify(engine, policy, cache, root, policy.decode, passes,
                                        step=len(accepted))
        children: dict[int, dict[int, int]] = {}
        for i, parent in enumerate(tree.parents):
            children.setdefault(parent, {}).setdefault(tree.tokens[i], i)
        path, node = [], -1
        while j < len(tokens):
            rows.append(logits[node + 1])
            nxt = children.get(node, {}).get(tokens[j])
            j += 1
            if nxt is None:
                break
            path.append(nxt)
            node = nxt
        keep_path(cache, prefix, path)
        accepted.append(len(path))
        root = tokens[j - 1]
    return torch.stack(rows), passes, accepted


@torch.no_grad()
def exact_logits(engine: FloatEngine, tokens: list[int]) -> torch.Tensor:
    """The exact float model's teacher-forced logits for positions 1.. of `tokens`."""
    n = len(tokens) - 1
    logits, _ = engine.step(torch.tensor(tokens[:-1]), torch.arange(n), KVCache(),
                            torch.tril(torch.ones(n, n, dtype=torch.bool)))
    return logits


def quality(engine: FloatEngine, policy: Policy, windows: list[list[int]], prompt_len: int,
            reference: FloatEngine | None = None) -> dict:
    """Teacher-forced quality of `policy` running on `engine`, on held-out windows, against the
    exact float model `reference` (default: `engine`; another one when the policy runs on a
    pruned model)."""
    reference = reference or engine
    nll_exact = nll_policy = kl = agree = count = 0.0
    for tokens in windows:
        exact = exact_logits(reference, tokens)[prompt_len - 1:]
        mine, _, _ = teacher_forced(engine, policy, tokens, prompt_len)
        target = torch.tensor(tokens[prompt_len:])
        lp_exact, lp_mine = F.log_softmax(exact, -1), F.log_softmax(mine, -1)
        nll_exact += float(-lp_exact.gather(-1, target[:, None]).sum())
        nll_policy += float(-lp_mine.gather(-1, target[:, None]).sum())
        kl += float((lp_exact.exp() * (lp_exact - lp_mine)).sum())
        agree += float((exact.argmax(-1) == mine.argmax(-1)).sum())
        count += len(target)
    return {"predictions": int(count), "top1_agreement": round(agree / count, 4),
            "mean_kl": round(max(kl / count, 0.0), 5),   # >= 0; rounding can dip below
            "ppl_ratio": round(math.exp((nll_policy - nll_exact) / count), 4)}


def run_policy(engine: FloatEngine, policy: Policy, prompts: list[list[int]],
               reference: list[DecodeResult], eot: int | None) -> dict:
    """Greedy decoding of the prompts under the policy: traffic metrics, and how much of the
    exact model's greedy output (`reference`) it reproduces."""
    decode = decode_speculative if policy.speculative else decode_ar
    # the policy's own tree shape (Specter drafts a chain), the run's length and sampling
    runs = [decode(engine, p, policy.decode, eot, policy=policy) for p in prompts]
    metrics = summarize(runs)
    same = [r.tokens == ref.tokens for r, ref in zip(runs, reference)]
    prefix = []
    for r, ref in zip(runs, reference):
        n = next((i for i, (a, b) in enumerate(zip(r.tokens, ref.tokens)) if a != b),
                 min(len(r.tokens), len(ref.tokens)))
        prefix.append(n / max(len(ref.tokens), 1))
    metrics.update(greedy_sequence_match=round(sum(same) / len(same), 4),
                   greedy_prefix_match=round(sum(prefix) / len(prefix), 4))
    return metrics


def on_chip_slots(kib: int, layout) -> int:
    """Whole experts per layer that `kib` KiB of on-chip buffer hold (split over the layers)."""
    slots = kib * 1024 // (layout.n_layers * layout.expert_fetch_bytes)
    if slots < 1:
        raise ConfigError(f"policies.onchip_expert_kib = {kib} holds no expert: accepted >= "
                          f"{math.ceil(layout.n_layers * layout.expert_fetch_bytes / 1024)}")
    return min(slots, layout.n_experts)


def prefill_routing(config, encoder, top_k: int):
    """EdgeXpert's shared-set prefill routing from the configuration for a model routing top_k
    experts, or None without an encoder."""
    from .prefill import PrefillRouting
    p = config.policies
    check_prefill_budgets(p, top_k)
    return None if encoder is None else PrefillRouting(
        encoder, p.prefill_tau_major, p.prefill_tau_minor, p.prefill_budget_minor,
        p.prefill_budget_trivial, p.prefill_classes, p.prefill_seed)


def pruned_edgexpert(layout, decode, model, ratio: float, calibration: bool, prefill=None):
    """EdgeXpert decoding on the bundled pruned-and-recovered checkpoint of `model`, with that
    checkpoint's own mask (`Policy.model`: `measure` runs it on that model)."""
    from .policies import EdgeXpert
    from .prune import load_pruned_checkpoint
    pruned = load_pruned_checkpoint(None, model)
    policy = EdgeXpert(layout, decode, pruned.model, ratio, pruned.meta["prune"]["sparsity"],
                       calibration, prefill=prefill)
    policy.model = pruned.model
    return policy


def build_policies(config, model, layout, encoder=None) -> list[Policy]:
    """Every policy `edgexpert compare` runs, from the configuration (a value the policy
    rejects is reported as the configuration key's error); EdgeXpert's prefill uses the
    shared-set routing when a prefill `encoder` (golden/prefill.py) is given."""
    from .policies import Autoregressive, Combined, EdgeXpert, MoESpec, S2MoE, SpecMoE, Specter
    p, d, k = config.policies, config.decode, model.cfg.top_k
    slots = on_chip_slots(p.onchip_expert_kib, layout)
    checked = {}
    for key, make in [("moe_spec_budget", lambda: MoESpec(layout, d, k, p.moe_spec_budget)),
                      ("s2moe_cap", lambda: S2MoE(layout, d, k, p.s2moe_threshold, p.s2moe_cap))]:
        try:
            checked[key] = make()
        except ValueError as exc:
            raise ConfigError(f"policies.{key}: {exc}") from None
    if p.pruned_checkpoint == "bundled":
        edgexpert = pruned_edgexpert(layout, d, model, p.coalescing_ratio, p.calibration,
                                     prefill_routing(config, encoder, k))
    else:
        edgexpert = EdgeXpert(layout, d, model, p.coalescing_ratio, p.pruning_sparsity,
                              p.calibration, prefill=prefill_routing(config, encoder, k))
    policies = [Autoregressive(layout, d), Policy(layout, d), edgexpert, checked["moe_spec_budget"], checked["s2moe_cap"], SpecMoE(layout, d, model, slots),
                Specter(layout, d, model, slots, p.specter_chain, p.specter_draft_bits),
                Combined(layout, d, model, slots, p.combined_threshold,
                         prefill=prefill_routing(config, encoder, k) if p.combined_prefill_reuse else None)]
    for policy in policies:
        policy.prefill_chunk = p.prefill_chunk
    return policies


def measure(engine: FloatEngine, policy: Policy, prompts: list[list[int]],
            reference: list[DecodeResult], windows: list[list[int]], prompt_len: int,
            eot: int | None) -> dict:
    """One policy's traffic (greedy decoding of the prompts) and quality (teacher-forced on the
    windows, against `engine`) in one dict; a policy with a model of its own decodes on it."""
    own = engine if policy.model is None else FloatEngine(policy.model)
    traffic = run_policy(own, policy, prompts, reference, eot)
    return {**traffic, **quality(own, policy, windows, prompt_len, reference=engine),
            "ema_bytes_per_token_decode": traffic["ema_bytes_per_token"]}


def against_naive(results: dict, naive: int) -> dict:
    """Adds each result's EMA reduction against naive speculative decoding's `naive` bytes per
    decoded token."""
    for metrics in results.values():
        metrics["ema_reduction_vs_naive_sd"] = round(1 - metrics["ema_bytes_per_token_decode"] / naive, 4)
    return results


def compare(config, model, prompts: list[list[int]], windows: list[list[int]],
            eot: int | None, encoder=None) -> dict:
    """Every policy on the same prompts (traffic, greedy match) and held-out windows (quality),
    keyed by policy name; EMA reduction against naive speculative decoding. `encoder`: EdgeXpert's
    prefill encoder (None: its prefill routes natively)."""
    from ..contracts.weight_layout import WeightLayout
    engine = FloatEngine(model)
    layout = WeightLayout.for_model(model.cfg)
    reference = [decode_ar(engine, p, config.decode, eot) for p in prompts]
    out = {policy.name: measure(engine, policy, prompts, reference, windows,
                                config.policies.eval_prompt_tokens, eot)
           for policy in build_policies(config, model, layout, encoder)}
    return against_naive(out, out["naive_sd"]["ema_bytes_per_token_decode"])
