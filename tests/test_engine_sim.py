# amaranth: UnusedElaboratable=no
# (constructors rejected on purpose leave their component unused)
"""The expert engine in Amaranth's simulator against numbers from golden/integer/ on small random
parameters: hidden values and scales, expert outputs and MoE sums bit for bit, with masked
columns, partial groups, an all-zero input, padding in column words and random back-pressure.

The cocotb bench (cocotb_tests/engine/) replays real golden trace rows on Icarus and Verilator.
"""

import random
from collections import deque

import numpy as np
import pytest
import torch
from amaranth.hdl import Module, ResetInserter, Signal
from amaranth.sim import Simulator

from edgexpert.cocotb_tests.engine.host import (INPUTS, OUTPUTS, flush_items, group_items,
                                                group_outputs, layouts, moe_items, scale_words,
                                                unpack)
from edgexpert.contracts.top import (EXPERT_OUT_VALUES, input_beats, inputs_per_beat,
                                     outputs_per_beat, value_beats)
from edgexpert.contracts.weight_image import ExpertWeights, memory_image
from edgexpert.contracts.weight_layout import WeightLayout
from edgexpert.golden.integer.int_model import IntModel, image_weights
from edgexpert.golden.integer.intops import I64, Dyadic, quantize_vec, rshift
from edgexpert.hw.engine import ExpertEngine


def run_engine(engine: ExpertEngine, inputs: dict[str, list[int]], seed: int, pressure: float,
               max_cycles: int = 200_000, reset_after: int | None = None,
               hold: tuple[str, int, int] | None = None,
               ) -> tuple[dict[str, list[int]], int, dict[str, list[int]]]:
    """Drive every input queue and drain every output, each stream paused with probability
    `pressure` per cycle; the flushes go only after every expert output arrived, or, with
    `inputs["_order"]` (a sequence of "cand" and "flush"), in that order with the candidates,
    as the top's command stream gives them. Returns the outputs, the cycles taken and, per
    group, the cycle its last candidate was taken (`start`) and its last expert output left
    (`end`), and the cycle each token's last MoE beat left (`flushed`). With `reset_after` = k: once k expert outputs are out (groups in flight, sums
    half combined), a reset of 2 cycles, then every input again from the start; what came out
    before the reset is dropped. `hold` = (output, k, n): that output not ready for n cycles once
    k of its items are out."""
    rng = random.Random(seed)
    held = []                # the cycle the hold began
    queues = {name: deque(inputs.get(name, [])) for name in INPUTS}
    expected_out = len(inputs["_expert_out_count"])
    got = {name: [] for name in OUTPUTS}
    cycles = []
    marks = {"start": [], "end": [], "flushed": []}
    rst = Signal()
    top = Module()
    top.submodules.engine = ResetInserter(rst)(engine)

    async def tb(ctx):
        order = deque(inputs.get("_order", []))
        offered = {name: False for name in INPUTS}
        pending_reset = reset_after
        for cycle in range(max_cycles):
            if pending_reset is not None and len(got["expert_out"]) >= pending_reset:
                pending_reset = None
                for name in INPUTS:
                    ctx.set(getattr(engine, name).valid, 0)
                ctx.set(rst, 1)
                await ctx.tick().repeat(2)
                ctx.set(rst, 0)
                queues.update({name: deque(inputs.get(name, [])) for name in INPUTS})
                order = deque(inputs.get("_order", []))
                offered = {name: False for name in INPUTS}
                for name in OUTPUTS:
                    got[name].clear()
                for mark in marks.values():
                    mark.clear()
            for name in INPUTS:
                port = getattr(engine, name)
                if "_order" in inputs:
                    gated = name in ("cand", "flush") and (not order or order[0] != name)
                else:
                    gated = name == "flush" and len(got["expert_out"]) < expected_out
                if queues[name] and not gated and (offered[name] or rng.random() >= pressure):
                    offered[name] = True
                    ctx.set(port.valid, 1)
                    ctx.set(port.payload.as_value(), queues[name][0])
                else:
                    ctx.set(port.valid, 0)
            if hold is not None and not held and len(got[hold[0]]) >= hold[1]:
                held.append(cycle)
            for name in OUTPUTS:
                holding = bool(held) and name == hold[0] and cycle < held[0] + hold[2]
                ctx.set(getattr(engine, name).ready, not holding and rng.random() >= pressure)
            for name in INPUTS:
                port = getattr(engine, name)
                if offered[name] and ctx.get(port.ready):
                    if name == "cand" and ctx.get(port.payload.last):
                        marks["start"].append(cycle)
                    queues[name].popleft()
                    offered[name] = False
                    if "_order" in inputs and name in ("cand", "flush"):
                        order.popleft()
            for name in OUTPUTS:
                port = getattr(engine, name)
                if ctx.get(port.valid) and ctx.get(port.ready):
                    got[name].append(ctx.get(port.payload.as_value()))
                    if name == "expert_out" and ctx.get(port.payload.last):
                        marks["end"].append(cycle)
                    if name == "moe_out" and ctx.get(port.payload.last):
                        marks["flushed"].append(cycle)
            await ctx.tick()
            if not any(queues.values()) and len(got["moe_out"]) == inputs["_moe_count"]:
                cycles.append(cycle + 1)
                break
        for _ in range(20):   # nothing more may come out
            for name in OUTPUTS:
                assert not ctx.get(getattr(engine, name).valid), f"extra item on {name}"
            await ctx.tick()

    sim = Simulator(top)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()
    assert cycles, f"hang: queues {[(k, len(q)) for k, q in queues.items()]}, outputs " \
                   f"{[(k, len(v)) for k, v in got.items()]}"
    return got, cycles[0], marks


