# amaranth: UnusedElaboratable=no
"""The top's feeder (hw/top/feeder.py: MaskWalker, Locator, LineReader) in Amaranth's simulator
against a model written from the EMA's contract: per descriptor, its scale block's lines and
then each selected channel's column lines, lowest channel first, read where the location table
says, from the line's bank; `last` and `end` where the contract puts them. Random masks (empty
words, runs across word boundaries, bit 31, a single channel), random locations and buffer
contents, and random pauses on both ends.

The `Replayer` in front of the same chain: descriptor pairs (GATE_UP, DOWN) with `uses` 1..4
among single descriptors; the model: a pair's words `uses` times over, from one set of command
words and completions.

The cocotb bench (cocotb_tests/top/) runs the whole top on real decode steps.
"""

import random
from collections import deque

import pytest
from amaranth.hdl import Module
from amaranth.lib import stream, wiring
from amaranth.sim import Simulator

from edgexpert.contracts.ema import (MASK_BITS, EmaOp, EmaStatus, ema_command_layout,
                                     ema_completion_layout)
from edgexpert.contracts.weight_layout import Matrix, WeightLayout
from edgexpert.hw.ema import EmaGeometry
from edgexpert.hw.top import LineReader, Locator, MaskWalker, Replayer
from edgexpert.hw.top.layouts import job_layout, word_layout

#: a layout whose GATE_UP has 40 input channels (two mask words, the second partly used) and a
#: 64-bit bus: a GATE_UP column (2 x 8 int4) is 1 beat, a DOWN column (40 int4) 3 beats
LAYOUT = WeightLayout(n_layers=1, n_experts=2, d_model=40, expert_ffn=8)
BANKS = 2


class Chain(wiring.Component):
    """MaskWalker -> Locator -> LineReader, their streams and read ports outside."""

    def __init__(self, g: EmaGeometry):
        self.walker, self.locator, self.reader = MaskWalker(g), Locator(g), LineReader(g, BANKS)
        super().__init__({
            "jobs": wiring.In(stream.Signature(ema_command_layout)),
            "done": wiring.In(stream.Signature(ema_completion_layout)),
            "words": wiring.Out(stream.Signature(word_layout(g.max_in_channels, g.data_width)))})

    def elaborate(self, platform):
        m = Module()
        m.submodules.walker, m.submodules.locator = self.walker, self.locator
        m.submodules.reader = self.reader
        wiring.connect(m, wiring.flipped(self.jobs), self.walker.jobs)
        wiring.connect(m, wiring.flipped(self.done), self.walker.done)
        wiring.connect(m, self.walker.channels, self.locator.channels)
        wiring.connect(m, self.locator.lines, self.reader.lines)
        wiring.connect(m, self.reader.words, wiring.flipped(self.words))
        return m


def _job(rng: random.Random, g: EmaGeometry, slot: int, lines: dict, buffer: dict,
         matrix: Matrix | None = None):
    """One descriptor: its command words, its completion and the words it must produce."""
    matrix = rng.choice(list(Matrix)) if matrix is None else matrix
    n = LAYOUT.in_channels(matrix)
    kind = rng.choice(["random", "one", "run", "all"])
    if kind == "one":
        chans = {rng.randrange(n)}
    elif kind == "run":
        start = rng.randrange(max(1, n - 10))
        chans = set(range(start, min(n, start + rng.randint(1, 10))))
    elif kind == "all":
        chans = set(range(n))
    else:
        chans = {c for c in range(n) if rng.random() < 0.3} or {31 if n > 31 else 0}
    words = [ema_command_layout.const({"op": EmaOp.DESCRIPTOR, "arg": {"descriptor": {
        "tag": slot, "layer": 0, "expert": 0, "matrix": int(matrix), "scales": 1}}}).as_bits()]
    for k in range(g.mask_words(matrix)):
        mask = sum(1 << (c - k * MASK_BITS) for c in chans if k * MASK_BITS <= c < (k + 1) * MASK_BITS)
        words.append(ema_command_layout.const({"op": EmaOp.MASK, "arg": {"mask": mask}}).as_bits())
    want = []
    items = [(1, g.scale_entry, g.scale_beats(matrix))] + \
        [(0, c, g.column_beats(matrix)) for c in sorted(chans)]
    for i, (scale, entry, count) in enumerate(items):
        # the EMA never allocates past the buffer's end: room for a 12-beat DOWN scale block
        first = lines.setdefault(slot * g.chan_stride + entry, rng.randrange(g.lines - 16))
        for k in range(count):
            final = k == count - 1
            want.append({"matrix": int(matrix), "scale": scale,
                         "channel": 0 if scale else entry,
                         "data": buffer.setdefault(first + k, rng.getrandbits(g.data_width)),
                         "last": int(final and (scale or i == len(items) - 1)),
                         "end": int(final and i == len(items) - 1)})
    done = {"tag": slot, "slot": slot, "status": EmaStatus.OK}
    return words, done, want


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_feeder_reads_each_selected_column_where_the_location_table_says(seed):
    rng = random.Random(seed)
    g = EmaGeometry(LAYOUT, 64, 4096, 4)
    dut = Chain(g)
    lines, buffer = {}, {}
    jobs, dones, want = deque(), deque(), []
    for n in range(12):
        words, done, expected = _job(rng, g, n % g.slots, lines, buffer)
        jobs.extend(words)
        dones.append(done)
        want += expected
    got, _ = _run(dut, rng, jobs, dones, lines, buffer, len(want))
    assert len(got) == len(want), f"{len(got)} words for {len(want)}"
    for i, (g_, w) in enumerate(zip(got, want)):
        assert g_ == w, f"word {i}: {g_} != {w}"


