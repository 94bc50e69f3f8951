"""cocotb bench of the accelerator top on real golden trace rows.

The external memory is cocotbext-axi's AxiRam (cocotb_tests/axi_memory.py) holding the bundled
weights' memory image, answering each burst `latency` cycles after its AR; the AXI protocol
monitor watches the master. For each batch (one pass and layer's rows, at most `tokens`) the
host model (host.py) sends the command beats: EMA steps with the groups' descriptors and masks,
each group's candidates and inputs, a flush per token; every output is compared in order,
bit for bit: `hidden` with hidden_q, `hidden_scale` with (hidden_m, hidden_e), `expert_out` with
expert_out_q16, `moe_out` with moe_out_q16 - the trace's for whole experts (`naive_sd`),
golden's masked outputs (golden/traces/expert_outputs.py) for EdgeXpert's masks, whether the
host sends them (`edgexpert`) or the DCU in the top selects them (`dcu`, `dcu_inline`: the host
sends DCU jobs). After each batch the host reads the
top's counters (busy, memory wait, compute cycles), so the report has them per pass. The bench
fails on a mismatch, an X/Z, a stream-rule or AXI protocol violation, a hang, missing or extra
items, a completion that is not OK, and a burst or word left in flight at the end.

This module runs inside the simulator; `edgexpert.cocotb_tests.top.run_bench` starts it.
"""

from __future__ import annotations

import hashlib
import random
import time
from itertools import groupby

import cocotb
import numpy as np
from cocotb.triggers import RisingEdge

from edgexpert.cocotb_tests.engine.host import OUTPUTS, values_in
from edgexpert.cocotb_tests.top import step_rows
from edgexpert.cocotb_tests.top.harness import TopTB
from edgexpert.cocotb_tests.top.host import (CROSS, CROSSING, batch_commands, cycle_bound,
                                            expected_outputs, layer_commands, plan_batches)
from edgexpert.contracts.cycles import TOP_MASKS
from edgexpert.contracts.ema import EmaCsr
from edgexpert.contracts.top import EXPERT_OUT_VALUES, TopCsr
from edgexpert.contracts.trace import PassKind

#: counters read after every batch
COUNTERS = {"busy": TopCsr.BUSY_CYCLES, "memory_wait": TopCsr.MEMORY_WAIT_CYCLES,
            "compute": TopCsr.COMPUTE_CYCLES, "groups": TopCsr.GROUPS,
            "words": TopCsr.WORDS, "beats": EmaCsr.BEATS, "ema_busy": EmaCsr.BUSY_CYCLES,
            "dcu_jobs": TopCsr.DCU_JOBS, "descriptor_wait": TopCsr.DESCRIPTOR_WAIT_CYCLES,
            "feedback_wait": TopCsr.FEEDBACK_WAIT_CYCLES}
#: the DCU modes and their job orders (host.py)
DCU_ORDERS = {"dcu": "ahead", "dcu_inline": "inline"}
#: cycles per bin of the step's timeline (about 300 bins over the bundled step)
TIMELINE_BIN = 1024


