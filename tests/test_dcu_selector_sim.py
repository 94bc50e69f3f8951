"""The DCU's selector alone in Amaranth's simulator, on importance words written directly (keys
the accumulator would take long to produce): the keep-th and the next key differing at every bit
position, equal at the boundary, all equal, pruned channels. Each job's mask must be the keep
largest keys, ties to the lower channel (sorted here, not searched), and its search must end
after the pass that separates the keep-th key from the next, or the pass that finds every key
still in question equal (hw/dcu/selector.py)."""

import random

import pytest
from amaranth.hdl import Elaboratable, Module
from amaranth.lib.memory import Memory
from amaranth.sim import Simulator

from edgexpert.contracts.dcu import LANES, DcuError
from edgexpert.contracts.ema import EmaOp
from edgexpert.contracts.weight_layout import Matrix
from edgexpert.hw.dcu.accumulator import importance_layout
from edgexpert.hw.dcu.geometry import IMPORTANCE_BITS, DcuGeometry
from edgexpert.hw.dcu.selector import DIGIT_BITS, Selector

GEOMETRY = DcuGeometry(gate_up_channels=96, down_channels=40, max_group=4)
CHANNELS = GEOMETRY.channels(Matrix.GATE_UP)
WORDS = GEOMETRY.words(Matrix.GATE_UP)


class SelectorOnMemories(Elaboratable):
    """The selector reading bank 0 of prune and importance memories that the bench writes."""

    def __init__(self):
        self.selector = Selector(GEOMETRY)
        depth = 2 * GEOMETRY.max_words
        self.sums = Memory(shape=importance_layout.size, depth=depth, init=[])
        self.prune = Memory(shape=LANES, depth=depth, init=[])

    def elaborate(self, platform):
        m = Module()
        m.submodules.selector = sel = self.selector
        m.submodules.sums, m.submodules.prune = self.sums, self.prune
        for mem, port in ((self.sums, sel.sums_rd), (self.prune, sel.prune_rd)):
            read = mem.read_port()
            m.d.comb += [read.addr.eq(port.addr), port.data.eq(read.data)]
        return m


def expected_mask(keys: list[int], keep: int) -> set[int]:
    return set(sorted(range(len(keys)), key=lambda j: (-keys[j], j))[:keep])


def expected_passes(keys: list[int], keep: int) -> int:
    """Digits (DIGIT_BITS key bits each) searched, from the digit of the largest key's top bit
    down to the first digit whose pass settles the mask: the digit of the highest bit where the
    keep-th and the next key differ (the channels agreeing with T are then exactly the rest of
    the keep), or the digit below the one where the keep-th key last differs from any other key
    at its highest differing bit (the pass that finds every agreeing key equal), or bit 0's."""
    ordered = sorted(keys, reverse=True)
    kth = ordered[keep - 1]
    digit = lambda bit: bit // DIGIT_BITS
    top_digit = digit((max(keys) | 1).bit_length() - 1)
    stops = [0]
    if keep < len(ordered) and kth != ordered[keep]:
        stops.append(digit((kth ^ ordered[keep]).bit_length() - 1))
    others = [(kth ^ k).bit_length() - 1 for k in keys if k != kth]
    # the pass over digit p sees the keys agreeing with T above p: all equal to the keep-th once
    # every other key differs from it above p
    stops.append(digit(min(others)) - 1 if others else top_digit)
    return top_digit - max(stops) + 1


