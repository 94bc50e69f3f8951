"""Small synthetic prompts for the PRU, good and bad, as the Amaranth-simulator test
(tests/test_pru_sim.py) and the fuzz bench (fuzz.py) build them. A good prompt is its Q.16 scores
and router logits; its expected routes and EMA words come from golden (a synthetic prefill trace,
golden/traces/prefill_trace.py, read by vectors.py). A bad prompt is score beats packed
unchecked (`score_beat`) with one or two fields out of range (docs/contracts.md, "PRU prompts:
accepted ranges") and the logit beats its first beat's length announces; its code is the field
it breaks, stated here, never read back from the RTL."""

from __future__ import annotations

import random

import torch

from edgexpert.contracts.config import load_config
from edgexpert.contracts.pru import SCORE_BITS, SCORE_MAX, PruError, logit_beats, score_beat
from edgexpert.hw.pru import PruParams

__all__ = ["SETTINGS", "BAD_KINDS", "small_model", "random_prompt", "random_bad_prompt",
           "bad_prompt", "PromptVectorsSum"]

#: the prefill policy of the small prompts: class thresholds, budgets, chunk
SETTINGS = {"tau_major_q16": 65536, "tau_minor_q16": 49152, "budget_minor": 2,
            "budget_trivial": 1, "chunk": 3}


def small_model(n_experts=8, top_k=3, n_layers=2):
    """The default configuration's model made small (48 / 40 channels, 2 heads)."""
    return load_config(overrides=[f"model.n_experts={n_experts}", f"model.top_k={top_k}",
                                  f"model.n_layers={n_layers}", "model.d_model=48",
                                  "model.expert_ffn=40", "model.n_heads=2"]).model


def random_prompt(rng: random.Random, params: PruParams) -> tuple[torch.Tensor, torch.Tensor]:
    """A good prompt of 1..max_tokens tokens: Q.16 scores summing to 1.0 (a random partition,
    so every class occurs) and logits [T, L, E] drawn from a few values (ties), a small range or
    all of int32."""
    t = rng.randint(1, params.max_tokens)
    cuts = sorted(rng.randint(0, SCORE_MAX) for _ in range(t - 1))
    scores = [b - a for a, b in zip([0, *cuts], [*cuts, SCORE_MAX])]
    kind = rng.choice(["ties", "small", "int32"])
    shape = (t, params.n_layers, params.n_experts)

    def draw():
        if kind == "ties":
            return rng.randint(-3, 2) * 40000
        if kind == "small":
            return rng.randint(-2**20, 2**20)
        return rng.randint(-2**31, 2**31 - 1)
    z = torch.tensor([draw() for _ in range(shape[0] * shape[1] * shape[2])]).reshape(shape)
    return torch.tensor(scores), z


#: the ways `random_bad_prompt` breaks a prompt, with the code each is reported with: a score
#: above 1.0, a first length of 0 or past max_tokens, a later length changed, and a bad score
#: before a changed length (the first bad field in beat order is named)
BAD_KINDS = {"score": PruError.SCORE, "length_zero": PruError.LENGTH,
             "length_above": PruError.LENGTH, "mismatch": PruError.MISMATCH,
             "score_then_mismatch": PruError.SCORE}


def random_bad_prompt(rng: random.Random, params: PruParams,
                      kind: str) -> tuple[list[int], list[int]]:
    """A prompt broken as `kind` (BAD_KINDS) says: (score beats, logit beats)."""
    top = 2**params.length_bits - 1
    t = rng.randint(2, params.max_tokens)
    scores = [rng.randint(0, SCORE_MAX) for _ in range(t)]
    lengths = [t] * t
    if kind == "score":
        scores[rng.randrange(t)] = rng.randint(SCORE_MAX + 1, 2**SCORE_BITS - 1)
    elif kind == "length_zero":
        scores, lengths = scores[:1], [0]
    elif kind == "length_above":
        t = rng.randint(params.max_tokens + 1, top)
        scores, lengths = [rng.randint(0, SCORE_MAX) for _ in range(t)], [t] * t
    elif kind in ("mismatch", "score_then_mismatch"):
        at = rng.randrange(1, t)
        lengths[at] = rng.choice([v for v in range(top + 1) if v != t])
        if kind == "score_then_mismatch":
            scores[rng.randrange(at)] = rng.randint(SCORE_MAX + 1, 2**SCORE_BITS - 1)
    else:
        raise ValueError(f"bad prompt kind {kind!r}: accepted {', '.join(BAD_KINDS)}")
    return bad_prompt(rng, params, scores, lengths)


def bad_prompt(rng: random.Random, params: PruParams, scores: list[int],
               lengths: list[int]) -> tuple[list[int], list[int]]:
    """A prompt's score beats with the given scores and length fields (unchecked), and the
    random logit beats its first length announces: 2 x length x n_layers x n_experts / lanes."""
    announced = lengths[0]
    rows = [[rng.randrange(-2**31, 2**31) for _ in range(params.n_experts)]
            for _ in range(2 * announced * params.n_layers)]
    return [score_beat(s, t) for s, t in zip(scores, lengths)], logit_beats(rows, params.lanes)


class PromptVectorsSum:
    """Prompts' beats and expected outputs one after the other."""
    def __init__(self):
        self.scores, self.logits, self.routes, self.ema = [], [], [], []

    def add(self, scores, logits, routes=(), ema=()):
        self.scores += scores
        self.logits += logits
        self.routes += list(routes)
        self.ema += list(ema)
