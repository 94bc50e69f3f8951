"""The PRU RTL in Amaranth's simulator on small synthetic prompts against golden.blocks.pru (the cocotb
bench, cocotb_tests/pru/, runs the bundled prompts' traces on Icarus and Verilator)."""

import dataclasses
import random

import pytest
import torch
from amaranth.hdl import Elaboratable, Module, Value
from amaranth.lib import wiring
from amaranth.sim import Simulator

from edgexpert.cocotb_tests.pru.prompts import (SETTINGS, PromptVectorsSum, bad_prompt,
                                                small_model)
from edgexpert.cocotb_tests.pru.vectors import prompt_vectors, pru_params
from edgexpert.contracts.config import load_config
from edgexpert.contracts.pru import (PruCsr, PruError, logit_beats, pru_status_layout, score_beat,
                                     score_beats)
from edgexpert.golden.traces.prefill_trace import synthetic_prefill_trace
from edgexpert.hw.pru import Pru
from edgexpert.support.simulation import paused_source


def run(dut: Pru, vectors, seed: int, stall: bool, rejects: list | None = None,
        registers: dict | None = None) -> tuple[list[int], list[int], int]:
    """Feeds `vectors` and takes its routes and EMA words; with `rejects` also records each
    cycle of `rejected` as (code, tag), and with `registers` reads every `PruCsr` register at
    the end (name: value)."""
    rng = random.Random(seed)
    routes, ema, cycles, fed = [], [], [0], [0]

    async def source(ctx, port, items):
        await paused_source(port, items, rng, 0.3 if stall else 0.0)(ctx)
        fed[0] += 1     # the clock waits for both sources when a rejection may come last

    async def sink(ctx, port, out, count):
        while len(out) < count:
            ctx.set(port.ready, not (stall and rng.random() < 0.3))
            _, _, valid, ready, payload = await ctx.tick().sample(port.valid, port.ready,
                                                                  Value.cast(port.payload))
            if valid and ready:
                out.append(payload)

    async def scores(ctx):
        await source(ctx, dut.score, vectors.scores)

    async def logits(ctx):
        await source(ctx, dut.logit, vectors.logits)

    async def route_sink(ctx):
        await sink(ctx, dut.route, routes, len(vectors.routes))

    async def ema_sink(ctx):
        await sink(ctx, dut.cmd, ema, len(vectors.ema))

    async def clock(ctx):
        # the last prompt may be a rejected one: its completion follows its last logit beat
        while len(routes) < len(vectors.routes) or len(ema) < len(vectors.ema) or \
                (rejects is not None and fed[0] < 2):
            _, _, valid, code, tag = await ctx.tick().sample(
                dut.rejected.valid, dut.rejected.payload.code, dut.rejected.payload.tag)
            if valid and rejects is not None:
                rejects.append((PruError(code), tag))
            cycles[0] += 1
            assert cycles[0] < 200_000, "hang"
        for _ in range(8):       # the last completion leaves a few cycles after its last job
            _, _, valid, code, tag = await ctx.tick().sample(
                dut.rejected.valid, dut.rejected.payload.code, dut.rejected.payload.tag)
            if valid and rejects is not None:
                rejects.append((PruError(code), tag))
        if registers is not None:
            for reg in PruCsr:
                ctx.set(dut.csr.addr, reg)
                await ctx.tick()
                registers[reg.name] = ctx.get(dut.csr.data)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    for bench in (scores, logits, route_sink, ema_sink, clock):
        sim.add_testbench(bench)
    sim.run()
    return routes, ema, cycles[0]


@pytest.mark.parametrize("stall,lanes,per_step,pick_register",
                         [(False, 1, None, 0), (True, 4, 2, 0), (True, 2, None, 2)])
def test_pru_matches_golden_on_synthetic_prompts(stall, lanes, per_step, pick_register):
    """pick_register 2: the selector's max tree over 8 experts registered after 2 of 3 levels
    (as pru_e128's after 3 of 7)."""
    model = small_model()
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
    params = dataclasses.replace(params, pick_register=pick_register)
    for p in range(2):
        vectors = prompt_vectors(trace, p, params)
        routes, ema, cycles = run(Pru(params), vectors, seed=p, stall=stall)
        assert routes == vectors.routes
        assert ema == vectors.ema


class _Chain(Elaboratable):
    """The PRU's fetch commands straight into the EMA controller."""
    def __init__(self, pru: Pru, ema):
        self.pru, self.ema = pru, ema

    def elaborate(self, platform):
        m = Module()
        m.submodules.pru, m.submodules.ema = self.pru, self.ema
        wiring.connect(m, self.pru.cmd, self.ema.cmd)
        return m


