"""Measurements of the golden model that later issues build on (`edgexpert analyze`).

- Integer path against the float model on held-out windows: perplexity of each, their ratio,
  top-1 agreement of the next-token predictions, mean KL(float || int).
- Routing skew per layer (as SpecMoE's Table I): the share of routed token-expert assignments that
  land on the hottest 25% of experts (0.25 when perfectly balanced).
- Co-activation of same-depth draft candidates (EdgeXpert's motivation for depth coalescing):
  over the verification passes of speculative decoding on the bundled prompts, for every depth
  group of the tree with at least two candidates and every layer, the fraction of candidates that
  share at least `min_shared` of their routed experts with another candidate of the group, and the
  same fraction over candidate pairs.
"""

from __future__ import annotations

import itertools

import torch

from ...contracts.trace import PassKind
from ..decoding.decode import DecodeResult, FloatEngine
from ..integer.int_model import IntModel
from ..decoding.metrics import LogitComparison
from ..lm.model import KVCache, MoEModel

__all__ = ["compare_paths", "routing_skew", "coactivation", "group_sharing"]


@torch.no_grad()
def compare_paths(model: MoEModel, int_model: IntModel, windows: torch.Tensor) -> dict:
    """Float (float64) against the integer path `int_model` (the model's quantization) on
    windows [N, S + 1] (next-token targets)."""
    fmodel = FloatEngine(model).model
    scores = LogitComparison()
    for w in windows:
        tokens, targets = w[:-1], w[1:]
        n = len(tokens)
        lf = fmodel(tokens[None])[0][0]
        li, _ = int_model.step(tokens, torch.arange(n), KVCache(),
                               torch.tril(torch.ones(n, n, dtype=torch.bool)))
        scores.add(lf, li, targets)
    return {"tokens": scores.count, "ppl_float": scores.ppl_reference(),
            "ppl_int": scores.ppl_compared(), "ppl_ratio": scores.ppl_ratio(),
            "top1_agreement": scores.top1_agreement(), "mean_kl": scores.mean_kl()}


@torch.no_grad()
def routing_skew(model: MoEModel, windows: torch.Tensor, hot_fraction: float = 0.25) -> list[float]:
    """Per layer: share of token-expert assignments on the hottest `hot_fraction` of experts."""
    counts = torch.zeros(model.cfg.n_layers, model.cfg.n_experts)
    for w in windows:
        _, _, chosen = model(w[None, :-1])
        for layer, idx in enumerate(chosen):
            counts[layer] += torch.bincount(idx.reshape(-1), minlength=model.cfg.n_experts)
    hot = max(1, round(hot_fraction * model.cfg.n_experts))
    top = counts.sort(dim=1, descending=True).values[:, :hot].sum(1)
    return [round(float(t / c), 4) for t, c in zip(top, counts.sum(1))]


def coactivation(runs: list[DecodeResult], min_shared: int = 3) -> dict:
    """Same-depth candidates' shared experts over the verification passes of `runs`
    (decoded with traces kept)."""
    total = dict.fromkeys(("groups", "candidates", "sharing", "pairs", "sharing_pairs"), 0)
    for run in runs:
        for p in run.traces:
            if p.kind != PassKind.VERIFY:
                continue
            depths = torch.tensor(p.depths)
            for d in torch.unique(depths[depths > 0]).tolist():
                rows = torch.nonzero(depths == d)[:, 0].tolist()
                if len(rows) < 2:
                    continue
                for layer in p.layers:
                    found = group_sharing([set(layer.experts[r][layer.experts[r] >= 0].tolist())
                                           for r in rows], min_shared)
                    for key, value in found.items():
                        total[key] += value
    return {"min_shared": min_shared, "groups": total["groups"], "candidates": total["candidates"],
            "candidate_fraction": round(total["sharing"] / max(total["candidates"], 1), 4),
            "pair_fraction": round(total["sharing_pairs"] / max(total["pairs"], 1), 4)}


def group_sharing(sets: list[set[int]], min_shared: int) -> dict:
    """One depth group's candidates' expert sets: counts of the group (1), its candidates, those
    sharing at least `min_shared` experts with another candidate, its pairs, and the pairs that
    share that many (`coactivation` sums them)."""
    shares = [False] * len(sets)
    pairs = sharing_pairs = 0
    for a, b in itertools.combinations(range(len(sets)), 2):
        pairs += 1
        if len(sets[a] & sets[b]) >= min_shared:
            sharing_pairs += 1
            shares[a] = shares[b] = True
    return {"groups": 1, "candidates": len(sets), "sharing": sum(shares), "pairs": pairs,
            "sharing_pairs": sharing_pairs}