def _run(dut, rng, jobs: deque, dones: deque, lines: dict, buffer: dict, n_want: int):
    """Plays `jobs` (command words) and `dones` (completions) into `dut` with random pauses on
    every stream, answering its read ports from `lines` and `buffer`; returns the words out
    and the cycles `dut.again` was high (0 without it)."""
    got, again = [], 0
    word_layout = dut.words.payload.shape()
    chain = getattr(dut, "chain", dut)

    async def tb(ctx):
        nonlocal again
        loc_addr = 0
        rows = [0] * BANKS
        for _ in range(40_000):
            # the read ports answer the address of the cycle before
            ctx.set(chain.locator.loc.data, lines.get(loc_addr, 0))
            for b in range(BANKS):
                ctx.set(chain.reader.buf[b].data, buffer.get(rows[b] * BANKS + b, 0))
            ctx.set(dut.jobs.valid, bool(jobs) and rng.random() < 0.7)
            if jobs:
                ctx.set(dut.jobs.payload.as_value(), jobs[0])
            ctx.set(dut.done.valid, bool(dones) and rng.random() < 0.7)
            if dones:
                ctx.set(dut.done.payload, dut.done.payload.shape().const(dones[0]))
            ctx.set(dut.words.ready, rng.random() < 0.6)
            if ctx.get(dut.jobs.valid) and ctx.get(dut.jobs.ready):
                jobs.popleft()
            if ctx.get(dut.done.valid) and ctx.get(dut.done.ready):
                dones.popleft()
            if ctx.get(dut.words.valid) and ctx.get(dut.words.ready):
                bits = ctx.get(dut.words.payload.as_value())
                got.append({name: (bits >> f.offset) & ((1 << f.width) - 1)
                            for name, f in word_layout})
            if dut is not chain:
                again += ctx.get(dut.replayer.again)
            loc_addr = ctx.get(chain.locator.loc.addr)
            rows = [ctx.get(chain.reader.buf[b].addr) for b in range(BANKS)]
            await ctx.tick()
            if len(got) >= n_want and not jobs and not dones:
                # a few more cycles: nothing more may come out
                for _ in range(50):
                    ctx.set(dut.words.ready, 1)
                    if ctx.get(dut.words.valid):
                        got.append("extra word")
                    await ctx.tick()
                break

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()
    return got, again


MAX_USES = 4


class ReplayChain(wiring.Component):
    """Replayer -> Chain."""

    def __init__(self, g: EmaGeometry):
        self.replayer, self.chain = Replayer(g, MAX_USES), Chain(g)
        super().__init__({
            "jobs": wiring.In(stream.Signature(job_layout(MAX_USES))),
            "done": wiring.In(stream.Signature(ema_completion_layout)),
            "words": wiring.Out(stream.Signature(word_layout(g.max_in_channels, g.data_width)))})

    def elaborate(self, platform):
        m = Module()
        m.submodules.replayer, m.submodules.chain = self.replayer, self.chain
        wiring.connect(m, wiring.flipped(self.jobs), self.replayer.jobs_in)
        wiring.connect(m, wiring.flipped(self.done), self.replayer.done_in)
        wiring.connect(m, self.replayer.jobs, self.chain.jobs)
        wiring.connect(m, self.replayer.done, self.chain.done)
        wiring.connect(m, self.chain.words, wiring.flipped(self.words))
        return m


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_replayer_walks_each_pair_once_per_use(seed):
    """Pairs with uses 1..MAX_USES (each count at least once) between single descriptors; the
    `uses` of a recorded pair's DOWN (any) and of a single descriptor (0 or 1) must not matter."""
    rng = random.Random(seed)
    g = EmaGeometry(LAYOUT, 64, 4096, 4)
    dut = ReplayChain(g)
    cmd_bits = ema_command_layout.size
    lines, buffer = {}, {}
    jobs, dones, want = deque(), deque(), []
    slot = 0
    counts = list(range(1, MAX_USES + 1)) + [rng.randint(1, MAX_USES) for _ in range(4)]
    rng.shuffle(counts)
    for uses in counts:
        if rng.random() < 0.5:      # a single descriptor (a host's), walked once
            words, done, expected = _job(rng, g, slot % g.slots, lines, buffer)
            jobs.extend([words[0] | rng.choice([0, 1]) << cmd_bits] + words[1:])
            dones.append(done)
            want += expected
            slot += 1
        pair = []
        for matrix in (Matrix.GATE_UP, Matrix.DOWN):
            words, done, expected = _job(rng, g, slot % g.slots, lines, buffer, matrix)
            # a pair's DOWN is recorded whatever its uses; a pair walked once is two singles
            first = uses if matrix == Matrix.GATE_UP else \
                rng.randint(0, MAX_USES) if uses > 1 else rng.randint(0, 1)
            jobs.extend([words[0] | first << cmd_bits] + words[1:])
            dones.append(done)
            pair += expected
            slot += 1
        want += pair * uses
    got, again = _run(dut, rng, jobs, dones, lines, buffer, len(want))
    assert len(got) == len(want), f"{len(got)} words for {len(want)}"
    for i, (g_, w) in enumerate(zip(got, want)):
        assert g_ == w, f"word {i}: {g_} != {w}"
    assert again == sum(u - 1 for u in counts)


def test_replayer_refuses_no_uses():
    with pytest.raises(ValueError, match="max_uses is 0: accepted 1 or more"):
        Replayer(EmaGeometry(LAYOUT, 64, 4096, 4), 0)
