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

from ..config import DecodeConfig
from .decode import (DecodeResult, FloatEngine, PassCost, _pass, decode_ar, decode_speculative,
                     draft_and_verify, keep_path, prefill, summarize)
from .model import KVCache
from .policy import Policy

__all__ = ["teacher_forced", "exact_logits", "quality", "run_policy", "build_policies", "compare"]


def teacher_forced(engine, policy: Policy, tokens: list[int], prompt_len: int,
                   cfg: DecodeConfig) -> tuple[torch.Tensor, list[PassCost], list[int]]:
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
        tree, logits = draft_and_verify(engine, policy, cache, root, cfg, passes, step=len(accepted))
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
            cfg: DecodeConfig, reference: FloatEngine | None = None) -> dict:
    """Teacher-forced quality of `policy` running on `engine`, on held-out windows, against the
    exact float model `reference` (default: `engine`; another one when the policy runs on a
    pruned model)."""
    reference = reference or engine
    nll_exact = nll_policy = kl = agree = count = 0.0
    for tokens in windows:
        exact = exact_logits(reference, tokens)[prompt_len - 1:]
        mine, _, _ = teacher_forced(engine, policy, tokens, prompt_len, cfg)
        target = torch.tensor(tokens[prompt_len:])
        lp_exact, lp_mine = F.log_softmax(exact, -1), F.log_softmax(mine, -1)
        nll_exact += float(-lp_exact.gather(-1, target[:, None]).sum())
        nll_policy += float(-lp_mine.gather(-1, target[:, None]).sum())
        kl += float((lp_exact.exp() * (lp_exact - lp_mine)).sum())
        agree += float((exact.argmax(-1) == mine.argmax(-1)).sum())
        count += len(target)
    return {"predictions": int(count), "top1_agreement": round(agree / count, 4),
            "mean_kl": round(kl / count, 5),
            "ppl_ratio": round(math.exp((nll_policy - nll_exact) / count), 4)}


def run_policy(engine: FloatEngine, policy: Policy, prompts: list[list[int]],
               reference: list[DecodeResult], cfg: DecodeConfig, eot: int | None) -> dict:
    """Greedy decoding of the prompts under the policy: traffic metrics, and how much of the
    exact model's greedy output (`reference`) it reproduces."""
    decode = decode_speculative if policy.speculative else decode_ar
    runs = [decode(engine, p, cfg, eot, policy=policy) for p in prompts]
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


def build_policies(config, model, layout) -> list[Policy]:
    """Every policy `edgexpert compare` runs, from the configuration."""
    from ..config import ConfigError
    from .policies import Autoregressive, EdgeXpert, MoESpec
    p, d = config.policies, config.decode
    try:
        spec = MoESpec(layout, d, model.cfg.top_k, p.moe_spec_budget)
    except ValueError as exc:
        raise ConfigError(f"policies.moe_spec_budget: {exc}") from None
    if p.pruned_checkpoint == "bundled":   # EdgeXpert on its pruned model, with that model's mask
        from .prune import load_pruned_checkpoint
        pruned = load_pruned_checkpoint(None, model)
        edgexpert = EdgeXpert(layout, d, pruned.model, p.coalescing_ratio,
                              pruned.meta["prune"]["sparsity"], p.calibration)
        edgexpert.model = pruned.model
    else:
        edgexpert = EdgeXpert(layout, d, model, p.coalescing_ratio, p.pruning_sparsity, p.calibration)
    return [Autoregressive(layout, d), Policy(layout, d), edgexpert, spec]


def compare(config, model, prompts: list[list[int]], windows: list[list[int]],
            eot: int | None) -> dict:
    """Every policy on the same prompts (traffic, greedy match) and held-out windows (quality),
    keyed by policy name; EMA reduction against naive speculative decoding."""
    from ..weight_layout import WeightLayout
    engine = FloatEngine(model)
    layout = WeightLayout.for_model(model.cfg)
    reference = [decode_ar(engine, p, config.decode, eot) for p in prompts]
    out = {}
    for policy in build_policies(config, model, layout):
        own = engine if policy.model is None else FloatEngine(policy.model)
        traffic = run_policy(own, policy, prompts, reference, config.decode, eot)
        q = quality(own, policy, windows, config.policies.eval_prompt_tokens, config.decode,
                    reference=engine)
        out[policy.name] = {**traffic, **q,
                            "ema_bytes_per_token_decode": traffic["ema_bytes_per_token"]}
    naive = out["naive_sd"]["ema_bytes_per_token_decode"]
    for metrics in out.values():
        metrics["ema_reduction_vs_naive_sd"] = round(1 - metrics["ema_bytes_per_token_decode"] / naive, 4)
    return out
