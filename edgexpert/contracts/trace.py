"""Trace files: what the RTL benches and the performance model read from a decoding run.

One file is a NumPy .npz archive (docs/traces.md is the reference):

- `header`: UTF-8 JSON: {"schema": "edgexpert-trace", "version": 1, "model": ModelConfig,
  "layout": WeightLayout fields, "path": "int", "decode": DecodeConfig, "source": ...}.
- Token rows, one per (pass, layer, token), all of length R:
  `row_prompt`, `row_step`, `row_pass` (index of the pass in its prompt's run), `row_kind`
  (`PassKind`, one of `DECODE_KINDS`: 1 ar, 2 draft, 3 verify), `row_layer`, `row_depth` (depth
  group in the draft tree; 0 for the root and for autoregressive steps), `row_token`;
  `x_q` [R, D] int8: the MoE input; `x_m` [R] int32 and `x_e` [R] int16: its scale m * 2**-e;
  `experts` [R, K] int16 (-1: none) and `weights_q16` [R, K] int32: routing;
  `hidden_q` [R, K, F] int8, `hidden_m` [R, K] int32, `hidden_e` [R, K] int16: each chosen
  expert's hidden vector silu(gate) * up as int8 with its scale (the DOWN matrix's input);
  `expert_out_q16` [R, K, D] int32: each chosen expert's output (Q.16, before weighting);
  `moe_out_q16` [R, D] int32: the weighted sum over experts (the MoE output added to the residual).
- Loads, one per (pass, layer, group, expert) that an external-memory fetch serves, length G:
  `load_prompt`, `load_pass`, `load_layer`, `load_group` (the depth group, or -1 when one fetch
  serves the whole pass), `load_expert`, `load_tokens` (tokens served), `mask_gate_up`
  [G, ceil(D/8)] and `mask_down` [G, ceil(F/8)] (uint8, bit j of the packed array = input channel
  j fetched, numpy.packbits order), `load_bytes` (int64: bytes of the fetch under the weight
  layout: the selected columns and the scale block of each matrix).

`write_trace` writes one, `read_trace` reads one and checks every array (names, dtypes, shapes,
value ranges, header); a malformed file raises TraceError naming the array and the problem.
The golden model builds traces from its decoding runs (edgexpert.golden.traces.decode_trace.build_trace).
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .config import ModelConfig
from .errors import InputError
from .weight_layout import Matrix, WeightLayout

__all__ = ["SCHEMA", "VERSION", "PassKind", "DECODE_KINDS", "ROW_ARRAYS", "LOAD_ARRAYS",
           "TraceError", "TraceArchive", "Trace", "write_trace", "read_trace", "fetch_bytes",
           "save_archive", "open_archive", "check_arrays"]

SCHEMA = "edgexpert-trace"
VERSION = 1


class PassKind(enum.IntEnum):
    """A forward pass of decoding. AR, DRAFT and VERIFY are the `row_kind` values a trace stores
    (docs/traces.md, `DECODE_KINDS`); PREFILL, the prompt's pass, is never stored in one."""
    AR = 1
    DRAFT = 2
    VERIFY = 3
    PREFILL = 4

    @property
    def label(self) -> str:
        """The kind as JSON and reports name it: "ar", "draft", "verify", "prefill"."""
        return self.name.lower()


#: the kinds a trace's rows may hold (consecutive values: `read_trace` checks the range)
DECODE_KINDS = (PassKind.AR, PassKind.DRAFT, PassKind.VERIFY)


# name -> (dtype, shape with "R"/"G" for the row/load count and model sizes by name)
ROW_ARRAYS = {
    "row_prompt": ("int32", ("R",)), "row_step": ("int32", ("R",)), "row_pass": ("int32", ("R",)),
    "row_kind": ("int8", ("R",)), "row_layer": ("int16", ("R",)), "row_depth": ("int16", ("R",)),
    "row_token": ("int32", ("R",)), "x_q": ("int8", ("R", "D")), "x_m": ("int32", ("R",)),
    "x_e": ("int16", ("R",)), "experts": ("int16", ("R", "K")), "weights_q16": ("int32", ("R", "K")),
    "hidden_q": ("int8", ("R", "K", "F")), "hidden_m": ("int32", ("R", "K")),
    "hidden_e": ("int16", ("R", "K")),
    "expert_out_q16": ("int32", ("R", "K", "D")), "moe_out_q16": ("int32", ("R", "D")),
}
LOAD_ARRAYS = {
    "load_prompt": ("int32", ("G",)), "load_pass": ("int32", ("G",)), "load_layer": ("int16", ("G",)),
    "load_group": ("int16", ("G",)), "load_expert": ("int16", ("G",)), "load_tokens": ("int32", ("G",)),
    "mask_gate_up": ("uint8", ("G", "D8")), "mask_down": ("uint8", ("G", "F8")),
    "load_bytes": ("int64", ("G",)),
}


class TraceError(InputError):
    """A trace file is missing an array, or an array has the wrong type, shape or values."""


@dataclass
class TraceArchive:
    """A trace file's header and arrays, with the model and weight layout its header records
    (the decode trace here and the prefill trace, contracts/prefill_trace.py)."""
    header: dict
    arrays: dict[str, np.ndarray]

    @property
    def model(self) -> ModelConfig:
        return ModelConfig(**self.header["model"])

    @property
    def layout(self) -> WeightLayout:
        return WeightLayout(**self.header["layout"])

    def __getitem__(self, name: str) -> np.ndarray:
        return self.arrays[name]


