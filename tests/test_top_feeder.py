# amaranth: UnusedElaboratable=no
"""The top's feeder (hw/top/feeder.py, lanes.py) in Amaranth's simulator against a model
written from the EMA's contract: per descriptor, its scale block's lines and
then each selected channel's column lines, lowest channel first, read where the location table
says, from the line's bank; `last` and `end` where the contract puts them. Random masks (empty
words, runs across word boundaries, bit 31, a single channel), random locations and buffer
contents, and random pauses on both ends.

The `Replayer` in front of the same chain: descriptor pairs (GATE_UP, DOWN) with `uses` 1..4
among single descriptors; the model: a pair's words `uses` times over, from one set of command
words and completions.

The whole `Feeder` (split, a lane per matrix, the bank arbiter): each engine port gets its
matrix's words in its descriptors' order, and the GATE_UP lane runs on while the DOWN ports
stall.

Bad descriptors (issue 28): each reported, and walked so that the engine stays in step, with
zeros for what the descriptor did not fetch, also when the location table's entry for it is
stale (a line the step never writes: the feeder hung there before 2026-12-03).

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
from edgexpert.hw.top import BankArbiter, Feeder, LineReader, Locator, MaskWalker, Replayer
from edgexpert.hw.top.layouts import job_layout, word_layout
from edgexpert.contracts.top import TopError, TopOp

#: a layout whose GATE_UP has 40 input channels (two mask words, the second partly used) and a
#: 64-bit bus: a GATE_UP column (2 x 8 int4) is 1 beat, a DOWN column (40 int4) 3 beats
LAYOUT = WeightLayout(n_layers=1, n_experts=2, d_model=40, expert_ffn=8)
BANKS = 2


class Chain(wiring.Component):
    """MaskWalker -> Locator -> LineReader, their streams and read ports outside, the reader's
    line reads through a `BankArbiter` whose other reader never asks."""

    def __init__(self, g: EmaGeometry):
        self.walker, self.locator, self.reader = MaskWalker(g), Locator(g), LineReader(g)
        self.arbiter = BankArbiter(g, BANKS)
        super().__init__({
            "jobs": wiring.In(stream.Signature(ema_command_layout)),
            "issued": wiring.In(stream.Signature(ema_completion_layout)),
            "filled": wiring.In(range(g.lines + 1)),
            "words": wiring.Out(stream.Signature(word_layout(g.max_in_channels, g.data_width)))})

    def elaborate(self, platform):
        m = Module()
        m.submodules.walker, m.submodules.locator = self.walker, self.locator
        m.submodules.reader, m.submodules.arbiter = self.reader, self.arbiter
        wiring.connect(m, self.reader.buf, self.arbiter.readers[0])
        wiring.connect(m, wiring.flipped(self.jobs), self.walker.jobs)
        wiring.connect(m, wiring.flipped(self.issued), self.walker.issued)
        m.d.comb += self.reader.filled.eq(self.filled)
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
    done = {"tag": slot, "slot": slot, "status": EmaStatus.OK}
    return (_descriptor_words(g, slot, matrix, chans), done,
            _walked(rng, g, slot, matrix, chans, lines, buffer))


def _descriptor_words(g: EmaGeometry, slot: int, matrix: Matrix, chans: set,
                      scales: int = 1) -> list[int]:
    """A DESCRIPTOR word (tag `slot`) and its mask words selecting `chans`."""
    words = [ema_command_layout.const({"op": EmaOp.DESCRIPTOR, "arg": {"descriptor": {
        "tag": slot, "layer": 0, "expert": 0, "matrix": int(matrix),
        "scales": scales}}}).as_bits()]
    for k in range(g.mask_words(matrix)):
        mask = sum(1 << (c - k * MASK_BITS) for c in chans if k * MASK_BITS <= c < (k + 1) * MASK_BITS)
        words.append(ema_command_layout.const({"op": EmaOp.MASK, "arg": {"mask": mask}}).as_bits())
    return words


def _chans(words: list[int], matrix: Matrix) -> set:
    """The channels of the matrix that a descriptor's mask words select (bits past its last
    channel dropped)."""
    return {k * MASK_BITS + b for k, w in enumerate(words[1:]) for b in range(MASK_BITS)
            if ema_command_layout.from_bits(w).arg.mask >> b & 1
            and k * MASK_BITS + b < LAYOUT.in_channels(matrix)}


def _walked(rng: random.Random, g: EmaGeometry, slot: int, matrix: Matrix, chans: set,
            lines: dict, buffer: dict, scales: bool = True) -> list[dict]:
    """The words a descriptor of `matrix` in `slot` selecting `chans` must produce: its scale
    block's, then each channel's column, lowest first, from the lines the table names. Without
    `scales` its scale block is words of 0, and selecting no channel it gets one column of 0 as
    channel 0 (docs/contracts.md, "The top's commands: accepted ranges"): neither is read from
    the table or the buffer."""
    want = []
    columns = [(0, c, g.column_beats(matrix), False) for c in sorted(chans)]
    items = [(1, g.scale_entry, g.scale_beats(matrix), not scales)] + \
        (columns or [(0, 0, g.column_beats(matrix), True)])
    for i, (scale, entry, count, zero) in enumerate(items):
        # the EMA never allocates past the buffer's end: room for a 12-beat DOWN scale block
        first = None if zero else \
            lines.setdefault(slot * g.chan_stride + entry, rng.randrange(g.lines - 16))
        for k in range(count):
            final = k == count - 1
            want.append({"matrix": int(matrix), "scale": scale,
                         "channel": 0 if scale else entry,
                         "data": 0 if zero else
                         buffer.setdefault(first + k, rng.getrandbits(g.data_width)),
                         "last": int(final and (scale or i == len(items) - 1)),
                         "end": int(final and i == len(items) - 1)})
    return want


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


def _run(dut, rng, jobs: deque, dones: deque, lines: dict, buffer: dict, n_want: int,
         rejects: list | None = None):
    """Plays `jobs` (command words) and `dones` (the EMA's notices) into `dut` with random
    pauses on every stream, answering its read ports from `lines` and `buffer`; `filled`, the
    lines written so far, rises by random steps from 0, and a buffer line read before it is
    written answers garbage. Returns the words out and the cycles `dut.again` was high (0
    without it). With `rejects`, records the walker's `rejected` (code, tag) as they come."""
    got, again = [], 0
    word_layout = dut.words.payload.shape()
    chain = getattr(dut, "chain", dut)

    async def tb(ctx):
        nonlocal again
        loc_addr = 0
        rows = [0] * BANKS
        filled, early = 0, [False] * BANKS
        for _ in range(40_000):
            # the read ports answer the address of the cycle before
            ctx.set(chain.locator.loc.data, lines.get(loc_addr, 0))
            for b in range(BANKS):
                line = rows[b] * BANKS + b
                ctx.set(chain.arbiter.buf[b].data,
                        rng.getrandbits(64) if early[b] else buffer.get(line, 0))
            if rng.random() < 0.3:
                filled = min(max(buffer) + 1, filled + rng.randint(1, 8))
            ctx.set(dut.filled, filled)
            ctx.set(dut.jobs.valid, bool(jobs) and rng.random() < 0.7)
            if jobs:
                ctx.set(dut.jobs.payload.as_value(), jobs[0])
            ctx.set(dut.issued.valid, bool(dones) and rng.random() < 0.7)
            if dones:
                ctx.set(dut.issued.payload, dut.issued.payload.shape().const(dones[0]))
            ctx.set(dut.words.ready, rng.random() < 0.6)
            if ctx.get(dut.jobs.valid) and ctx.get(dut.jobs.ready):
                jobs.popleft()
            if ctx.get(dut.issued.valid) and ctx.get(dut.issued.ready):
                dones.popleft()
            if ctx.get(dut.words.valid) and ctx.get(dut.words.ready):
                bits = ctx.get(dut.words.payload.as_value())
                got.append({name: (bits >> f.offset) & ((1 << f.width) - 1)
                            for name, f in word_layout})
            if dut is not chain:
                again += ctx.get(dut.replayer.again)
            if rejects is not None and ctx.get(chain.walker.rejected.valid):
                rejects.append((TopError(ctx.get(chain.walker.rejected.payload.code)),
                                ctx.get(chain.walker.rejected.payload.tag)))
            loc_addr = ctx.get(chain.locator.loc.addr)
            rows = [ctx.get(chain.arbiter.buf[b].addr) for b in range(BANKS)]
            early = [rows[b] * BANKS + b >= filled for b in range(BANKS)]
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
            "issued": wiring.In(stream.Signature(ema_completion_layout)),
            "filled": wiring.In(range(g.lines + 1)),
            "words": wiring.Out(stream.Signature(word_layout(g.max_in_channels, g.data_width)))})

    def elaborate(self, platform):
        m = Module()
        m.submodules.replayer, m.submodules.chain = self.replayer, self.chain
        wiring.connect(m, wiring.flipped(self.jobs), self.replayer.i_jobs)
        wiring.connect(m, wiring.flipped(self.issued), self.replayer.i_issued)
        wiring.connect(m, self.replayer.o_jobs, self.chain.jobs)
        wiring.connect(m, self.replayer.o_issued, self.chain.issued)
        m.d.comb += self.chain.filled.eq(self.filled)
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


