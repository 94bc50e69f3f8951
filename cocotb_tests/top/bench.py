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
import os
import random
import time
from itertools import groupby
from pathlib import Path

import cocotb
import numpy as np
from cocotb.triggers import ClockCycles, RisingEdge

from edgexpert.cocotb_tests.axi_monitor import AxiReadMonitor
from edgexpert.cocotb_tests.engine.host import OUTPUTS, layouts, unpack, values_in
from edgexpert.contracts.top import EXPERT_OUT_VALUES
from edgexpert.cocotb_tests.streams import StreamSink, StreamSource
from edgexpert.cocotb_tests.top.harness import (check_no_rejects, command_streams,
                                               memory_report, read_counters, read_csr,
                                               start_top)
from edgexpert.cocotb_tests.top import step_rows
from edgexpert.cocotb_tests.top.host import (batch_commands, cycle_bound, expected_outputs,
                                            plan_batches)
from edgexpert.contracts.cycles import TOP_MASKS
from edgexpert.contracts.ema import EmaCsr
from edgexpert.contracts.top import TopCsr
from edgexpert.contracts.trace import PassKind, read_trace
from edgexpert.hw.ema import EmaGeometry
from edgexpert.cocotb_tests.runner import bench_params, write_bench_report

PARAMS = bench_params()
EMA = PARAMS["ema"]
CANDS, SLOTS = PARAMS["candidates"], PARAMS["tokens"]
TRACE = read_trace(Path(PARAMS["trace"]))
MASKED = dict(np.load(PARAMS["masked"]))
LAYOUT = TRACE.layout
D, F = LAYOUT.d_model, LAYOUT.expert_ffn
GEOMETRY = EmaGeometry(LAYOUT, EMA["data_width"], EMA["buffer_bytes"], EMA["slots"])
LAYOUTS = layouts(D, F, CANDS, EMA["data_width"], SLOTS)
#: counters read after every batch
COUNTERS = {"busy": TopCsr.BUSY_CYCLES, "memory_wait": TopCsr.MEMORY_WAIT_CYCLES,
            "compute": TopCsr.COMPUTE_CYCLES, "groups": TopCsr.GROUPS,
            "words": TopCsr.WORDS, "beats": EmaCsr.BEATS, "ema_busy": EmaCsr.BUSY_CYCLES,
            "dcu_jobs": TopCsr.DCU_JOBS, "descriptor_wait": TopCsr.DESCRIPTOR_WAIT_CYCLES,
            "feedback_wait": TopCsr.FEEDBACK_WAIT_CYCLES}
#: channels the DCU keeps per group: golden/policies/edgexpert.py `selected_count` without
#: pruning, round(ratio x channels), 1..channels
KEEP = tuple(max(1, min(c, round(PARAMS["ratio"] * c))) for c in (D, F))
#: the DCU modes and their job orders (host.py)
DCU_ORDERS = {"dcu": "ahead", "dcu_inline": "inline"}
#: cycles per bin of the step's timeline (about 300 bins over the bundled step)
TIMELINE_BIN = 1024
_report: dict = {}


def rows(selection: str) -> list[int]:
    """"ci": layer 0 of the second draft pass (several tokens, top-1, shared experts) and the
    first token of the first verification pass (top-k); "step": every row; "first_step": the
    rows of the first prompt's first decoding step (its draft passes and its verification pass,
    all layers: what `edgexpert demo` runs); "drafts": its draft passes only (all layers, about
    52,000 cycles with whole experts: what `edgexpert bench top` times both simulators on);
    "step=N": the first prompt's decoding step N (`edgexpert bench top --trace --step`)."""
    t = TRACE
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
    return pick(draft_pass)[:SLOTS] + pick(verify_pass)[:1]


def plan(masks: str, selection: str) -> list:
    return plan_batches(TRACE, None if masks == "naive_sd" else MASKED, rows(selection), CANDS,
                        SLOTS, GEOMETRY, merge_depths=masks == "edgexpert")


def commands(batch, masks: str) -> list[int]:
    return batch_commands(TRACE, batch, candidates=CANDS, tokens=SLOTS,
                          word_bits=EMA["data_width"],
                          dcu=KEEP if masks in DCU_ORDERS else None,
                          order=DCU_ORDERS.get(masks, "ahead"))


def bound(batch, beats: list[int], expect: dict) -> int:
    """Cycles a batch may take before the bench calls it a hang."""
    return cycle_bound(batch, beats, expect, GEOMETRY, PARAMS["latency"])