def random_groups(d_model: int, ffn: int, cands: int, word_bits: int, slots: int, seed: int):
    """Six groups (two per expert of three) of random int4 weights, float16 scale words with
    subnormals, masked GATE_UP and DOWN channels, partial groups, an all-zero input and token
    slots shared by several experts, then a flush of every slot: the engine's input items and
    the outputs golden's integer expert (`IntModel.expert`) gives for them."""
    rng = np.random.default_rng(seed)
    slots = 4
    layout = WeightLayout(n_layers=1, n_experts=3, d_model=d_model, expert_ffn=ffn)
    weights = {(0, e): ExpertWeights(
        gate=rng.integers(-8, 8, (ffn, d_model), dtype=np.int8),
        up=rng.integers(-8, 8, (ffn, d_model), dtype=np.int8),
        down=rng.integers(-8, 8, (d_model, ffn), dtype=np.int8),
        scales_gate_up=scale_words(rng, 2 * ffn), scales_down=scale_words(rng, d_model))
        for e in range(3)}
    image = memory_image(layout, weights, junk_seed=seed)
    inputs = {name: [] for name in INPUTS}
    want = {name: [] for name in OUTPUTS}
    moe = np.zeros((slots, d_model), dtype=np.int64)
    for expert in range(3):
        for _ in range(2):
            n = int(rng.integers(1, cands + 1))
            tokens = rng.choice(slots, n, replace=False)
            x8 = torch.from_numpy(rng.integers(-127, 128, (n, d_model))).to(I64)
            if expert == 1:
                x8[0] = 0        # an all-zero input: h = 0, q = 0, m = e = 0
            sx = Dyadic(torch.from_numpy(rng.integers(8192, 32768, n)).to(I64),
                        torch.from_numpy(rng.integers(24, 30, n)).to(I64))
            g = rng.integers(0, 65537, n)
            gu_mask = rng.random(d_model) < 0.7
            gu_mask[0] = True
            dn_mask = rng.random(ffn) < 0.8 if expert == 2 else np.ones(ffn, dtype=bool)
            dn_mask[-1] = True
            items = group_items(layout, image, 0, expert, x8.numpy(), sx.m.numpy(), sx.e.numpy(),
                                tokens, g, candidates=cands, word_bits=word_bits,
                                token_slots=slots, gate_up_channels=np.flatnonzero(gu_mask),
                                down_channels=np.flatnonzero(dn_mask))
            for name, values in items.items():
                inputs[name] += values
            y, h8, sh = IntModel.expert(x8, sx, *image_weights(weights[0, expert]), gu_mask,
                                         dn_mask)
            for name, items in group_outputs(h8, sh.m, sh.e, y).items():
                want[name] += items
            for c in range(n):
                moe[tokens[c]] += rshift(y[c] * int(g[c]), 16).numpy()
    inputs["flush"] = flush_items(slots, range(slots))
    want["moe_out"] = [item for t in range(slots) for item in moe_items(t, moe[t], word_bits)]
    inputs["_expert_out_count"] = want["expert_out"]
    inputs["_moe_count"] = len(want["moe_out"])
    return inputs, want


def check_outputs(got: dict, want: dict, lay: dict) -> None:
    for name in OUTPUTS:
        items = [unpack(lay[name], v) for v in got[name]]
        assert len(items) == len(want[name]), f"{name}: {len(items)} items for {len(want[name])}"
        for i, (g_, w_) in enumerate(zip(items, want[name])):
            assert g_ == w_, f"{name} item {i}: RTL {g_} != golden {w_}"


@pytest.mark.parametrize("d_model, ffn, cands, lanes, word_bits, pressure", [
    (12, 3, 3, 2, 32, 0.5),    # padding nibbles in GATE_UP words, two words per DOWN column
    (8, 8, 2, 16, 64, 0.0),    # one chunk per word, full speed
    (20, 4, 1, 8, 32, 0.3),    # a single candidate, three words per DOWN column
    (8, 8, 2, 128, 512, 0.3),  # engine_l128's lanes and word: one chunk, most lanes padding
])
def test_engine_matches_golden(d_model, ffn, cands, lanes, word_bits, pressure):
    seed = d_model * 1000 + ffn * 10 + cands
    slots = 4
    inputs, want = random_groups(d_model, ffn, cands, word_bits, slots, seed)
    engine = ExpertEngine(d_model, ffn, cands, lanes, word_bits, slots)
    got, cycles, marks = run_engine(engine, inputs, seed, pressure)
    check_outputs(got, want, layouts(d_model, ffn, cands, word_bits, slots))
    # groups overlap: each group after the first starts before the one before it has left
    assert len(marks["start"]) == len(marks["end"]) == 6
    overlapped = [nxt < end for nxt, end in zip(marks["start"][1:], marks["end"])]
    assert all(overlapped) if pressure == 0 else any(overlapped), (marks, overlapped)


@pytest.mark.parametrize("reset_after, pressure", [(2, 0.0), (12, 0.3), (22, 0.0)])
def test_a_reset_mid_step_leaves_no_partial_sums(reset_after, pressure):
    """A reset while groups are in flight, counted in expert-output beats (four outputs each):
    after the first group's first outputs (its DOWN drain, the next group's GATE_UP MACs),
    after two groups' worth combined, mid-way through the fourth group; then the same groups
    from the start come out exact, as from a new engine: no accumulator row and no MoE sum
    keeps what it held before the reset."""
    d_model, ffn, cands, lanes, word_bits, slots = 12, 3, 3, 2, 32, 4
    seed = 20261201 + reset_after
    inputs, want = random_groups(d_model, ffn, cands, word_bits, slots, seed)
    assert reset_after < len(want["expert_out"])
    engine = ExpertEngine(d_model, ffn, cands, lanes, word_bits, slots)
    got, _, _ = run_engine(engine, inputs, seed, pressure, reset_after=reset_after)
    check_outputs(got, want, layouts(d_model, ffn, cands, word_bits, slots))