def _spoil(words: list[int], descriptor: dict | None = None, masks: dict | None = None):
    """A descriptor's command words with descriptor fields (`descriptor`) or mask words (by
    index, `masks`) replaced."""
    out = list(words)
    if descriptor:
        fields = ema_command_layout.from_bits(out[0]).arg.descriptor
        now = {name: int(getattr(fields, name)) for name in ("tag", "layer", "expert", "matrix",
                                                             "scales")}
        out[0] = ema_command_layout.const({"op": EmaOp.DESCRIPTOR, "arg": {
            "descriptor": {**now, **descriptor}}}).as_bits()
    for k, mask in (masks or {}).items():
        out[1 + k] = ema_command_layout.const({"op": EmaOp.MASK, "arg": {"mask": mask}}).as_bits()
    return out


@pytest.mark.parametrize("seed", [1, 2])
def test_bad_descriptors_are_reported_and_walked_so_the_engine_stays_in_step(seed):
    """A descriptor without scales (its scale block zeros), one with a mask bit past the last
    channel (not walked), one selecting no channel (a column of zeros as channel 0), a stray
    MASK word (dropped) and a descriptor with two bad fields (the first named), each followed
    by a good descriptor: every word is the contract's, `rejected` gives each code in order
    with op EMA."""
    rng = random.Random(seed)
    g = EmaGeometry(LAYOUT, 64, 4096, 4)
    dut = Chain(g)
    lines, buffer = {}, {}
    jobs, dones, want, expected = deque(), deque(), [], []
    gu = Matrix.GATE_UP            # 40 channels: the second mask word holds 8
    tail_bit = 1 << 20             # channel 52: past the last
    slot = iter(range(100))

    def job(spoil=None, code=None):
        s = next(slot) % g.slots
        words, done, expected_words = _job(rng, g, s, lines, buffer, gu)
        if spoil is not None:
            words = spoil(words)
            scales = ema_command_layout.from_bits(words[0]).arg.descriptor.scales
            expected_words = _walked(rng, g, s, gu, _chans(words, gu), lines, buffer,
                                     bool(scales))
        jobs.extend(words)
        dones.append(done)
        want.extend(expected_words)
        if code is not None:
            expected.append((code, TopOp.EMA))

    def with_tail(w):
        return ema_command_layout.from_bits(w[2]).arg.mask | tail_bit

    job()
    job(lambda w: _spoil(w, descriptor={"scales": 0}), TopError.NO_SCALES)
    job()
    job(lambda w: _spoil(w, masks={1: with_tail(w)}), TopError.MASK_TAIL)
    job()
    job(lambda w: _spoil(w, masks={0: 0, 1: 0}), TopError.NO_CHANNEL)
    jobs.append(ema_command_layout.const({"op": EmaOp.MASK, "arg": {"mask": 5}}).as_bits())
    expected.append((TopError.STRAY_MASK, TopOp.EMA))
    job()
    job(lambda w: _spoil(w, descriptor={"scales": 0}, masks={1: with_tail(w)}),
        TopError.NO_SCALES)
    job()
    rejects = []
    got, _ = _run(dut, rng, jobs, dones, lines, buffer, len(want), rejects)
    assert len(got) == len(want), f"{len(got)} words for {len(want)}"
    for i, (g_, w) in enumerate(zip(got, want)):
        assert g_ == w, f"word {i}: {g_} != {w}"
    assert rejects == expected


