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

import torch

from ...support.progress import progress_bar
from ...contracts.trace import PassKind
from ...contracts.weight_layout import WeightLayout
from ..decoding.decode import (DecodeResult, FloatEngine, PassCost, decode_ar, decode_speculative,
                     draft_and_verify, exact_logits, keep_path, prefill, run_pass, summarize)
from ..decoding.metrics import LogitComparison, greedy_match
from ..policies.registry import build_policies
from ..decoding.policy import Policy

__all__ = ["teacher_forced", "quality", "run_policy", "measure", "against_naive", "compare"]


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
            logits, _, cost = run_pass(engine, policy, PassKind.AR, torch.tensor([root]),
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


def quality(engine: FloatEngine, policy: Policy, windows: list[list[int]], prompt_len: int,
            reference: FloatEngine | None = None) -> dict:
    """Teacher-forced quality of `policy` running on `engine`, on held-out windows, against the
    exact float model `reference` (default: `engine`; another one when the policy runs on a
    pruned model)."""
    reference = reference or engine
    scores = LogitComparison()
    for tokens in windows:
        exact = exact_logits(reference, tokens)[prompt_len - 1:]
        mine, _, _ = teacher_forced(engine, policy, tokens, prompt_len)
        scores.add(exact, mine, torch.tensor(tokens[prompt_len:]))
    return {"predictions": scores.count, "top1_agreement": scores.top1_agreement(),
            "mean_kl": scores.mean_kl(), "ppl_ratio": scores.ppl_ratio()}


def run_policy(engine: FloatEngine, policy: Policy, prompts: list[list[int]],
               reference: list[DecodeResult], eot: int | None) -> dict:
    """Greedy decoding of the prompts under the policy: traffic metrics, and how much of the
    exact model's greedy output (`reference`) it reproduces."""
    decode = decode_speculative if policy.speculative else decode_ar
    # the policy's own tree shape (Specter drafts a chain), the run's length and sampling
    runs = [decode(engine, p, policy.decode, eot, policy=policy) for p in prompts]
    metrics = summarize(runs)
    metrics.update(greedy_match([r.tokens for r in runs], [ref.tokens for ref in reference]))
    return metrics


def measure(engine: FloatEngine, policy: Policy, prompts: list[list[int]],
            reference: list[DecodeResult], windows: list[list[int]], prompt_len: int,
            eot: int | None) -> dict:
    """One policy's traffic (greedy decoding of the prompts) and quality (teacher-forced on the
    windows, against `engine`) in one dict; a policy with a model of its own decodes on it."""
    own = engine if policy.model is None else FloatEngine(policy.model)
    traffic = run_policy(own, policy, prompts, reference, eot)
    return {**traffic, **quality(own, policy, windows, prompt_len, reference=engine),
            "ema_bytes_per_token_decode": traffic["ema_bytes_per_token"], "draft": policy.draft,
            "onchip": policy.onchip}


def against_naive(results: dict, naive: int) -> dict:
    """Adds each result's change in EMA bytes per decoded token against naive speculative
    decoding's `naive`: bytes / naive - 1, so -0.125 is 12.5% fewer (the sign the docs print)."""
    for metrics in results.values():
        metrics["ema_change_vs_naive_sd"] = round(metrics["ema_bytes_per_token_decode"] / naive - 1, 4)
    return results


def compare(config, model, prompts: list[list[int]], windows: list[list[int]],
            eot: int | None, encoder=None, eagle=None, progress: bool = True) -> dict:
    """Every policy on the same prompts (traffic, greedy match) and held-out windows (quality),
    keyed by policy name; EMA bytes change against naive speculative decoding. `encoder`:
    EdgeXpert's prefill encoder (None: its prefill routes natively); `eagle`: the EAGLE draft head
    (golden/decoding/eagle/) for the policies that draft with it (policies.draft). `progress`: a
    bar over the policies."""
    engine = FloatEngine(model)
    layout = WeightLayout.for_model(model.cfg)
    reference = [decode_ar(engine, p, config.decode, eot) for p in prompts]
    out = {}
    bar = progress_bar(build_policies(config, model, layout, encoder, eagle), desc="compare",
                       unit="policy", enabled=progress)
    for policy in bar:
        bar.set_postfix_str(policy.name)
        out[policy.name] = measure(engine, policy, prompts, reference, windows,
                                   config.policies.eval_prompt_tokens, eot)
    return against_naive(out, out["naive_sd"]["ema_bytes_per_token_decode"])
