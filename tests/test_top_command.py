"""The top's command merge (hw/top/command.py, `CommandMerge`) in Amaranth's simulator: two and
three sources of random EMA commands (NEW_STEP alone, descriptors of either matrix with their
mask words) under random pauses on every source and on the output. The output must be every
source's commands whole (a descriptor and all its mask words, never another source's word
between them), each source's in its order, nothing lost or added, and an offered word must hold
until taken (the stream rule)."""

import random
from collections import deque

import pytest
from amaranth.sim import Simulator

from edgexpert.contracts.ema import EmaOp, ema_command_layout
from edgexpert.contracts.weight_layout import Matrix, WeightLayout
from edgexpert.hw.ema import EmaGeometry
from edgexpert.hw.top import CommandMerge

#: GATE_UP has 40 input channels (two mask words), DOWN 8 (one): commands of 1, 2 and 3 words
LAYOUT = WeightLayout(n_layers=1, n_experts=2, d_model=40, expert_ffn=8)


def _commands(rng: random.Random, g: EmaGeometry, source: int, count: int) -> list[list[int]]:
    out = []
    for n in range(count):
        if rng.random() < 0.2:
            # its unused argument names the source, so two sources' NEW_STEPs differ
            out.append([ema_command_layout.const({"op": EmaOp.NEW_STEP, "arg": {
                "mask": source << 24 | n << 8}}).as_bits()])
            continue
        matrix = rng.choice(list(Matrix))
        words = [ema_command_layout.const({"op": EmaOp.DESCRIPTOR, "arg": {"descriptor": {
            "tag": n % 256, "layer": 0, "expert": source, "matrix": int(matrix)}}}).as_bits()]
        # each mask word names its source and command, so a foreign word shows
        words += [ema_command_layout.const({"op": EmaOp.MASK, "arg": {
            "mask": source << 24 | n << 8 | k}}).as_bits() for k in range(g.mask_words(matrix))]
        out.append(words)
    return out


@pytest.mark.parametrize("sources, seed", [(2, 1), (2, 2), (3, 3)])
def test_merge_grants_whole_commands(sources, seed):
    rng = random.Random(seed)
    g = EmaGeometry(LAYOUT, 64, 4096, 4)
    dut = CommandMerge(g, sources)
    commands = [_commands(rng, g, s, 30) for s in range(sources)]
    queues = [deque(w for cmd in cmds for w in cmd) for cmds in commands]
    got = []

    async def tb(ctx):
        offered = None
        holding = [False] * sources   # a source keeps offering its word until it is taken
        for _ in range(20_000):
            for s, q in enumerate(queues):
                holding[s] = bool(q) and (holding[s] or rng.random() < 0.6)
                ctx.set(dut.inputs[s].valid, holding[s])
                if q:
                    ctx.set(dut.inputs[s].payload.as_value(), q[0])
            ctx.set(dut.cmd.ready, rng.random() < 0.6)
            valid, word = ctx.get(dut.cmd.valid), ctx.get(dut.cmd.payload.as_value())
            if offered is not None:
                assert valid and word == offered, "an offered command word changed before taken"
            for s, q in enumerate(queues):
                if ctx.get(dut.inputs[s].valid) and ctx.get(dut.inputs[s].ready):
                    q.popleft()
                    holding[s] = False
            if valid and ctx.get(dut.cmd.ready):
                got.append(word)
                offered = None
            elif valid:
                offered = word
            await ctx.tick()
            if not any(queues):
                break

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()
    # split the output into commands and give each back to its source, in order
    want = [deque(map(tuple, cmds)) for cmds in commands]
    i = 0
    while i < len(got):
        heads = [s for s in range(sources) if want[s] and got[i:i + len(want[s][0])] ==
                 list(want[s][0])]
        assert heads, f"word {i} starts no source's next command whole"
        i += len(want[heads[0]].popleft())
    assert not any(want), "commands missing"