@pytest.mark.parametrize("seed", [1, 2])
def test_a_descriptor_without_a_channel_or_scales_reads_no_stale_location_entry(seed):
    """Issue 28's hang in the feeder alone: the location table's entry of what a bad
    descriptor did not fetch (channel 0 of one selecting none, the scale block of one without
    `scales`) is stale, left by an earlier step, and names a line this step never writes
    (`filled` stays below it). Before, the walker sent that item to the line reader, which
    waited for the line for good (40,000 cycles here, the GATE_UP ports short of words). Now
    the engine gets a column of zeros as channel 0 (with `last` and `end`) or a scale block of
    zeros instead, nothing waits, each is reported, and the good descriptors around them, in
    both lanes, are exact."""
    rng = random.Random(seed)
    g = EmaGeometry(LAYOUT, 64, 4096, 4)
    dut = Feeder(g, BANKS, 1)
    # `_walked` allocates below g.lines - 16 + 12 beats: `filled` never reaches the last line
    stale = g.lines - 1
    gu, down = Matrix.GATE_UP, Matrix.DOWN
    # (slot, matrix, channels, scales) in command order; the bad ones in slots 1-3, whose
    # entries of what they do not fetch are stale
    plan = [(0, gu, {3, 33}, 1), (1, gu, set(), 1), (0, down, {0, 5}, 1),
            (2, down, {0, 7}, 0), (3, gu, set(), 0), (0, gu, {0, 39}, 1), (0, down, {2}, 1)]
    lines = {g.chan_stride + 0: stale, 2 * g.chan_stride + g.scale_entry: stale,
             3 * g.chan_stride + 0: stale, 3 * g.chan_stride + g.scale_entry: stale}
    buffer, jobs, dones, words = {}, deque(), [], []
    for slot, matrix, chans, scales in plan:
        jobs.extend(_descriptor_words(g, slot, matrix, chans, scales))
        dones.append({"tag": slot, "slot": slot, "status": EmaStatus.OK})
        words += _walked(rng, g, slot, matrix, chans, lines, buffer, bool(scales))
    assert stale > max(buffer)
    want = _by_port(words)
    got, counts, rejects = _play_feeder(dut, rng, jobs, dones, lines, buffer, want)
    for name in want:
        assert got[name] == want[name], f"{name}: {len(got[name])} words for {len(want[name])}"
    assert counts["ended"] == len(plan) and counts["moved"] == len(words)
    assert [code for lane, code in rejects if lane == gu] == [TopError.NO_CHANNEL,
                                                              TopError.NO_SCALES]
    assert [code for lane, code in rejects if lane == down] == [TopError.NO_SCALES]


