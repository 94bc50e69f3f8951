"""Switching-activity stimulus of the prompt routing unit (`pru`).

The PRU routes prompts back to back at full throughput (outputs always ready): each prompt has
`tokens` tokens whose scores spread r = score x length over 0..2 (all three classes) and router
logits drawn uniformly within +-8.0 in Q.16 (the bundled model's integer router logits lie
within a few units; random low bits switch like real ones). Its inputs are fed in the order the
contract asks (docs/blocks/pru.md): the scores, then per layer every token's logits twice. One
operation is one token routed in one layer (its routing phase's last pick leaving), so the
energy per operation covers both phases of that token.
"""

from __future__ import annotations

import random

from ...contracts.pru import score_beats
from .common import Stimulus

__all__ = ["drive_pru", "pru_stimulus"]

#: logits within +-8.0 (Q.16)
LOGIT_SPAN = 8 << 16


def _prompt(rng: random.Random, dut, tokens: int) -> tuple[list[int], list[int]]:
    p = dut.params
    scores = score_beats([rng.randrange(0, 2 * 65536 // tokens) for _ in range(tokens)],
                         p.max_tokens)
    logits = []
    for _layer in range(p.n_layers):
        beats = [[rng.randrange(-LOGIT_SPAN, LOGIT_SPAN) for _ in range(p.lanes)]
                 for _ in range(tokens * p.beats_per_token)]
        logits += beats + beats          # the shared-set phase, then the routing phase
    return scores, logits


async def drive_pru(ctx, dut, rng: random.Random, cycles: int, tokens: int) -> int:
    scores: list[int] = []
    logits: list[int] = []
    routed = 0
    ctx.set(dut.route.ready, 1)
    ctx.set(dut.cmd.ready, 1)
    for _ in range(cycles):
        if not logits:
            scores, logits = _prompt(rng, dut, tokens)
        ctx.set(dut.score.valid, bool(scores))
        if scores:
            ctx.set(dut.score.payload.as_value(), scores[0])
        ctx.set(dut.logit.valid, 1)
        ctx.set(dut.logit.payload, logits[0])
        _, _, s_ready, l_ready, r_valid, r_last = await ctx.tick().sample(
            dut.score.ready, dut.logit.ready, dut.route.valid, dut.route.payload.last)
        if scores and s_ready:
            scores.pop(0)
        if l_ready:
            logits.pop(0)
        routed += int(bool(r_valid and r_last))
    return routed


#: tokens per prompt: a layer's first routed token leaves only after the shared-set phase of
#: every token, so the prompts are short enough for short activity runs (synth.activity_cycles
#: down to 100) to route several tokens even at 128 experts. The work per token (both phases)
#: does not depend on the prompt's length; only the per-prompt score beats are amortized over
#: fewer tokens.
PROMPT_TOKENS = 2


def pru_stimulus(config) -> Stimulus:
    return Stimulus("token-layer routed", drive_pru, {"tokens": PROMPT_TOKENS})
