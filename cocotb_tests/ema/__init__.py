"""cocotb bench of the EMA controller (bench.py), its utilization benchmark (utilization.py), and
the functions that run them."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

from edgexpert.hw.ema import EmaSystem
from edgexpert.cocotb_tests.runner import SimResult, run_cocotb
from edgexpert.support.tools import build_root
from edgexpert.contracts.weight_layout import WeightLayout

__all__ = ["BENCH_MODULE", "UTILIZATION_MODULE", "BENCH_LAYOUT", "BENCH_CASES",
           "bench_tests", "run_bench", "UTILIZATION_CASES", "UTILIZATION_LATENCIES",
           "run_utilization", "golden_mask_trace"]

BENCH_MODULE = "edgexpert.cocotb_tests.ema.bench"
UTILIZATION_MODULE = "edgexpert.cocotb_tests.ema.utilization"

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
                   "bus_error/slverr", "bus_error/decerr", "bus_errors_random", "reset_mid_burst",
                   "command_errors"])


def _system(layout: WeightLayout, hw: dict) -> EmaSystem:
    return EmaSystem(layout, data_width=hw["data_width"], addr_width=hw.get("addr_width", 32),
                     outstanding=hw["outstanding"], buffer_bytes=hw["buffer_bytes"],
                     buffer_banks=hw["buffer_banks"], slots=hw["slots"])


#: error cases of `bus_errors_random` in the test suite; the benchmark run
#: (cocotb_tests/ema/test_ema.py::test_ema_error_seeds) takes ERROR_SEEDS_BENCHMARK
ERROR_CASES_CI = 6
ERROR_SEEDS_BENCHMARK = 100


def run_bench(case: str, simulator: str | None = None, seed: int = 20261129,
              waves: bool | None = None, error_cases: int = ERROR_CASES_CI,
              error_seed: int | None = None, testcase: str | None = None,
              memory: dict | None = None, test_filter: str | None = None) -> SimResult:
    """Run every test of the EMA bench for one parameter set (or only `testcase`, or those
    `test_filter` matches); raises SimError on any failure. `bus_errors_random` runs
    `error_cases` cases, seeded `error_seed`, `error_seed + 1`, ... (default: `seed`).
    `memory`: `sim.perf.ema_model.bench_memory`'s parameters (default: the latency memory)."""
    hw = BENCH_CASES[case]
    masks = build_root() / "bench" / "ema" / f"golden_masks-{case}.json"
    golden_mask_trace(BENCH_LAYOUT, hw, masks, max_steps=3)
    params = {**hw, "layout": asdict(BENCH_LAYOUT), "trace_file": str(masks),
              "error_cases": error_cases, "error_seed": seed if error_seed is None else error_seed,
              "memory": memory or {"memory": "latency"}}
    if testcase is not None:
        test_filter = rf"\.{testcase}$"
    # the memory is the bench's, not the RTL's: every memory shares the case's build folder
    return run_cocotb(_system(BENCH_LAYOUT, hw), toplevel="ema_system", test_module=BENCH_MODULE,
                      case=case if testcase is None else f"{case}-{testcase}", params=params,
                      simulator=simulator, seed=seed, waves=waves, test_filter=test_filter,
                      progress_total=1 if testcase else 0 if test_filter else len(bench_tests()))


def run_utilization(layout: WeightLayout, hw: dict, trace_file: Path, seed: int = 20261129,
                    simulator: str = "verilator", waves: bool = False,
                    memory: dict | None = None) -> SimResult:
    """The bus-utilization benchmark (not a test): every case of UTILIZATION_CASES at every
    latency of UTILIZATION_LATENCIES on the latency memory, or once on the DRAM `memory`
    (`sim.perf.ema_model.bench_memory`'s parameters), on the given hardware and model shape.
    `waves` records the whole run (about a million cycles: a large file)."""
    params = {**hw, "layout": asdict(layout), "trace_file": str(trace_file),
              "memory": memory or {"memory": "latency"}}
    case = "bench-{data_width}b-o{outstanding}".format(**hw)
    runs = len(UTILIZATION_LATENCIES) if params["memory"]["memory"] == "latency" else 1
    return run_cocotb(_system(layout, hw), toplevel="ema_system", test_module=UTILIZATION_MODULE,
                      case=case, params=params, simulator=simulator, seed=seed, waves=waves,
                      progress_total=len(UTILIZATION_CASES) * runs)


def golden_mask_trace(layout: WeightLayout, hw: dict, out: Path, ratio: float = 0.5,
                      prompts: int = 2, new_tokens: int = 16, max_steps: int | None = None) -> str:
    """Write the golden model's depth-coalesced channel masks (edgexpert.golden.traces.masks) for this
    layout and hardware to `out`; returns their source label.

    The layout of the bundled checkpoint gets the trained model on the bundled held-out prompts
    ("golden"). Any other layout gets a golden model of that shape with seeded random weights on
    seeded random prompts ("golden, random weights"): the same decoding, tracing and selection,
    but its routing and activations are those of an untrained model."""
    import torch

    from edgexpert.contracts.config import load_config
    from edgexpert.golden.lm.checkpoint import load_checkpoint
    from edgexpert.golden.lm.corpus import load_corpus
    from edgexpert.golden.decoding.decode import decode_speculative
    from edgexpert.golden.integer.int_model import quantize_model
    from edgexpert.golden.traces.masks import coalesced_masks
    from edgexpert.golden.lm.model import MoEModel
    from edgexpert.golden.lm.prompts import load_prompts
    from edgexpert.golden.traces.decode_trace import build_trace
    from edgexpert.contracts.mask_trace import write_mask_trace
    from edgexpert.contracts.ema import Descriptor
    from edgexpert.golden.blocks.ema import EmaReference

    ckpt = load_checkpoint()
    if WeightLayout.for_model(ckpt.model.cfg) == WeightLayout(**{**asdict(layout), "base_address": 0}):
        model, label = ckpt.model, "golden"
        token_lists = load_prompts(load_corpus(), ckpt.tokenizer)[:prompts]
    else:
        heads = 2
        cfg = load_config(overrides=[
            f"model.d_model={layout.d_model}", f"model.n_layers={layout.n_layers}",
            f"model.n_heads={heads}", f"model.n_experts={layout.n_experts}",
            f"model.top_k={min(4, layout.n_experts)}", f"model.expert_ffn={layout.expert_ffn}",
            f"model.n_shared_experts={layout.n_shared_experts}", "model.vocab_size=256",
            "model.max_seq_len=128", "train.seq_len=64"]).model
        torch.manual_seed(20261129)
        model, label = MoEModel(cfg).eval(), "golden, random weights"
        gen = torch.Generator().manual_seed(20261129)
        token_lists = [torch.randint(0, 256, (24,), generator=gen).tolist() for _ in range(prompts)]
    decode = load_config(overrides=[f"decode.max_new_tokens={new_tokens}"]).decode
    engine = quantize_model(model)
    runs = [decode_speculative(engine, p, decode, keep_traces=True) for p in token_lists]
    trace = build_trace(runs, model.cfg, decode, {"mask_source": label})
    reference = EmaReference(layout, hw["data_width"] // 8, hw["buffer_bytes"], hw["slots"])

    def fits(entries) -> bool:
        try:
            reference.step(Descriptor(0, e.layer, e.expert, e.matrix, e.channels, True)
                           for e in entries)
        except ValueError:
            return False
        return True

    masks = coalesced_masks(trace, ratio, fits, max_steps, label)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_mask_trace(out, masks)
    return masks.source