@pytest.mark.parametrize("pressure", [0.0, 0.3])
def test_flushes_queue_behind_their_groups(pressure):
    """Two batches on the same token slots, each batch's flushes sent right after its last
    candidate and the next batch's candidates right after them (the top's command order), with
    no wait for the outputs: every MoE sum holds exactly its own batch's terms (a flush reads
    its slot once the groups before it are combined and before any later group adds to it),
    and without pauses the second batch's groups start before the first batch's sums are out."""
    d_model, ffn, cands, lanes, word_bits, slots = 12, 3, 3, 2, 32, 4
    first = random_groups(d_model, ffn, cands, word_bits, slots, 20261203)
    second = random_groups(d_model, ffn, cands, word_bits, slots, 20261204)
    inputs = {name: first[0][name] + second[0][name] for name in INPUTS}
    want = {name: first[1][name] + second[1][name] for name in OUTPUTS}
    inputs["_order"] = [name for batch, _ in (first, second)
                        for name in ["cand"] * len(batch["cand"]) + ["flush"] * len(batch["flush"])]
    inputs["_expert_out_count"] = want["expert_out"]
    inputs["_moe_count"] = len(want["moe_out"])
    engine = ExpertEngine(d_model, ffn, cands, lanes, word_bits, slots)
    got, _, marks = run_engine(engine, inputs, 20261203, pressure)
    check_outputs(got, want, layouts(d_model, ffn, cands, word_bits, slots))
    if pressure == 0:
        assert marks["start"][6] < marks["flushed"][slots - 1], marks


@pytest.mark.parametrize("after", [0, 13])
def test_the_down_array_keeps_a_hidden_scale_per_group_it_holds(after):
    """The DOWN array holds the hidden vectors of more groups than the one draining, the one
    multiplying and the one loading: with its outputs held (expert_out not ready for 3,000
    cycles; in the top a drain of four candidates behind groups of one did the same) the first
    group stops in its drain (`after` = 0: at its first output; 13 of its 18 beats: with its last
    sum in the drain's register and the requantizer's pipeline full, so the next group is
    handed over and drains too), the
    next one's MAC ends and waits to hand its sums over (its input bank free again), and the
    groups after it load into the two banks: four groups' hidden scales held, five with
    `after` = 13. Each group is requantized with its own: with room for three (H_QUEUE = 3
    before issue 28's fix) the fourth group's record was dropped and it took the third's scale
    (the top bench's DCU run at DCU_LEAD = 3: one group's expert_out wrong); with four, the
    second case still failed."""
    # groups of 3, 2, 1, 3, 3 and 2 candidates, six beats a candidate: the first one's drain
    # outlasts the requantizer's pipeline, and the fourth group's outputs depend on its scale
    d_model, ffn, cands, lanes, word_bits, slots = 24, 3, 3, 2, 32, 4
    seed = 20261229
    inputs, want = random_groups(d_model, ffn, cands, word_bits, slots, seed)
    engine = ExpertEngine(d_model, ffn, cands, lanes, word_bits, slots)
    got, _, marks = run_engine(engine, inputs, seed, 0.0, hold=("expert_out", after, 3000))
    check_outputs(got, want, layouts(d_model, ffn, cands, word_bits, slots))
    # the hold came while the first group drained, after the fifth group was taken
    assert marks["start"][4] < marks["end"][0] and marks["end"][0] > 3000, marks


@pytest.mark.parametrize("kwargs, message", [
    ({"lanes": 3}, "lanes must divide"),
    ({"word_bits": 48}, "word_bits must be a power of two"),
    ({"candidates": 0}, "candidates must be an integer in 1..64"),
    ({"tokens": 0}, "tokens must be an integer in 1..4096"),
    ({"d_model": 10}, "d_model must be a multiple of 4"),
])
def test_parameters_are_checked(kwargs, message):
    params = {"d_model": 8, "expert_ffn": 4, "candidates": 2, "lanes": 4, "word_bits": 32,
              "tokens": 2} | kwargs
    with pytest.raises(TypeError, match=message):
        ExpertEngine(**params)


