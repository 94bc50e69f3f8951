"""Switching-activity stimulus of the accelerator top.

The host sends EMA steps of `GROUPS_PER_STEP` groups back to back (every command beat offered
every cycle, every output always taken): per group a random expert of a random layer, both
matrices whole (every mask bit set) with their scale blocks, fetched one group ahead of the
group's `candidates` candidates and int8 inputs (drawn like quantized normal values,
stimulus.GAUSSIAN_SIGMA; scales in the ranges engine_stimulus.py uses), then a flush. The
external memory answers each burst `LATENCY` cycles after its AR with random beats, one per
cycle (packed int4 weights look like random bits). One operation is one int8 x int4 MAC of a
column word the engine takes: candidates x the values the word holds (2F of a GATE_UP column,
D of a DOWN column, word_bits / 4 per word).
"""

from __future__ import annotations

import random
from collections import deque

from ...contracts.ema import Descriptor, encode_descriptor, new_step_command
from ...contracts.top import TopOp, input_beats, inputs_per_beat
from ...contracts.weight_layout import Matrix
from ...hw.engine.layouts import flush_layout, x_layout
from ...hw.top.layouts import host_cand_layout
from ...hw.top import command_layout
from .common import GAUSSIAN_SIGMA, Stimulus

__all__ = ["drive_top", "top_stimulus"]

#: groups per EMA step: three whole experts of the bundled model (about 19 KiB each) fit a
#: 64 KiB buffer, the bundled 256 KiB one with room
GROUPS_PER_STEP = 3
#: cycles from an AR to its first beat: the EMA bench's short latency (docs/blocks/ema.md)
LATENCY = 20


def _step(rng: random.Random, layout, tokens: int, candidates: int, word_bits: int) -> list[int]:
    lay = command_layout(tokens, candidates, layout.d_model, word_bits,
                         expert_ffn=layout.expert_ffn)
    cand, flush = host_cand_layout(tokens, layout.expert_ffn), flush_layout(tokens)
    x = x_layout(candidates, layout.d_model, inputs_per_beat(word_bits))

    def beat(op: TopOp, bits: int) -> int:
        return int(op) << lay["op"].offset | bits << lay["arg"].offset

    experts = rng.sample(range(layout.n_experts), GROUPS_PER_STEP)
    layer = rng.randrange(layout.n_layers)
    fetch = []
    for i, e in enumerate(experts):
        words = []
        for n, matrix in enumerate(Matrix):
            words += encode_descriptor(layout, Descriptor(
                2 * i + n, layer, e, matrix, range(layout.in_channels(matrix)), scales=True))
        fetch.append([beat(TopOp.EMA, w) for w in words])
    beats = [beat(TopOp.EMA, new_step_command())] + fetch[0]
    d = layout.d_model
    for i in range(GROUPS_PER_STEP):
        if i + 1 < GROUPS_PER_STEP:
            beats += fetch[i + 1]
        beats += [beat(TopOp.CAND, cand.const({
            "x": {"m": rng.randrange(1 << 13, 1 << 15), "e": rng.randint(18, 20)},
            "token": c, "weight": rng.randrange(1 << 16),
            "down": (1 << layout.expert_ffn) - 1,
            "last": int(c == candidates - 1)}).as_bits()) for c in range(candidates)]
        for c in range(candidates):
            xs = input_beats([max(-127, min(127, round(rng.gauss(0, GAUSSIAN_SIGMA["act"]))))
                              for _ in range(d)], word_bits)
            beats += [beat(TopOp.X, x.const({
                "candidate": c, "beat": b, "values": v,
                "last": int(c == candidates - 1 and b == len(xs) - 1)}).as_bits())
                for b, v in enumerate(xs)]
    beats += [beat(TopOp.FLUSH, flush.const({"token": c}).as_bits())
              for c in range(min(tokens, candidates))]
    return beats


async def drive_top(ctx, dut, rng: random.Random, cycles: int) -> int:
    p = dut.engine.parameters
    layout = dut.ema.geometry.layout
    d, f, c = p["d_model"], p["expert_ffn"], p["candidates"]
    axi = dut.m_axi
    beats: deque = deque()
    bursts: deque = deque()       # [cycle the first beat may leave, beats left]
    for port in ("hidden", "hidden_scale", "expert_out", "moe_out"):
        ctx.set(getattr(dut, port).ready, 1)
    ctx.set(axi.arready, 1)
    w = p["word_bits"] // 4
    # per matrix: the engine's column port, outputs per column, words per column, word index
    columns = [[dut.engine.gate_up, 2 * f, -(-2 * f // w), 0],
               [dut.engine.down, d, -(-d // w), 0]]
    macs = 0
    for cycle in range(cycles):
        if not beats:
            beats.extend(_step(rng, layout, p["tokens"], c, p["word_bits"]))
        ctx.set(dut.cmd.valid, 1)
        ctx.set(dut.cmd.payload.as_value(), beats[0])
        serving = bool(bursts) and bursts[0][0] <= cycle
        ctx.set(axi.rvalid, serving)
        if serving:
            ctx.set(axi.rdata, rng.getrandbits(len(axi.rdata)))
            ctx.set(axi.rlast, bursts[0][1] == 1)
        if ctx.get(dut.cmd.ready):
            beats.popleft()
        if ctx.get(axi.arvalid):
            bursts.append([cycle + LATENCY, ctx.get(axi.arlen) + 1])
        if serving and ctx.get(axi.rready):
            bursts[0][1] -= 1
            if bursts[0][1] == 0:
                bursts.popleft()
        for column in columns:
            port, outputs, words, k = column
            if ctx.get(port.valid) and ctx.get(port.ready):
                macs += c * min(w, outputs - k * w)
                column[3] = (k + 1) % words
        await ctx.tick()
    return macs


def top_stimulus(config) -> Stimulus:
    return Stimulus("MAC", drive_top, {})