def _play_feeder(dut, rng, jobs: deque, dones: list, lines: dict, buffer: dict, want: dict,
                 ready: dict | None = None, cycles: int = 40_000, notice_chance: float = 0.5):
    """Plays `jobs` (words with their uses) into a `Feeder` and pulses each notice of `dones`
    (in order) at a random time after its descriptor was taken, as the EMA does; answers the
    location-table and buffer ports; takes the four engine ports' words with random pauses (or
    `ready`: a port's constant readiness; `notice_chance`: a notice's chance to come in a cycle
    it may). Returns the words per port, the cycles `again` was
    high, the total of `ended` and `moved`, and the rejections."""
    ports = ("gate_up", "gate_up_scales", "down", "down_scales")
    got = {name: [] for name in ports}
    counts = {"again": 0, "ended": 0, "moved": 0}
    rejects = []
    layouts = {name: getattr(dut, name).payload.shape() for name in ports}

    async def tb(ctx):
        loc_addr = [0, 0]
        rows = [0] * BANKS
        filled = 0
        taken = 0                       # descriptors taken by the feeder so far
        notified = 0
        for _ in range(cycles):
            for k in range(2):
                ctx.set(dut.loc[k].data, lines.get(loc_addr[k], 0))
            for b in range(BANKS):
                ctx.set(dut.buf[b].data, buffer.get(rows[b] * BANKS + b, 0))
            if rng.random() < 0.3:
                filled = min(max(buffer) + 1, filled + rng.randint(1, 8))
            ctx.set(dut.filled, filled)
            ctx.set(dut.jobs.valid, bool(jobs) and rng.random() < 0.8)
            if jobs:
                ctx.set(dut.jobs.payload.as_value(), jobs[0])
            pulse = notified < taken and rng.random() < notice_chance
            ctx.set(dut.issued.valid, pulse)
            if pulse:
                ctx.set(dut.issued.payload, dut.issued.payload.shape().const(dones[notified]))
                notified += 1
            for name in ports:
                fixed = (ready or {}).get(name)
                ctx.set(getattr(dut, name).ready, rng.random() < 0.6 if fixed is None else fixed)
            if ctx.get(dut.jobs.valid) and ctx.get(dut.jobs.ready):
                word = jobs.popleft() & ((1 << ema_command_layout.size) - 1)   # without uses
                taken += ema_command_layout.from_bits(word).op == EmaOp.DESCRIPTOR
            for name in ports:
                port = getattr(dut, name)
                if ctx.get(port.valid) and ctx.get(port.ready):
                    bits = ctx.get(port.payload.as_value())
                    got[name].append({f: (bits >> fl.offset) & ((1 << fl.width) - 1)
                                      for f, fl in layouts[name]})
            for key in counts:
                counts[key] += ctx.get(getattr(dut, key))
            for k in range(2):
                if ctx.get(dut.rejected[k].valid):
                    rejects.append((k, TopError(ctx.get(dut.rejected[k].payload.code))))
            loc_addr = [ctx.get(dut.loc[k].addr) for k in range(2)]
            rows = [ctx.get(dut.buf[b].addr) for b in range(BANKS)]
            await ctx.tick()
            if all(len(got[p]) >= len(want[p]) for p in ports) and not jobs \
                    and notified == len(dones):
                break

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()
    return got, counts, rejects


