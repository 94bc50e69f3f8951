"""cocotb bench of the accelerator top with its PRU on a prefill chunk of a bundled prompt.

The external memory and the AXI monitor as in bench.py. The host (prefill.py) sends the chunk's
scores, then per layer its logits (both PRU phases), reads the PRU's routes from the top's
`route` port, and sends the engine's groups formed from them and a FLUSH per token; it sends no
EMA word (the PRU's fetches reach the EMA through the command merge, the feeder walks each
expert once per group). Per layer the report has the cycles from its first LOGIT beat to its
last moe_out item and the top's and the EMA's counters over them (busy, memory wait, compute,
words fed, R beats, bytes). Checked bit for bit, in order: every route against the trace's experts,
weights and classes (cocotb_tests/pru/vectors.py), every hidden, hidden_scale, expert_out and
moe_out against the trace's MoE arrays (golden's integer model with the PRU's routes); the
EMA's completions (DESCRIPTORS: two per expert the trace's fetch lists name) and bytes (whole
experts), the top's GROUPS and MATRICES (two per group: the replays). Fails as bench.py does.

This module runs inside the simulator; `edgexpert.cocotb_tests.top.run_prefill` starts it.
"""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

import cocotb
import numpy as np
from cocotb.triggers import ClockCycles

from edgexpert.cocotb_tests.engine.host import OUTPUTS, layouts, unpack, values_in
from edgexpert.cocotb_tests.pru.vectors import prompt_vectors
from edgexpert.cocotb_tests.top.harness import (check_no_rejects, command_streams,
                                               memory_report, read_counters, read_csr,
                                               start_top)
from edgexpert.cocotb_tests.top.prefill import (expected_group_outputs, expected_moe,
                                                group_beats, groups_from_routes, logit_beats,
                                                score_beats)
from edgexpert.contracts.ema import EmaCsr
from edgexpert.contracts.prefill_trace import read_prefill_trace
from edgexpert.contracts.top import TopCsr
from edgexpert.hw.pru import PruParams
from edgexpert.hw.top import command_layout
from edgexpert.cocotb_tests.runner import bench_params, write_bench_report

PARAMS = bench_params()
EMA = PARAMS["ema"]
CANDS, SLOTS = PARAMS["candidates"], PARAMS["tokens"]
PRU = PruParams(**PARAMS["pru"])
TRACE = read_prefill_trace(Path(PARAMS["trace"]))
LAYOUT = TRACE.layout
D, F = LAYOUT.d_model, LAYOUT.expert_ffn
LAYOUTS = layouts(D, F, CANDS, EMA["data_width"], SLOTS)
CMD = command_layout(SLOTS, CANDS, D, EMA["data_width"], PRU, expert_ffn=F)
#: counters read before and after every layer (bench.py reads the same per batch)
COUNTERS = {"busy": TopCsr.BUSY_CYCLES, "memory_wait": TopCsr.MEMORY_WAIT_CYCLES,
            "compute": TopCsr.COMPUTE_CYCLES, "words": TopCsr.WORDS, "beats": EmaCsr.BEATS,
            "bytes": EmaCsr.BYTES}
_report: dict = {}


