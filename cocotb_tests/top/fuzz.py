"""cocotb fuzz bench of the accelerator top (docs/blocks/top.md, "Fuzz bench"; issue 28): plays
fuzz_vectors.py's sequences, valid and bad commands mixed, under random pauses on the command
stream, every output stream and both AXI read channels, with the resets and bus errors the
sequences name. Per sequence it asserts:

- no hang: every output the sequence's groups and flushes owe arrives within a bound
  (host.py `cycle_bound`), and the top is idle (STATUS busy 0) soon after;
- without poison: every output equal to golden's (the sequence's arrays), item for item;
- every bad command reported: COMMAND_REJECTED and DCU_REJECTED grow by the rejections due,
  DCU_STATUS names the first rejected job since reset, COMMAND_STATUS a code due; a bus error
  sets the EMA's STATUS (its response) and the top's STATUS error bit;
- after a reset every counter and STATUS is 0 (the host resets after a sequence whose fault
  stops the EMA, `recover`; a bad descriptor the EMA fetches needs none: the next sequence is
  compared as any);
- the AXI monitor clean throughout (its checks raise on a violation) and drained at the end.

The report: the counts (sequences, commands valid and bad, resets, bus errors, sequences
poisoned (run to the end, not compared), hangs and mismatches, which are 0 or the test has
failed) and the wall time. This module runs inside the
simulator; `edgexpert.cocotb_tests.top.run_fuzz` starts it.
"""

from __future__ import annotations

import json
import os
import random
import time
from collections import Counter
from pathlib import Path

import cocotb
import numpy as np
from cocotb.triggers import RisingEdge
from cocotbext.axi.constants import AxiResp

from edgexpert.cocotb_tests.engine.host import OUTPUTS, unpack
from edgexpert.cocotb_tests.runner import write_bench_report
from edgexpert.cocotb_tests.top.harness import TopTB
from edgexpert.cocotb_tests.top.host import Batch, Group, cycle_bound, expected_outputs
from edgexpert.contracts.dcu import DcuError
from edgexpert.contracts.ema import EmaCsr, EmaError
from edgexpert.contracts.top import TopCsr, TopError
from edgexpert.contracts.trace import PassKind

REJECTED = {"command": TopCsr.COMMAND_REJECTED, "dcu": TopCsr.DCU_REJECTED}
#: register reads the top may stay busy after a sequence's last output (its counters settle)
IDLE_READS = 200
#: sequences between the bench's progress lines
PROGRESS_EVERY = 100


def _batch(seq: dict) -> Batch:
    """The host model's batch of a sequence: its rows (0..n-1) and groups, as the expected
    outputs need them."""
    batch = Batch(0, 0, PassKind.DRAFT, seq["layer"], list(range(len(seq["rows"]))))
    batch.groups = [Group(e, [tuple(c) for c in cands], (), ()) for e, cands in seq["groups"]]
    return batch


