"""Bus-utilization benchmark of the EMA controller (not a test: `edgexpert bench ema` runs it).

Utilization = R data beats / cycles while the engine has work (the BEATS and BUSY_CYCLES
counters), against the AXI peak of one beat per cycle. The latency memory answers every burst
after a fixed latency and then streams one beat per cycle; a DRAM memory (params["memory"],
cocotb_tests/axi_memory.py `DramAxiRam`) delivers each beat when the DRAM model has moved it.
Nothing else pauses. All steps of a case are sent back to back, as a host would queue them.

Cases (each at every latency of UTILIZATION_LATENCIES on the latency memory, once on a DRAM;
a run is named case/latency or case/memory):
- dense: whole GATE_UP and DOWN matrices with their scale blocks, a few experts per step;
- trace: the steps of the mask trace file (params["trace_file"]: by default the golden model's
  depth-coalesced masks; its "source" says), scale blocks included;
- random50: the trace's steps with one random half of each matrix's channels (each kept with
  probability 1/2 independently: short runs, the hard case for a burst engine).

Correctness is checked on the way (every completion OK, the AR sequence equal to the reference's),
so a fast but wrong engine cannot report a number.
"""

from __future__ import annotations

import os

import cocotb

from edgexpert.cocotb_tests.ema import UTILIZATION_CASES, UTILIZATION_LATENCIES
from edgexpert.cocotb_tests.ema.harness import EmaTB, decode_status
from edgexpert.contracts.ema import Descriptor, EmaError, EmaStatus, encode_step
from edgexpert.contracts.mask_trace import read_mask_trace
from edgexpert.sim.perf.ema_model import EmaParameters, bench_workload
from edgexpert.cocotb_tests.runner import bench_params, write_bench_report

_report: dict = {}


def _workload(tb: EmaTB, case: str) -> tuple[list[list[Descriptor]], str]:
    """The case's steps, built by the same definition the performance model calibrates on
    (`sim.perf.ema_model.bench_workload`), and where its masks come from."""
    trace_file = tb.params["trace_file"]
    params = EmaParameters(tb.g.data_width, tb.outstanding, tb.g.buffer_bytes, tb.g.slots)
    # the run's seed, not the test's (cocotb derives that from the test name): every latency
    # sees the same random masks
    steps = bench_workload(case, tb.layout, params, trace_file,
                           int(os.environ["COCOTB_RANDOM_SEED"]))
    source = {"dense": "dense", "random50": "random-50%"}.get(case)
    return _tagged(steps), source or read_mask_trace(trace_file, tb.layout).source


def _tagged(steps):
    n = 0
    out = []
    for step in steps:
        out.append([])
        for d in step:
            out[-1].append(Descriptor(n % 256, d.layer, d.expert, d.matrix, d.channels, d.scales))
            n += 1
    return out


# read at import: the memory decides the latencies cocotb.parametrize names when it collects
# the tests
MEMORY = bench_params().get("memory", {"memory": "latency"})["memory"]


@cocotb.test()
@cocotb.parametrize(case=list(UTILIZATION_CASES),
                    latency=list(UTILIZATION_LATENCIES) if MEMORY == "latency" else [0])
async def utilization(dut, case: str, latency: int):
    name = f"{case}/{latency if MEMORY == 'latency' else MEMORY}"
    tb = EmaTB(dut, f"utilization/{name}", latency=latency, record_writes=False)
    steps, source = _workload(tb, case)
    results = [tb.ref.step(step) for step in steps]
    words = [w for step in steps for w in encode_step(tb.layout, step)]
    await tb.reset()
    n = sum(len(r.completions) for r in results)
    bound = sum(tb.bound(r) for r in results)
    got = await tb.run_commands(words, n, bound)
    assert all(c.status == EmaStatus.OK for c in got)
    tb.monitor.assert_drained()
    assert [(a, b) for a, b, _ in tb.monitor.ars] == [b for r in results for b in tb.ref.bursts(r)]
    c = await tb.counters()
    assert decode_status(c["STATUS"])["code"] == EmaError.NONE
    _report[name] = {
        "case": case, "memory": MEMORY, "latency": latency if MEMORY == "latency" else None,
        "mask_source": source, "steps": len(steps),
        "descriptors": n, "beats": c["BEATS"], "bursts": c["BURSTS"], "bytes": c["BYTES"],
        "busy_cycles": c["BUSY_CYCLES"], "stall_cycles": c["STALL_CYCLES"],
        "utilization": round(c["BEATS"] / c["BUSY_CYCLES"], 4),
        "mean_burst_beats": round(c["BEATS"] / max(1, c["BURSTS"]), 2),
        "peak_outstanding": c["PEAK_OUTSTANDING"],
        "fetched_channels": c["FETCHED_CHANNELS"], "skipped_channels": c["SKIPPED_CHANNELS"],
    }
    if MEMORY != "latency":
        _report[name]["dram"] = tb.ram.report()
    write_bench_report({"seed": int(os.environ["COCOTB_RANDOM_SEED"]), "runs": _report})
