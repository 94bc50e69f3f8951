"""Switching-activity stimulus of the expert engine.

The engine runs groups back to back at full speed (every input offered every cycle, every
output always taken): `candidates` candidates per group with int8 inputs drawn like quantized
normal values (stimulus.GAUSSIAN_SIGMA), uniform random int4 columns (packed int4 weights look
like random bits), scale words and activation scales in the ranges the bundled checkpoint's
trace shows (float16 scales near 2**-7, x_e 18..20, m in [2**13, 2**15)), every input channel
of both matrices fetched and in every candidate's masks. One operation is one int8 x int4 MAC of a column word that holds
values (padding nibbles of a word are not counted).
"""

from __future__ import annotations

import random

from ...contracts.top import input_beats, inputs_per_beat
from ...hw.engine.layouts import (cand_layout, column_layout, flush_layout, mask_layout,
                                 scale_words_layout, x_layout)
from .common import GAUSSIAN_SIGMA, Stimulus

__all__ = ["drive_engine", "engine_stimulus"]


def _group(rng: random.Random, p: dict) -> dict[str, list]:
    """One group's input items per port: (payload dict, MACs its transfer completes)."""
    d, f, c, w, t = (p[k] for k in ("d_model", "expert_ffn", "candidates", "word_bits", "tokens"))
    items: dict[str, list] = {}
    items["cand"] = [{"x": {"m": rng.randrange(1 << 13, 1 << 15), "e": rng.randint(18, 20)},
                      "token": rng.randrange(t), "weight": rng.randrange(1 << 16),
                      "last": int(i == c - 1)} for i in range(c)]
    for name, channels in (("gate_up_mask", d), ("down_mask", f)):
        items[name] = [{"mask": (1 << channels) - 1, "last": int(i == c - 1)} for i in range(c)]
    items["x"] = []
    for i in range(c):
        xs = input_beats([max(-127, min(127, round(rng.gauss(0, GAUSSIAN_SIGMA["act"]))))
                          for _ in range(d)], w)
        items["x"] += [{"candidate": i, "beat": b, "values": v,
                        "last": int(i == c - 1 and b == len(xs) - 1)} for b, v in enumerate(xs)]
    for name, channels, outputs in (("gate_up", d, 2 * f), ("down", f, d)):
        per_col = -(-outputs * 4 // w)
        # a word's MACs: every candidate times the word's values (the last word may hold fewer)
        items[name] = [({"channel": j, "data": rng.getrandbits(w),
                         "last": int(j == channels - 1 and k == per_col - 1)},
                        c * min(w // 4, outputs - k * (w // 4)))
                       for j in range(channels) for k in range(per_col)]
        words = -(-outputs * 16 // w)
        # float16 words with exponent 7..10 (scales 2**-8..2**-5) and any fraction
        items[f"{name}_scales"] = [
            {"data": sum((rng.randint(7, 10) << 10 | rng.randrange(1024)) << (16 * i)
                         for i in range(w // 16)), "last": int(k == words - 1)}
            for k in range(words)]
    items["flush"] = [{"token": rng.randrange(t)}]
    return {name: [v if isinstance(v, tuple) else (v, 0) for v in values]
            for name, values in items.items()}


async def drive_engine(ctx, dut, rng: random.Random, cycles: int) -> int:
    p = dut.parameters
    layouts = {"cand": cand_layout(p["tokens"]),
               "gate_up_mask": mask_layout(p["d_model"]),
               "down_mask": mask_layout(p["expert_ffn"]),
               "x": x_layout(p["candidates"], p["d_model"], inputs_per_beat(p["word_bits"])),
               "gate_up": column_layout(p["d_model"], p["word_bits"]),
               "down": column_layout(p["expert_ffn"], p["word_bits"]),
               "gate_up_scales": scale_words_layout(p["word_bits"]),
               "down_scales": scale_words_layout(p["word_bits"]),
               "flush": flush_layout(p["tokens"])}
    queues: dict[str, list] = {name: [] for name in layouts}
    for port in ("hidden", "hidden_scale", "expert_out", "moe_out"):
        ctx.set(getattr(dut, port).ready, 1)
    macs = 0
    for _ in range(cycles):
        if not queues["cand"]:     # the next group waits in the queues behind this one
            for name, values in _group(rng, p).items():
                queues[name] += values
        for name, layout in layouts.items():
            port = getattr(dut, name)
            ctx.set(port.valid, bool(queues[name]))
            if queues[name]:
                ctx.set(port.payload.as_value(), layout.const(queues[name][0][0]).as_bits())
        for name in layouts:
            if queues[name] and ctx.get(getattr(dut, name).ready):
                macs += queues[name].pop(0)[1]
        await ctx.tick()
    return macs


def engine_stimulus(config) -> Stimulus:
    return Stimulus("MAC", drive_engine, {})
