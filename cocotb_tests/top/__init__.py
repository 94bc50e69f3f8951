"""cocotb bench of the accelerator top (bench.py), its host model (host.py) and the functions
that prepare its vectors and run it.

The vectors are the engine bench's (cocotb_tests/engine: the bundled checkpoint's integer path
decoding a short prompt speculatively, and the bundled weights' memory image) plus, for the
EdgeXpert masks, the channels each group selects and the outputs golden's integer model gives
on them (`prepare_masked`, golden/traces/expert_outputs.py).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from edgexpert.cocotb_tests.engine import bench_decode, prepare_vectors, vectors_key, write_image
from edgexpert.contracts.config import Config, load_config
from edgexpert.contracts.cycles import TOP_MASKS
from edgexpert.support.tools import build_root
from edgexpert.contracts.trace import read_trace
from edgexpert.hw.emit import Design
from edgexpert.contracts.hardware import top_parameters
from edgexpert.hw.top import AcceleratorTop
from edgexpert.cocotb_tests.runner import SimResult, run_cocotb

__all__ = ["BENCH_MODULE", "FUZZ_MODULE", "PREFILL_MODULE", "BENCH_CASES", "LATENCY", "hardware",
           "prepare_masked", "prompt_vectors", "trace_vectors", "run_name", "step_rows",
           "check_hardware", "bench_tests", "step_filter", "run_bench", "time_simulators",
           "run_fuzz", "prefill_hardware", "run_prefill", "TIMELINE_MODULE", "run_timeline"]

BENCH_MODULE = "edgexpert.cocotb_tests.top.bench"
FUZZ_MODULE = "edgexpert.cocotb_tests.top.fuzz"
PREFILL_MODULE = "edgexpert.cocotb_tests.top.prefill_bench"
TIMELINE_MODULE = "edgexpert.cocotb_tests.top.timeline"

#: hardware sets besides "bundled" (the configuration's: 256 KiB buffer, 48 outstanding, 32
#: slots; the benchmark's). `ci`: the bundled engine (4 candidates, 64 lanes, 8 token slots)
#: and a 256-bit EMA with a 64 KiB buffer (three whole experts of the bundled model per step),
#: 16 outstanding reads and 8 slots, so the CI build and run stay short
BENCH_CASES = {
    "ci": {"ema": {"data_width": 256, "addr_width": 32, "outstanding": 16,
                   "buffer_bytes": 65536, "buffer_banks": 4, "slots": 8},
           "candidates": 4, "lanes": 64, "tokens": 8},
    # the fine model's CI piece (test_top_fine_model): a 64-bit bus, 2 candidates, 16 lanes,
    # the `ci` buffer and slots; the smaller engine's Verilator build is what keeps the test
    # short (the set docs/blocks/top.md's Verification names "a smaller set", 2026-12-02)
    "fine_ci": {"ema": {"data_width": 64, "addr_width": 32, "outstanding": 16,
                        "buffer_bytes": 65536, "buffer_banks": 4, "slots": 8},
                "candidates": 2, "lanes": 16, "tokens": 8},
}
#: the memory's latency in cycles from AR to the first beat: the EMA bench's trace case
LATENCY = 100


def hardware(case: str) -> dict:
    """The top's parameters of a hardware set: "bundled" or one of BENCH_CASES."""
    if case == "bundled":
        return top_parameters(load_config())
    return BENCH_CASES[case]


def bench_tests() -> list[str]:
    return sorted(f"trace_step/{masks}/{mode}" for masks in TOP_MASKS for mode in ("none", "random"))


