"""cocotb bench of the EMA controller (bench.py), its utilization benchmark (utilization.py), and
the functions that run them."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

from edgexpert.hw.ema import EmaSystem
from edgexpert.sim.runner import SimResult, run_cocotb
from edgexpert.weight_layout import WeightLayout

__all__ = ["BENCH_MODULE", "UTILIZATION_MODULE", "GOLDEN_TRACE", "BENCH_LAYOUT", "BENCH_CASES",
           "bench_tests", "run_bench", "UTILIZATION_CASES", "UTILIZATION_LATENCIES",
           "run_utilization"]

BENCH_MODULE = "edgexpert.cocotb_tests.ema.bench"
UTILIZATION_MODULE = "edgexpert.cocotb_tests.ema.utilization"

#: The golden model's mask trace, once it writes one (a file read by
#: `edgexpert.mask_trace.read_mask_trace`). None: the benchmark and the bench use
#: `synthetic_standin_trace` and label their results "mask_source": "synthetic-standin".
GOLDEN_TRACE: Path | None = None

#: Small enough for quick runs, shaped to exercise the contract: F = 40 gives 40-byte GATE_UP
#: columns in a 64-byte stride (padding inside reads, reads ending mid-stride), a shared expert,
#: a base address that is not 0, and blocks that straddle 4 KB pages.
BENCH_LAYOUT = WeightLayout(n_layers=2, n_experts=3, d_model=64, expert_ffn=40,
                            n_shared_experts=1, base_address=0x3000)

#: hardware parameter sets the pytest wrapper runs (each on Icarus and on Verilator)
BENCH_CASES = {
    "w64": {"data_width": 64, "outstanding": 4, "buffer_bytes": 16384, "buffer_banks": 2,
            "slots": 8},
    "w256": {"data_width": 256, "outstanding": 16, "buffer_bytes": 16384, "buffer_banks": 4,
             "slots": 8},
}

UTILIZATION_CASES = ("dense", "trace", "random50")
UTILIZATION_LATENCIES = (20, 100)


def bench_tests() -> list[str]:
    """Names of the cocotb tests the bench runs (what its report holds)."""
    return sorted(["random_masks/none", "random_masks/random", "trace_masks", "dense_bursts",
                   "bus_error/slverr", "bus_error/decerr", "reset_mid_burst", "command_errors"])


def _system(layout: WeightLayout, hw: dict) -> EmaSystem:
    return EmaSystem(layout, data_width=hw["data_width"], addr_width=hw.get("addr_width", 32),
                     outstanding=hw["outstanding"], buffer_bytes=hw["buffer_bytes"],
                     buffer_banks=hw["buffer_banks"], slots=hw["slots"])


def run_bench(case: str, simulator: str | None = None, seed: int = 20261129,
              waves: bool | None = None) -> SimResult:
    """Run every test of the EMA bench for one parameter set; raises SimError on any failure."""
    hw = BENCH_CASES[case]
    params = {**hw, "layout": asdict(BENCH_LAYOUT)}
    return run_cocotb(_system(BENCH_LAYOUT, hw), toplevel="ema_system", test_module=BENCH_MODULE,
                      case=case, params=params, simulator=simulator, seed=seed, waves=waves)


def run_utilization(layout: WeightLayout, hw: dict, trace_file: Path, seed: int = 20261129,
                    simulator: str = "verilator") -> SimResult:
    """The bus-utilization benchmark (not a test): every case of UTILIZATION_CASES at every
    latency of UTILIZATION_LATENCIES, on the given hardware and model shape."""
    params = {**hw, "layout": asdict(layout), "trace_file": str(trace_file)}
    case = "bench-{data_width}b-o{outstanding}".format(**hw)
    return run_cocotb(_system(layout, hw), toplevel="ema_system", test_module=UTILIZATION_MODULE,
                      case=case, params=params, simulator=simulator, seed=seed, waves=False)
