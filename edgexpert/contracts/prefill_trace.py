"""Prefill trace files: what the PRU bench reads from EdgeXpert's prefill on the integer path.

One file is a NumPy .npz archive (docs/traces.md, "Prefill traces", is the reference):

- `header`: UTF-8 JSON: {"schema": "edgexpert-prefill-trace", "version": 1, "model": ModelConfig,
  "layout": WeightLayout fields, "path": "int", "prefill": {"tau_major_q16", "tau_minor_q16",
  "budget_minor", "budget_trivial", "chunk"}, "source": ...}.
- Prompt tokens, one row per token of every prompt's prefill pass, N rows:
  `tok_prompt` int32 [N], `tok_index` int32 [N] (position in its prompt), `token` int32 [N],
  `score_q16` int32 [N] (the encoder's score, Q.16), `token_class` int8 [N] (0 major, 1 minor,
  2 trivial), `logits_q16` int32 [N, L, E] (router logits per layer, Q.16),
  `experts` int16 [N, L, K] (in pick order, -1: none) and `weights_q16` int32 [N, L, K].
- Fetches, one per (prompt, layer, chunk), C rows: `fetch_prompt` int32 [C], `fetch_layer`
  int16 [C], `fetch_chunk` int32 [C], `fetch_experts` uint8 [C, ceil(E/8)] (bit e of the
  numpy.packbits array: expert e is fetched).

`write_prefill_trace` writes one; `read_prefill_trace` reads one and checks every array (names,
dtypes, shapes, value ranges, header); a malformed file raises PrefillTraceError naming the array
and the problem. The golden model builds them (edgexpert.golden.prefill_trace).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .config import ModelConfig
from .errors import InputError
from .trace import check_arrays
from .weight_layout import WeightLayout

__all__ = ["PREFILL_SCHEMA", "PREFILL_VERSION", "TOKEN_ARRAYS", "FETCH_ARRAYS",
           "PrefillTraceError", "PrefillTrace", "write_prefill_trace", "read_prefill_trace"]

PREFILL_SCHEMA = "edgexpert-prefill-trace"
PREFILL_VERSION = 1

# name -> (dtype, shape with "N"/"C" for the token/fetch count and model sizes by name)
TOKEN_ARRAYS = {
    "tok_prompt": ("int32", ("N",)), "tok_index": ("int32", ("N",)), "token": ("int32", ("N",)),
    "score_q16": ("int32", ("N",)), "token_class": ("int8", ("N",)),
    "logits_q16": ("int32", ("N", "L", "E")), "experts": ("int16", ("N", "L", "K")),
    "weights_q16": ("int32", ("N", "L", "K")),
}
FETCH_ARRAYS = {
    "fetch_prompt": ("int32", ("C",)), "fetch_layer": ("int16", ("C",)),
    "fetch_chunk": ("int32", ("C",)), "fetch_experts": ("uint8", ("C", "E8")),
}
PREFILL_KEYS = ("tau_major_q16", "tau_minor_q16", "budget_minor", "budget_trivial", "chunk")


class PrefillTraceError(InputError):
    """A prefill trace is missing an array, or an array has the wrong type, shape or values."""


@dataclass
class PrefillTrace:
    header: dict
    arrays: dict[str, np.ndarray]

    @property
    def model(self) -> ModelConfig:
        return ModelConfig(**self.header["model"])

    @property
    def layout(self) -> WeightLayout:
        return WeightLayout(**self.header["layout"])

    @property
    def prefill(self) -> dict:
        return self.header["prefill"]

    def __getitem__(self, name: str) -> np.ndarray:
        return self.arrays[name]

    def prompt(self, p: int) -> dict[str, np.ndarray]:
        """The token arrays of prompt p, in token order."""
        rows = np.flatnonzero(self.arrays["tok_prompt"] == p)
        return {name: self.arrays[name][rows] for name in TOKEN_ARRAYS}


def write_prefill_trace(trace: PrefillTrace, path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    header = np.frombuffer(json.dumps(trace.header, sort_keys=True).encode(), dtype=np.uint8)
    with open(path, "wb") as f:  # a file object: np.savez_compressed adds no ".npz" of its own
        np.savez_compressed(f, header=header, **trace.arrays)
    return path


def _header(path: Path, archive) -> tuple[dict, ModelConfig]:
    if "header" not in archive.files:
        raise PrefillTraceError(f"{path} has no header array")
    try:
        header = json.loads(archive["header"].tobytes().decode())
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PrefillTraceError(f"{path}: header is not JSON: {exc}") from None
    if header.get("schema") != PREFILL_SCHEMA or header.get("version") != PREFILL_VERSION:
        raise PrefillTraceError(f"{path}: header says schema {header.get('schema')!r} version "
                                f"{header.get('version')!r}: accepted {PREFILL_SCHEMA!r} version "
                                f"{PREFILL_VERSION}")
    try:
        model = ModelConfig(**header["model"])
        WeightLayout(**header["layout"])
        prefill = header["prefill"]
        bad = [key for key in PREFILL_KEYS if not isinstance(prefill.get(key), int)]
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise PrefillTraceError(f"{path}: header model, layout or prefill is malformed: "
                                f"{exc}") from None
    if bad:
        raise PrefillTraceError(f"{path}: header prefill lacks integer {bad}: accepted "
                                f"{list(PREFILL_KEYS)}")
    return header, model


def read_prefill_trace(path: Path) -> PrefillTrace:
    """Read and validate a prefill trace file."""
    path = Path(path)
    try:
        archive = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise PrefillTraceError(f"{path} is not a prefill trace file (.npz): {exc}") from None
    with archive:
        header, model = _header(path, archive)
        arrays = {name: archive[name] for name in archive.files if name != "header"}
    sizes = {"L": model.n_layers, "E": model.n_experts, "K": model.top_k,
             "E8": -(-model.n_experts // 8)}
    checks = [("tok_index", 0, model.max_seq_len - 1), ("token", 0, model.vocab_size - 1),
              ("score_q16", 0, 65536), ("token_class", 0, 2), ("experts", -1, model.n_experts - 1),
              ("weights_q16", 0, 65536), ("fetch_layer", 0, model.n_layers - 1),
              ("fetch_chunk", 0, model.max_seq_len - 1)]
    check_arrays(path, arrays, ((TOKEN_ARRAYS, "N"), (FETCH_ARRAYS, "C")), sizes, checks,
                 PrefillTraceError)
    return PrefillTrace(header, arrays)
