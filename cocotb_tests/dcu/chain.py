"""cocotb bench of the DCU feeding the EMA (`DcuEma`) on golden depth groups.

The DCU's commands go straight into the EMA, which fetches from cocotbext-axi's AxiRam (the
weight image, a pipelined latency) under the AXI protocol monitor. Checked: every completion
(tag, slot, OK) and every AR (address, beats) in order, and the BYTES, BURSTS and
FETCHED_CHANNELS counters, against the EMA reference model (golden/blocks/ema.py) run on the golden
selection (golden/blocks/dcu.py) of the same groups; the policy's byte count (golden/decoding/policy.py
`PassFetches`, exact bytes per run) is reported next to the EMA's (whole beats).

This module runs inside the simulator; `edgexpert.cocotb_tests.dcu.run_chain` starts it.
"""

from __future__ import annotations

import dataclasses
import os
import random

import cocotb
import numpy as np
from cocotb.triggers import ClockCycles

from edgexpert.cocotb_tests.ema.harness import EmaChainTB
from edgexpert.cocotb_tests.streams import random_pauses
from edgexpert.contracts.dcu import DcuJob, encode_job
from edgexpert.contracts.ema import SLOT_BITS, TAG_BITS, Completion, EmaCsr, EmaStatus
from edgexpert.contracts.weight_layout import Matrix
from edgexpert.golden.blocks import dcu as golden
from edgexpert.golden.decoding.policy import PassFetches
from edgexpert.cocotb_tests.runner import write_bench_report


class TB(EmaChainTB):
    """The chain's TB (`EmaChainTB`) with its streams (`route`, `data` in; `done` out), every
    one paused at random."""

    def __init__(self, dut):
        super().__init__(dut, "dcu_ema")

    def open_streams(self, rng: random.Random):
        self.add_source("route", random_pauses(rng), rng)
        self.add_source("data", random_pauses(rng), rng)
        self.add_sink("done", random_pauses(rng))

    def steps(self) -> list[list[DcuJob]]:
        """The file's first `jobs` groups, in steps: a new one where the trace's pass and layer
        change or the EMA's slots or buffer would overflow (the reference model decides)."""
        P, layout = self.params, self.layout
        reference = self.reference()
        with np.load(P["groups_file"]) as f:
            q, counts, meta, m, e, g = (f[k] for k in ("q", "counts", "meta", "m", "e", "g"))
        steps: list[list[DcuJob]] = []
        at = 0
        for i, (n, (layer, expert, matrix, _depth, first)) in enumerate(zip(counts, meta)):
            if i == P["jobs"]:
                break
            matrix = Matrix(int(matrix))
            c = layout.in_channels(matrix)
            job = DcuJob(i % 256, int(layer), int(expert), matrix, q[at:at + n, :c],
                         m[at:at + n], e[at:at + n], g[at:at + n],
                         golden.requested_count(c, P["ratio"]), scales=True)
            at += n
            try:
                fits = bool(steps) and not first and reference.step(
                    [golden.job_descriptor(j) for j in steps[-1] + [job]]) is not None
            except ValueError:
                fits = False
            if fits:
                steps[-1].append(job)
            else:
                steps.append([job])
        return [[dataclasses.replace(j, new_step=k == 0) for k, j in enumerate(step)]
                for step in steps]



@cocotb.test()
async def chained_ema(dut):
    rng = random.Random(f"{cocotb.RANDOM_SEED}-chained_ema")
    tb = TB(dut)
    await tb.reset()
    layout, monitor = tb.layout, tb.monitor

    steps = tb.steps()
    reference = tb.reference()
    results = [reference.step([golden.job_descriptor(j) for j in step]) for step in steps]
    policy_bytes = 0
    for step in steps:
        fetches = PassFetches(layout)
        for job in step:
            d = golden.job_descriptor(job)
            fetches.fetch(d.layer, d.expert, d.matrix, sorted(d.channels))
        policy_bytes += fetches.bytes
    route, data = [], []
    for step in steps:
        for job in step:
            r, d = encode_job(layout, job)
            route += r
            data += d
    jobs = sum(len(s) for s in steps)
    dut._log.info("chained_ema: seed %d, %d jobs in %d steps, latency %d, pauses random",
                  cocotb.RANDOM_SEED, jobs, len(steps), tb.params["latency"])
    tb.open_streams(rng)
    route_src, data_src, done = tb.sources["route"], tb.sources["data"], tb.sinks["done"]
    senders = [cocotb.start_soon(route_src.send_all(route)),
               cocotb.start_soon(data_src.send_all(data))]
    beats = sum(b for r in results for _, b in reference.bursts(r))
    await done.wait_for(jobs, max_cycles=8 * (len(route) + len(data) + beats) + 100 * jobs + 5000)
    for task in senders:
        await task
    await ClockCycles(dut.clk, 50)
    tb.stop_sinks()
    monitor.stop()
    monitor.assert_drained()
    got = [Completion(i & (2**TAG_BITS - 1), (i >> TAG_BITS) & (2**SLOT_BITS - 1),
                      EmaStatus(i >> (TAG_BITS + SLOT_BITS))) for i in done.items]
    want = [c for r in results for c in r.completions]
    assert got == want, f"completions {got[:4]}... != golden {want[:4]}..."
    ars = [(a, n) for a, n, _ in monitor.ars]
    expected = [b for r in results for b in reference.bursts(r)]
    assert ars == expected, f"{len(ars)} ARs != golden's {len(expected)} (first {ars[:3]} vs {expected[:3]})"
    counters = {reg.name: await tb.csr(reg) for reg in
                (EmaCsr.BYTES, EmaCsr.BURSTS, EmaCsr.FETCHED_CHANNELS)}
    assert counters["BURSTS"] == len(expected)
    assert counters["BYTES"] == beats * tb.beat
    assert counters["FETCHED_CHANNELS"] == sum(r.fetched_channels for r in results)
    write_bench_report({"seed": int(os.environ["COCOTB_RANDOM_SEED"]), "tests": {"chained_ema": {
        "jobs": jobs, "steps": len(steps), "bursts": len(expected), "bytes": counters["BYTES"],
        "policy_bytes": policy_bytes, "fetched_channels": counters["FETCHED_CHANNELS"]}}})