def test_pru_drives_the_ema_through_a_prompt():
    """PRU -> EMA on one chunk of one layer (its experts need two EMA steps): every descriptor
    completes OK, the AXI reads are the EMA reference model's for whole experts, and the buffer
    ends up holding what the reference says (memory image of seeded random weights)."""
    from edgexpert.cocotb_tests.ema import BENCH_CASES, BENCH_LAYOUT
    from edgexpert.contracts.ema import Descriptor, ema_completion_layout
    from edgexpert.contracts.weight_image import memory_image, random_weights
    from edgexpert.contracts.weight_layout import Matrix
    from edgexpert.golden.blocks.ema import EmaReference
    from edgexpert.golden.blocks.pru import experts_per_step
    from edgexpert.hw.ema import EmaSystem

    layout, hw = BENCH_LAYOUT, BENCH_CASES["w64"]
    beat = hw["data_width"] // 8
    model = load_config(overrides=[
        f"model.n_experts={layout.n_experts}", "model.top_k=2", "model.n_layers=1",
        f"model.d_model={layout.d_model}", f"model.expert_ffn={layout.expert_ffn}",
        f"model.n_shared_experts={layout.n_shared_experts}", "model.n_heads=2"]).model
    z = torch.tensor([[[3, 1, 2]], [[0, 5, 1]], [[2, 0, 7]], [[1, 1, 1]]]) * 65536
    trace = synthetic_prefill_trace(model, {**SETTINGS, "chunk": 4},
                                    [(torch.tensor([40000, 10000, 9000, 6536]), z)], {})
    per_step = experts_per_step(layout, beat, hw["buffer_bytes"], hw["slots"])
    params = dataclasses.replace(pru_params(trace, max_tokens=8, lanes=1),
                                 experts_per_step=per_step)
    chosen = sorted(set(trace["experts"][trace["experts"] >= 0].tolist()))
    assert per_step < len(chosen) == 3      # the chunk's three experts take two steps
    vectors = prompt_vectors(trace, 0, params)
    ema = EmaSystem(layout, data_width=hw["data_width"], outstanding=hw["outstanding"],
                    buffer_bytes=hw["buffer_bytes"], buffer_banks=hw["buffer_banks"],
                    slots=hw["slots"])
    pru = Pru(params)
    dut = _Chain(pru, ema)
    image = memory_image(layout, random_weights(layout, seed=7))
    reference = EmaReference(layout, beat, hw["buffer_bytes"], hw["slots"])
    steps = [[Descriptor(t, 0, e, mtx, range(layout.in_channels(mtx)), True)
              for t, (e, mtx) in enumerate((e, mtx) for e in group for mtx in Matrix)]
             for group in (chosen[:per_step], chosen[per_step:])]
    results = [reference.step(s) for s in steps]
    ars, done, lines = [], [], {}
    expected = {}
    for r in results:                    # the second step's lines overwrite the first's
        expected.update(reference.buffer_lines(r, image, layout.base_address))

    async def feed(ctx, port, items):
        ctx.set(port.valid, 1)
        for item in items:
            ctx.set(Value.cast(port.payload), item)
            await ctx.tick().until(port.ready)
        ctx.set(port.valid, 0)

    async def scores(ctx):
        await feed(ctx, pru.score, vectors.scores)

    async def logits(ctx):
        await feed(ctx, pru.logit, vectors.logits)

    async def memory(ctx):
        axi, queue, head, sent = ema.m_axi, [], None, 0
        ctx.set(axi.arready, 1)
        ctx.set(ema.done.ready, 1)
        ctx.set(pru.route.ready, 1)
        for _ in range(20_000):
            if len(done) == sum(len(r.completions) for r in results):
                break
            if head is None and queue:
                head, sent = queue.pop(0), 0
            if head is not None:
                at = head[0] - layout.base_address + sent * beat
                ctx.set(axi.rdata, int.from_bytes(image[at:at + beat], "little"))
                ctx.set(axi.rlast, sent == head[1] - 1)
            ctx.set(axi.rvalid, head is not None)
            _, _, arvalid, araddr, arlen, rready, d_valid, d_payload = \
                await ctx.tick().sample(axi.arvalid, axi.araddr, axi.arlen, axi.rready,
                                        ema.done.valid, Value.cast(ema.done.payload))
            if arvalid:
                ars.append((araddr, arlen + 1))
                queue.append((araddr, arlen + 1))
            if head is not None and rready:
                sent += 1
                if sent == head[1]:
                    head = None
            if d_valid:
                done.append(ema_completion_layout.from_bits(d_payload))
        banks = hw["buffer_banks"]
        for line in sorted(expected):
            port = ema.buf_rd[line % banks]
            ctx.set(port.addr, line // banks)
            await ctx.tick()
            await ctx.tick()
            lines[line] = ctx.get(port.data).to_bytes(beat, "little")

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    for bench in (scores, logits, memory):
        sim.add_testbench(bench)
    sim.run()
    want = [c for r in results for c in r.completions]
    assert [(int(c.tag), int(c.status)) for c in done] == [(c.tag, int(c.status)) for c in want]
    assert ars == [b for r in results for b in reference.bursts(r)]
    assert expected and lines == expected


def test_pick_register_placement_and_range():
    """The registry registers the max tree past PRU_TREE_LEVELS_PER_CYCLE levels, halfway."""
    from edgexpert.hw.pru import pick_register_for
    assert [pick_register_for(n) for n in (2, 16, 32, 64, 128, 1024)] == [0, 0, 2, 3, 3, 5]
    trace = synthetic_prefill_trace(small_model(), SETTINGS, [(torch.tensor([65536]),
                                                          torch.zeros(1, 2, 8, dtype=torch.long))], {})
    params = pru_params(trace, 8, 1)
    with pytest.raises(ValueError, match="pick_register = 3 is out of range: accepted 0..2"):
        dataclasses.replace(params, pick_register=3)


@pytest.mark.parametrize("stall", [False, True])
def test_bad_prompts_are_rejected_and_the_next_prompt_is_exact(stall):
    """Bad prompts of each `PruError` (a score above 1.0, a length of 0 and one past
    max_tokens, a later beat's length changed, and one with two bad fields: the first named),
    each followed by a good prompt of the synthetic trace: `rejected` gives each (code, prompt
    number) in order, every good prompt's routes and EMA words are golden's, STATUS names the
    first rejected prompt and PROMPTS / REJECTED count them."""
    model = small_model()
    gen = torch.Generator().manual_seed(5)
    z = torch.randint(-3, 3, (7, model.n_layers, model.n_experts), generator=gen) * 40000
    scores = torch.tensor([30000, 1000, 5000, 9000, 4000, 12000, 4536])
    trace = synthetic_prefill_trace(model, SETTINGS, [(scores, z), (torch.tensor([65536]),
                                                                    z[:1])], {})
    params = pru_params(trace, max_tokens=8, lanes=2)
    assert params.length_bits == 4          # so a length of 11 fits the field
    good = [prompt_vectors(trace, p, params) for p in range(2)]
    rng = random.Random(3)
    bad = {PruError.SCORE: ([100, 200, 65537, 300], [4] * 4),
           PruError.LENGTH: ([100], [0]),
           "past max_tokens": ([5000] * 11, [11] * 11),
           PruError.MISMATCH: ([100, 200, 300], [3, 4, 3]),
           "two fields": ([70000, 200], [2, 3])}
    expected = [PruError.SCORE, PruError.LENGTH, PruError.LENGTH, PruError.MISMATCH,
                PruError.SCORE]
    feed = PromptVectorsSum()
    for (score_fields, lengths), vectors in zip(bad.values(), [good[0], good[1]] * 3):
        feed.add(*bad_prompt(rng, params, score_fields, lengths))
        feed.add(vectors.scores, vectors.logits, vectors.routes, vectors.ema)
    feed.add(good[0].scores, good[0].logits, good[0].routes, good[0].ema)
    rejects, registers = [], {}
    routes, ema, _ = run(Pru(params), feed, seed=11, stall=stall, rejects=rejects,
                         registers=registers)
    assert routes == feed.routes
    assert ema == feed.ema
    assert rejects == [(code, 2 * i) for i, code in enumerate(expected)]
    status = pru_status_layout.from_bits(registers["STATUS"])
    assert (status.error, PruError(status.code), status.tag) == (1, PruError.SCORE, 0)
    assert registers["PROMPTS"] == 6 and registers["REJECTED"] == 5


def test_prompt_encoders_refuse_out_of_range_fields():
    """The host's packers name the field and its accepted range."""
    with pytest.raises(ValueError, match=r"^score = 65537 is out of range: accepted 0\.\.65536$"):
        score_beats([1, 65537], max_tokens=8)
    for scores in ([], [1] * 9):
        with pytest.raises(ValueError, match=r"^prompt length = \d+ is out of range: accepted 1\.\.8$"):
            score_beats(scores, max_tokens=8)
    with pytest.raises(ValueError, match=r"^router logit = 2147483648 is out of range: "
                                         r"accepted -2147483648\.\.2147483647$"):
        logit_beats([[0, 2**31]], lanes=2)
    assert score_beats([65536, 0], max_tokens=8) == [score_beat(65536, 2), score_beat(0, 2)]
