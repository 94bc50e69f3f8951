"""Traces of the golden model's decoding runs, in the trace file format of
edgexpert.contracts.trace (docs/traces.md): `build_trace` turns integer-path decoding runs into a
`Trace`; the contract writes, reads and checks the file.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ...contracts.config import DecodeConfig, ModelConfig
from ...contracts.trace import (LOAD_ARRAYS, ROW_ARRAYS, SCHEMA, VERSION, Trace, TraceError,
                               fetch_bytes)
from ...contracts.weight_layout import WeightLayout

__all__ = ["build_trace"]


def build_trace(runs: list, model: ModelConfig, decode: DecodeConfig, source: dict) -> Trace:
    """A trace of integer-path decoding runs (one DecodeResult per prompt, with traces kept).
    Loads: one fetch per pass, layer and expert with every input channel (naive fetching)."""
    layout = WeightLayout.for_model(model)
    k = model.top_k
    rows: dict[str, list] = {name: [] for name in ROW_ARRAYS}
    loads: dict[str, list] = {name: [] for name in LOAD_ARRAYS}
    full_gu, full_dn = np.ones(model.d_model, bool), np.ones(model.expert_ffn, bool)
    for prompt, run in enumerate(runs):
        for index, p in enumerate(run.traces):
            for layer, lt in enumerate(p.layers):
                if lt.int_data is None:
                    raise TraceError("traces come from the integer path: decode with --path int")
                d = lt.int_data
                n, j = lt.experts.shape
                if j > k:
                    raise TraceError(f"pass routes {j} experts per token: accepted up to top_k {k}")
                pad = k - j
                experts = np.pad(lt.experts.numpy(), ((0, 0), (0, pad)), constant_values=-1)
                rows["row_prompt"].append(np.full(n, prompt))
                rows["row_step"].append(np.full(n, p.step))
                rows["row_pass"].append(np.full(n, index))
                rows["row_kind"].append(np.full(n, int(p.kind)))
                rows["row_layer"].append(np.full(n, layer))
                rows["row_depth"].append(np.asarray(p.depths))
                rows["row_token"].append(np.asarray(p.tokens))
                rows["x_q"].append(d["x8"].numpy())
                rows["x_m"].append(d["x_scale"].m.numpy())
                rows["x_e"].append(d["x_scale"].e.numpy())
                rows["experts"].append(experts)
                rows["weights_q16"].append(np.pad(d["weights_q16"].numpy(), ((0, 0), (0, pad))))
                rows["hidden_q"].append(np.pad(d["hidden_q"].numpy(), ((0, 0), (0, pad), (0, 0))))
                rows["hidden_m"].append(np.pad(d["hidden_scale"].m.numpy(), ((0, 0), (0, pad))))
                rows["hidden_e"].append(np.pad(d["hidden_scale"].e.numpy(), ((0, 0), (0, pad))))
                rows["expert_out_q16"].append(np.pad(d["expert_out_q16"].numpy(),
                                                     ((0, 0), (0, pad), (0, 0))))
                rows["moe_out_q16"].append(d["moe_out_q16"].numpy())
                for e in np.unique(experts[experts >= 0]).tolist():
                    loads["load_prompt"].append([prompt])
                    loads["load_pass"].append([index])
                    loads["load_layer"].append([layer])
                    loads["load_group"].append([-1])
                    loads["load_expert"].append([e])
                    loads["load_tokens"].append([int((experts == e).any(1).sum())])
                    loads["mask_gate_up"].append(np.packbits(full_gu)[None])
                    loads["mask_down"].append(np.packbits(full_dn)[None])
                    loads["load_bytes"].append([fetch_bytes(layout, full_gu, full_dn)])
    arrays = {}
    for spec, lists in ((ROW_ARRAYS, rows), (LOAD_ARRAYS, loads)):
        for name, (dtype, _) in spec.items():
            arrays[name] = np.concatenate(lists[name]).astype(dtype) if lists[name] else \
                np.zeros((0,), dtype)
    header = {"schema": SCHEMA, "version": VERSION, "model": dataclasses.asdict(model),
              "layout": dataclasses.asdict(layout), "path": "int",
              "decode": dataclasses.asdict(decode), "source": source}
    return Trace(header, arrays)
