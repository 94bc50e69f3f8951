"""cocotb bench of the DCU (`Dcu`) against the golden integer selection (golden/blocks/dcu.py).

Every command word the DCU emits is compared in order with golden's (golden/blocks/dcu.py
`job_commands`: NEW_STEP where the job asks, the selection's descriptor as the EMA contract
encodes it); the bench fails on a mismatch, an X/Z, a stream-rule violation on `cmd`, a hang (a cycle bound
on the results) and on a missing or extra word after the run drains.

- `trace_groups/none`, `trace_groups/random`: the depth groups of golden integer-path
  speculative decoding of bundled prompts (every layer and depth; the file the caller wrote;
  `trace_jobs` of them taken evenly over the file), without pauses (cycles per job measured) and, for the first `paused_jobs` of them, with seeded
  random pauses on `route`, `data` and `cmd`;
- `edge_cases/random`: groups of 1 and of `max_group` candidates, all-zero inputs, ties, pruned
  channels, a fully pruned expert, extreme values, random pauses on all three streams;
- `bad_jobs/random`: every way a job can be out of range for the instance (bad_jobs.py), each
  followed by a good job, random pauses: each bad one rejected (`rejected`: its tag and first
  bad field, in order), no command for it, the good ones exact, STATUS naming the first,
  JOBS and REJECTED counting them.

This module runs inside the simulator; `edgexpert.cocotb_tests.dcu.run_bench` starts it. Seeds:
cocotb's (COCOTB_RANDOM_SEED, fixed by the caller, logged); each test derives its own.
"""

from __future__ import annotations

import os
import random
from collections import defaultdict

import cocotb
import numpy as np
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge

from edgexpert.cocotb_tests.streams import BenchTB, pauses
from edgexpert.cocotb_tests.dcu.bad_jobs import bad_jobs
from edgexpert.contracts.dcu import (DcuCsr, DcuError, DcuJob, dcu_reject_layout,
                                     dcu_status_layout, encode_job)
from edgexpert.contracts.weight_layout import Matrix, WeightLayout
from edgexpert.golden.blocks import dcu as golden
from edgexpert.cocotb_tests.runner import bench_params, write_bench_report

_report: dict = {}