def prepare_masked(trace_path: Path, tokens: int, candidates: int, out: Path | None = None,
                   ratio: float | None = None, trace=None) -> str:
    """Write (once) golden's EdgeXpert masks of every group the top runs (`top_groups`: at most
    `candidates` of a depth group and expert, in batches of at most `tokens` rows) and the
    outputs the integer model gives on them (golden/traces/expert_outputs.py); return the
    file's path. `trace`: the file already read, if it was."""
    ratio = load_config().policies.coalescing_ratio if ratio is None else ratio
    out = Path(out) if out is not None else build_root() / "bench" / "top"
    path = out / f"masked-{tokens}x{candidates}.npz"
    stamp = path.with_suffix(".json")
    digest = hashlib.sha256(Path(trace_path).read_bytes()).hexdigest()
    # version 2: groups of the top, DOWN selected on the hidden vectors of the masked GATE_UP
    key = {"trace": digest, "ratio": ratio, "tokens": tokens, "candidates": candidates,
           "version": 2}
    if not (path.is_file() and stamp.is_file() and json.loads(stamp.read_text()) == key):
        import numpy as np

        # torch and the golden model load only here
        from edgexpert.golden.traces.expert_outputs import masked_outputs
        from .host import top_groups
        trace = read_trace(Path(trace_path)) if trace is None else trace
        path.parent.mkdir(parents=True, exist_ok=True)
        np.savez_compressed(path, **masked_outputs(trace, top_groups(trace, tokens, candidates),
                                                   ratio))
        stamp.write_text(json.dumps(key, sort_keys=True))
    return str(path)


def _digest(data) -> str:
    """A short name for what a folder's files depend on (JSON-able data or bytes)."""
    raw = data if isinstance(data, bytes) else json.dumps(data, sort_keys=True).encode()
    return hashlib.sha256(raw).hexdigest()[:12]


def prompt_vectors(prompt: str, config: Config) -> dict:
    """The vectors of a user's prompt (`edgexpert bench top --prompt`): the bundled checkpoint
    `model.name` names decoding it with the bench's settings (`bench_decode`), in a folder
    build/bench/top/prompt-<digest>/ named by everything they depend on (`vectors_key`), so two
    prompts or settings never share a file. Returns the trace and image paths, the folder and
    its name."""
    decode = bench_decode(config)
    name = f"prompt-{_digest(vectors_key(prompt, decode, config.model))}"
    folder = build_root() / "bench" / "top" / name
    return {**prepare_vectors(folder, prompt, decode, config.model), "folder": str(folder),
            "name": name}


def trace_vectors(trace_file: Path) -> dict:
    """The vectors of a trace `edgexpert decode --traces` wrote (`edgexpert bench top
    --trace`): the file copied into build/bench/top/trace-<digest of its bytes>/ (a later
    rewrite of the user's file cannot change a run's vectors), and the memory image of the
    checkpoint its source names, whose model must be the trace's. A trace the top cannot
    replay raises InputError in one line."""
    import shutil

    from edgexpert.contracts.errors import InputError

    trace_file = Path(trace_file)
    trace = read_trace(trace_file)  # TraceError, one line, for a malformed file
    if trace.header.get("path") != "int":
        raise InputError(f"trace {trace_file} is of the {trace.header.get('path')!r} path: "
                         "accepted integer-path traces (edgexpert decode --traces, --path int)")
    checkpoint = trace.header.get("source", {}).get("checkpoint")
    if not checkpoint or not Path(checkpoint).is_dir():
        raise InputError(f"trace {trace_file} names no checkpoint folder here (source "
                         f"checkpoint {checkpoint!r}): accepted traces of `edgexpert decode "
                         "--traces` whose --checkpoint folder (or the bundled one) exists")
    weights = Path(checkpoint) / "model.safetensors"
    name = f"trace-{_digest(trace_file.read_bytes())}"
    folder = build_root() / "bench" / "top" / name
    folder.mkdir(parents=True, exist_ok=True)
    copy, image = folder / "trace.npz", folder / "image.bin"
    if not copy.is_file():
        shutil.copyfile(trace_file, copy)
    stamp = folder / "image.json"
    key = {"weights": hashlib.sha256(weights.read_bytes()).hexdigest(),
           "seed": trace.header["decode"]["seed"], "version": 1}
    if not (image.is_file() and stamp.is_file() and json.loads(stamp.read_text()) == key):
        # torch loads only here; the masked outputs (`prepare_masked`) reuse the model
        from edgexpert.golden.integer.int_model import load_int_model
        engine = load_int_model(checkpoint)
        if engine.cfg != trace.model:
            raise InputError(f"trace {trace_file} was not decoded by checkpoint {checkpoint} "
                             f"(its model differs): accepted the checkpoint the trace names")
        write_image(engine, image, key["seed"])
        stamp.write_text(json.dumps(key, sort_keys=True))
    return {"trace": str(copy), "image": str(image), "folder": str(folder), "name": name}