class Trace(TraceArchive):
    """A decode trace (the module doc says what it holds)."""


def fetch_bytes(layout: WeightLayout, gate_up: np.ndarray, down: np.ndarray) -> int:
    """Bytes that fetching the input channels selected by boolean masks of one expert moves."""
    return (layout.fetch_bytes(Matrix.GATE_UP, np.flatnonzero(gate_up).tolist())
            + layout.fetch_bytes(Matrix.DOWN, np.flatnonzero(down).tolist()))


def write_trace(trace: Trace, path: Path) -> Path:
    return save_archive(path, trace.header, trace.arrays)


def save_archive(path: Path, header: dict, arrays: dict) -> Path:
    """A trace archive: `header` as a JSON byte array (sorted keys: the same trace, the same
    file) beside `arrays`, compressed."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    encoded = np.frombuffer(json.dumps(header, sort_keys=True).encode(), dtype=np.uint8)
    with open(path, "wb") as f:  # a file object: np.savez_compressed adds no ".npz" of its own
        np.savez_compressed(f, header=encoded, **arrays)
    return path


def _sizes(header: dict) -> dict[str, int]:
    m = header["model"]
    return {"D": m["d_model"], "K": m["top_k"], "F": m["expert_ffn"], "D8": -(-m["d_model"] // 8),
            "F8": -(-m["expert_ffn"] // 8)}


def read_trace(path: Path) -> Trace:
    """Read and validate a trace file."""
    path = Path(path)
    header, model, arrays = open_archive(path, "trace file", SCHEMA, VERSION, TraceError)
    checks = [
        ("row_layer", 0, model.n_layers - 1), ("load_layer", 0, model.n_layers - 1),
        ("experts", -1, model.n_experts - 1), ("load_expert", 0, model.n_experts - 1),
        ("row_kind", min(DECODE_KINDS), max(DECODE_KINDS)), ("x_q", -127, 127),
        ("hidden_q", -127, 127), ("row_token", 0, model.vocab_size - 1),
        ("weights_q16", 0, 65536),
        ("load_bytes", 0, WeightLayout(**header["layout"]).expert_fetch_bytes),
    ]
    check_arrays(path, arrays, ((ROW_ARRAYS, "R"), (LOAD_ARRAYS, "G")), _sizes(header), checks,
                 TraceError)
    return Trace(header, arrays)


def open_archive(path: Path, kind: str, schema: str, version: int,
                 error) -> tuple[dict, ModelConfig, dict]:
    """A trace archive's header and arrays: the .npz file, its JSON `header` array with this
    `schema` and `version`, and the header's model and weight layout, each checked; a problem
    raises `error` naming the file (`kind` says what the file should have been)."""
    try:
        archive = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise error(f"{path} is not a {kind} (.npz): {exc}") from None
    with archive:
        if "header" not in archive.files:
            raise error(f"{path} has no header array")
        try:
            header = json.loads(archive["header"].tobytes().decode())
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise error(f"{path}: header is not JSON: {exc}") from None
        if header.get("schema") != schema or header.get("version") != version:
            raise error(f"{path}: header says schema {header.get('schema')!r} version "
                        f"{header.get('version')!r}: accepted {schema!r} version {version}")
        try:
            model = ModelConfig(**header["model"])
            WeightLayout(**header["layout"])
        except (KeyError, TypeError, ValueError) as exc:
            raise error(f"{path}: header model or layout is malformed: {exc}") from None
        arrays = {name: archive[name] for name in archive.files if name != "header"}
    return header, model, arrays


def check_arrays(path: Path, arrays: dict, groups, sizes: dict, ranges, error) -> None:
    """The arrays of a trace archive against their specs: `groups` is ((spec, count name), ...),
    each spec name -> (dtype, shape) with the count name or `sizes`' keys for dimensions (a
    group's count is its first array's length); no array missing, none unknown, every dtype and
    shape as specified, and each (name, lo, hi) of `ranges` within lo..hi. A problem raises
    `error` naming the file, the array and what is accepted."""
    sizes = dict(sizes)
    for spec, count_name in groups:
        first = next(iter(spec))
        if first not in arrays:
            raise error(f"{path}: array {first!r} is missing")
        sizes[count_name] = len(arrays[first])
        for name, (dtype, shape) in spec.items():
            if name not in arrays:
                raise error(f"{path}: array {name!r} is missing")
            a = arrays[name]
            want = tuple(sizes[s] for s in shape)
            if a.dtype != np.dtype(dtype) or a.shape != want:
                raise error(f"{path}: array {name!r} is {a.dtype}{list(a.shape)}: accepted "
                            f"{dtype}{list(want)}")
    unknown = sorted(set(arrays) - {name for spec, _ in groups for name in spec})
    if unknown:
        raise error(f"{path}: unknown arrays {unknown}")
    for name, lo, hi in ranges:
        a = arrays[name]
        if a.size and (int(a.min()) < lo or int(a.max()) > hi):
            raise error(f"{path}: array {name!r} holds {int(a.min())}..{int(a.max())}: "
                        f"accepted {int(lo)}..{int(hi)}")
