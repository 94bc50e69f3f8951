# amaranth: UnusedElaboratable=no
# (constructors rejected on purpose leave their component unused)
"""The DCU in Amaranth's simulator: random jobs (group sizes 1 and the maximum, ties, all-zero
inputs, pruning, one-word and partial-word matrices) with random pauses on both inputs and on
the output; every command word equals the golden selection's (golden/blocks/dcu.py) as the EMA
contract encodes it. The cocotb bench (cocotb_tests/dcu/) replays golden traces on Icarus and
Verilator."""

import random

import numpy as np
import pytest
from amaranth.sim import Simulator

from edgexpert.contracts.dcu import DcuJob, encode_job
from edgexpert.contracts.ema import Descriptor, encode_descriptor, new_step_command
from edgexpert.contracts.weight_layout import Matrix, WeightLayout
from edgexpert.golden.blocks import dcu as golden
from edgexpert.hw.dcu import Dcu


def expected_commands(layout: WeightLayout, job: DcuJob) -> list[int]:
    chosen = golden.select(job.q, job.m, job.e, job.g, job.keep, job.prune).tolist()
    words = [new_step_command()] if job.new_step else []
    return words + encode_descriptor(layout, Descriptor(job.tag, job.layer, job.expert,
                                                        job.matrix, chosen, job.scales))


def random_job(rng: random.Random, layout: WeightLayout, max_group: int, tag: int,
               kind: str) -> DcuJob:
    matrix = rng.choice([Matrix.GATE_UP, Matrix.DOWN])
    c = layout.in_channels(matrix)
    n = {"one": 1, "max": max_group}.get(kind, rng.randint(1, max_group))
    q = np.array([[rng.randint(-127, 127) for _ in range(c)] for _ in range(n)])
    m = np.array([rng.randint(8257, 16513) for _ in range(n)])
    e = np.array([rng.randint(18, 26) for _ in range(n)])
    g = np.array([rng.randint(0, 65536) for _ in range(n)])
    prune = None
    if kind == "zero":
        q[:] = 0
        m[:], e[:] = 0, 0
    if kind == "ties":      # few distinct values: many equal keys
        q = np.array([[rng.choice([0, 3, 5]) for _ in range(c)] for _ in range(n)])
        m[:], e[:], g[:] = 9000, 20, 30000
    if kind == "prune" or rng.random() < 0.3:
        prune = np.array([rng.random() < 0.7 for _ in range(c)], dtype=np.int64)
    if kind == "pruned_all":
        prune = np.zeros(c, dtype=np.int64)
    return DcuJob(tag, rng.randrange(layout.n_layers), rng.randrange(layout.n_experts), matrix,
                  q, m, e, g, rng.randint(1, c), prune, scales=rng.random() < 0.5,
                  new_step=rng.random() < 0.3)


def run_dcu(dut: Dcu, jobs_route: list[int], jobs_data: list[int], expected: int,
            rng: random.Random, pause: float) -> tuple[list[int], int]:
    """Drive the route and data beats with random pauses, take `expected` command words with
    random pauses; returns (words, cycles)."""
    out: list[int] = []
    cycles = [0]

    def driver(port, beats):
        async def tb(ctx):
            for beat in beats:
                while rng.random() < pause:
                    ctx.set(port.valid, 0)
                    await ctx.tick()
                ctx.set(port.valid, 1)
                ctx.set(port.payload.as_value(), beat)
                await ctx.tick().until(port.ready)
            ctx.set(port.valid, 0)
        return tb

    async def sink(ctx):
        idle = 0
        while len(out) < expected:
            ready = rng.random() >= pause
            ctx.set(dut.cmd.ready, ready)
            await ctx.delay(1e-9)   # settle after setting ready
            valid = ctx.get(dut.cmd.valid)
            payload = ctx.get(dut.cmd.payload.as_value())
            await ctx.tick()
            cycles[0] += 1
            idle = 0 if valid else idle + 1
            assert idle < 20000, f"no command for 20000 cycles after {len(out)} of {expected}"
            if valid and ready:
                out.append(payload)
        ctx.set(dut.cmd.ready, 0)
        for _ in range(50):        # nothing more comes
            await ctx.tick()
            assert not ctx.get(dut.cmd.valid), "a command beyond the expected ones"

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(driver(dut.route, jobs_route))
    sim.add_testbench(driver(dut.data, jobs_data))
    sim.add_testbench(sink)
    sim.run()
    return out, cycles[0]


# three-words: a word count that is not a power of two (the bundled GATE_UP has 6), so the
# second bank's words do not start at a power of two (DcuGeometry.bank_address)
@pytest.mark.parametrize("shape", [(48, 40, 8), (20, 64, 3), (96, 40, 4)],
                         ids=["partial-words", "one-word", "three-words"])
def test_dcu_matches_the_golden_selection(shape):
    gate_up, down, max_group = shape
    layout = WeightLayout(n_layers=2, n_experts=5, d_model=gate_up, expert_ffn=down)
    rng = random.Random(20261201)
    kinds = ["one", "max", "zero", "ties", "prune", "pruned_all"] + ["random"] * 10
    jobs = [random_job(rng, layout, max_group, tag, kind) for tag, kind in enumerate(kinds)]
    route, beats, expected = [], [], []
    for job in jobs:
        r, d = encode_job(layout, job)
        route += r
        beats += d
        expected += expected_commands(layout, job)
    for pause in (0.0, 0.4):
        out, _ = run_dcu(Dcu(gate_up, down, max_group), route, beats, len(expected),
                         random.Random(7), pause)
        for i, (got, want) in enumerate(zip(out, expected)):
            assert got == want, f"command word {i}: {got:#x} != {want:#x} (pause {pause})"


def test_bad_parameters_name_the_accepted_range():
    with pytest.raises(ValueError, match=r"max_group = 65 is out of range: accepted 1..64"):
        Dcu(max_group=65)
    with pytest.raises(ValueError, match=r"gate_up_channels = 4096 is out of range: accepted 1..4095"):
        Dcu(gate_up_channels=4096)
    with pytest.raises(TypeError, match="down_channels must be an integer"):
        Dcu(down_channels=6.0)