def run_name(hw: dict, selection: str, ratio: float) -> str:
    """What a user's run on its vectors depends on besides them: the rows, the hardware (a
    digest) and the coalescing ratio; names its case and its results' folder."""
    return f"{selection.replace('=', '')}-hw{_digest(hw)}-r{ratio:g}"


def step_rows(trace, step: int | None) -> list[int]:
    """The trace rows of decoding step `step` of the trace's first prompt (None: every row);
    a step the trace does not hold raises ValueError naming the steps it does."""
    rows_of = trace["row_prompt"] == trace["row_prompt"].min()
    steps = sorted(set(trace["row_step"][rows_of].tolist()))
    if step is None:
        return list(range(len(trace["row_pass"])))
    if step not in steps:
        raise ValueError(f"step {step} is not in the trace: accepted {steps[0]}..{steps[-1]} "
                         "(the first prompt's decoding steps)")
    return [int(r) for r in (rows_of & (trace["row_step"] == step)).nonzero()[0]]


def check_hardware(layout, hw: dict, trace, rows: list[int]) -> AcceleratorTop:
    """The top built at `hw` (what `run_bench` then simulates), once its EMA is known to hold
    every group of `rows` with whole experts (the most a group fetches); ValueError naming the
    setting otherwise, before any Verilog is built."""
    from edgexpert.hw.ema import EmaGeometry
    from .host import plan_batches
    try:
        top = AcceleratorTop(layout, **hw)
    except ValueError as exc:
        raise ValueError(f"hardware.ema: {exc}") from None
    except TypeError as exc:  # lanes that do not divide the buffer word's int4 values
        raise ValueError(f"hardware.engine: {exc}") from None
    ema = hw["ema"]
    try:
        plan_batches(trace, None, rows, hw["candidates"], hw["tokens"],
                     EmaGeometry(layout, ema["data_width"], ema["buffer_bytes"], ema["slots"]))
    except ValueError as exc:
        raise ValueError(f"hardware.ema.buffer_bytes = {ema['buffer_bytes']}, hardware.ema.slots"
                         f" = {ema['slots']}: {exc}; accepted a buffer and slots that hold one "
                         "whole expert's group") from None
    return top


def run_bench(case: str, simulator: str | None = None, seed: int = 20261129,
              waves: bool | None = None, selection: str = "ci",
              test_filter: str | None = None, progress_total: int = 0,
              memory: dict | None = None, vectors: dict | None = None, hw: dict | None = None,
              ratio: float | None = None, top: AcceleratorTop | None = None,
              test_module: str = BENCH_MODULE, extra: dict | None = None) -> SimResult:
    """Run the top bench for one hardware set on the trace rows of `selection` ("ci": a draft
    pass and two batches of the verification pass in layer 0; "ci_first_batch": its first;
    "step": every row of the trace; "first_step": the first prompt's first decoding step, its
    draft and verification passes, all layers;
    "drafts": that step's draft passes only; "step=N": the first prompt's decoding step N).
    `memory`: `sim.perf.ema_model.bench_memory`'s parameters (default: the latency memory at
    LATENCY cycles). A user's run: `vectors` (`prompt_vectors`, `trace_vectors`; default the
    engine bench's), `hw` (the top's parameters; default the hardware set `case` names) and
    `ratio` (policies.coalescing_ratio; default the bundled one), and the top `check_hardware`
    built at `hw`; its case is named after the hardware and the vectors, so no other run shares
    its folder. `test_module` and `extra` (more bench parameters) serve `run_timeline`."""
    hw = hardware(case) if hw is None else hw
    ratio = load_config().policies.coalescing_ratio if ratio is None else ratio
    files = prepare_vectors() if vectors is None else {k: vectors[k] for k in ("trace", "image")}
    # read once here for the Design and the masked outputs (a given top's caller read it)
    trace = read_trace(Path(files["trace"])) if top is None else None
    files["masked"] = prepare_masked(Path(files["trace"]), hw["tokens"], hw["candidates"],
                                     out=None if vectors is None else Path(vectors["folder"]),
                                     ratio=ratio, trace=trace)
    if top is None:
        # a Design, not a built top: the cases of one hardware set elaborate it once
        # (hw/emit.py)
        top = Design(AcceleratorTop, (trace.layout,), hw)
    # the memory is the bench's, not the RTL's: one build for every memory
    name = f"{case}-{selection}"
    if vectors is not None:
        name = f"{case}-{vectors['name']}-{run_name(hw, selection, ratio)}"
    return run_cocotb(top, toplevel="accelerator_top", test_module=test_module, case=name,
                      params={**hw, **files, "ratio": ratio, "selection": selection,
                              "latency": LATENCY, "memory": memory or {"memory": "latency"},
                              **(extra or {})},
                      simulator=simulator, seed=seed, waves=waves, test_filter=test_filter,
                      progress_total=progress_total)


