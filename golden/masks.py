"""Channel masks from golden traces, for the EMA controller's bench and benchmark.

EdgeXpert's depth-aware coalescing, as far as the traces of naive speculative decoding carry it:
for each verification pass and layer (one EMA step), for each depth group of the draft tree in
order, for each routed expert the group uses, the input-channel importance summed over the
group's candidates c that use the expert,

    GATE_UP channel j:  I[j] = sum_c |x_c[j]| * g_c,e       (x_c: the MoE input, dequantized)
    DOWN channel f:     I[f] = sum_c |h_c,e[f]| * g_c,e     (h: the expert's hidden vector)

and the `ratio` most important channels of each matrix are fetched (ties to the lower channel):
the same selection as the live policy (golden.policies.salient_channels).
A later group asks again for what an earlier one fetched; the EMA controller's residency skips
it, which is the de-duplication coalescing relies on. The model's fine-grained pruning mask (the
third factor of EdgeXpert's importance) is all ones here, as in the default configuration
(docs/policies.md); shared experts are not listed.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import torch

from ..contracts.mask_trace import MaskEntry, MaskTrace
from ..contracts.trace import PassKind, Trace
from ..contracts.weight_layout import Matrix
from .policies import salient_channels

__all__ = ["GOLDEN_SOURCE", "coalesced_masks"]

GOLDEN_SOURCE = "golden"


def _select(values: np.ndarray, weights: np.ndarray, ratio: float) -> tuple[int, ...]:
    return tuple(salient_channels(torch.from_numpy(values), torch.from_numpy(weights), ratio).tolist())


def coalesced_masks(trace: Trace, ratio: float,
                    fits: Callable[[list[MaskEntry]], bool] = lambda entries: True,
                    max_steps: int | None = None, label: str = GOLDEN_SOURCE) -> MaskTrace:
    """The mask trace of `trace`'s verification passes with `ratio` of the channels selected.

    Within a pass and layer the entries are ordered expert by expert (each expert's depth groups
    in order, so their masks de-duplicate against each other) and packed into EMA steps while
    `fits(entries)` (the buffer and slots the step needs) holds. `label` starts the source."""
    if not 0 < ratio <= 1:
        raise ValueError(f"ratio = {ratio} is out of range: accepted (0, 1]")
    layout = trace.layout
    x = np.abs(trace["x_q"].astype(np.float64)) * (trace["x_m"] * 2.0 ** -trace["x_e"].astype(np.float64))[:, None]
    h = np.abs(trace["hidden_q"].astype(np.float64)) * (trace["hidden_m"] * 2.0 ** -trace["hidden_e"].astype(np.float64))[..., None]
    g = trace["weights_q16"] / 65536.0
    verify = trace["row_kind"] == PassKind.VERIFY
    keys = np.unique(np.stack([trace["row_prompt"], trace["row_pass"], trace["row_layer"]], 1)[verify], axis=0)
    steps = []
    for prompt, index, layer in keys.tolist():
        rows = np.flatnonzero(verify & (trace["row_prompt"] == prompt) & (trace["row_pass"] == index)
                              & (trace["row_layer"] == layer))
        by_expert: dict[int, list[MaskEntry]] = {}
        for depth in np.unique(trace["row_depth"][rows]).tolist():
            group = rows[trace["row_depth"][rows] == depth]
            experts = trace["experts"][group]
            for e in np.unique(experts[experts >= 0]).tolist():
                cand, slot = np.nonzero(experts == e)
                weight = g[group[cand], slot]
                by_expert.setdefault(e, []).extend([
                    MaskEntry(layer, e, Matrix.GATE_UP, _select(x[group[cand]], weight, ratio)),
                    MaskEntry(layer, e, Matrix.DOWN, _select(h[group[cand], slot], weight, ratio))])
        step: list[MaskEntry] = []
        for e, entries in by_expert.items():
            if not fits(entries):
                raise ValueError(f"expert {e} of layer {layer} alone does not fit one EMA step")
            if not fits(step + entries):
                steps.append(tuple(step))
                step = []
            step += entries
        steps.append(tuple(step))
        if max_steps is not None and len(steps) >= max_steps:
            steps = steps[:max_steps]
            break
    model = {key: getattr(layout, key) for key in ("n_layers", "n_experts", "d_model",
                                                    "expert_ffn", "n_shared_experts")}
    return MaskTrace(f"{label} (depth-group |x|*g selection, ratio {ratio})", model, tuple(steps))