class StepTB(TopTB):
    """The top on trace rows (`params["selection"]`): golden's masked outputs (`masked`), the
    channels the DCU keeps (`keep`), the host's batches and command beats, playing them and
    the report."""

    def __init__(self, dut, rng: random.Random, mode: str):
        super().__init__(dut, rng, mode)
        self.selection = self.params["selection"]
        self.masked = dict(np.load(self.params["masked"]))
        #: channels the DCU keeps per group: golden/policies/edgexpert.py `selected_count`
        #: without pruning, round(ratio x channels), 1..channels
        self.keep = tuple(max(1, min(c, round(self.params["ratio"] * c)))
                          for c in (self.layout.d_model, self.layout.expert_ffn))

    def rows(self) -> list[int]:
        """"ci": layer 0 of the second draft pass (several tokens, top-1, shared experts) and
        the first 2 x `tokens` tokens of the first verification pass (top-k, several depth
        groups: experts two depth groups share, whose DCU parts one engine group takes; two
        batches, the second's first GATE_UP ahead of the first's last DOWNs, `CROSS`; whole
        batches of `tokens`, as golden's masked outputs are selected on); "ci_first_batch": the
        same with the verification pass's first batch only; "step": every row;
        "first_step": the rows of the first prompt's first decoding step (its draft passes and
        its verification pass, all layers: what `edgexpert demo` runs); "drafts": its draft
        passes only (all layers, about 52,000 cycles with whole experts: what `edgexpert bench
        top` times both simulators on); "step=N": the first prompt's decoding step N
        (`edgexpert bench top --trace --step`)."""
        t, selection = self.trace, self.selection
        if selection == "step":
            return list(range(len(t["row_pass"])))
        if selection.startswith("step="):
            return step_rows(t, int(selection.removeprefix("step=")))
        if selection in ("first_step", "drafts"):
            prompt = int(t["row_prompt"].min())
            step = int(t["row_step"][t["row_prompt"] == prompt].min())
            chosen = (t["row_prompt"] == prompt) & (t["row_step"] == step)
            if selection == "drafts":
                chosen &= t["row_kind"] == PassKind.DRAFT
            return np.flatnonzero(chosen).tolist()
        draft = np.flatnonzero(t["row_kind"] == PassKind.DRAFT)
        verify = np.flatnonzero(t["row_kind"] == PassKind.VERIFY)
        draft_pass = sorted(set(t["row_pass"][draft].tolist()))[1]
        verify_pass = int(t["row_pass"][verify[0]])
        pick = lambda p: np.flatnonzero((t["row_pass"] == p) & (t["row_layer"] == 0)).tolist()
        batches = 2 if selection == "ci" else 1
        return pick(draft_pass)[:self.tokens] + pick(verify_pass)[:batches * self.tokens]

    def plan(self, masks: str) -> list:
        return plan_batches(self.trace, None if masks == "naive_sd" else self.masked, self.rows(),
                            self.candidates, self.tokens, self.geometry,
                            merge_depths=masks == "edgexpert", merge_parts=masks in DCU_ORDERS,
                            carry=CROSS if masks in CROSSING else 0)

    def commands(self, batch, masks: str) -> list[int]:
        return batch_commands(self.trace, batch, **self._order(masks))

    def layer_commands(self, batches: list, masks: str) -> list[int]:
        """One pass and layer's batches, back to back (`plan`'s carried DOWNs behind the next
        batch's first GATE_UP)."""
        return layer_commands(self.trace, batches, **self._order(masks))

    def _order(self, masks: str) -> dict:
        return dict(candidates=self.candidates, tokens=self.tokens,
                    word_bits=self.ema["data_width"],
                    dcu=self.keep if masks in DCU_ORDERS else None,
                    order=DCU_ORDERS.get(masks, "ahead"))

    def expected(self, batch, masks: str) -> dict:
        """A batch's outputs: the trace's with whole experts, golden's masked ones otherwise."""
        values = self.trace if masks == "naive_sd" else self.masked
        return expected_outputs(values, batch, self.ema["data_width"])

    def bound(self, batch, beats: list[int], expect: dict) -> int:
        """Cycles a batch may take before the bench calls it a hang."""
        return cycle_bound(batch, beats, expect, self.geometry, self.latency)

    async def play(self, batches: list, masks: str) -> tuple[dict, dict, int, list[dict]]:
        """Every batch's commands; the batches of one layer of a pass (its tokens in slot-sized
        parts) back to back, each part's flushes right behind its groups (the engine holds them
        in order), and the next layer's once the one before has all its MoE sums out (its
        inputs depend on them); the host reads the counters after each layer. Returns the
        expected outputs, the per-pass entries (the counters summed over the pass's layers),
        the MACs and each layer's timeline entry (`layer_timeline`)."""
        monitor = self.monitor
        want = {p: [] for p in OUTPUTS}
        passes: dict[tuple, dict] = {}
        layers: list[dict] = []
        before = await self.counters(COUNTERS)
        macs = 0
        for (prompt, index, layer), parts in groupby(
                batches, key=lambda b: (b.prompt, b.pass_index, b.layer)):
            parts = list(parts)
            beats = self.layer_commands(parts, masks)
            limit = 0
            for batch in parts:
                expect = self.expected(batch, masks)
                for p in OUTPUTS:
                    want[p] += expect[p]
                limit += self.bound(batch, beats, expect)
            start, first_beat = monitor.cycle, len(monitor.beat_cycles)
            task = cocotb.start_soon(self.cmd.send_all(beats))
            await self.sinks["moe_out"].wait_for(len(want["moe_out"]), max_cycles=limit)
            end, last_beat = monitor.cycle, len(monitor.beat_cycles)
            await task
            layer_macs = sum(self.layout.group_macs(len(g.cands), len(g.gate_up), len(g.down))
                             for batch in parts for g in batch.groups)
            macs += layer_macs
            after = await self.counters(COUNTERS)
            key = (prompt, index)
            entry = passes.setdefault(key, {
                "prompt": prompt, "pass": index, "kind": parts[0].kind.label,
                "layers": len({b.layer for b in batches if (b.prompt, b.pass_index) == key}),
                "tokens": 0, "groups": 0, "macs": 0,
                **{k: 0 for k in COUNTERS if k != "groups"}})
            if layer == min(b.layer for b in batches if (b.prompt, b.pass_index) == key):
                entry["tokens"] += sum(len(batch.rows) for batch in parts)
            groups = sum(len(batch.groups) for batch in parts)
            entry["groups"] += groups
            entry["macs"] += layer_macs
            for k in COUNTERS:
                if k != "groups":
                    entry[k] += after[k] - before[k]
            assert after["groups"] - before["groups"] == groups, \
                f"GROUPS counted {after['groups'] - before['groups']} for {groups}"
            layers.append(layer_timeline(
                monitor.beat_cycles[first_beat:last_beat], start, end, prompt=prompt,
                index=index, layer=layer, kind=entry["kind"], groups=groups,
                candidates=sum(len(g.cands) for batch in parts for g in batch.groups),
                busy=after["busy"] - before["busy"], compute=after["compute"] - before["compute"],
                memory_wait=after["memory_wait"] - before["memory_wait"]))
            before = after
        await self.drain(want)
        return want, passes, macs, layers

    def record(self, name: str, entry: dict):
        super().record(name, entry, selection=self.selection)