#: the passes `run_timeline` takes, and the trace rows (`run_bench`'s selection) that hold them
TIMELINE_KINDS = {"draft": "drafts", "verify": "first_step"}


def run_timeline(masks: str, layers: int, seed: int = 20261129, kind: str = "draft") -> dict:
    """The first `layers` layers of the bundled prompt's first pass of `kind` ("draft" or
    "verify") through the bundled top with `masks`, on Icarus, with the internal streams'
    handshakes (cocotb_tests/top/timeline.py); returns its report entry."""
    if masks not in TOP_MASKS:
        raise ValueError(f"masks = {masks!r}: accepted {', '.join(TOP_MASKS)}")
    if not isinstance(layers, int) or not 1 <= layers <= 64:
        raise ValueError(f"layers = {layers!r}: accepted 1..64")
    if kind not in TIMELINE_KINDS:
        raise ValueError(f"kind = {kind!r}: accepted {', '.join(TIMELINE_KINDS)}")
    result = run_bench("bundled", "icarus", seed=seed, selection=TIMELINE_KINDS[kind],
                       test_module=TIMELINE_MODULE,
                       extra={"timeline_masks": masks, "timeline_layers": layers,
                              "timeline_kind": kind})
    return result.report["tests"][f"timeline/{masks}"]


def step_filter(masks: list[str], quick: bool) -> str:
    """cocotb's test filter of `trace_step` runs: these masks, without pauses when `quick`."""
    return (f"trace_step/masks=({'|'.join(masks)})/"
            + ("mode=none" if quick else "mode=(none|random)"))


def time_simulators(runs: int, seed: int) -> dict:
    """Wall time of the bench's simulation (its `wall_s`: the command beats, the outputs' checks
    and the simulator, without the build) of the same rows on Icarus and Verilator: the first
    decoding step's draft passes with whole experts, `runs` times each in turn; the
    ratio of the medians. Both must give the same cycle count."""
    import statistics

    walls = {"icarus": [], "verilator": []}
    cycles = set()
    for _ in range(runs):
        for simulator in walls:
            run = run_bench("bundled", simulator, seed=seed, selection="drafts",
                            test_filter="masks=naive_sd/mode=none")
            entry = run.report["tests"]["trace_step/naive_sd/none"]
            walls[simulator].append(entry["wall_s"])
            cycles.add(entry["cycles"])
    if len(cycles) != 1:
        raise RuntimeError(f"Icarus and Verilator disagree on the cycle count: {sorted(cycles)}")
    count = cycles.pop()
    median = {sim: statistics.median(w) for sim, w in walls.items()}
    return {"selection": "drafts", "cycles": count, "runs": runs,
            **{sim: {"simulation_s": w, "median_s": median[sim],
                     "cycles_per_s": round(count / median[sim])} for sim, w in walls.items()},
            "icarus_over_verilator": round(median["icarus"] / median["verilator"], 2)}


