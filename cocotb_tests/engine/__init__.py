"""cocotb bench of the expert engine (bench.py), its host side (host.py) and the functions that
prepare its golden vectors and run it.

The vectors are real: the bundled checkpoint's integer path decodes a short prompt
speculatively (golden/decoding/decode.py) and its trace (edgexpert.contracts.trace) gives every MoE
input, routing, hidden vector and output; the bundled weights packed by
`edgexpert.contracts.weight_image` give the bytes the columns are read from.
"""

from __future__ import annotations

import json
from pathlib import Path

from edgexpert.support.tools import build_root
from edgexpert.hw.emit import Design
from edgexpert.hw.engine import ExpertEngine
from edgexpert.cocotb_tests.runner import SimResult, run_cocotb

__all__ = ["BENCH_MODULE", "BENCH_CASES", "TRACE_PROMPT", "prepare_vectors", "bench_tests",
           "run_bench"]

BENCH_MODULE = "edgexpert.cocotb_tests.engine.bench"

#: the hardware set of the pytest wrapper (on Icarus and Verilator) at the bundled model's
#: d_model and expert_ffn: the defaults (hardware.engine.*, the EMA's 256-bit buffer word with
#: one word's 64 products per cycle); tests/test_engine_sim.py covers other widths
BENCH_CASES = {
    "c4w256": {"candidates": 4, "lanes": 64, "word_bits": 256, "tokens": 8},
}
#: the prompt the trace decodes, and the decoding settings that keep its step short
TRACE_PROMPT = "def add(a, b):\n    return"
TRACE_DECODE = {"max_new_tokens": 2, "max_depth": 3, "max_candidates": 16}


def bench_tests() -> list[str]:
    """Names of the cocotb tests the bench runs (what its report holds)."""
    return sorted(["trace_rows/none", "trace_rows/random"])


def prepare_vectors(out: Path | None = None) -> dict:
    """Write (once) the trace of the bundled checkpoint decoding TRACE_PROMPT and the bundled
    expert weights' memory image under `out` (default build/bench/engine/); return their paths."""
    out = Path(out) if out is not None else build_root() / "bench" / "engine"
    trace_path, image_path = out / "trace.npz", out / "image.bin"
    stamp = out / "vectors.json"
    key = {"prompt": TRACE_PROMPT, "decode": TRACE_DECODE, "version": 1}
    if not (trace_path.is_file() and image_path.is_file() and stamp.is_file()
            and json.loads(stamp.read_text()) == key):
        _write_vectors(trace_path, image_path)
        stamp.write_text(json.dumps(key, sort_keys=True))
    return {"trace": str(trace_path), "image": str(image_path)}


def _write_vectors(trace_path: Path, image_path: Path) -> None:
    # torch and the golden model load only here: the bench itself reads the files
    import dataclasses

    import numpy as np
    import torch

    from edgexpert.contracts.trace import write_trace
    from edgexpert.contracts.weight_image import ExpertWeights, memory_image
    from edgexpert.contracts.weight_layout import WeightLayout
    from edgexpert.golden.lm.checkpoint import load_checkpoint
    from edgexpert.golden.decoding.decode import decode_speculative
    from edgexpert.golden.integer.int_model import IntModel
    from edgexpert.golden.traces.decode_trace import build_trace
    from edgexpert.contracts.config import load_config

    config = load_config()
    decode = dataclasses.replace(config.decode, **TRACE_DECODE)
    checkpoint = load_checkpoint()
    torch.manual_seed(decode.seed)
    engine = IntModel(checkpoint.model.eval())
    prompt = checkpoint.tokenizer.encode(TRACE_PROMPT).ids
    run = decode_speculative(engine, prompt, decode, keep_traces=True)
    trace = build_trace([run], checkpoint.model.cfg, decode,
                        {"bench": "engine", "prompt": TRACE_PROMPT})
    write_trace(trace, trace_path)
    layout = WeightLayout.for_model(checkpoint.model.cfg)
    weights = {}
    for layer, w in enumerate(engine.layers):
        for e in range(layout.n_experts):
            weights[layer, e] = ExpertWeights(
                gate=w["gate"].q[e].numpy(), up=w["up"].q[e].numpy(), down=w["down"].q[e].numpy(),
                scales_gate_up=np.concatenate([w["gate"].words[e].numpy(),
                                               w["up"].words[e].numpy()]).astype(np.uint16),
                scales_down=w["down"].words[e].numpy().astype(np.uint16))
    image_path.write_bytes(bytes(memory_image(layout, weights, junk_seed=decode.seed)))


def run_bench(case: str, simulator: str | None = None, seed: int = 20261129,
              waves: bool | None = None, selection: str = "ci") -> SimResult:
    """Run every test of the engine bench for one hardware set on the golden trace rows of
    `selection` ("ci": a draft pass and a verify token of one layer; "step": every row of
    the decode step, all layers); raises SimError on any failure."""
    hw = BENCH_CASES[case]
    vectors = prepare_vectors()
    from edgexpert.contracts.trace import read_trace
    model = read_trace(Path(vectors["trace"])).model
    # a Design, not a built engine: both simulators' cases elaborate it once (hw/emit.py)
    engine = Design(ExpertEngine, (model.d_model, model.expert_ffn), hw)
    return run_cocotb(engine, toplevel="expert_engine", test_module=BENCH_MODULE,
                      case=f"{case}-{selection}", params={**hw, **vectors, "selection": selection},
                      simulator=simulator, seed=seed, waves=waves)