def _by_port(words: list[dict]) -> dict:
    """The contract's words of descriptors as the engine's four ports see them."""
    out = {"gate_up": [], "gate_up_scales": [], "down": [], "down_scales": []}
    for w in words:
        name = ("gate_up" if w["matrix"] == Matrix.GATE_UP else "down") + \
            ("_scales" if w["scale"] else "")
        out[name].append({"data": w["data"], "last": w["last"]} if w["scale"] else
                         {"channel": w["channel"], "data": w["data"], "last": w["last"]})
    return out


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_feeder_gives_each_matrix_its_words_in_its_descriptors_order(seed):
    """The whole feeder (split, two lanes, bank arbiter): descriptors of both matrices in random
    order, notices at random times, random pauses on every engine port: each port gets exactly
    its matrix's words, in its descriptors' order; `ended` counts every descriptor, `moved`
    every word."""
    rng = random.Random(seed)
    g = EmaGeometry(LAYOUT, 64, 4096, 4)
    dut = Feeder(g, BANKS, 1)
    lines, buffer = {}, {}
    jobs, dones, words = deque(), [], []
    for n in range(16):
        w, done, expected = _job(rng, g, n % g.slots, lines, buffer)
        jobs.extend(w)
        dones.append(done)
        words += expected
    want = _by_port(words)
    got, counts, rejects = _play_feeder(dut, rng, jobs, dones, lines, buffer, want)
    for name in want:
        assert got[name] == want[name], name
    assert counts["ended"] == 16 and counts["moved"] == len(words) and rejects == []
    assert counts["again"] == 0


