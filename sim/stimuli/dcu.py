"""Switching-activity stimulus of the depth coalescing unit (`dcu`).

The DCU runs jobs the way depth-coalesced decoding gives them: GATE_UP and DOWN alternately, the
group size n drawn from the golden trace's distribution (integer-path speculative decoding of
the 8 bundled prompts, 4 new tokens, verification passes: 7,612 groups, mean n 3.0; the counts
for n = 1..8 below, larger groups folded into 8), int8 inputs Gaussian with sigma 127/4 (the
largest code near 4 sigma, as `GAUSSIAN_SIGMA`), scales and routing weights in their contract
ranges, a quarter of the channels pruned, 75% of the channels requested (the default
coalescing ratio). The first job is a one-candidate DOWN group, the shortest (about 35 cycles at
the bundled model's channels), so that even a short run (the tests' 100 cycles) completes a
decision. Both inputs are always offered and every command taken at once, so the DCU
runs at its own speed. One operation is one coalescing decision: one job's DESCRIPTOR and mask
words delivered.
"""

from __future__ import annotations

import random
from collections import deque

from ...contracts.dcu import DcuJob, encode_job
from ...contracts.ema import EmaOp
from ...contracts.weight_layout import Matrix, WeightLayout
from .common import GAUSSIAN_SIGMA, Stimulus

__all__ = ["GROUP_SIZES", "drive_dcu", "dcu_stimulus"]

#: groups of n = 1..8 candidates in the golden trace above (n >= 8 counted as 8)
GROUP_SIZES = (3130, 1490, 918, 526, 420, 270, 262, 596)


def _job(rng: random.Random, layout: WeightLayout, matrix: Matrix, tag: int, max_group: int,
         n: int | None = None) -> DcuJob:
    c = layout.in_channels(matrix)
    n = n or min(max_group, rng.choices(range(1, 9), weights=GROUP_SIZES)[0])
    sigma = GAUSSIAN_SIGMA["act"]
    q = [[max(-127, min(127, round(rng.gauss(0, sigma)))) for _ in range(c)] for _ in range(n)]
    return DcuJob(tag, 0, 0, matrix, q, [rng.randint(8257, 16513) for _ in range(n)],
                  [rng.randint(18, 21) for _ in range(n)], [rng.randint(1, 65536) for _ in range(n)],
                  max(1, round(0.75 * c)), [int(rng.random() >= 0.25) for _ in range(c)])


async def drive_dcu(ctx, dut, rng: random.Random, cycles: int) -> int:
    g = dut.geometry
    layout = WeightLayout(n_layers=1, n_experts=1, d_model=g.gate_up_channels,
                          expert_ffn=g.down_channels)
    route: deque = deque()
    data: deque = deque()
    decisions = jobs = 0
    ctx.set(dut.cmd.ready, 1)
    for cycle in range(cycles):
        if len(route) < 2:
            # DOWN first, one candidate: the shortest job; then alternating, sizes as the trace
            job = _job(rng, layout, Matrix.DOWN if jobs % 2 == 0 else Matrix.GATE_UP,
                       jobs % 256, g.max_group, n=1 if jobs == 0 else None)
            jobs += 1
            r, d = encode_job(layout, job)
            route.extend(r)
            data.extend(d)
        ctx.set(dut.route.valid, 1)
        ctx.set(dut.route.payload.as_value(), route[0])
        ctx.set(dut.data.valid, bool(data))
        if data:
            ctx.set(dut.data.payload.as_value(), data[0])
        if ctx.get(dut.route.ready):
            route.popleft()
        if data and ctx.get(dut.data.ready):
            data.popleft()
        if ctx.get(dut.cmd.valid) and ctx.get(dut.cmd.payload.op) == EmaOp.DESCRIPTOR:
            decisions += 1
        await ctx.tick()
    return decisions


def dcu_stimulus(config) -> Stimulus:
    return Stimulus("coalescing decision", drive_dcu)