async def play(dut, batches: list, masks: str, source: StreamSource,
               sinks: dict[str, StreamSink],
               monitor: AxiReadMonitor) -> tuple[dict, dict, int, list[dict]]:
    """Every batch's commands; the batches of one layer of a pass (its tokens in slot-sized
    parts) back to back, each part's flushes right behind its groups (the engine holds them in
    order), and the next layer's once the one before has all its MoE sums out (its inputs
    depend on them); the host reads the counters after each layer. Returns the expected
    outputs, the per-pass entries (the counters summed over the pass's layers), the MACs and
    each layer's timeline entry (`layer_timeline`)."""
    values = TRACE if masks == "naive_sd" else MASKED
    want = {p: [] for p in OUTPUTS}
    passes: dict[tuple, dict] = {}
    layers: list[dict] = []
    before = await read_counters(dut, COUNTERS)
    macs = 0
    for (prompt, index, layer), parts in groupby(batches,
                                                  key=lambda b: (b.prompt, b.pass_index, b.layer)):
        parts = list(parts)
        beats = [beat for batch in parts for beat in commands(batch, masks)]
        limit = 0
        for batch in parts:
            expect = expected_outputs(values, batch, EMA["data_width"])
            for p in OUTPUTS:
                want[p] += expect[p]
            limit += bound(batch, beats, expect)
        start, first_beat = monitor.cycle, len(monitor.beat_cycles)
        task = cocotb.start_soon(source.send_all(beats))
        await sinks["moe_out"].wait_for(len(want["moe_out"]), max_cycles=limit)
        end, last_beat = monitor.cycle, len(monitor.beat_cycles)
        await task
        layer_macs = sum(LAYOUT.group_macs(len(g.cands), len(g.gate_up), len(g.down))
                         for batch in parts for g in batch.groups)
        macs += layer_macs
        after = await read_counters(dut, COUNTERS)
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
            monitor.beat_cycles[first_beat:last_beat], start, end, prompt=prompt, index=index,
            layer=layer, kind=entry["kind"], groups=groups,
            candidates=sum(len(g.cands) for batch in parts for g in batch.groups),
            busy=after["busy"] - before["busy"], compute=after["compute"] - before["compute"],
            memory_wait=after["memory_wait"] - before["memory_wait"]))
        before = after
    for p in OUTPUTS:
        await sinks[p].wait_for(len(want[p]), max_cycles=1000)
    await ClockCycles(dut.clk, 50)
    return want, passes, macs, layers


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


def compare(dut, name: str, masks: str, sinks: dict[str, StreamSink], want: dict) -> dict:
    """Every output item against the reference; the mismatches are counted (the report says
    how many) before the test fails on the first one. Returns the counts."""
    mismatches, first = {}, None
    for p in OUTPUTS:
        sinks[p].stop()
        got = [unpack(LAYOUTS[p], v) for v in sinks[p].items]
        assert len(got) == len(want[p]), f"{p}: {len(got)} items for {len(want[p])}"
        wrong = [i for i, (g, w) in enumerate(zip(got, want[p])) if g != w]
        mismatches[p] = len(wrong)
        if wrong and first is None:
            first = f"{p} item {wrong[0]}: RTL {got[wrong[0]]} != {masks} reference " \
                    f"{want[p][wrong[0]]}"
    if first is not None:
        dut._log.error("%s: mismatches %s", name, mismatches)
    assert first is None, first
    return mismatches