def layer_timeline(beat_cycles: list[int], start: int, end: int, **fields) -> dict:
    """A layer of a pass on the monitor's clock: from its first command beat (`start`) to its
    last MoE sum (`end`), split into `head` (to its first AXI beat), `bus` (its beats),
    `gaps` (cycles between its first and last beat without one) and `tail` (after its last
    beat). At one beat a cycle, the bus's roofline, only `bus` remains."""
    beats = len(beat_cycles)
    first, last = (beat_cycles[0], beat_cycles[-1]) if beats else (end, end)
    return {**fields, "start": start, "end": end, "beats": beats, "head": first - start,
            "bus": beats, "gaps": last - first + 1 - beats if beats else 0,
            "tail": end - last}


def beats_per_bin(beat_cycles: list[int], origin: int) -> list[int]:
    """AXI beats per `TIMELINE_BIN` cycles from `origin` (the step's timeline plot)."""
    counts = np.bincount((np.asarray(beat_cycles, dtype=np.int64) - origin) // TIMELINE_BIN)
    return [int(c) for c in counts]


@cocotb.test()
@cocotb.parametrize(masks=list(TOP_MASKS), mode=["none", "random"])
async def trace_step(dut, masks: str, mode: str):
    """The selected trace rows through the top with `masks`, every stream and the AXI read
    channels paused by `mode`."""
    name = f"trace_step/{masks}/{mode}"
    rng = random.Random(f"{cocotb.RANDOM_SEED}-{name}")
    tb = StepTB(dut, rng, mode)
    batches = tb.plan(masks)
    dut._log.info("%s: seed %d, selection %s: %d batches, %d groups, latency %d", name,
                  cocotb.RANDOM_SEED, tb.selection, len(batches),
                  sum(len(b.groups) for b in batches), tb.latency)
    await tb.reset()
    tb.add_streams()
    wall = time.time()
    want, passes, macs, layers = await tb.play(batches, masks)
    wall = time.time() - wall
    mismatches = tb.compare(name, f"{masks} reference", want)
    await tb.check_idle()
    monitor = tb.monitor
    monitor.stop()
    # every AR's address and length: the host's and the DCU's masks must fetch alike (sorted:
    # the `dcu` order fetches the next group's GATE_UP before this group's DOWN)
    ars = sorted((int(a), int(b)) for a, b, _ in monitor.ars)
    cycles = sum(e["busy"] for e in passes.values())
    tb.record(name, {
        "rows": sum(len(b.rows) for b in batches), "batches": len(batches),
        "groups": sum(len(b.groups) for b in batches),
        # the DCU's parts (a pair of DCU jobs each; one per group without the DCU's masks)
        "parts": sum(len(g.job_parts) for b in batches for g in b.groups),
        "candidates": sum(len(g.cands) for b in batches for g in b.groups),
        "steps": sum(len(b.steps) for b in batches), "macs": macs, "cycles": cycles,
        # batches whose first GATE_UP went ahead of the batch before's last DOWNs (`CROSS`)
        "crossed": sum(1 for b in batches if b.carried),
        **{k: sum(e[k] for e in passes.values())
           for k in ("memory_wait", "compute", "beats", "words", "dcu_jobs", "descriptor_wait",
                     "feedback_wait")},
        "ars": len(ars), "ar_digest": hashlib.sha256(repr(ars).encode()).hexdigest()[:16],
        "macs_per_cycle": round(macs / cycles, 3), "wall_s": round(wall, 2),
        "items_checked": {p: values_in(want[p]) for p in OUTPUTS}, "mismatches": mismatches,
        "memory": tb.ram.report(),
        "passes": sorted(passes.values(), key=lambda e: (e["prompt"], e["pass"])),
        "layers": layers, "bin_cycles": TIMELINE_BIN,
        "beats_per_bin": beats_per_bin(monitor.beat_cycles, layers[0]["start"])})


@cocotb.test()
@cocotb.parametrize(cut=["fetch", "combine"])
async def reset_mid_step(dut, cut: str):
    """A reset in the middle of the selection's first batch, with the DCU choosing the masks
    under random pauses: at `cut` "fetch" with bursts half delivered and no output yet; at
    "combine" once the first group's expert outputs are out and the next group's GATE_UP MACs
    run (its partial sums in the accumulators, the first group's in the MoE sums). After it
    every counter and STATUS is 0, and the whole selection from the start comes out equal to
    the reference, item for item: nothing the reset cut off is left in the EMA, the feeder, the
    DCU or the engine."""
    name, masks = f"reset_mid_step/{cut}", "dcu"
    rng = random.Random(f"{cocotb.RANDOM_SEED}-{name}")
    tb = StepTB(dut, rng, "random")
    batches = tb.plan(masks)
    await tb.reset()
    tb.add_streams()
    monitor, expert_out = tb.monitor, tb.sinks["expert_out"]
    first = batches[0]
    expect = tb.expected(first, masks)
    beats = tb.commands(first, masks)
    # "combine": the first group's expert outputs and one of the next group's
    outputs = len(first.groups[0].cands) * tb.layout.d_model // EXPERT_OUT_VALUES + 1
    assert len(expect["expert_out"]) > outputs, "the first batch has a single group"
    task = cocotb.start_soon(tb.cmd.send_all(beats))
    if cut == "combine":
        await expert_out.wait_for(outputs, max_cycles=tb.bound(first, beats, expect))
    else:
        for _ in range(tb.bound(first, beats, expect)):
            await RisingEdge(tb.clk)
            if monitor.outstanding and monitor.beats >= 8:
                break
        assert monitor.outstanding, "no burst in flight to reset in"
    at_reset = {"expert_out": len(expert_out.items),
                "moe_out": len(tb.sinks["moe_out"].items), "bursts_open": monitor.outstanding,
                "commands_sent": tb.cmd.sent}
    task.cancel()
    await tb.reset(cycles=2)
    counters = await tb.counters({**COUNTERS, "status": TopCsr.STATUS})
    assert all(v == 0 for v in counters.values()), f"not cleared by the reset: {counters}"
    tb.add_streams()
    want, *_ = await tb.play(batches, masks)
    mismatches = tb.compare(name, f"{masks} reference", want)
    await tb.check_idle()
    monitor.stop()
    tb.record(name, {"at_reset": at_reset,
                     "items_checked": {p: values_in(want[p]) for p in OUTPUTS},
                     "mismatches": mismatches})
