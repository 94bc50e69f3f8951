"""The PRU RTL in Amaranth's simulator on small synthetic prompts against golden.pru (the cocotb
bench, cocotb_tests/pru/, runs the bundled prompts' traces on Icarus and Verilator)."""

import dataclasses
import random

import pytest
import torch
from amaranth.hdl import Value
from amaranth.sim import Simulator

from edgexpert.cocotb_tests.pru.vectors import prompt_vectors, pru_params
from edgexpert.contracts.config import load_config
from edgexpert.golden.prefill_trace import synthetic_prefill_trace
from edgexpert.hw.pru import Pru, PruParams


def _model(n_experts=8, top_k=3, n_layers=2):
    return load_config(overrides=[f"model.n_experts={n_experts}", f"model.top_k={top_k}",
                                  f"model.n_layers={n_layers}", "model.d_model=48",
                                  "model.expert_ffn=40", "model.n_heads=2"]).model


SETTINGS = {"tau_major_q16": 65536, "tau_minor_q16": 49152, "budget_minor": 2,
            "budget_trivial": 1, "chunk": 3}


def run(dut: Pru, vectors, seed: int, stall: bool) -> tuple[list[int], list[int], int]:
    rng = random.Random(seed)
    routes, ema, cycles = [], [], [0]

    async def source(ctx, port, items):
        for item in items:
            while stall and rng.random() < 0.3:
                ctx.set(port.valid, 0)
                await ctx.tick()
            ctx.set(port.valid, 1)
            ctx.set(Value.cast(port.payload), item)
            await ctx.tick().until(port.ready)
        ctx.set(port.valid, 0)

    async def sink(ctx, port, out, count):
        while len(out) < count:
            ctx.set(port.ready, not (stall and rng.random() < 0.3))
            _, _, valid, ready, payload = await ctx.tick().sample(port.valid, port.ready,
                                                                  Value.cast(port.payload))
            if valid and ready:
                out.append(payload)

    async def scores(ctx):
        await source(ctx, dut.i_score, vectors.scores)

    async def logits(ctx):
        await source(ctx, dut.i_logit, vectors.logits)

    async def route_sink(ctx):
        await sink(ctx, dut.o_route, routes, len(vectors.routes))

    async def ema_sink(ctx):
        await sink(ctx, dut.o_ema, ema, len(vectors.ema))

    async def clock(ctx):
        while len(routes) < len(vectors.routes) or len(ema) < len(vectors.ema):
            await ctx.tick()
            cycles[0] += 1
            assert cycles[0] < 200_000, "hang"

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    for bench in (scores, logits, route_sink, ema_sink, clock):
        sim.add_testbench(bench)
    sim.run()
    return routes, ema, cycles[0]


@pytest.mark.parametrize("stall,lanes,per_step", [(False, 1, None), (True, 4, 2)])
def test_pru_matches_golden_on_synthetic_prompts(stall, lanes, per_step):
    model = _model()
    gen = torch.Generator().manual_seed(5)
    t = 7
    # ties: every logit drawn from a few values
    z = torch.randint(-3, 3, (t, model.n_layers, model.n_experts), generator=gen) * 40000
    scores = torch.tensor([30000, 1000, 5000, 9000, 4000, 12000, 4536])
    trace = synthetic_prefill_trace(model, SETTINGS, [(scores, z), (torch.tensor([65536]),
                                                                    z[:1])], {})
    params = pru_params(trace, max_tokens=8, lanes=lanes)
    if per_step is not None:          # chunks of more experts than one EMA step takes
        params = dataclasses.replace(params, experts_per_step=per_step)
    for p in range(2):
        vectors = prompt_vectors(trace, p, params)
        routes, ema, cycles = run(Pru(params), vectors, seed=p, stall=stall)
        assert routes == vectors.routes
        assert ema == vectors.ema
