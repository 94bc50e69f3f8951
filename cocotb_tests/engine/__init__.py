"""cocotb bench of the expert engine (bench.py), its host side (host.py) and the functions that
prepare its golden vectors and run it.

The vectors are real: the bundled checkpoint's integer path decodes a short prompt
speculatively (golden/decoding/decode.py) and its trace (edgexpert.contracts.trace) gives every MoE
input, routing, hidden vector and output; the bundled weights packed by
`edgexpert.contracts.weight_image` give the bytes the columns are read from.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from edgexpert.contracts.config import Config, DecodeConfig, ModelConfig, load_config
from edgexpert.support.tools import build_root
from edgexpert.hw.emit import Design
from edgexpert.hw.engine import ExpertEngine
from edgexpert.cocotb_tests.runner import SimResult, run_cocotb

__all__ = ["BENCH_MODULE", "BENCH_CASES", "TRACE_PROMPT", "TRACE_DECODE", "bench_decode",
           "vectors_key", "prepare_vectors", "write_image", "bench_tests", "run_bench"]

BENCH_MODULE = "edgexpert.cocotb_tests.engine.bench"

#: the hardware set of the pytest wrapper (on Icarus and Verilator) at the bundled model's
#: d_model and expert_ffn: the defaults (hardware.engine.*, the EMA's 256-bit buffer word with
#: one word's 64 products per cycle); tests/test_engine_sim.py covers other widths
BENCH_CASES = {
    "c4w256": {"candidates": 4, "lanes": 64, "word_bits": 256, "tokens": 8},
}
#: the prompt the trace decodes, and the decoding settings that keep its step short (a user's
#: own prompt, `edgexpert bench top --prompt`, gets them too where the user set none)
TRACE_PROMPT = "def add(a, b):\n    return"
TRACE_DECODE = {"max_new_tokens": 2, "max_depth": 3, "max_candidates": 16}


def bench_tests() -> list[str]:
    """Names of the cocotb tests the bench runs (what its report holds)."""
    return sorted(["trace_rows/none", "trace_rows/random"])


def bench_decode(config: Config | None = None) -> DecodeConfig:
    """The decoding settings the bench's trace is made with: `config`'s (default: the bundled
    ones) with TRACE_DECODE over every setting of it the configuration leaves at its default, so
    a step stays short unless the user asks for a longer one (`--set decode.max_depth=6`)."""
    bundled = load_config().decode
    decode = bundled if config is None else config.decode
    short = {k: v for k, v in TRACE_DECODE.items() if getattr(decode, k) == getattr(bundled, k)}
    return dataclasses.replace(decode, **short)


def vectors_key(prompt: str = TRACE_PROMPT, decode: DecodeConfig | None = None,
                model: ModelConfig | None = None) -> dict:
    """What the trace and image of `prepare_vectors` depend on: the prompt, every decoding
    setting and the model (its shape and which bundled checkpoint)."""
    decode = bench_decode() if decode is None else decode
    model = load_config().model if model is None else model
    return {"prompt": prompt, "decode": dataclasses.asdict(decode),
            "model": dataclasses.asdict(model), "version": 2}


def prepare_vectors(out: Path | None = None, prompt: str = TRACE_PROMPT,
                    decode: DecodeConfig | None = None, model: ModelConfig | None = None) -> dict:
    """Write (once) the trace of the bundled checkpoint `model` names (default: the bundled
    configuration's) decoding `prompt` with `decode` (default `bench_decode()`) and that
    checkpoint's expert weights' memory image under `out` (default build/bench/engine/); return
    their paths. A stamp holds `vectors_key`: any change rewrites both."""
    out = Path(out) if out is not None else build_root() / "bench" / "engine"
    trace_path, image_path = out / "trace.npz", out / "image.bin"
    stamp = out / "vectors.json"
    key = vectors_key(prompt, decode, model)
    if not (trace_path.is_file() and image_path.is_file() and stamp.is_file()
            and json.loads(stamp.read_text()) == key):
        out.mkdir(parents=True, exist_ok=True)
        _write_vectors(trace_path, image_path, prompt, DecodeConfig(**key["decode"]),
                       ModelConfig(**key["model"]))
        stamp.write_text(json.dumps(key, sort_keys=True))
    return {"trace": str(trace_path), "image": str(image_path)}


def _write_vectors(trace_path: Path, image_path: Path, text: str, decode: DecodeConfig,
                   model: ModelConfig) -> None:
    # torch and the golden model load only here: the bench itself reads the files
    import torch

    from edgexpert.contracts.trace import write_trace
    from edgexpert.golden.lm.checkpoint import load_bundled
    from edgexpert.golden.decoding.decode import decode_speculative
    from edgexpert.golden.integer.int_model import load_int_model
    from edgexpert.golden.lm.prompts import text_prompts
    from edgexpert.golden.traces.decode_trace import build_trace

    checkpoint = load_bundled(model)
    torch.manual_seed(decode.seed)
    # the process's one quantized model of the checkpoint: the masked outputs reuse it
    engine = load_int_model(checkpoint.path, checkpoint.model)
    room = checkpoint.model.cfg.max_seq_len - decode.max_new_tokens - decode.max_depth
    prompt, = text_prompts([text], checkpoint.tokenizer, max(room, 0))
    run = decode_speculative(engine, prompt, decode, keep_traces=True)
    trace = build_trace([run], checkpoint.model.cfg, decode,
                        {"bench": "engine", "prompt": text, "checkpoint": str(checkpoint.path)})
    write_trace(trace, trace_path)
    write_image(engine, image_path, decode.seed)


def write_image(engine, image_path: Path, junk_seed: int) -> None:
    """The memory image of an integer model's (`IntModel.expert_weights`) expert weights,
    packed by `edgexpert.contracts.weight_image` (`junk_seed`: the bytes between the experts)."""
    from edgexpert.contracts.weight_image import memory_image
    from edgexpert.contracts.weight_layout import WeightLayout

    image = memory_image(WeightLayout.for_model(engine.cfg), engine.expert_weights(),
                         junk_seed=junk_seed)
    image_path.write_bytes(bytes(image))


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