def test_gate_up_columns_do_not_wait_behind_down_columns():
    """Why the feeder has two lanes: with the engine's DOWN ports never ready (a DOWN MAC
    waiting for its group's hidden vectors), the GATE_UP columns of the groups behind still
    reach the engine, all of them."""
    rng = random.Random(7)
    g = EmaGeometry(LAYOUT, 64, 4096, 4)
    dut = Feeder(g, BANKS, 1)
    lines, buffer = {}, {}
    jobs, dones, words = deque(), [], []
    for n in range(4):                  # four groups: GATE_UP, DOWN each
        for matrix in (Matrix.GATE_UP, Matrix.DOWN):
            w, done, expected = _job(rng, g, (2 * n + int(matrix)) % g.slots, lines, buffer,
                                     matrix)
            jobs.extend(w)
            dones.append(done)
            words += expected
    want = _by_port(words)
    got, _, _ = _play_feeder(dut, rng, jobs, dones, lines, buffer,
                             {**want, "down": [], "down_scales": []},
                             ready={"down": 0, "down_scales": 0}, cycles=5_000)
    assert got["gate_up"] == want["gate_up"]
    assert got["gate_up_scales"] == want["gate_up_scales"]
    assert got["down"] == [] and got["down_scales"] == []


@pytest.mark.parametrize("seed", [1, 2])
def test_feeder_replays_pairs_into_both_lanes(seed):
    """With a PRU's `uses`: each pair's GATE_UP words `uses` times on the GATE_UP ports and its
    DOWN words as many times on the DOWN ports; `again` once per replay. The notices come late
    (the split takes words ahead of them): a pair's recorded notices must be its own, not those
    still owed to the descriptors before it."""
    rng = random.Random(seed)
    g = EmaGeometry(LAYOUT, 64, 4096, 4)
    dut = Feeder(g, BANKS, MAX_USES)
    cmd_bits = ema_command_layout.size
    lines, buffer = {}, {}
    jobs, dones, words = deque(), [], []
    counts = [rng.randint(1, MAX_USES) for _ in range(6)]
    for n, uses in enumerate(counts):
        pair = []
        for matrix in (Matrix.GATE_UP, Matrix.DOWN):
            w, done, expected = _job(rng, g, (2 * n + int(matrix)) % g.slots, lines, buffer,
                                     matrix)
            jobs.extend([w[0] | (uses if matrix == Matrix.GATE_UP else 0) << cmd_bits] + w[1:])
            dones.append(done)
            pair += expected
        words += pair * uses
    want = _by_port(words)
    got, got_counts, _ = _play_feeder(dut, rng, jobs, dones, lines, buffer, want,
                                      notice_chance=0.05)
    for name in want:
        assert got[name] == want[name], name
    assert got_counts["again"] == sum(u - 1 for u in counts)
    assert got_counts["ended"] == 2 * sum(counts)
