"""Prefill trace files: what the PRU bench reads from EdgeXpert's prefill on the integer path.

One file is a NumPy .npz archive (docs/traces.md, "Prefill traces", is the reference):

- `header`: UTF-8 JSON: {"schema": "edgexpert-prefill-trace", "version": 2, "model": ModelConfig,
  "layout": WeightLayout fields, "path": "int", "prefill": {"tau_major_q16", "tau_minor_q16",
  "budget_minor", "budget_trivial", "chunk"}, "source": ...}.
- Prompt tokens, one row per token of every prompt's prefill pass, N rows:
  `tok_prompt` int32 [N], `tok_index` int32 [N] (position in its prompt), `token` int32 [N],
  `score_q16` int32 [N] (the encoder's score, Q.16), `token_class` int8 [N] (0 major, 1 minor,
  2 trivial), `logits_q16` int32 [N, L, E] (router logits per layer, Q.16),
  `experts` int16 [N, L, K] (in pick order, -1: none) and `weights_q16` int32 [N, L, K];
  the MoE layer on the integer path with those routes (0 in synthetic traces, which have no
  model): `x_q` int8 [N, L, D] the MoE input, `x_m` int32 [N, L] and `x_e` int16 [N, L] its
  scale m * 2**-e, `hidden_q` int8 [N, L, K, F] with `hidden_m` int32 / `hidden_e` int16
  [N, L, K] each chosen expert's hidden vector and scale, `expert_out_q16` int32 [N, L, K, D]
  its output and `moe_out_q16` int32 [N, L, D] the weighted sum (version 2 added them).
- Fetches, one per (prompt, layer, chunk), C rows: `fetch_prompt` int32 [C], `fetch_layer`
  int16 [C], `fetch_chunk` int32 [C], `fetch_experts` uint8 [C, ceil(E/8)] (bit e of the
  numpy.packbits array: expert e is fetched).

`write_prefill_trace` writes one; `read_prefill_trace` reads one and checks every array (names,
dtypes, shapes, value ranges, header); a malformed file raises PrefillTraceError naming the array
and the problem. The golden model builds them (edgexpert.golden.traces.prefill_trace).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .errors import InputError
from .trace import TraceArchive, check_arrays, open_archive, save_archive

__all__ = ["PREFILL_SCHEMA", "PREFILL_VERSION", "TOKEN_ARRAYS", "FETCH_ARRAYS",
           "PrefillTraceError", "PrefillTrace", "write_prefill_trace", "read_prefill_trace"]

PREFILL_SCHEMA = "edgexpert-prefill-trace"
#: 2: the MoE layer's inputs and outputs per (token, layer), for the top's prefill bench
PREFILL_VERSION = 2

# name -> (dtype, shape with "N"/"C" for the token/fetch count and model sizes by name)
TOKEN_ARRAYS = {
    "tok_prompt": ("int32", ("N",)), "tok_index": ("int32", ("N",)), "token": ("int32", ("N",)),
    "score_q16": ("int32", ("N",)), "token_class": ("int8", ("N",)),
    "logits_q16": ("int32", ("N", "L", "E")), "experts": ("int16", ("N", "L", "K")),
    "weights_q16": ("int32", ("N", "L", "K")),
    "x_q": ("int8", ("N", "L", "D")), "x_m": ("int32", ("N", "L")), "x_e": ("int16", ("N", "L")),
    "hidden_q": ("int8", ("N", "L", "K", "F")), "hidden_m": ("int32", ("N", "L", "K")),
    "hidden_e": ("int16", ("N", "L", "K")), "expert_out_q16": ("int32", ("N", "L", "K", "D")),
    "moe_out_q16": ("int32", ("N", "L", "D")),
}
FETCH_ARRAYS = {
    "fetch_prompt": ("int32", ("C",)), "fetch_layer": ("int16", ("C",)),
    "fetch_chunk": ("int32", ("C",)), "fetch_experts": ("uint8", ("C", "E8")),
}
PREFILL_KEYS = ("tau_major_q16", "tau_minor_q16", "budget_minor", "budget_trivial", "chunk")


class PrefillTraceError(InputError):
    """A prefill trace is missing an array, or an array has the wrong type, shape or values."""


class PrefillTrace(TraceArchive):
    @property
    def prefill(self) -> dict:
        return self.header["prefill"]

    def prompt(self, p: int) -> dict[str, np.ndarray]:
        """The token arrays of prompt p, in token order."""
        rows = np.flatnonzero(self.arrays["tok_prompt"] == p)
        return {name: self.arrays[name][rows] for name in TOKEN_ARRAYS}


def write_prefill_trace(trace: PrefillTrace, path: Path) -> Path:
    return save_archive(path, trace.header, trace.arrays)


def _check_prefill(path: Path, header: dict) -> None:
    """The header's prefill settings: every key of `PREFILL_KEYS`, an integer."""
    prefill = header.get("prefill")
    if not isinstance(prefill, dict):
        raise PrefillTraceError(f"{path}: header prefill is malformed: {prefill!r}")
    bad = [key for key in PREFILL_KEYS if not isinstance(prefill.get(key), int)]
    if bad:
        raise PrefillTraceError(f"{path}: header prefill lacks integer {bad}: accepted "
                                f"{list(PREFILL_KEYS)}")


def read_prefill_trace(path: Path) -> PrefillTrace:
    """Read and validate a prefill trace file."""
    path = Path(path)
    header, model, arrays = open_archive(path, "prefill trace file", PREFILL_SCHEMA,
                                         PREFILL_VERSION, PrefillTraceError)
    _check_prefill(path, header)
    sizes = {"L": model.n_layers, "E": model.n_experts, "K": model.top_k,
             "E8": -(-model.n_experts // 8), "D": model.d_model, "F": model.expert_ffn}
    checks = [("tok_index", 0, model.max_seq_len - 1), ("token", 0, model.vocab_size - 1),
              ("score_q16", 0, 65536), ("token_class", 0, 2), ("experts", -1, model.n_experts - 1),
              ("weights_q16", 0, 65536), ("fetch_layer", 0, model.n_layers - 1),
              ("fetch_chunk", 0, model.max_seq_len - 1),
              # int8 values are symmetric (docs/contracts.md, number formats)
              ("x_q", -127, 127), ("hidden_q", -127, 127)]
    check_arrays(path, arrays, ((TOKEN_ARRAYS, "N"), (FETCH_ARRAYS, "C")), sizes, checks,
                 PrefillTraceError)
    return PrefillTrace(header, arrays)
