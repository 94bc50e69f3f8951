"""cocotb bench of the prompt routing unit (bench.py), the traces it runs on, and the function
that runs it.

Two hardware cases: `e32`, the bundled model's shape (32 experts, top-4, 4 layers) on the golden
integer model's prefill traces of bundled prompts plus synthetic corner prompts; `e128`,
Qwen3-30B-A3B's routing (128 experts, top-8) on synthetic prompts only (no checkpoint of that
shape is bundled). A synthetic prompt's logits do not come from a model (golden's
`synthetic_prefill_trace` routes them by the contract)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from edgexpert.support.tools import build_root
from edgexpert.hw.pru import Pru, PRU_LOGIT_LANES, PRU_MAX_TOKENS
from edgexpert.cocotb_tests.runner import SimResult, run_cocotb

__all__ = ["BENCH_MODULE", "CHAIN_MODULE", "CHAIN_EMA", "BENCH_CASES", "MAX_TOKENS", "LANES",
           "CI_RUN", "FULL_RUN", "bench_tests", "run_bench", "run_chain", "bundled_prefill_trace",
           "corner_prefill_trace"]

BENCH_MODULE = "edgexpert.cocotb_tests.pru.bench"
CHAIN_MODULE = "edgexpert.cocotb_tests.pru.chain"
#: the chained bench's EMA: the DCU chain's (the default bus, a smaller buffer and slot table,
#: quick to build), so a chunk's experts take several steps
CHAIN_EMA = {"data_width": 256, "addr_width": 32, "outstanding": 16, "buffer_bytes": 65536,
             "buffer_banks": 4, "slots": 16}
#: the longest prompt and the logits per beat: the registry's (edgexpert.blocks)
MAX_TOKENS = PRU_MAX_TOKENS
LANES = PRU_LOGIT_LANES
#: model overrides per case (the bundled config's other fields; budgets within top_k)
BENCH_CASES = {
    "e32": {"overrides": []},
    "e128": {"overrides": ["model.n_experts=128", "model.top_k=8", "model.n_layers=2"]},
}
#: what the test command runs (about a minute of simulation per simulator); the benchmark runs
#: every bundled prompt and both backpressure modes
CI_RUN = {"bundled_prompts": 1, "modes": ("random",)}
FULL_RUN = {"bundled_prompts": 8, "modes": ("none", "random")}


def bench_tests(case: str, bundled_prompts: int, modes) -> list[str]:
    """Names of the cocotb tests the bench runs (what its report holds)."""
    traces = ["corners"] + (["bundled"] if bundled_prompts and case == "e32" else [])
    return sorted(f"{t}/{m}" for t in traces for m in modes)


def _config(case: str):
    from edgexpert.contracts.config import load_config
    return load_config(overrides=BENCH_CASES[case]["overrides"])


def bundled_prefill_trace(out: Path, prompts: int, progress: bool = False,
                          tokens: int | None = None) -> Path:
    """The golden integer model's prefill trace of the first `prompts` bundled prompts (each cut
    to a prefill pass of `tokens` tokens if given), scored by the integer encoder: encoder,
    model and PRU all on the A8W4 path."""
    from edgexpert.contracts.prefill_trace import write_prefill_trace
    from edgexpert.golden.lm.checkpoint import load_checkpoint
    from edgexpert.golden.lm.corpus import load_corpus
    from edgexpert.golden.integer.int_model import quantize_model
    from edgexpert.golden.policies.prefill import load_encoder
    from edgexpert.golden.traces.prefill_trace import build_prefill_trace
    from edgexpert.golden.lm.prompts import load_prompts

    ckpt = load_checkpoint()
    encoder, _ = load_encoder(ckpt.model)
    chosen = load_prompts(load_corpus(), ckpt.tokenizer)[:prompts]
    if tokens is not None:      # the prefill pass takes all but the last token
        chosen = [p[:tokens + 1] for p in chosen]
    policies = _config("e32").policies
    policies = dataclasses.replace(policies, prefill=dataclasses.replace(policies.prefill,
                                                                         encoder="int"))
    trace = build_prefill_trace(quantize_model(ckpt.model), encoder, policies, chosen,
                                {"prompts": f"bundled[:{prompts}]"}, progress)
    return write_prefill_trace(trace, out)


def corner_prefill_trace(case: str, out: Path, seed: int) -> Path:
    """Synthetic prompts: 1 token; the longest (MAX_TOKENS) with random logits; all major (equal
    scores); all trivial (scores far below tau_minor, so S is empty); all trivial but one major;
    and tied logits (four values, so most keys tie)."""
    import torch

    from edgexpert.contracts.prefill_trace import write_prefill_trace
    from edgexpert.golden.traces.prefill_trace import prefill_settings, synthetic_prefill_trace

    config = _config(case)
    m = config.model
    gen = torch.Generator().manual_seed(seed)

    def logits(t, spread=8 * 65536):
        return torch.randint(-spread, spread, (t, m.n_layers, m.n_experts), generator=gen)

    def uniform(t):
        return torch.full((t,), -(-65536 // t))     # rounded up: r = s t >= 1.0 for every token

    def spread_scores(t):      # r = s t spread over 0..2: every class
        return torch.randint(0, 2 * 65536 // t, (t,), generator=gen)

    trivial = torch.full((20,), 65536 // (20 * 4))    # r = 0.25 each: all trivial, S empty
    one_major = trivial.clone()
    one_major[0] = 65536 - int(trivial[1:].sum())
    prompts = [
        (torch.tensor([65536]), logits(1)),
        (spread_scores(MAX_TOKENS), logits(MAX_TOKENS)),
        (uniform(24), logits(24)),
        (trivial, logits(20)),
        (one_major, logits(20)),
        (spread_scores(30), torch.randint(-2, 2, (30, m.n_layers, m.n_experts), generator=gen) * 65536),
    ]
    trace = synthetic_prefill_trace(m, prefill_settings(config.policies), prompts,
                                    {"prompts": "synthetic corners", "seed": seed})
    return write_prefill_trace(trace, out)


def run_bench(case: str, simulator: str | None = None, seed: int = 20261129,
              waves: bool | None = None, bundled_prompts: int = CI_RUN["bundled_prompts"],
              modes=CI_RUN["modes"]) -> SimResult:
    """Run the PRU bench for one case: the corner prompts and (32 experts only: the bundled
    model's shape) the first `bundled_prompts` bundled prompts, each under every backpressure
    mode of `modes`; raises SimError on any failure."""
    from edgexpert.contracts.prefill_trace import read_prefill_trace
    from edgexpert.cocotb_tests.pru.vectors import pru_params

    folder = build_root() / "bench" / "pru"
    corners = corner_prefill_trace(case, folder / f"corners-{case}.npz", seed)
    traces = {"corners": {"file": str(corners), "modes": list(modes)}}
    if bundled_prompts and case == "e32":
        bundled = bundled_prefill_trace(folder / f"bundled-{bundled_prompts}.npz", bundled_prompts)
        traces["bundled"] = {"file": str(bundled), "modes": list(modes)}
    params = pru_params(read_prefill_trace(corners), MAX_TOKENS, LANES)
    name = f"{case}-p{bundled_prompts}-{'-'.join(modes)}"
    return run_cocotb(Pru(params), toplevel="pru", test_module=BENCH_MODULE, case=name,
                      params={"traces": traces, "case": case}, simulator=simulator, seed=seed,
                      waves=waves)


def run_chain(simulator: str = "verilator", seed: int = 20261129, latency: int = 40) -> SimResult:
    """The PRU -> EMA chained bench (chain.py): the first bundled prompt's first chunk
    (`policies.prefill.chunk` tokens) in its first layer, the PRU's registry parameters with
    n_layers = 1 and its EMA steps sized for CHAIN_EMA; raises SimError on any failure."""
    from edgexpert.contracts.prefill_trace import read_prefill_trace
    from edgexpert.cocotb_tests.pru.vectors import pru_params
    from edgexpert.golden.blocks.pru import experts_per_step
    from edgexpert.hw.pru.chain import PruEma

    chunk = _config("e32").policies.prefill.chunk
    trace_file = bundled_prefill_trace(build_root() / "bench" / "pru" / f"chain-{chunk}.npz", 1,
                                       tokens=chunk)
    trace = read_prefill_trace(trace_file)
    layout = trace.layout
    per_step = experts_per_step(layout, CHAIN_EMA["data_width"] // 8, CHAIN_EMA["buffer_bytes"],
                                CHAIN_EMA["slots"])
    params = dataclasses.replace(pru_params(trace, MAX_TOKENS, LANES), n_layers=1,
                                 experts_per_step=per_step)
    bench = {"trace": str(trace_file), "pru": dataclasses.asdict(params),
             "layout": dataclasses.asdict(layout), "ema": CHAIN_EMA, "latency": latency}
    return run_cocotb(PruEma(params, layout, CHAIN_EMA), toplevel="pru_ema",
                      test_module=CHAIN_MODULE, case="chain", params=bench, simulator=simulator,
                      seed=seed)
