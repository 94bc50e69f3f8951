# amaranth: UnusedElaboratable=no
# (constructors rejected on purpose leave their component unused)
"""The DCU in Amaranth's simulator: random jobs (group sizes 1 and the maximum, ties, all-zero
inputs, pruning, one-word and partial-word matrices, a candidate of negligible weight and small
exponent) with random pauses on both inputs and on the output; every command word equals the
golden selection's (golden/blocks/dcu.py) as the EMA contract encodes it. Jobs with a field out
of range for the instance (cocotb_tests/dcu/bad_jobs.py) are rejected, reported, counted, and
the good job after each is exact. The cocotb bench (cocotb_tests/dcu/) replays golden traces on
Icarus and Verilator."""

import random

import pytest
from amaranth.sim import Simulator

from edgexpert.cocotb_tests.dcu.bad_jobs import bad_jobs
from edgexpert.cocotb_tests.dcu.jobs import random_job
from edgexpert.golden.blocks.dcu import job_commands
from edgexpert.contracts.dcu import DcuCsr, DcuError, dcu_status_layout, encode_job
from edgexpert.contracts.weight_layout import WeightLayout
from edgexpert.hw.dcu import Dcu
from edgexpert.support.simulation import paused_source


def run_dcu(dut: Dcu, jobs_route: list[int], jobs_data: list[int], expected: int,
            rng: random.Random, pause: float) -> dict:
    """Drive the route and data beats with random pauses, take `expected` command words with
    random pauses, then read the registers; returns the words, the cycles, the rejected jobs
    (code, tag) in order and the registers (`DcuCsr` name: value)."""
    out: list[int] = []
    rejected: list[tuple[DcuError, int]] = []
    cycles = [0]
    registers: dict[str, int] = {}

    async def monitor(ctx):
        async for _, _, valid, payload in ctx.tick().sample(dut.rejected.valid,
                                                            dut.rejected.payload):
            if valid:
                rejected.append((DcuError(payload.code), int(payload.tag)))

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
        for reg in DcuCsr:
            ctx.set(dut.csr.addr, reg)
            await ctx.tick()
            registers[reg.name] = ctx.get(dut.csr.data)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(paused_source(dut.route, jobs_route, rng, pause))
    sim.add_testbench(paused_source(dut.data, jobs_data, rng, pause))
    sim.add_testbench(monitor, background=True)
    sim.add_testbench(sink)
    sim.run()
    return {"words": out, "cycles": cycles[0], "rejected": rejected, "registers": registers}


# three-words: a word count that is not a power of two (the bundled GATE_UP has 6), so the
# second bank's words do not start at a power of two (DcuGeometry.bank_address)
@pytest.mark.parametrize("shape", [(48, 40, 8), (20, 64, 3), (96, 40, 4)],
                         ids=["partial-words", "one-word", "three-words"])
def test_dcu_matches_the_golden_selection(shape):
    gate_up, down, max_group = shape
    layout = WeightLayout(n_layers=2, n_experts=5, d_model=gate_up, expert_ffn=down)
    rng = random.Random(20261201)
    kinds = ["one", "max", "zero", "ties", "prune", "pruned_all", "weighted"] + ["random"] * 9
    jobs = [random_job(rng, layout, max_group, tag, kind) for tag, kind in enumerate(kinds)]
    route, beats, expected = [], [], []
    for job in jobs:
        r, d = encode_job(layout, job)
        route += r
        beats += d
        expected += job_commands(layout, job)
    for pause in (0.0, 0.4):
        out = run_dcu(Dcu(gate_up, down, max_group), route, beats, len(expected),
                      random.Random(7), pause)["words"]
        for i, (got, want) in enumerate(zip(out, expected)):
            assert got == want, f"command word {i}: {got:#x} != {want:#x} (pause {pause})"


# issue 28: a DCU for groups of at most 4 given a group of 5 (or a count of 0) took the route
# beats and then waited for data it never took: it hung without a word
@pytest.mark.parametrize("shape", [(48, 40, 4), (20, 64, 3)], ids=["partial-words", "one-word"])
def test_bad_jobs_are_rejected_and_the_next_job_is_exact(shape):
    gate_up, down, max_group = shape
    layout = WeightLayout(n_layers=2, n_experts=5, d_model=gate_up, expert_ffn=down)
    rng = random.Random(20261202)
    bad = bad_jobs(layout, max_group, rng, first_tag=100)
    assert {b.code for b in bad} == set(DcuError) - {DcuError.NONE}
    route, beats, expected = [], [], []
    for tag, job in enumerate(bad):       # each bad job, then a good one
        good = random_job(rng, layout, max_group, tag, "random")
        r, d = encode_job(layout, good, max_group)
        route += job.route + r
        beats += job.data + d
        expected += job_commands(layout, good)
    first = bad[0]
    for pause in (0.0, 0.4):
        dut = Dcu(gate_up, down, max_group, layers=layout.n_layers,
                  experts=layout.experts_per_layer)
        result = run_dcu(dut, route, beats, len(expected), random.Random(11), pause)
        for i, (got, want) in enumerate(zip(result["words"], expected)):
            assert got == want, f"command word {i}: {got:#x} != {want:#x} (pause {pause})"
        assert result["rejected"] == [(b.code, b.tag) for b in bad], pause
        regs = result["registers"]
        status = dcu_status_layout.from_bits(regs["STATUS"] & (2**dcu_status_layout.size - 1))
        assert (status.error, DcuError(status.code), status.tag) == (1, first.code, first.tag)
        assert (regs["JOBS"], regs["REJECTED"]) == (len(bad), len(bad))


def test_bad_parameters_name_the_accepted_range():
    with pytest.raises(ValueError, match=r"max_group = 65 is out of range: accepted 1..64"):
        Dcu(max_group=65)
    with pytest.raises(ValueError, match=r"gate_up_channels = 4096 is out of range: accepted 1..4095"):
        Dcu(gate_up_channels=4096)
    with pytest.raises(TypeError, match="down_channels must be an integer"):
        Dcu(down_channels=6.0)
    with pytest.raises(ValueError, match=r"experts = 1025 is out of range: accepted 1..1024"):
        Dcu(experts=1025)
