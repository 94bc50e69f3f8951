"""Quality metrics of the golden model, measured one way for every caller: the integer path
against the float model (golden/studies/analysis.py), a policy against the exact model teacher-forced
(golden/studies/evaluate.py) and in its prefill pass (golden/policies/prefill.py), and greedy outputs against the
exact model's.

`LogitComparison` sums, over positions with a known next token, the negative log-likelihood of
that token under the reference and under the compared logits, KL(reference || compared) and
top-1 agreement; the ratios are taken once at the end, so long windows weigh by their tokens.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

__all__ = ["LogitComparison", "greedy_match"]


@dataclass
class LogitComparison:
    """Running sums comparing `compared` logits with `reference` logits at the same positions."""
    count: int = 0
    nll_reference: float = 0.0
    nll_compared: float = 0.0
    kl: float = 0.0
    agree: float = 0.0

    def add(self, reference: torch.Tensor, compared: torch.Tensor, targets: torch.Tensor) -> None:
        """Logits [N, V] of both at N positions, and the true next tokens [N] there."""
        lp_ref, lp_cmp = F.log_softmax(reference, -1), F.log_softmax(compared, -1)
        self.nll_reference += float(-lp_ref.gather(-1, targets[:, None]).sum())
        self.nll_compared += float(-lp_cmp.gather(-1, targets[:, None]).sum())
        self.kl += float((lp_ref.exp() * (lp_ref - lp_cmp)).sum())
        self.agree += float((reference.argmax(-1) == compared.argmax(-1)).sum())
        self.count += len(targets)

    def top1_agreement(self) -> float:
        """Share of positions where both predict the same most likely token."""
        return round(self.agree / self.count, 4)

    def mean_kl(self) -> float:
        """Mean KL(reference || compared) in nats per position, clamped at 0: KL is never
        negative, but when the compared logits equal the reference's up to float64 rounding (a
        lossless policy, the exact model against itself) the sum can come out a hair below zero,
        which would print as -0.0."""
        return round(max(self.kl / self.count, 0.0), 5)

    def ppl_ratio(self) -> float:
        """Perplexity of the true tokens under `compared` over that under `reference`."""
        return round(math.exp((self.nll_compared - self.nll_reference) / self.count), 4)

    def ppl_reference(self) -> float:
        return round(math.exp(self.nll_reference / self.count), 4)

    def ppl_compared(self) -> float:
        return round(math.exp(self.nll_compared / self.count), 4)


def greedy_match(outputs: list[list[int]], reference: list[list[int]]) -> dict:
    """How much of the reference's greedy outputs `outputs` reproduce, prompt by prompt:
    the share of identical outputs, and the mean share of each reference output matched before
    the first differing token."""
    same = [out == ref for out, ref in zip(outputs, reference)]
    prefix = []
    for out, ref in zip(outputs, reference):
        n = next((i for i, (a, b) in enumerate(zip(out, ref)) if a != b), min(len(out), len(ref)))
        prefix.append(n / max(len(ref), 1))
    return {"greedy_sequence_match": round(sum(same) / len(same), 4),
            "greedy_prefix_match": round(sum(prefix) / len(prefix), 4)}