class FuzzTB(TopTB):
    """The top under random pauses everywhere, the vectors' sequences (`vectors`) and the
    run's counts."""

    def __init__(self, dut, rng: random.Random):
        super().__init__(dut, rng, "random")
        self.vectors = json.loads(Path(self.params["vectors"]).read_text())
        self.counts = Counter()
        self.first = {"command": None, "dcu": None}     # first rejection due since reset

    async def recover(self):
        """The host's recovery: a reset, then every counter and STATUS reads 0."""
        await self.reset(cycles=2)
        self.ram.errors.clear()
        regs = {**REJECTED, "status": TopCsr.STATUS, "command_status": TopCsr.COMMAND_STATUS,
                "dcu_status": TopCsr.DCU_STATUS, "ema_status": EmaCsr.STATUS}
        after = await self.counters(regs)
        assert all(v == 0 for v in after.values()), f"not cleared by the reset: {after}"
        self.first = {"command": None, "dcu": None}
        self.counts["resets"] += 1
        self.add_streams()

    async def play(self, seq: dict) -> None:
        kinds = [f["kind"] for f in seq["faults"]]
        name = f"sequence {seq['index']} ({seq['mode']}, faults {kinds})"
        beats = [int(b, 16) for b in seq["beats"]]
        values = {k: np.asarray(seq[k]) for k in ("hidden_q", "hidden_m", "hidden_e",
                                                  "expert_out_q16", "moe_out_q16")}
        want = expected_outputs(values, _batch(seq), self.ema["data_width"])
        before = await self.counters(REJECTED)
        base = {p: len(self.sinks[p].items) for p in OUTPUTS}
        memory = self.ram
        if seq["bus_error"] is not None:
            err = seq["bus_error"]
            memory.errors[(memory.bursts + err["burst"], err["beat"])] = err["resp"]
        task = cocotb.start_soon(self.cmd.send_all(beats))
        self.counts["sequences"] += 1
        # the valid commands: each group (its commands and beats) and each token's flush
        self.counts["valid_commands"] += len(seq["groups"]) + len(seq["rows"])
        self.counts["bad_commands"] += sum(f["kind"] not in ("reset", "bus_error")
                                           for f in seq["faults"])
        if seq["reset_after"] is not None:
            start = self.cmd.sent
            while self.cmd.sent - start < seq["reset_after"] and not task.done():
                await RisingEdge(self.clk)
            task.cancel()
            self.counts["cut_by_reset"] += 1
            await self.recover()
            return
        limit = cycle_bound(_batch(seq), beats, want, self.geometry, self.latency)
        for p in OUTPUTS:
            try:
                await self.sinks[p].wait_for(base[p] + len(want[p]), max_cycles=limit)
            except AssertionError as exc:
                raise AssertionError(f"{name}: hang: {exc}") from None
        await task
        await self._idle(name)
        got = {p: [unpack(self.layouts[p], v) for v in list(self.sinks[p].items)[base[p]:]]
               for p in OUTPUTS}
        for p in OUTPUTS:
            assert len(got[p]) == len(want[p]), \
                f"{name}: {p}: {len(got[p])} items for {len(want[p])}"
        if not seq["poison"]:
            for p in OUTPUTS:
                wrong = [i for i, (g, w) in enumerate(zip(got[p], want[p])) if g != w]
                assert not wrong, (f"{name}: {p} item {wrong[0]}: RTL {got[p][wrong[0]]} != "
                                   f"golden {want[p][wrong[0]]} ({len(wrong)} mismatches)")
            self.counts["checked_groups"] += len(seq["groups"])
            self.counts["checked_values"] += sum(len(w) for w in want.values())
        else:
            self.counts["poisoned"] += 1
        await self._rejections(name, seq, before)
        if seq["bus_error"] is not None:
            await self._bus_error(name, seq["bus_error"])
        if seq["recover"]:
            await self.recover()

    async def _idle(self, name: str):
        for _ in range(IDLE_READS):
            if await self.csr(TopCsr.STATUS) & 1 == 0:
                return
        raise AssertionError(f"{name}: hang: the top still busy {IDLE_READS} reads after the "
                             "sequence's last output")

    async def _rejections(self, name: str, seq: dict, before: dict):
        after = await self.counters(REJECTED)
        for kind, reg in REJECTED.items():
            due = len(seq[kind])
            assert after[kind] - before[kind] == due, \
                f"{name}: {reg.name} grew by {after[kind] - before[kind]}, {due} rejections due"
            if due and self.first[kind] is None:
                # the DCU answers its jobs in order: its first is known; the command path's,
                # the feeder's and the DCU path's checks report at their own times
                self.first[kind] = seq[kind][0] if kind == "dcu" else seq[kind]
        await self._first(name, TopCsr.DCU_STATUS, self.first["dcu"] and [self.first["dcu"]],
                          DcuError)
        await self._first(name, TopCsr.COMMAND_STATUS, self.first["command"], TopError)

    async def _first(self, name: str, reg: TopCsr, due, code_enum):
        """STATUS (reject_status_layout: bit 0 error, the code from bit 1, the tag from bit 8)
        names one of the rejections `due` first since reset, or none."""
        status = await self.csr(reg)
        if not due:
            assert status == 0, f"{name}: {reg.name} {status:#x} with nothing rejected"
            return
        width = code_enum.as_shape().width
        got = [status >> 1 & (1 << width) - 1, status >> 8 & 0xFF]
        assert status & 1 and got in due, f"{name}: {reg.name} {status:#x}: expected one of {due}"

    async def _bus_error(self, name: str, err: dict):
        ema = await self.csr(EmaCsr.STATUS)
        top = await self.csr(TopCsr.STATUS)
        # the EMA's STATUS names the AXI response (ema_status_layout: bits 2-4)
        code = EmaError.SLVERR if err["resp"] == AxiResp.SLVERR else EmaError.DECERR
        assert ema & 2 and ema >> 2 & 7 == code, f"{name}: EMA STATUS {ema:#x}, {code.name} due"
        assert top & 2, f"{name}: the top's STATUS {top:#x} without the error bit"
        self.counts["bus_errors"] += 1


async def _run(dut, test: str):
    rng = random.Random(f"{cocotb.RANDOM_SEED}-{test}")
    tb = FuzzTB(dut, rng)
    seed, sequences = tb.vectors["seed"], tb.vectors["sequences"]
    dut._log.info("%s: vector seed %d, bench seed %d, %d sequences", test, seed,
                  cocotb.RANDOM_SEED, len(sequences))
    await tb.reset()
    tb.add_streams()
    wall = time.time()
    for n, seq in enumerate(sequences, 1):
        await tb.play(seq)
        if n % PROGRESS_EVERY == 0:
            dut._log.info("%s: %d sequences, %s", test, n, dict(tb.counts))
    tb.monitor.assert_drained()
    tb.monitor.stop()
    counts = dict(tb.counts)
    counts.update(hangs=0, mismatches=0, ars=len(tb.monitor.ars),
                  wall_s=round(time.time() - wall, 1))
    dut._log.info("%s: %s", test, counts)
    write_bench_report({"test": test, "vector_seed": seed, "vectors": tb.params["vectors"],
                        "seed": int(os.environ["COCOTB_RANDOM_SEED"]), "counts": counts,
                        "faults": dict(Counter(f["kind"] for s in sequences
                                               for f in s["faults"])),
                        "modes": dict(Counter(s["mode"] for s in sequences))})


@cocotb.test()
async def fuzz(dut):
    """The vectors' sequences in order (module doc)."""
    await _run(dut, "fuzz")
