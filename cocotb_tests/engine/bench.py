"""cocotb bench of the expert engine on real golden trace rows.

For each batch of token rows (one layer of one pass; at most `tokens` rows, one token slot
each) the host sends every group (one expert and up to `candidates` of its (token, slot)
choices): the candidates' x_q with their scale, token slot and routing weight, the expert's
GATE_UP and DOWN scale blocks and columns read from the bundled weight image, and right after
the batch's last candidate a flush of each token slot (the engine holds it until the batch's
groups are combined; the next batch's candidates follow it). Every output is compared in
order with the trace: `hidden` with hidden_q, `hidden_scale` with (hidden_m, hidden_e),
`expert_out` with expert_out_q16 and `moe_out` with moe_out_q16, bit for bit. The bench fails on
a mismatch, an X/Z, a stream-rule violation, a hang and on missing or extra items. Every stream
is paused by the test's back-pressure mode.

This module runs inside the simulator; `edgexpert.cocotb_tests.engine.run_bench` starts it.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import cocotb
import numpy as np
from cocotb.triggers import ClockCycles

from edgexpert.cocotb_tests.engine.host import (INPUTS, OUTPUTS, flush_items, group_items,
                                                group_outputs, layouts, moe_items, plan_groups,
                                                unpack, values_in)
from edgexpert.cocotb_tests.streams import BenchTB, pauses
from edgexpert.contracts.trace import PassKind, read_trace
from edgexpert.cocotb_tests.runner import bench_params, write_bench_report

_report: dict = {}


class TB(BenchTB):
    """The engine's clock and reset, the bench's parameters with the trace and weight image
    they name, and its streams (`INPUTS` in, `OUTPUTS` out) by port name."""

    def __init__(self, dut):
        super().__init__(dut)
        self.params = P = bench_params()
        self.candidates, self.word_bits, self.slots = P["candidates"], P["word_bits"], P["tokens"]
        self.trace = read_trace(Path(P["trace"]))
        self.image = Path(P["image"]).read_bytes()
        self.layout = self.trace.layout
        self.port_layouts = layouts(self.layout.d_model, self.layout.expert_ffn, self.candidates,
                                    self.word_bits, self.slots)

    def open_streams(self, mode: str, rng: random.Random):
        """Every stream, paused by back-pressure `mode`."""
        for port in INPUTS:
            self.add_source(port, pauses(mode, rng), rng)
        for port in OUTPUTS:
            self.add_sink(port, pauses(mode, rng))

    def batches(self, selection: str) -> list[tuple[int, list[int]]]:
        """(layer, rows) batches. "ci": layer 0 of the second draft pass (several tokens, top-1
        experts, some shared) and the first token of the first verify pass (top-k experts, so
        its MoE sum combines several); "step": every row of the trace, in slot-sized batches."""
        t, slots = self.trace, self.slots
        if selection == "ci":
            draft = np.flatnonzero(t["row_kind"] == PassKind.DRAFT)
            verify = np.flatnonzero(t["row_kind"] == PassKind.VERIFY)
            draft_pass = sorted(set(t["row_pass"][draft].tolist()))[1]
            verify_pass = int(t["row_pass"][verify[0]])
            pick = lambda p: np.flatnonzero((t["row_pass"] == p) & (t["row_layer"] == 0)).tolist()
            return [(0, pick(draft_pass)[:slots]), (0, pick(verify_pass)[:1])]
        out = []
        for key in sorted(set(zip(t["row_prompt"].tolist(), t["row_pass"].tolist(),
                                  t["row_layer"].tolist()))):
            rows = np.flatnonzero((t["row_prompt"] == key[0]) & (t["row_pass"] == key[1])
                                  & (t["row_layer"] == key[2])).tolist()
            out += [(key[2], rows[i:i + slots]) for i in range(0, len(rows), slots)]
        return out

    def build(self, selection: str):
        """Input items per batch and the expected outputs, from the trace alone."""
        t, layout, cands, word = self.trace, self.layout, self.candidates, self.word_bits
        plan, want = [], {name: [] for name in OUTPUTS}
        macs = groups = candidates = 0
        for layer, rows in self.batches(selection):
            slot_of = {row: i for i, row in enumerate(rows)}
            items = {name: [] for name in INPUTS}
            for expert, chosen in plan_groups(t["experts"], rows, cands):
                r = [row for row, _ in chosen]
                g = group_items(layout, self.image, layer, expert, t["x_q"][r], t["x_m"][r],
                                t["x_e"][r], [slot_of[row] for row in r],
                                [t["weights_q16"][row, k] for row, k in chosen],
                                candidates=cands, word_bits=word, token_slots=self.slots)
                for name, values in g.items():
                    items[name] += values
                n = len(chosen)
                rk = tuple(zip(*chosen))
                for name, values in group_outputs(t["hidden_q"][rk], t["hidden_m"][rk],
                                                  t["hidden_e"][rk],
                                                  t["expert_out_q16"][rk]).items():
                    want[name] += values
                macs += layout.group_macs(n)
                groups += 1
                candidates += n
            items["flush"] = flush_items(self.slots, range(len(rows)))
            for row, slot in slot_of.items():
                want["moe_out"] += moe_items(slot, t["moe_out_q16"][row], word)
            plan.append(items)
        return plan, want, {"groups": groups, "candidates": candidates, "macs": macs,
                            "rows": sum(len(rows) for _, rows in self.batches(selection))}


@cocotb.test()
@cocotb.parametrize(mode=["none", "random"])
async def trace_rows(dut, mode: str):
    """The selected golden trace rows, every stream paused by `mode`."""
    name = f"trace_rows/{mode}"
    rng = random.Random(f"{cocotb.RANDOM_SEED}-{name}")
    tb = TB(dut)
    selection = tb.params["selection"]
    plan, want, counts = tb.build(selection)
    dut._log.info("seed %d, selection %s: %d rows, %d groups", cocotb.RANDOM_SEED, selection,
                  counts["rows"], counts["groups"])
    await tb.reset()
    tb.open_streams(mode, rng)
    sources, sinks = tb.sources, tb.sinks
    # each input item takes a few cycles at most, the quantizer's value ~9, the MAC a chunk per
    # candidate; 30x every item plus the MAC work is a hang
    total_items = sum(len(v) for items in plan for v in items.values())
    bound = 30 * (total_items + sum(len(v) for v in want.values())) + 10 * counts["macs"] // 64
    start = sinks["moe_out"].cycles
    # the columns, scales and inputs of every batch in order; the candidates and flushes in
    # the top's command order: a batch's flushes right behind its last candidate, the next
    # batch's candidates behind them (the engine reads each slot out once the groups before
    # its flush are combined, before the next batch's groups add to it)
    tasks = [cocotb.start_soon(sources[p].send_all([v for items in plan for v in items[p]]))
             for p in INPUTS if p not in ("cand", "flush")]
    for items in plan:
        await sources["cand"].send_all(items["cand"])
        await sources["flush"].send_all(items["flush"])
    for task in tasks:
        await task
    for p in OUTPUTS:
        await sinks[p].wait_for(len(want[p]), max_cycles=bound)
    cycles = sinks["moe_out"].cycles - start
    await ClockCycles(dut.clk, 50)
    tb.stop_sinks()
    for p in OUTPUTS:
        got = [unpack(tb.port_layouts[p], v) for v in sinks[p].items]
        assert len(got) == len(want[p]), f"{p}: {len(got)} items for {len(want[p])}"
        for i, (g, w) in enumerate(zip(got, want[p])):
            assert g == w, f"{p} item {i}: RTL {g} != trace {w}"
    _report[name] = {**counts, "cycles": cycles,
                     "items_checked": {p: values_in(want[p]) for p in OUTPUTS},
                     "cycles_per_group": round(cycles / counts["groups"], 1),
                     "macs_per_cycle": round(counts["macs"] / cycles, 3)}
    write_bench_report({**{k: tb.params[k] for k in ("candidates", "lanes", "word_bits", "tokens")},
                        "selection": selection, "seed": int(os.environ["COCOTB_RANDOM_SEED"]),
                        "tests": _report})
