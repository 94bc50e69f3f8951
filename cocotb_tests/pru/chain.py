"""cocotb bench of the PRU feeding the EMA (`PruEma`) on one chunk of a bundled prompt.

The prompt's first chunk (`policies.prefill.chunk` tokens) of the golden integer model's prefill
trace, one layer: the PRU's fetch list goes straight into the EMA, which fetches from
cocotbext-axi's AxiRam (the weight image, a pipelined latency) under the AXI protocol monitor.
Checked: every `route` beat against golden; every EMA completion (tag, slot, OK) and every
AR (address, beats) in order, and the BYTES and BURSTS counters, against the EMA reference model
(golden/blocks/ema.py) on the steps `golden.blocks.pru.fetch_commands` cuts the chunk's experts into; and the
bytes against what the policy's prefill cost model counts for the chunk (the chunk's distinct
experts x `WeightLayout.expert_fetch_bytes`). Random pauses on every stream.

This module runs inside the simulator; `edgexpert.cocotb_tests.pru.run_chain` starts it.
"""

from __future__ import annotations

import os
import random

import cocotb
import torch
from cocotb.triggers import ClockCycles

from edgexpert.cocotb_tests.pru.vectors import prompt_vectors
from edgexpert.cocotb_tests.ema.harness import EmaChainTB
from edgexpert.cocotb_tests.streams import random_pauses
from edgexpert.contracts.ema import (SLOT_BITS, TAG_BITS, Completion, Descriptor, EmaCsr,
                                     EmaStatus)
from edgexpert.contracts.prefill_trace import read_prefill_trace
from edgexpert.contracts.weight_layout import Matrix
from edgexpert.golden.blocks.pru import chunk_fetches
from edgexpert.hw.pru import PruParams
from edgexpert.cocotb_tests.runner import write_bench_report


class TB(EmaChainTB):
    """The chain's TB (`EmaChainTB`) with the PRU's parameters, the prefill trace and its
    streams (`score`, `logit` in; `route`, `done` out), every one paused at random."""

    def __init__(self, dut):
        super().__init__(dut, "pru_ema")
        self.hw = PruParams(**self.params["pru"])
        self.trace = read_prefill_trace(self.params["trace"])

    def open_streams(self, rng: random.Random):
        self.add_source("score", random_pauses(rng), rng)
        self.add_source("logit", random_pauses(rng), rng)
        self.add_sink("route", random_pauses(rng))
        self.add_sink("done", random_pauses(rng))



@cocotb.test()
async def chained_ema(dut):
    rng = random.Random(f"{cocotb.RANDOM_SEED}-pru-chained_ema")
    tb = TB(dut)
    hw, trace, layout, beat, params = tb.hw, tb.trace, tb.layout, tb.beat, tb.params
    await tb.reset()
    monitor = tb.monitor

    # golden: the chunk's experts (layer 0), in the EMA steps the PRU's fetch list cuts them into
    experts = torch.from_numpy(trace.prompt(0)["experts"][:, 0]).long()
    assert len(experts) == hw.chunk, f"the trace's prompt has {len(experts)} tokens, not a chunk"
    (chosen,) = chunk_fetches(experts, hw.chunk)
    reference = tb.reference()
    steps = [[Descriptor(t, 0, e, mtx, range(layout.in_channels(mtx)), True)
              for t, (e, mtx) in enumerate((e, mtx) for e in group for mtx in Matrix)]
             for group in (chosen[i:i + hw.experts_per_step]
                           for i in range(0, len(chosen), hw.experts_per_step))]
    results = [reference.step(step) for step in steps]
    want = [c for r in results for c in r.completions]
    expected = [b for r in results for b in reference.bursts(r)]
    beats = sum(n for _, n in expected)
    policy_bytes = len(chosen) * layout.expert_fetch_bytes
    vectors = prompt_vectors(trace, 0, hw)
    dut._log.info("chained_ema: seed %d, %d tokens, %d experts in %d EMA steps, latency %d, "
                  "pauses random", cocotb.RANDOM_SEED, vectors.tokens, len(chosen), len(steps),
                  params["latency"])

    tb.open_streams(rng)
    scores, logits = tb.sources["score"], tb.sources["logit"]
    routes, done = tb.sinks["route"], tb.sinks["done"]
    feeders = [cocotb.start_soon(scores.send_all(vectors.scores)),
               cocotb.start_soon(logits.send_all(vectors.logits))]
    limit = 8 * (len(vectors.logits) + len(vectors.routes) + beats) + 5000
    await done.wait_for(len(want), max_cycles=limit)
    await routes.wait_for(len(vectors.routes), max_cycles=limit)
    await ClockCycles(dut.clk, 50)
    assert all(f.done() for f in feeders), "inputs left unconsumed"
    tb.stop_sinks()
    monitor.stop()
    monitor.assert_drained()
    assert list(routes.items) == vectors.routes, "route differs from golden"
    got = [Completion(i & (2**TAG_BITS - 1), (i >> TAG_BITS) & (2**SLOT_BITS - 1),
                      EmaStatus(i >> (TAG_BITS + SLOT_BITS))) for i in done.items]
    assert got == want, f"completions {got[:4]}... != golden {want[:4]}..."
    ars = [(a, n) for a, n, _ in monitor.ars]
    assert ars == expected, (f"{len(ars)} ARs != golden's {len(expected)} "
                             f"(first {ars[:3]} vs {expected[:3]})")
    counters = {reg.name: await tb.csr(reg) for reg in (EmaCsr.BYTES, EmaCsr.BURSTS)}
    assert counters["BURSTS"] == len(expected)
    assert counters["BYTES"] == beats * beat
    # whole experts are whole beats: the EMA moves exactly what the cost model counts
    assert counters["BYTES"] == policy_bytes, (f"EMA moved {counters['BYTES']} bytes, the prefill "
                                               f"cost model counts {policy_bytes}")
    write_bench_report({"seed": int(os.environ["COCOTB_RANDOM_SEED"]), "tests": {"chained_ema": {
        "tokens": vectors.tokens, "experts": len(chosen), "steps": len(steps),
        "bursts": len(expected), "bytes": counters["BYTES"], "policy_bytes": policy_bytes,
        "route_beats": len(vectors.routes)}}})