def beats_per_bin(beat_cycles: list[int], origin: int) -> list[int]:
    """AXI beats per `TIMELINE_BIN` cycles from `origin` (the step's timeline plot)."""
    counts = np.bincount((np.asarray(beat_cycles, dtype=np.int64) - origin) // TIMELINE_BIN)
    return [int(c) for c in counts]


async def check_idle(dut, monitor: AxiReadMonitor) -> None:
    """The top idle without an error, the EMA without a latched error, no command rejected, no
    burst left open."""
    status = await read_csr(dut, int(TopCsr.STATUS))
    assert status == 0, f"STATUS {status:#x}: busy (bit 0) or a completion not OK (bit 1)"
    assert await read_csr(dut, int(EmaCsr.STATUS)) & 2 == 0, "the EMA latched an error"
    await check_no_rejects(dut)
    monitor.assert_drained()


@cocotb.test()
@cocotb.parametrize(masks=list(TOP_MASKS), mode=["none", "random"])
async def trace_step(dut, masks: str, mode: str):
    """The selected trace rows through the top with `masks`, every stream and the AXI read
    channels paused by `mode`."""
    name = f"trace_step/{masks}/{mode}"
    rng = random.Random(f"{cocotb.RANDOM_SEED}-{name}")
    selection = PARAMS["selection"]
    batches = plan(masks, selection)
    dut._log.info("%s: seed %d, selection %s: %d batches, %d groups, latency %d", name,
                  cocotb.RANDOM_SEED, selection, len(batches),
                  sum(len(b.groups) for b in batches), PARAMS["latency"])
    monitor = await start_top(dut, PARAMS, LAYOUT.base_address, rng, mode)
    source, sinks = command_streams(dut, OUTPUTS, mode, rng)
    wall = time.time()
    want, passes, macs, layers = await play(dut, batches, masks, source, sinks, monitor)
    wall = time.time() - wall
    mismatches = compare(dut, name, masks, sinks, want)
    await check_idle(dut, monitor)
    monitor.stop()
    # every AR's address and length: the host's and the DCU's masks must fetch alike (sorted:
    # the `dcu` order fetches the next group's GATE_UP before this group's DOWN)
    ars = sorted((int(a), int(b)) for a, b, _ in monitor.ars)
    cycles = sum(e["busy"] for e in passes.values())
    _report[name] = {
        "rows": sum(len(b.rows) for b in batches), "batches": len(batches),
        "groups": sum(len(b.groups) for b in batches),
        "candidates": sum(len(g.cands) for b in batches for g in b.groups),
        "steps": sum(len(b.steps) for b in batches), "macs": macs, "cycles": cycles,
        **{k: sum(e[k] for e in passes.values())
           for k in ("memory_wait", "compute", "beats", "words", "dcu_jobs", "descriptor_wait",
                     "feedback_wait")},
        "ars": len(ars), "ar_digest": hashlib.sha256(repr(ars).encode()).hexdigest()[:16],
        "macs_per_cycle": round(macs / cycles, 3), "wall_s": round(wall, 2),
        "items_checked": {p: values_in(want[p]) for p in OUTPUTS}, "mismatches": mismatches,
        "memory": memory_report(),
        "passes": sorted(passes.values(), key=lambda e: (e["prompt"], e["pass"])),
        "layers": layers, "bin_cycles": TIMELINE_BIN,
        "beats_per_bin": beats_per_bin(monitor.beat_cycles, layers[0]["start"])}
    _write_report(selection)


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
    batches = plan(masks, PARAMS["selection"])
    monitor = await start_top(dut, PARAMS, LAYOUT.base_address, rng, "random")
    source, sinks = command_streams(dut, OUTPUTS, "random", rng)
    first = batches[0]
    expect = expected_outputs(MASKED, first, EMA["data_width"])
    beats = commands(first, masks)
    # "combine": the first group's expert outputs and one of the next group's
    outputs = len(first.groups[0].cands) * D // EXPERT_OUT_VALUES + 1
    assert len(expect["expert_out"]) > outputs, "the first batch has a single group"
    task = cocotb.start_soon(source.send_all(beats))
    if cut == "combine":
        await sinks["expert_out"].wait_for(outputs, max_cycles=bound(first, beats, expect))
    else:
        for _ in range(bound(first, beats, expect)):
            await RisingEdge(dut.clk)
            if monitor.outstanding and monitor.beats >= 8:
                break
        assert monitor.outstanding, "no burst in flight to reset in"
    at_reset = {"expert_out": len(sinks["expert_out"].items),
                "moe_out": len(sinks["moe_out"].items), "bursts_open": monitor.outstanding,
                "commands_sent": source.sent}
    task.cancel()
    source.idle()
    for sink in sinks.values():
        sink.stop()
    dut.rst.value = 1
    await ClockCycles(dut.clk, 2)
    dut.rst.value = 0
    counters = await read_counters(dut, {**COUNTERS, "status": TopCsr.STATUS})
    assert all(v == 0 for v in counters.values()), f"not cleared by the reset: {counters}"
    source, sinks = command_streams(dut, OUTPUTS, "random", rng)
    want, *_ = await play(dut, batches, masks, source, sinks, monitor)
    mismatches = compare(dut, name, masks, sinks, want)
    await check_idle(dut, monitor)
    monitor.stop()
    _report[name] = {"at_reset": at_reset, "items_checked": {p: values_in(want[p]) for p in OUTPUTS},
                     "mismatches": mismatches}
    _write_report(PARAMS["selection"])


def _write_report(selection: str) -> None:
    write_bench_report({"case": {k: PARAMS[k] for k in ("ema", "candidates", "lanes", "tokens")},
                        "latency": PARAMS["latency"], "memory": PARAMS["memory"],
                        "selection": selection,
                        "seed": int(os.environ["COCOTB_RANDOM_SEED"]), "tests": _report})