@cocotb.test()
@cocotb.parametrize(mode=["none", "random"])
async def prefill_chunk(dut, mode: str):
    """The trace's first prompt (one chunk) through every layer of the PRU, every stream and
    the AXI read channels paused by `mode`."""
    name = f"prefill_chunk/{mode}"
    rng = random.Random(f"{cocotb.RANDOM_SEED}-{name}")
    vec = prompt_vectors(TRACE, 0, PRU)
    rows = TRACE.prompt(0)
    t = vec.tokens
    assert t <= SLOTS and t <= PRU.chunk, f"{t} tokens: the bench runs one chunk"
    monitor = await start_top(dut, PARAMS, LAYOUT.base_address, rng, mode)
    source, sinks = command_streams(dut, ("route",) + OUTPUTS, mode, rng)
    want = {p: [] for p in OUTPUTS}
    layers = []
    wall = time.time()
    await source.send_all(score_beats(CMD, vec.scores))
    n_routes = 0
    groups_total = 0
    before = await read_counters(dut, COUNTERS)
    for layer in range(PRU.n_layers):
        start = sinks["route"].cycles
        task = cocotb.start_soon(source.send_all(logit_beats(CMD, vec.logits, layer, t,
                                                           PRU.beats_per_token)))
        routes_want = sum(int(e >= 0) for e in rows["experts"][:, layer].ravel())
        await sinks["route"].wait_for(n_routes + routes_want, max_cycles=40 * t * 64 + 5000)
        await task
        got = [unpack(PRU.route_layout, v) for v in list(sinks["route"].items)[n_routes:]]
        n_routes += routes_want
        groups = groups_from_routes(got, CANDS)
        groups_total += len(groups)
        expect = expected_group_outputs(rows, layer, groups)
        for p in ("hidden", "hidden_scale", "expert_out"):
            want[p] += expect[p]
        want["moe_out"] += expected_moe(rows, layer, t, EMA["data_width"])
        beats = group_beats(CMD, rows, layer, groups, candidates=CANDS, tokens=SLOTS, d_model=D,
                            expert_ffn=F, word_bits=EMA["data_width"])
        task = cocotb.start_soon(source.send_all(beats))
        words = len(groups) * (D * 2 + F) + 2000
        bound = 40 * (len(beats) + words) + 8 * PARAMS["latency"] * len(groups) + 20_000
        await sinks["moe_out"].wait_for(len(want["moe_out"]), max_cycles=bound)
        await task
        after = await read_counters(dut, COUNTERS)
        layers.append({"layer": layer, "groups": len(groups),
                       "experts": len({g.expert for g in groups}),
                       # whole experts: per candidate every GATE_UP and DOWN column
                       "macs": LAYOUT.group_macs(sum(len(g.cands) for g in groups)),
                       "cycles": sinks["route"].cycles - start,
                       **{k: after[k] - before[k] for k in COUNTERS}})
        before = after
    for p in OUTPUTS:
        await sinks[p].wait_for(len(want[p]), max_cycles=1000)
    await ClockCycles(dut.clk, 50)
    wall = time.time() - wall
    got_routes = list(sinks["route"].items)
    assert len(got_routes) == len(vec.routes), f"route: {len(got_routes)} for {len(vec.routes)}"
    wrong = [i for i, (g, w) in enumerate(zip(got_routes, vec.routes)) if g != w]
    assert not wrong, (f"route {wrong[0]}: RTL {unpack(PRU.route_layout, got_routes[wrong[0]])} "
                       f"!= golden {unpack(PRU.route_layout, vec.routes[wrong[0]])}")
    mismatches, first = {"route": 0}, None
    for p in OUTPUTS:
        sinks[p].stop()
        got = [unpack(LAYOUTS[p], v) for v in sinks[p].items]
        assert len(got) == len(want[p]), f"{p}: {len(got)} items for {len(want[p])}"
        bad = [i for i, (g, w) in enumerate(zip(got, want[p])) if g != w]
        mismatches[p] = len(bad)
        if bad and first is None:
            first = f"{p} item {bad[0]}: RTL {got[bad[0]]} != golden {want[p][bad[0]]}"
    sinks["route"].stop()
    assert first is None, first
    fetched = sum(int(np.unpackbits(TRACE["fetch_experts"][c]).sum())
                  for c in np.flatnonzero(TRACE["fetch_prompt"] == 0)
                  if TRACE["fetch_layer"][c] < PRU.n_layers)
    completions = await read_csr(dut, int(EmaCsr.DESCRIPTORS))
    assert completions == 2 * fetched, f"EMA completions {completions}: the PRU fetches " \
        f"{fetched} experts, two descriptors each"
    fetched_bytes = await read_csr(dut, int(EmaCsr.BYTES))
    assert fetched_bytes == fetched * LAYOUT.expert_fetch_bytes, \
        f"EMA bytes {fetched_bytes}: {fetched} whole experts are " \
        f"{fetched * LAYOUT.expert_fetch_bytes}"
    groups_counted = await read_csr(dut, int(TopCsr.GROUPS))
    matrices = await read_csr(dut, int(TopCsr.MATRICES))
    assert groups_counted == groups_total and matrices == 2 * groups_total, \
        f"GROUPS {groups_counted}, MATRICES {matrices} for {groups_total} groups"
    status = await read_csr(dut, int(TopCsr.STATUS))
    assert status == 0, f"STATUS {status:#x}: busy (bit 0) or a completion not OK (bit 1)"
    assert await read_csr(dut, int(EmaCsr.STATUS)) & 2 == 0, "the EMA latched an error"
    await check_no_rejects(dut)
    monitor.assert_drained()
    monitor.stop()
    _report[name] = {"tokens": t, "layers": layers, "experts_fetched": fetched,
                     "bytes_fetched": fetched_bytes, "groups": groups_total,
                     "replays": groups_total - fetched, "routes": len(vec.routes),
                     "cycles": sum(entry["cycles"] for entry in layers),
                     "wall_s": round(wall, 2),
                     "items_checked": {"route": len(vec.routes),
                                       **{p: values_in(want[p]) for p in OUTPUTS}},
                     "mismatches": mismatches, "memory": memory_report()}
    write_bench_report({"case": {k: PARAMS[k] for k in ("ema", "candidates", "lanes", "tokens")},
                        "latency": PARAMS["latency"], "memory": PARAMS["memory"],
                        "seed": int(os.environ["COCOTB_RANDOM_SEED"]), "tests": _report})