class TB(BenchTB):
    """The DCU's clock and reset, its parameters and their weight layout, its streams (`route`,
    `data` in; `cmd` out) and register reads; the job lists the tests run."""

    def __init__(self, dut):
        super().__init__(dut)
        self.params = P = bench_params()
        #: a layout of the DCU's channel counts, layers and experts, for the EMA command encoding
        self.layout = WeightLayout(n_layers=P["layers"], n_experts=P["experts"],
                                   d_model=P["gate_up_channels"], expert_ffn=P["down_channels"])

    def record(self, name: str, **values):
        _report[name] = values
        write_bench_report({"seed": int(os.environ["COCOTB_RANDOM_SEED"]),
                            "coverage": self.params["coverage"],
                            "groups_file": self.params["groups_file"], "tests": _report})

    def keep(self, matrix: Matrix) -> int:
        """policies.coalescing_ratio of the matrix's channels (golden.policies.selected_count)."""
        return golden.requested_count(self.layout.in_channels(matrix), self.params["ratio"])

    def trace_jobs(self) -> list[DcuJob]:
        P, layout = self.params, self.layout
        with np.load(P["groups_file"]) as f:
            q, counts, meta, m, e, g = (f[k] for k in ("q", "counts", "meta", "m", "e", "g"))
        jobs, at = [], 0
        # evenly over the file (an odd spacing mixes GATE_UP and DOWN, which alternate there)
        picks = set(np.linspace(0, len(counts) - 1, P["trace_jobs"]).round().astype(int).tolist())
        for i, (n, (layer, expert, matrix, _depth, first)) in enumerate(zip(counts, meta)):
            matrix = Matrix(int(matrix))
            rows = slice(at, at + n)
            if i in picks:
                jobs.append(DcuJob(i % 256, int(layer), int(expert), matrix,
                                   q[rows, :layout.in_channels(matrix)], m[rows], e[rows], g[rows],
                                   self.keep(matrix), scales=True,
                                   new_step=bool(first) or not jobs))
            at += n
        return jobs

    def edge_jobs(self, rng: random.Random) -> list[DcuJob]:
        """Groups of 1 and of the maximum, zeros, ties, pruning, extremes."""
        top = self.params["max_group"]
        jobs = []
        for i, kind in enumerate(["one", "max", "zero", "ties", "prune", "pruned_all", "extreme",
                                  "one_zero_weight", "random", "random"]):
            matrix = Matrix(i % 2)
            c = self.layout.in_channels(matrix)
            n = {"one": 1, "one_zero_weight": 1, "max": top, "extreme": top}.get(
                kind, rng.randint(1, top))
            q = np.array([[rng.randint(-127, 127) for _ in range(c)] for _ in range(n)])
            m = np.array([rng.randint(8257, 32767) for _ in range(n)])
            e = np.array([rng.randint(14, 22) for _ in range(n)])
            g = np.array([rng.randint(0, 65536) for _ in range(n)])
            prune = None
            if kind == "zero":
                q[:], m[:], e[:] = 0, 0, 0
            if kind == "ties":
                q = np.array([[rng.choice([0, 2, 7]) for _ in range(c)] for _ in range(n)])
                m[:], e[:], g[:] = 12000, 20, 40000
            if kind == "extreme":          # the contract's largest sums: every lane at -127
                q[:], m[:], e[:], g[:] = -127, 32767, 20, 65536
            if kind == "one_zero_weight":
                g[:] = 0
            if kind in ("prune", "ties") or (kind == "random" and rng.random() < 0.5):
                prune = np.array([rng.random() < 0.75 for _ in range(c)], dtype=np.int64)
            if kind == "pruned_all":
                prune = np.zeros(c, dtype=np.int64)
            keep = rng.choice([1, c, self.keep(matrix), rng.randint(1, c)])
            jobs.append(DcuJob(i, rng.randrange(4), rng.randrange(32), matrix, q, m, e, g, keep,
                               prune, scales=rng.random() < 0.5, new_step=rng.random() < 0.3))
        return jobs

    async def run_jobs(self, jobs: list[DcuJob], mode: str, name: str) -> dict:
        """Send `jobs` to the reset DCU, compare every command word; returns cycles per job
        (no-pause runs)."""
        route, data, expected, ends = [], [], [], []
        for job in jobs:
            r, d = encode_job(self.layout, job, self.params["max_group"])
            route += r
            data += d
            expected += golden.job_commands(self.layout, job)
            ends.append(len(expected))
        result, _ = await self.run_beats(route, data, expected, ends, mode, name, jobs)
        return result

    async def run_beats(self, route: list[int], data: list[int], expected: list[int],
                        ends: list[int], mode: str, name: str, jobs: list[DcuJob]):
        """Send the beats to the reset DCU, compare every command word with `expected` (`ends`:
        where each good job's words end); returns (cycles per good job, the rejected jobs seen:
        (code, tag))."""
        dut = self.dut
        rng = random.Random(f"{cocotb.RANDOM_SEED}-{name}")
        dut._log.info("%s: seed %d, %d jobs, %d route and %d data beats, %d command words, "
                      "pauses %s", name, cocotb.RANDOM_SEED, len(jobs), len(route), len(data),
                      len(expected), mode)
        route_src = self.add_source("route", pauses(mode, rng), rng)
        data_src = self.add_source("data", pauses(mode, rng), rng)
        sink = self.add_sink("cmd", pauses(mode, rng))
        start = sink.cycles
        done_at: list[int] = []

        async def watch():
            seen = 0
            while seen < len(ends):
                await RisingEdge(self.clk)
                while seen < len(ends) and len(sink.items) >= ends[seen]:
                    done_at.append(sink.cycles)
                    seen += 1
        rejected: list[tuple[DcuError, int]] = []

        async def watch_rejected():
            while True:
                await RisingEdge(self.clk)
                await ReadOnly()
                if dut.rejected__valid.value:
                    beat = dcu_reject_layout.from_bits(dut.rejected__payload.value.to_unsigned())
                    rejected.append((DcuError(beat.code), int(beat.tag)))
        watcher = cocotb.start_soon(watch())
        rejecter = cocotb.start_soon(watch_rejected())
        sending = [cocotb.start_soon(route_src.send_all(route)),
                   cocotb.start_soon(data_src.send_all(data))]
        # a job costs at most a few hundred cycles per 32 channels; 8 x that bound (pauses halve
        # the rate on three streams) is a hang
        bound = 8 * sum(40 * (len(j.m) + 32) * -(-j.q.shape[1] // 32) for j in jobs) + 40 * (
            len(route) + len(data)) + 1000
        await sink.wait_for(len(expected), max_cycles=bound)
        for task in sending:
            await task
        await ClockCycles(self.clk, 50)
        self.stop_sinks()
        watcher.cancel()
        rejecter.cancel()
        got = list(sink.items)
        assert len(got) == len(expected), f"{len(got)} command words for {len(expected)} expected"
        for i, (g, e) in enumerate(zip(got, expected)):
            assert g == e, f"command word {i}: DCU {g:#x} != golden {e:#x}"
        # with every input offered at once, a job's cycles are the time between its last
        # command word and the previous job's
        job_cycles = [at - before for at, before in zip(done_at, [start] + done_at[:-1])]
        per_job: dict = defaultdict(list)
        for job, cycles in zip(jobs, job_cycles):
            per_job[f"{job.matrix.name}/{len(job.m)}"].append(cycles)
        return {"jobs": len(jobs), "words": len(expected), "cycles": sink.cycles - start,
                "job_cycles": job_cycles,
                "cycles_per_job": {k: {"mean": sum(v) / len(v), "worst": max(v), "jobs": len(v)}
                                   for k, v in sorted(per_job.items())}}, rejected

    async def read_csr(self, reg: DcuCsr) -> int:
        """The register one cycle after its address."""
        self.dut.csr__addr.value = int(reg)
        await RisingEdge(self.clk)
        await RisingEdge(self.clk)
        return self.dut.csr__data.value.to_unsigned()


@cocotb.test()
async def trace_groups_none(dut):
    tb = TB(dut)
    await tb.reset()
    result = await tb.run_jobs(tb.trace_jobs(), "none", "trace_groups/none")
    tb.record("trace_groups/none", **result)


@cocotb.test()
async def trace_groups_random(dut):
    tb = TB(dut)
    await tb.reset()
    jobs = tb.trace_jobs()[:tb.params["paused_jobs"]]
    result = await tb.run_jobs(jobs, "random", "trace_groups/random")
    del result["cycles_per_job"], result["job_cycles"]    # pauses, not the DCU, set these
    tb.record("trace_groups/random", **result)


@cocotb.test()
async def edge_cases_random(dut):
    tb = TB(dut)
    await tb.reset()
    rng = random.Random(f"{cocotb.RANDOM_SEED}-edge_cases")
    jobs = tb.edge_jobs(rng)
    result = await tb.run_jobs(jobs, "random", "edge_cases/random")
    del result["cycles_per_job"], result["job_cycles"]
    tb.record("edge_cases/random", **result, group_sizes=sorted({len(j.m) for j in jobs}))


@cocotb.test()
async def bad_jobs_random(dut):
    dut.csr__addr.value = 0
    tb = TB(dut)
    await tb.reset()
    rng = random.Random(f"{cocotb.RANDOM_SEED}-bad_jobs")
    max_group = tb.params["max_group"]
    bad = bad_jobs(tb.layout, max_group, rng, first_tag=100)
    # after each bad job a golden trace group (mostly small: the Icarus run stays short)
    trace = tb.trace_jobs()
    goods = [trace[i % len(trace)] for i in range(len(bad))]
    route, data, expected, ends = [], [], [], []
    for job, after in zip(bad, goods):
        r, d = encode_job(tb.layout, after, max_group)
        route += job.route + r
        data += job.data + d
        expected += golden.job_commands(tb.layout, after)
        ends.append(len(expected))
    result, rejected = await tb.run_beats(route, data, expected, ends, "random",
                                          "bad_jobs/random", goods)
    assert rejected == [(b.code, b.tag) for b in bad], f"rejected {rejected}"
    status = dcu_status_layout.from_bits(await tb.read_csr(DcuCsr.STATUS)
                                         & (2**dcu_status_layout.size - 1))
    assert (status.error, DcuError(status.code), status.tag) == (1, bad[0].code, bad[0].tag)
    counts = {reg.name: await tb.read_csr(reg) for reg in (DcuCsr.JOBS, DcuCsr.REJECTED)}
    assert counts == {"JOBS": len(goods), "REJECTED": len(bad)}, counts
    del result["cycles_per_job"], result["job_cycles"]
    tb.record("bad_jobs/random", **result, rejected=len(rejected),
              codes=sorted({b.code.name for b in bad}))