def test_input_beats_follow_the_contract():
    """docs/contracts.md, "The engine's input beats": channel j is value j % V of beat j // V
    (V = word_bits / 8), the last beat padded with zeros; a word outside 16..1024 or not a
    power of two is refused with the accepted range."""
    x = list(range(-5, 5))                       # D = 10, V = 4: 3 beats
    beats = input_beats(x, 32)
    assert inputs_per_beat(32) == 4 and inputs_per_beat(256) == 32 and len(beats) == 3
    assert [beats[j // 4][j % 4] for j in range(10)] == x and beats[2][2:] == [0, 0]
    for bad in (8, 48, 2048, True):
        with pytest.raises(ValueError, match="power of two in 16..1024"):
            inputs_per_beat(bad)


def test_output_beats_follow_the_contract():
    """docs/contracts.md, "The engine's output beats": expert outputs 4j .. 4j + 3 in beat j;
    MoE sums in beats of max(4, word_bits / 32), channel d value d % W of beat d // W, the last
    beat padded with zeros."""
    y = list(range(-4, 4))
    assert value_beats(y, EXPERT_OUT_VALUES) == [[-4, -3, -2, -1], [0, 1, 2, 3]]
    assert [outputs_per_beat(w) for w in (16, 32, 64, 256, 1024)] == [4, 4, 4, 8, 32]
    beats = value_beats(list(range(10)), outputs_per_beat(256))
    assert beats == [list(range(8)), [8, 9, 0, 0, 0, 0, 0, 0]]


def _run_quantizer(h: np.ndarray):
    """The Quantizer fed the candidates' vectors h [candidates, F] back to back, every output
    taken at once: its values and scales as unpacked items, the cycles each h item was taken and
    each value came out."""
    from edgexpert.hw.engine.layouts import act_layout, h_layout, hidden_scale_layout
    from edgexpert.hw.engine.quantizer import Quantizer
    cands, ffn = h.shape
    quant = Quantizer(cands, ffn)
    lay_h, lay_q = h_layout(cands, ffn), act_layout(cands, ffn)
    lay_s = hidden_scale_layout(cands)
    items = [lay_h.const({"candidate": c, "index": f, "value": int(h[c, f]),
                          "last": int(c == cands - 1 and f == ffn - 1)}).as_bits()
             for c in range(cands) for f in range(ffn)]
    got_q, got_s, taken_at, out_at = [], [], [], []

    async def tb(ctx):
        ctx.set(quant.hidden.ready, 1)
        ctx.set(quant.scale.ready, 1)
        queue = deque(items)
        for cycle in range(cands * (2 * ffn + 40) + 100):
            ctx.set(quant.h.valid, bool(queue))
            if queue:
                ctx.set(quant.h.payload.as_value(), queue[0])
            if queue and ctx.get(quant.h.ready):
                queue.popleft()
                taken_at.append(cycle)
            if ctx.get(quant.hidden.valid):
                got_q.append(unpack(lay_q, ctx.get(quant.hidden.payload.as_value())))
                out_at.append(cycle)
            if ctx.get(quant.scale.valid):
                got_s.append(unpack(lay_s, ctx.get(quant.scale.payload.as_value())))
            await ctx.tick()
            if len(got_q) == cands * ffn:
                break

    sim = Simulator(quant)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()
    return got_q, got_s, taken_at, out_at


def _assert_quantize_vec(h, got_q, got_s):
    cands, ffn = h.shape
    want_q, want_s = quantize_vec(torch.from_numpy(h).to(I64), 16)
    assert [(q["candidate"], q["channel"], q["value"]) for q in got_q] == \
        [(c, f, int(want_q[c, f])) for c in range(cands) for f in range(ffn)]
    assert [(s["candidate"], s["scale"]["m"], s["scale"]["e"]) for s in got_s] == \
        [(c, int(want_s.m[c]), int(want_s.e[c])) for c in range(cands)]


def test_the_quantizer_takes_a_vector_while_it_emits_the_one_before():
    """Three candidates' h back to back, every output taken at once: each q and scale equal to
    quantize_vec, and the quantizer's two stages overlap: the second vector is in before the
    first one's values are out, and the three take F + 3 (F + 24) cycles and a few of latency
    (docs/blocks/engine.md, Cycles), not the 3 (2F + 40) of one stage."""
    ffn, cands = 8, 3
    rng = np.random.default_rng(20261202)
    h = rng.integers(-2**40, 2**40, (cands, ffn))
    h[1] = 0                                     # a = 0: q = 0, m = e = 0
    h[2] = rng.integers(-3, 4, ffn)              # a small vector: k > 0
    got_q, got_s, taken_at, out_at = _run_quantizer(h)
    _assert_quantize_vec(h, got_q, got_s)
    assert len(taken_at) == cands * ffn
    assert taken_at[2 * ffn - 1] < out_at[ffn - 1], "the second vector waited for the first"
    assert out_at[-1] <= ffn + cands * (ffn + 24) + 4, out_at[-1]


def test_the_quantizer_is_quantize_vec_at_every_magnitude():
    """One vector per bit length of max |h| from 1 to 47 (the Q.16 hidden's whole range,
    layouts.H_WIDTH), each holding |h| = a twice, a - 1 twice, a // 2 and three random values up
    to a, each of random sign: the normalizing shift, the scaled n = 254 |h| 2**(49-s) + N / 2
    and the corrected estimate at each shift a > 0 takes, against quantize_vec (a = 0 is the
    test above's)."""
    rng = np.random.default_rng(20261204)
    rows = []
    for bits in range(1, 48):
        a = int(rng.integers(1 << (bits - 1), 1 << bits))
        row = [a, -a, a - 1, -(a - 1), a // 2] + [int(v) for v in rng.integers(-a, a + 1, 3)]
        rows.append([v * (1 if rng.random() < 0.5 else -1) for v in row])
    h = np.array(rows, dtype=np.int64)
    got_q, got_s, _, _ = _run_quantizer(h)
    _assert_quantize_vec(h, got_q, got_s)


def _run_mac(mac, acts: deque, cols: deque, lay_s, count: int, cycles: int, ready):
    """A ColumnMac alone: its input beats and column words offered in order, its sums taken in
    the cycles `ready(cycle)` allows, until `count` sums are out. Returns the sums (candidate,
    index, value), the cycles each column was taken and the cycles each sum left."""
    got, col_taken, sum_out = [], [], []

    async def tb(ctx):
        for cycle in range(cycles):
            ctx.set(mac.act.valid, bool(acts))
            if acts:
                ctx.set(mac.act.payload.as_value(), acts[0])
            ctx.set(mac.columns.valid, bool(cols))
            if cols:
                ctx.set(mac.columns.payload.as_value(), cols[0])
            ctx.set(mac.sums.ready, ready(cycle))
            if acts and ctx.get(mac.act.ready):
                acts.popleft()
            if cols and ctx.get(mac.columns.ready):
                col_taken.append(cycle)
                cols.popleft()
            if ctx.get(mac.sums.valid) and ctx.get(mac.sums.ready):
                item = unpack(lay_s, ctx.get(mac.sums.payload.as_value()))
                got.append((item["candidate"], item["index"], item["value"]))
                sum_out.append(cycle)
            await ctx.tick()
            if len(got) == count:
                break

    sim = Simulator(mac)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()
    return got, col_taken, sum_out


@pytest.mark.parametrize("width", [32, 19, 14, 13])
def test_the_carry_select_accumulate_wraps_like_an_add_of_its_width(width):
    """`accumulate` (the MAC's add, docs/synthesis.md "Clock gating") against wrap arithmetic at
    the accumulator's width (32, the bundled GATE_UP array's 19, the narrowest with a high part
    and one without): the corners where the low part's carry and the product's sign pick hi - 1,
    hi or hi + 1 (sums crossing 2^13 both ways, the width's bounds) and random sums."""
    from amaranth.hdl import signed
    from edgexpert.hw.engine.column_mac import accumulate
    acc, x, w = Signal(signed(width)), Signal(signed(8)), Signal(signed(4))
    out = Signal(signed(width))
    m = Module()
    m.d.comb += out.eq(accumulate(acc, x * w))
    rng = random.Random(20261204)
    top = 2 ** (width - 1)
    corners = [0, -1, 1, 0x1FFF, 0x2000, -0x2000, -0x2001, top - 1, -top, top - 0x3FF,
               -top + 0x3FF, top // 2, -top // 2]
    cases = [(a, xv, wv) for a in corners for xv in (-128, -1, 0, 1, 127) for wv in (-8, -1, 1, 7)]
    cases += [(rng.randrange(-top, top), rng.randrange(-128, 128), rng.randrange(-8, 8))
              for _ in range(2000)]
    wrong = []

    async def bench(ctx):
        for a, xv, wv in cases:
            ctx.set(acc, a)
            ctx.set(x, xv)
            ctx.set(w, wv)
            want = (a + xv * wv + top) % (2 * top) - top
            if ctx.get(out) != want:
                wrong.append((a, xv, wv, ctx.get(out), want))

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
    assert not wrong, f"{len(wrong)} of {len(cases)} sums wrong, first {wrong[0]}"


def test_the_accumulators_hold_the_largest_sums_exactly():
    """The MAC array's sums are `sum_bits(channels)` wide, not 32: the largest sums a group can
    make (every product (-128) x (-8) = 1024, and every one 127 x (-8)), with every channel and
    again with one channel sent, come out equal to numpy's int64 sums; one bit fewer would wrap
    the first (the bound is tight)."""
    from edgexpert.hw.engine.column_mac import ColumnMac, sum_bits
    from edgexpert.hw.engine.layouts import column_layout, sum_layout, x_layout
    channels, outputs, cands, lanes, word_bits, per = 24, 8, 2, 4, 32, 4
    assert channels * 1024 >= 2 ** (sum_bits(channels) - 2)     # a bit fewer would not hold it
    mac = ColumnMac(channels, outputs, cands, lanes, word_bits, per)
    lay_x, lay_c = x_layout(cands, channels, per), column_layout(channels, word_bits)
    lay_s = sum_layout(cands, outputs, 1)
    beats, words, want = [], [], []
    for x_value, order in ((-128, range(channels)), (127, range(channels)), (-128, [5])):
        x = np.full((cands, channels), x_value)
        w = np.full((channels, outputs), -8)
        beats.append([lay_x.const({"candidate": c, "beat": b,
                                   "values": [int(v) for v in x[c, b * per:(b + 1) * per]],
                                   "last": int(c == cands - 1 and b == channels // per - 1)}
                                  ).as_bits()
                      for c in range(cands) for b in range(channels // per)])
        words.append([lay_c.const({"channel": j, "last": int(k == len(order) - 1),
                                   "data": sum((int(w[j, o]) & 15) << (4 * o)
                                               for o in range(outputs))}).as_bits()
                      for k, j in enumerate(order)])
        acc = x[:, list(order)].astype(np.int64) @ w[list(order)]
        want += [(c, o, int(acc[c, o])) for c in range(cands) for o in range(outputs)]
    acts = deque(b for group in beats for b in group)
    cols = deque(wd for group in words for wd in group)
    got, _, _ = _run_mac(mac, acts, cols, lay_s, len(want), 2000, lambda cycle: True)
    assert got == want
    assert want[0][2] == channels * 1024


@pytest.mark.parametrize("split", ["halves", "neighbours"])
def test_a_mac_array_multiplies_the_next_group_while_it_drains(split):
    """ColumnMac alone, three groups (2, 1 and 2 candidates, masked channels, columns in any
    order), the sums taken one cycle in three: every sum equal to numpy's, and the arrays'
    phases overlap (docs/blocks/engine.md, Cycles): the next group's inputs load while this
    group multiplies, and its columns are all taken before this group's last sum leaves (one
    set of accumulators made a group's MAC wait for the drain before it)."""
    from edgexpert.hw.engine.column_mac import ColumnMac
    from edgexpert.hw.engine.layouts import column_layout, sum_layout, x_layout
    channels, outputs, cands, lanes, word_bits, per = 6, 8, 2, 4, 32, 4
    mac = ColumnMac(channels, outputs, cands, lanes, word_bits, per, parts=2, split=split)
    rng = np.random.default_rng(20261203)
    lay_x, lay_c = x_layout(cands, channels, per), column_layout(channels, word_bits)
    lay_s = sum_layout(cands, outputs, 2)
    groups, want = [], []
    for n in (2, 1, 2):
        x = rng.integers(-128, 128, (n, channels))
        w = rng.integers(-8, 8, (channels, outputs))
        order = rng.permutation(channels)[:int(rng.integers(3, channels + 1))]
        beats = [lay_x.const({"candidate": c, "beat": b,
                              "values": [int(v) for v in np.pad(x[c, b * per:(b + 1) * per],
                                                                (0, per))[:per]],
                              "last": int(c == n - 1 and b == 1)}).as_bits()
                 for c in range(n) for b in range(2)]
        words = [lay_c.const({"channel": int(j), "last": int(k == len(order) - 1),
                              "data": sum((int(w[j, o]) & 15) << (4 * o) for o in range(outputs))
                              }).as_bits() for k, j in enumerate(order)]
        groups.append((beats, words))
        acc = x[:, order] @ w[order]
        pick = (lambda o, p: 2 * o + p) if split == "neighbours" else (lambda o, p: p * 4 + o)
        want += [(c, o, [int(acc[c, pick(o, p)]) for p in range(2)]) for c in range(n)
                 for o in range(outputs // 2)]
    acts = deque(b for beats, _ in groups for b in beats)
    cols = deque(wd for _, words in groups for wd in words)
    got, col_taken, sum_out = _run_mac(mac, acts, cols, lay_s, len(want), 600,
                                       lambda cycle: cycle % 3 == 0)
    assert got == want
    first_cols, first_sums = len(groups[0][1]), 2 * outputs // 2
    second_cols = first_cols + len(groups[1][1])
    assert col_taken[second_cols - 1] < sum_out[first_sums - 1], (col_taken, sum_out)


@pytest.mark.parametrize("pause", [False, True])
def test_the_down_mac_starts_while_the_last_candidate_loads(pause):
    """ColumnMac with `early` (the DOWN array) alone: groups of 1-3 candidates whose inputs come
    one value per beat, candidate-major and in channel order (the quantizer's order), the last
    candidate's beats marked; columns a random subset in any order, every word offered at
    once. Every sum equals numpy's (a column whose row is not yet written would read the group
    before's input), and a group's MAC takes columns before its last candidate's last beat is
    in (without `early` its first column waits for it), while its last column waits for that
    beat. With `pause` the inputs and the sums stall at random."""
    from edgexpert.hw.engine.column_mac import ColumnMac
    from edgexpert.hw.engine.layouts import column_layout, sum_layout, x_layout
    channels, outputs, cands, lanes, word_bits = 8, 8, 3, 4, 32
    mac = ColumnMac(channels, outputs, cands, lanes, word_bits, 1, parts=2, split="neighbours",
                    early=True)
    rng = np.random.default_rng(20261205 + pause)
    lay_x, lay_c = x_layout(cands, channels, 1), column_layout(channels, word_bits)
    lay_s = sum_layout(cands, outputs, 2)
    groups, want = [], []
    for n in (1, 3, 2, 3, 1):
        x = rng.integers(-128, 128, (n, channels))
        w = rng.integers(-8, 8, (channels, outputs))
        order = rng.permutation(channels)[:int(rng.integers(1, channels + 1))]
        if rng.random() < 0.5:
            order = np.sort(order)
        beats = [(lay_x.const({"candidate": c, "beat": j, "values": [int(x[c, j])],
                               "last": int(c == n - 1 and j == channels - 1)}).as_bits(),
                  int(c == n - 1)) for c in range(n) for j in range(channels)]
        words = [lay_c.const({"channel": int(j), "last": int(k == len(order) - 1),
                              "data": sum((int(w[j, o]) & 15) << (4 * o) for o in range(outputs))
                              }).as_bits() for k, j in enumerate(order)]
        groups.append((beats, words))
        acc = x[:, order] @ w[order]
        want += [(c, o, [int(acc[c, 2 * o + p]) for p in range(2)]) for c in range(n)
                 for o in range(outputs // 2)]
    acts = deque(b for beats, _ in groups for b in beats)
    cols = deque((g, wd) for g, (_, words) in enumerate(groups) for wd in words)
    got, col_at, last_beat_at = [], {}, []
    pick = random.Random(20261205)

    async def tb(ctx):
        for cycle in range(2000):
            act_on = bool(acts) and not (pause and pick.random() < 0.3)
            ctx.set(mac.act.valid, act_on)
            if acts:
                ctx.set(mac.act.payload.as_value(), acts[0][0])
                ctx.set(mac.act_final, acts[0][1])
            ctx.set(mac.columns.valid, bool(cols))
            if cols:
                ctx.set(mac.columns.payload.as_value(), cols[0][1])
            ctx.set(mac.sums.ready, not (pause and pick.random() < 0.5))
            if act_on and ctx.get(mac.act.ready):
                if unpack(lay_x, acts[0][0])["last"]:
                    last_beat_at.append(cycle)
                acts.popleft()
            if cols and ctx.get(mac.columns.ready):
                col_at.setdefault(cols[0][0], []).append(cycle)
                cols.popleft()
            if ctx.get(mac.sums.valid) and ctx.get(mac.sums.ready):
                item = unpack(lay_s, ctx.get(mac.sums.payload.as_value()))
                got.append((item["candidate"], item["index"], item["value"]))
            await ctx.tick()
            if len(got) == len(want):
                break

    sim = Simulator(mac)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()
    assert got == want
    for g in range(len(groups)):
        assert col_at[g][-1] > last_beat_at[g], (g, col_at[g], last_beat_at[g])
    early = [g for g in range(len(groups)) if col_at[g][0] < last_beat_at[g]]
    assert early, (col_at, last_beat_at)


def test_candidates_of_one_group_take_their_own_masks():
    """Three groups whose candidates come from different depth groups: each candidate's GATE_UP
    and DOWN masks on the mask ports, the group's columns their unions (docs/contracts.md,
    "Candidates of several depth groups in one engine group"), the inputs unmasked. Every
    hidden value is the one golden gives on the candidate's own GATE_UP mask, every expert
    output the one on both its masks (a channel outside a mask enters no sum). An engine that
    ignores either mask fails."""
    d_model, ffn, cands, lanes, word_bits, slots = 16, 8, 3, 4, 32, 4
    # a draw whose expert outputs stay in int32 (golden's are not wrapped; 20261209's are not)
    rng = np.random.default_rng(20261208)
    layout = WeightLayout(n_layers=1, n_experts=2, d_model=d_model, expert_ffn=ffn)
    weights = {(0, e): ExpertWeights(
        gate=rng.integers(-8, 8, (ffn, d_model), dtype=np.int8),
        up=rng.integers(-8, 8, (ffn, d_model), dtype=np.int8),
        down=rng.integers(-8, 8, (d_model, ffn), dtype=np.int8),
        scales_gate_up=scale_words(rng, 2 * ffn), scales_down=scale_words(rng, d_model))
        for e in range(2)}
    image = memory_image(layout, weights, junk_seed=1)
    inputs = {name: [] for name in INPUTS}
    want = {name: [] for name in OUTPUTS}
    moe = np.zeros((slots, d_model), dtype=np.int64)
    for expert, n in ((0, 3), (1, 2), (0, 2)):
        tokens = rng.choice(slots, n, replace=False)
        x8 = torch.from_numpy(rng.integers(-127, 128, (n, d_model))).to(I64)
        sx = Dyadic(torch.from_numpy(rng.integers(8192, 32768, n)).to(I64),
                    torch.from_numpy(rng.integers(24, 30, n)).to(I64))
        g = rng.integers(0, 65537, n)
        own = [np.flatnonzero(rng.random(ffn) < 0.6) for _ in range(n)]
        own_gu = [np.flatnonzero(rng.random(d_model) < 0.6) for _ in range(n)]

        def union(masks):
            return sorted(set().union(*(set(o.tolist()) for o in masks)))

        items = group_items(layout, image, 0, expert, x8.numpy(), sx.m.numpy(), sx.e.numpy(),
                            tokens, g, candidates=cands, word_bits=word_bits, token_slots=slots,
                            gate_up_channels=union(own_gu), down_channels=union(own),
                            cand_gate_up_channels=own_gu, cand_down_channels=own)
        for name, values in items.items():
            inputs[name] += values
        outs = []
        for c in range(n):
            gu_mask, dn_mask = np.zeros(d_model, dtype=bool), np.zeros(ffn, dtype=bool)
            gu_mask[own_gu[c]] = True
            dn_mask[own[c]] = True
            outs.append(IntModel.expert(x8[c:c + 1], Dyadic(sx.m[c:c + 1], sx.e[c:c + 1]),
                                        *image_weights(weights[0, expert]), gu_mask, dn_mask))
        y = torch.cat([o[0] for o in outs])
        h8 = torch.cat([o[1] for o in outs])
        sh = Dyadic(torch.cat([o[2].m for o in outs]), torch.cat([o[2].e for o in outs]))
        for name, group_want in group_outputs(h8, sh.m, sh.e, y).items():
            want[name] += group_want
        for c in range(n):
            moe[tokens[c]] += rshift(y[c] * int(g[c]), 16).numpy()
    inputs["flush"] = flush_items(slots, range(slots))
    want["moe_out"] = [item for t in range(slots) for item in moe_items(t, moe[t], word_bits)]
    inputs["_expert_out_count"] = want["expert_out"]
    inputs["_moe_count"] = len(want["moe_out"])
    engine = ExpertEngine(d_model, ffn, cands, lanes, word_bits, slots)
    got, _, _ = run_engine(engine, inputs, 20261206, 0.3)
    check_outputs(got, want, layouts(d_model, ffn, cands, word_bits, slots))


@pytest.mark.parametrize("gap", [0, 1, 2])
def test_the_combine_adds_to_the_row_the_beat_before_is_writing(gap):
    """Combine alone, a token's sums one row (d_model = values = 4): three candidates of that
    token, a beat each, `gap` cycles apart (0: each beat's row is read in the cycle the beat
    before writes it, which the registered read sees only by being transparent), then the
    flush: the sum of the three weighted beats, and 0 for the token never written."""
    from edgexpert.hw.engine.combine import Combine
    from edgexpert.hw.engine.layouts import moe_layout, sum_layout
    cands, tokens = 3, 2
    comb = Combine(cands, 4, tokens, 4)
    lay_y, lay_moe = sum_layout(cands, 4, 4), moe_layout(tokens, 4, 4)
    ys = [[1000, -7, 3 << 20, -(1 << 30)], [5, 6, -7, 8], [-123456, 1, 0, 99]]
    weights = [65536, 32768, 12345]
    beats = deque(lay_y.const({"candidate": c, "index": 0, "value": ys[c], "last": int(c == 2)}
                              ).as_bits() for c in range(cands))
    want = [sum(int(rshift(torch.tensor(y[i] * weights[c], dtype=I64), 16))
                for c, y in enumerate(ys)) for i in range(4)]
    want = [((int(v) + 2**31) % 2**32) - 2**31 for v in want]
    got = {}

    async def tb(ctx):
        for c in range(cands):
            ctx.set(comb.token[c], 1)
            ctx.set(comb.weight[c], weights[c])
        wait = 0
        for _ in range(60):
            ctx.set(comb.y.valid, bool(beats) and wait == 0)
            if beats:
                ctx.set(comb.y.payload.as_value(), beats[0])
            ctx.set(comb.flush.valid, not beats and len(got) < tokens)
            ctx.set(comb.flush.payload.token, 1 if 1 not in got else 0)
            ctx.set(comb.moe_out.ready, 1)
            took = bool(beats) and wait == 0 and ctx.get(comb.y.ready)
            if ctx.get(comb.moe_out.valid):
                item = unpack(lay_moe, ctx.get(comb.moe_out.payload.as_value()))
                got[item["token"]] = item["values"]
            await ctx.tick()
            if took:
                beats.popleft()
                wait = gap
            elif wait:
                wait -= 1

    sim = Simulator(comb)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()
    assert got == {1: want, 0: [0, 0, 0, 0]}


def requant_groups(rng, count: int, cands: int, outputs: int, word_bits: int, parts: int,
                   split: str, shuffle: bool):
    """`count` groups for a `Requant` alone, each with a scale block of its own: per group its
    scale words (buffer words), its sums (candidate-major, or shuffled with `last` on the one
    taken last) and its candidates' x scales; and golden's requantized values in the order the
    sums go in."""
    from edgexpert.golden.integer.int_model import scale_words_dyadic
    from edgexpert.golden.integer.intops import requant
    from edgexpert.hw.engine.layouts import scale_words_layout, sum_layout
    lay_s, lay_w = sum_layout(cands, outputs, parts), scale_words_layout(word_bits)
    per, half = word_bits // 16, outputs // parts

    def place(j: int, p: int) -> int:
        return parts * j + p if split == "neighbours" else j + p * half

    groups, want = [], []
    for _ in range(count):
        words = scale_words(rng, outputs)
        # results within the contract's int32 (the RTL keeps 32 bits, golden int64)
        acc = rng.integers(-2**12, 2**12, (cands, outputs))
        xm, xe = rng.integers(8192, 32768, cands), rng.integers(28, 34, cands)
        blocks = [lay_w.const({"data": sum(int(words[i * per + k]) << (16 * k) for k in range(per)),
                               "last": int(i == outputs // per - 1)}).as_bits()
                  for i in range(outputs // per)]
        order = [(c, j) for c in range(cands) for j in range(half)]
        if shuffle:
            rng.shuffle(order)
        sums = [lay_s.const({"candidate": c, "index": j,
                             "value": [int(acc[c, place(j, p)]) for p in range(parts)],
                             "last": int(n == len(order) - 1)}).as_bits()
                for n, (c, j) in enumerate(order)]
        groups.append((blocks, sums, xm, xe))
        q = requant(torch.from_numpy(acc), Dyadic(torch.from_numpy(xm), torch.from_numpy(xe)),
                    scale_words_dyadic(words), 16)
        want += [(c, j, [int(q[c, place(j, p)]) for p in range(parts)]) for c, j in order]
    return groups, want


def drive_requant(rq, groups, want, lay_s, offered, taken_out, cycles: int, on_take=None):
    """Feed `groups` to `rq` (scale words whenever `offered("scales", cycle)`, sums whenever
    `offered("sums", cycle)`, outputs taken whenever `taken_out(cycle)`) until every output is
    out or `cycles` pass; `on_take(cycle, kind, left)` hears of each scale word and sum taken.
    Returns the outputs as (candidate, index, values)."""
    scales = deque(b for blocks, *_ in groups for b in blocks)
    sums = deque((g, s) for g, (_, group_sums, *_) in enumerate(groups) for s in group_sums)
    cands = len(groups[0][2])
    got = []

    async def tb(ctx):
        for cycle in range(cycles):
            ctx.set(rq.o_sums.ready, taken_out(cycle))
            offer_scale = bool(scales) and offered("scales", cycle)
            ctx.set(rq.scales.valid, offer_scale)
            if scales:
                ctx.set(rq.scales.payload.as_value(), scales[0])
            offer = bool(sums) and offered("sums", cycle)
            ctx.set(rq.i_sums.valid, offer)
            if sums:
                g, item = sums[0]
                ctx.set(rq.i_sums.payload.as_value(), item)
                for c in range(cands):
                    ctx.set(rq.act_scale[c].m, int(groups[g][2][c]))
                    ctx.set(rq.act_scale[c].e, int(groups[g][3][c]))
            if offer_scale and ctx.get(rq.scales.ready):
                scales.popleft()
                if on_take:
                    on_take(cycle, "scales", len(scales))
            if offer and ctx.get(rq.i_sums.ready):
                sums.popleft()
                if on_take:
                    on_take(cycle, "sums", len(sums))
            if ctx.get(rq.o_sums.valid) and ctx.get(rq.o_sums.ready):
                item = unpack(lay_s, ctx.get(rq.o_sums.payload.as_value()))
                got.append((item["candidate"], item["index"], item["value"]))
            await ctx.tick()
            if len(got) == len(want):
                break

    sim = Simulator(rq)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()
    return got


def test_the_requantizer_loads_the_next_scale_block_while_it_scales():
    """Requant alone, two groups (two candidates each, pairs of outputs), the sums offered one
    cycle in four and every scale word at once: each output equal to golden's
    requant, and the second group's scale block is all in before the first group's last sum is
    taken (with one block the weight stream stood at the next matrix's scale words for a whole
    drain: docs/blocks/engine.md, Cycles)."""
    from edgexpert.hw.engine.layouts import sum_layout
    from edgexpert.hw.engine.requant import Requant
    cands, outputs, word_bits = 2, 8, 32
    rq = Requant(cands, outputs, word_bits, parts=2, split="neighbours")
    groups, want = requant_groups(np.random.default_rng(20261204), 2, cands, outputs, word_bits,
                                  2, "neighbours", shuffle=False)
    scale_taken, last_sum_taken = [], []

    def on_take(cycle, kind, left):
        if kind == "scales":
            scale_taken.append(cycle)
        elif left == len(groups[1][1]):
            last_sum_taken.append(cycle)

    got = drive_requant(rq, groups, want, sum_layout(cands, outputs, 2),
                        offered=lambda kind, cycle: kind == "scales" or cycle % 4 == 0,
                        taken_out=lambda cycle: True, cycles=300, on_take=on_take)
    assert got == want
    assert scale_taken[-1] < last_sum_taken[0], (scale_taken, last_sum_taken)


@pytest.mark.parametrize("split", ["halves", "neighbours"])
def test_the_requantizer_forgets_a_held_scale_word_with_its_block(split: str):
    """Requant alone, three groups, each with its own scale block: the third group's block loads
    where the first group's was, at the same addresses, so a port that kept the first group's
    word past its block would scale the third group with it. Sums in a shuffled order (a word
    read once for several sums, and read again after others), offered and taken with random
    pauses on every stream, so a held word also waits through stalls: every output equal to
    golden's requant, in order."""
    from edgexpert.hw.engine.layouts import sum_layout
    from edgexpert.hw.engine.requant import Requant
    cands, outputs, word_bits, parts = 3, 16, 64, 2
    rq = Requant(cands, outputs, word_bits, parts=parts, split=split)
    groups, want = requant_groups(np.random.default_rng(20261205), 3, cands, outputs, word_bits,
                                  parts, split, shuffle=True)
    pause = random.Random(20261205)
    got = drive_requant(rq, groups, want, sum_layout(cands, outputs, parts),
                        offered=lambda kind, cycle: pause.random() > 0.3,
                        taken_out=lambda cycle: pause.random() > 0.3, cycles=2000)
    assert got == want