def run_jobs(jobs: list[tuple[list[int], list[bool], int]]) -> list[tuple[set[int], int]]:
    """Runs (importance, kept, keep) jobs one after the other through one simulation (an
    elaboration per job took most of the time); per job, the channels its mask words take and
    the cycles from its acceptance to its DESCRIPTOR."""
    dut = SelectorOnMemories()
    sel = dut.selector
    results = []

    async def bench(ctx):
        ctx.set(sel.cmd.ready, 1)
        for importance, kept, keep in jobs:
            lanes = WORDS * LANES
            importance = importance + [0] * (lanes - len(importance))
            kept = kept + [False] * (lanes - len(kept))
            for w in range(WORDS):
                ctx.set(dut.sums.data[w], sum(v << (IMPORTANCE_BITS * i) for i, v in
                                              enumerate(importance[w * LANES:][:LANES])))
                ctx.set(dut.prune.data[w], sum(1 << i for i, k in
                                               enumerate(kept[w * LANES:][:LANES]) if k))
            top = 0
            for v, k in zip(importance, kept):
                top |= v if k else 0
            ctx.set(sel.job.payload.header.matrix, Matrix.GATE_UP)
            ctx.set(sel.job.payload.keep, keep)
            ctx.set(sel.job.payload.top, top)
            ctx.set(sel.job.payload.error, DcuError.NONE)
            ctx.set(sel.job.valid, 1)
            await ctx.tick().until(sel.job.ready)
            ctx.set(sel.job.valid, 0)
            mask, descriptor_at = set(), None
            cycles, words = 0, 0
            while words < WORDS:
                await ctx.delay(1e-9)
                valid, op = ctx.get(sel.cmd.valid), ctx.get(sel.cmd.payload.op)
                if valid and op == EmaOp.DESCRIPTOR and descriptor_at is None:
                    descriptor_at = cycles
                elif valid and op == EmaOp.MASK:
                    word = ctx.get(sel.cmd.payload.arg.mask)
                    mask |= {words * LANES + i for i in range(LANES) if word >> i & 1}
                    words += 1
                await ctx.tick()
                cycles += 1
                assert cycles < 2000, "the selector hung"
            results.append((mask, descriptor_at))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return results


def boundary_case(rng: random.Random, bit: int | None, keep: int) -> list[int]:
    """Importance values whose keep-th and next keys first differ at key bit `bit` (key bit b is
    importance bit b - 1, bit 0 being 1 in every kept key), or are equal (None)."""
    kth = rng.randrange(1 << 20, 1 << 24)
    if bit is None:
        nxt = kth
    else:
        kth |= 1 << (bit - 1)
        nxt = (kth >> bit << bit) | rng.randrange(1 << (bit - 1))
    above = [rng.randrange(kth, kth + (1 << 20)) for _ in range(keep - 1)]
    below = [rng.randrange(nxt + 1) for _ in range(CHANNELS - keep - 1)]
    values = above + [kth, nxt] + below
    rng.shuffle(values)
    return values


#: the bits at which the keep-th and the next key first differ (None: equal), in every digit
#: position of a key and at both ends of a digit
BOUNDARY_BITS = [None, 1, 2, 3, 4, 5, 8, 12, 13, 16, 20, 23]


def test_the_search_ends_where_the_boundary_is_settled():
    keep = 70
    cases = []
    for bit in BOUNDARY_BITS:
        rng = random.Random(20261204 + (bit or 99))
        importance = boundary_case(rng, bit, keep)
        cases.append((importance, [2 * v + 1 for v in importance]))
    results = run_jobs([(importance, [True] * CHANNELS, keep) for importance, _ in cases])
    for bit, (_, keys), (mask, cycles) in zip(BOUNDARY_BITS, cases, results):
        assert mask == expected_mask(keys, keep), bit
        # idle -> passes x words + 1 searching, then Step before the DESCRIPTOR
        passes = expected_passes(keys, keep)
        assert cycles == passes * WORDS + 2, (bit, cycles, passes)


@pytest.mark.parametrize("case", ["random", "equal", "pruned", "top", "one", "one_candidate"])
def test_masks_are_the_keep_largest_keys(case):
    rng = random.Random(20261205)
    jobs = []
    for trial in range(6):
        importance = [rng.randrange(1 << rng.randrange(1, IMPORTANCE_BITS)) for _ in range(CHANNELS)]
        kept = [True] * CHANNELS
        keep = rng.randrange(1, CHANNELS + 1)
        if case == "equal":
            importance = [importance[0]] * CHANNELS
        elif case == "pruned":
            kept = [rng.random() < 0.5 for _ in range(CHANNELS)]
            kept[0] = True
            keep = rng.randrange(1, sum(kept) + 1)
        elif case == "top":
            importance = [(1 << IMPORTANCE_BITS) - 1 - rng.randrange(4) for _ in range(CHANNELS)]
        elif case == "one":
            keep = 1
        elif case == "one_candidate":
            # a group of one: I = |q| W, a few distinct keys, ties at the boundary
            weight = rng.randrange(1, 1 << 16)
            importance = [rng.randrange(128) * weight for _ in range(CHANNELS)]
        jobs.append((importance, kept, keep))
    for trial, ((importance, kept, keep), (mask, cycles)) in enumerate(zip(jobs, run_jobs(jobs))):
        keys = [2 * v + 1 if k else 0 for v, k in zip(importance, kept)]
        assert mask == expected_mask(keys, keep), (case, trial)
        assert cycles == expected_passes(keys, keep) * WORDS + 2, (case, trial)
