"""The EAGLE head's draft passes (golden/decoding/eagle/: drafting, apart from the head itself).

Decoding (`EagleTree`): the draft's KV cache lives next to the target's (`KVCache.draft`). Entry
i of it holds (target feature after token i - 1, token i): the target's verification pass gives
the features of the accepted tokens, which the first draft pass of the next step adds (with the
new root); deeper draft passes feed the head's own output feature instead of the target's (the
tree nodes' entries are dropped when the next step starts).
"""

from __future__ import annotations

import torch

from ...lm.model import KVCache, LayerTrace

__all__ = ["record_features", "EagleTree"]


def record_features(cache: KVCache, tokens: torch.Tensor, traces: list[LayerTrace],
                    fused: tuple[int, ...]) -> None:
    """Keep, per entry a target pass appended to `cache`, its token and the fused layers'
    outputs (what the draft of the next step reads; `KVCache.keep` drops the rejected ones)."""
    features = torch.cat([traces[layer].output for layer in fused], dim=-1).to(torch.float64)
    old = cache.entries
    cache.entries = {
        "tokens": torch.cat([old["tokens"], tokens]) if old else tokens.clone(),
        "features": torch.cat([old["features"], features]) if old else features}


class EagleTree:
    """The draft passes of one tree, by `head` (an EagleHead in float64, or an IntEagleHead):
    the head's state across steps lives in `target.draft` (its KV cache and how many of its
    entries hold true target features)."""

    def __init__(self, head, target: KVCache, root: int):
        if target.draft is None:
            target.draft = {"cache": KVCache(), "valid": 0}
        self.head, self.target, self.root = head, target, root
        self.state = target.draft
        self.out: dict[int, torch.Tensor] = {}     # node (-1: the root) -> its output feature
        self.entry: dict[int, int] = {}            # node -> its entry in the head's cache

    @torch.no_grad()
    def run(self, frontier: list[int], parents: list[int],
            tokens: list[int]) -> tuple[torch.Tensor, int, int]:
        """One draft pass over the frontier nodes (tokens): (logits [len(frontier), V], tokens
        processed, cache entries attended that were there before the pass)."""
        cache = self.state["cache"]
        if frontier == [-1]:
            return self._first(cache)
        first = len(cache)
        for r, n in enumerate(frontier):
            self.entry[n] = first + r
        allowed = torch.zeros(len(frontier), first + len(frontier), dtype=torch.bool)
        allowed[:, :self.state["valid"]] = True
        allowed[:, self.entry[-1]] = True
        for r, n in enumerate(frontier):
            while n >= 0:
                allowed[r, self.entry[n]] = True
                n = parents[n]
        feature = torch.stack([self.out[parents[n]] for n in frontier])
        out = self.head.step(feature, torch.tensor(tokens), cache, allowed)
        for r, n in enumerate(frontier):
            self.out[n] = out[r]
        return self.head.full_logits(out), len(frontier), first

    def _first(self, cache: KVCache) -> tuple[torch.Tensor, int, int]:
        """The root's pass: drop the last tree's entries, then add every target entry since the
        last step (entry i: feature after token i - 1, token i; the root last)."""
        valid, known = self.state["valid"], len(self.target)
        cache.keep(torch.arange(valid))
        if known == 0:     # a one-token prompt: no target feature yet, the root drafts on zeros
            features = torch.zeros(1, len(self.head.settings.fused) * self.head.cfg.d_model,
                                   dtype=torch.float64)
            tokens = torch.tensor([self.root])
        else:
            # entry i - 1 holds position i (position 0 has no feature before it): `valid`
            # entries cover positions 1..valid, the new ones valid + 1..known (the root)
            features = self.target.entries["features"][valid:known]
            tokens = torch.cat([self.target.entries["tokens"][valid + 1:known],
                                torch.tensor([self.root])])
        n = len(tokens)
        allowed = torch.cat([torch.ones(n, valid, dtype=torch.bool),
                             torch.ones(n, n, dtype=torch.bool).tril()], dim=1)
        out = self.head.step(self.head.fuse(features), tokens, cache, allowed)
        # a one-token prompt's root drafted on zeros: its entry is dropped at the next step
        self.state["valid"] = len(cache) if known else 0
        self.entry[-1] = len(cache) - 1
        self.out[-1] = out[-1]
        return self.head.full_logits(out[-1:]), n, valid
