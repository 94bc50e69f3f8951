"""cocotb module of `scripts/top_timeline.py`: where a layer's cycles go inside the top.

The first pass of kind `params["timeline_kind"]` of the selected rows (`params["selection"]`:
"drafts", one token and one group a layer, for a draft pass; "first_step" for the first step's
verification pass, 17 tokens and 31-42 groups a layer) runs alone through the top with
`params["timeline_masks"]`, its first
`params["timeline_layers"]` layers, no pauses; every cycle the handshakes (valid and ready
both high) of the internal streams in PROBES are sampled through the simulator's hierarchy
(Icarus: every signal of the generated Verilog is visible). Outputs are compared with the
bench's expectations as in `trace_step`. The report entry `timeline/<masks>` has, per layer, its
start and end on the bench monitor's clock and each probe's handshakes as runs
[first, last, count] (a new run after a gap of more than RUN_GAP cycles).
"""

from __future__ import annotations

import random

import cocotb
from cocotb.triggers import RisingEdge

from edgexpert.cocotb_tests.top.bench import StepTB

#: probe name -> (valid, ready) paths below the top, in the order a layer uses them
PROBES = {
    "dcu_route": ("dcu_path.dcu.route__valid", "dcu_path.dcu.route__ready"),
    "dcu_data": ("dcu_path.dcu.data__valid", "dcu_path.dcu.data__ready"),
    "selector_job": ("dcu_path.dcu.selector.job__valid", "dcu_path.dcu.selector.job__ready"),
    "ema_cmd": ("ema.controller.cmd__valid", "ema.controller.cmd__ready"),
    "ar": ("ema.controller.issuer.ar__arvalid", "ema.controller.issuer.ar__arready"),
    "r_beat": ("m_axi__rvalid", "m_axi__rready"),
    "gate_up_walk": ("feeder.gate_up_lane.walker.channels__valid",
                     "feeder.gate_up_lane.walker.channels__ready"),
    "gate_up_columns": ("engine.gate_up_mac.columns__valid", "engine.gate_up_mac.columns__ready"),
    "gate_up_drain": ("engine.gate_up_mac.sums__valid", "engine.gate_up_mac.sums__ready"),
    "quantizer_in": ("engine.quantizer.h__valid", "engine.quantizer.h__ready"),
    "hidden_scale": ("engine.quantizer.scale__valid", "engine.quantizer.scale__ready"),
    "hidden": ("engine.quantizer.hidden__valid", "engine.quantizer.hidden__ready"),
    "dcu_hidden_beat": ("dcu_path.packer.beats__valid", "dcu_path.packer.beats__ready"),
    "down_walk": ("feeder.down_lane.walker.channels__valid",
                  "feeder.down_lane.walker.channels__ready"),
    "down_columns": ("engine.down_mac.columns__valid", "engine.down_mac.columns__ready"),
    "down_drain": ("engine.down_mac.sums__valid", "engine.down_mac.sums__ready"),
    "moe_out": ("moe_out__valid", "moe_out__ready"),
}
#: handshakes closer than this many cycles belong to one run
RUN_GAP = 3


def _signal(dut, path: str):
    handle = dut
    for part in path.split("."):
        handle = getattr(handle, part)
    return handle


def runs_of(cycles: list[int]) -> list[list[int]]:
    """[first, last, count] of each run of handshake cycles (gaps of at most RUN_GAP)."""
    runs: list[list[int]] = []
    for c in cycles:
        if runs and c - runs[-1][1] <= RUN_GAP:
            runs[-1][1], runs[-1][2] = c, runs[-1][2] + 1
        else:
            runs.append([c, c, 1])
    return runs


@cocotb.test()
async def timeline(dut):
    tb = StepTB(dut, random.Random(f"{cocotb.RANDOM_SEED}-timeline"), "none")
    masks, layers = tb.params["timeline_masks"], tb.params["timeline_layers"]
    plan = tb.plan(masks)
    first = next(b for b in plan if b.kind.name.lower() == tb.params["timeline_kind"])
    batches = [b for b in plan if b.pass_index == first.pass_index and b.layer < layers]
    await tb.reset()
    tb.add_streams()
    handles = {name: (_signal(dut, v), _signal(dut, r)) for name, (v, r) in PROBES.items()}
    seen: dict[str, list[int]] = {name: [] for name in PROBES}
    monitor = tb.monitor

    async def sample():
        while True:
            await RisingEdge(dut.clk)
            for name, (valid, ready) in handles.items():
                v, r = valid.value, ready.value
                if v.is_resolvable and r.is_resolvable and int(v) and int(r):
                    seen[name].append(monitor.cycle)

    sampler = cocotb.start_soon(sample())
    want, _, _, timelines = await tb.play(batches, masks)
    sampler.cancel()
    name = f"timeline/{masks}"
    mismatches = tb.compare(name, f"{masks} reference", want)
    await tb.check_idle()
    entries = []
    for layer in timelines:
        start, end = layer["start"], layer["end"]
        entries.append({"layer": layer["layer"], "start": start, "end": end,
                        "probes": {name: runs_of([c - start for c in cycles if start <= c <= end])
                                   for name, cycles in seen.items()}})
    tb.record(name, {"layers": entries, "run_gap": RUN_GAP, "mismatches": mismatches})