def run_fuzz(sequences: int, seed: int = 20261203, case: str = "ci",
             simulator: str | None = "verilator", directed: str | None = None,
             waves: bool | None = None) -> SimResult:
    """The top fuzz bench (fuzz.py) on `sequences` random sequences drawn from `seed`
    (fuzz_vectors.py), on hardware set `case`. `directed` instead: "dcu_rejects" (issue 28's
    rejected DCU jobs) or "bad_descriptors" (the shortest cases of the feeder's former hang,
    each followed by a good sequence). The build is the top bench's on the same case
    (`run_bench`'s folder: one Verilator build serves both)."""
    from .fuzz_vectors import bad_descriptor_sequences, directed_sequences, write_sequences

    hw = hardware(case)
    files = prepare_vectors()
    trace = read_trace(Path(files["trace"]))
    folder = build_root() / "bench" / "top"
    if directed == "dcu_rejects":
        vectors = directed_sequences(trace, hw, seed, folder / f"fuzz-directed-{seed}.json")
    elif directed == "bad_descriptors":
        vectors = bad_descriptor_sequences(trace, hw, folder / "fuzz-bad-descriptors.json")
    elif directed is not None:
        raise ValueError(f"directed = {directed!r}: accepted dcu_rejects, bad_descriptors")
    else:
        vectors = write_sequences(trace, hw, sequences, seed,
                                  folder / f"fuzz-{case}-{seed}-{sequences}.json")
    top = Design(AcceleratorTop, (trace.layout,), hw)
    return run_cocotb(top, toplevel="accelerator_top", test_module=FUZZ_MODULE,
                      case=f"{case}-ci", params={**hw, **files, "vectors": str(vectors),
                                                 "latency": LATENCY,
                                                 "memory": {"memory": "latency"}},
                      simulator=simulator, seed=seed, waves=waves)


def prefill_hardware(case: str, trace) -> dict:
    """The top with its PRU for the prefill bench: the hardware set's EMA and engine with one
    token slot per token of a chunk (`policies.prefill.chunk` = 16: the engine takes `tokens`
    as a parameter, so a chunk's MoE sums are all in the engine at once rather than split
    over two batches), and the PRU of the trace's model and settings (the registry's
    parameters, cocotb_tests/pru/vectors.py) with EMA steps sized for this EMA."""
    import dataclasses

    from edgexpert.cocotb_tests.pru import LANES, MAX_TOKENS
    from edgexpert.cocotb_tests.pru.vectors import pru_params
    from edgexpert.golden.blocks.pru import experts_per_step

    hw = dict(hardware(case))
    ema = hw["ema"]
    per_step = experts_per_step(trace.layout, ema["data_width"] // 8, ema["buffer_bytes"],
                                ema["slots"])
    pru = dataclasses.replace(pru_params(trace, MAX_TOKENS, LANES), experts_per_step=per_step)
    return {**hw, "tokens": max(hw["tokens"], trace.prefill["chunk"]), "pru": pru}


def run_prefill(case: str = "ci", simulator: str | None = None, seed: int = 20261129,
                waves: bool | None = None, test_filter: str | None = None,
                layers: int | None = None, tokens: int | None = None,
                memory: dict | None = None) -> SimResult:
    """Run the prefill bench (prefill_bench.py): the first bundled prompt's first chunk
    (`policies.prefill.chunk` tokens, or its first `tokens` of them) through its first `layers`
    layers (default all), on the top with its PRU, on `memory` (as `run_bench`)."""
    import dataclasses

    from edgexpert.cocotb_tests.engine import prepare_vectors as engine_vectors
    from edgexpert.cocotb_tests.pru import bundled_prefill_trace
    from edgexpert.contracts.prefill_trace import read_prefill_trace

    chunk = load_config().policies.prefill.chunk
    tokens = chunk if tokens is None else tokens
    if not 1 <= tokens <= chunk:
        raise ValueError(f"tokens is {tokens}: accepted 1..{chunk} (one chunk)")
    trace_file = bundled_prefill_trace(build_root() / "bench" / "top" / f"prefill-{tokens}.npz",
                                       1, tokens=tokens)
    trace = read_prefill_trace(trace_file)
    hw = prefill_hardware(case, trace)
    if layers is not None:
        if not 1 <= layers <= trace.model.n_layers:
            raise ValueError(f"layers is {layers}: accepted 1..{trace.model.n_layers}")
        hw["pru"] = dataclasses.replace(hw["pru"], n_layers=layers)
    top = Design(AcceleratorTop, (trace.layout,), hw)
    params = {**hw, "pru": dataclasses.asdict(hw["pru"]), "trace": str(trace_file),
              "image": engine_vectors()["image"], "latency": LATENCY}
    params["memory"] = memory or {"memory": "latency"}
    return run_cocotb(top, toplevel="accelerator_top", test_module=PREFILL_MODULE,
                      case=f"prefill-{case}-{hw['pru'].n_layers}-{tokens}", params=params,
                      simulator=simulator, seed=seed,
                      waves=waves, test_filter=test_filter)
