"""Channel masks from golden traces, for the EMA controller's bench and benchmark.

EdgeXpert's depth-aware coalescing, as far as the traces of naive speculative decoding carry it:
for each verification pass and layer (one EMA step), for each depth group of the draft tree in
order, for each routed expert the group uses, the input-channel importance summed over the
group's candidates c that use the expert, in the DCU's integer contract (golden/blocks/dcu.py,
docs/contracts.md "Depth coalescing") on the traces' integers:

    GATE_UP channel j:  I[j] = sum_c |x_q[c, j]| * W_c     (W_c from x_m, x_e and weights_q16)
    DOWN channel f:     I[f] = sum_c |hidden_q[c, e, f]| * W_c  (W_c from hidden_m, hidden_e)

and the `ratio` most important channels of each matrix are fetched (ties to the lower channel):
the same selection as the live policy (golden.policies.salient_channels) and the DCU's RTL.
A later group asks again for what an earlier one fetched; the EMA controller's residency skips
it, which is the de-duplication coalescing relies on. The model's fine-grained pruning mask (the
third factor of EdgeXpert's importance) is all ones here, as in the default configuration
(docs/policies.md); shared experts are not listed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator

import numpy as np

from ...contracts.mask_trace import MaskEntry, MaskTrace
from ...contracts.trace import PassKind, Trace
from ...contracts.weight_layout import Matrix
from ..blocks import dcu
from ..policies.edgexpert import selected_count

__all__ = ["GOLDEN_SOURCE", "GroupInputs", "depth_groups", "coalesced_masks"]

GOLDEN_SOURCE = "golden"


@dataclass(frozen=True)
class GroupInputs:
    """What the DCU takes for one depth group, expert and matrix of a verification pass: the
    candidates' int8 inputs q [n, C], their scales (m, e) [n] and routing weights g [n]."""
    prompt: int
    pass_index: int
    layer: int
    depth: int
    expert: int
    matrix: Matrix
    q: np.ndarray
    m: np.ndarray
    e: np.ndarray
    g: np.ndarray


def depth_groups(trace: Trace) -> Iterator[list[GroupInputs]]:
    """Per verification pass and layer (in trace order), its groups: each depth in order, each
    routed expert the depth's candidates use (ascending), GATE_UP then DOWN."""
    x, xm, xe = trace["x_q"], trace["x_m"], trace["x_e"]
    h, hm, he = trace["hidden_q"], trace["hidden_m"], trace["hidden_e"]
    g = trace["weights_q16"]
    verify = trace["row_kind"] == PassKind.VERIFY
    keys = np.unique(np.stack([trace["row_prompt"], trace["row_pass"], trace["row_layer"]], 1)[verify], axis=0)
    for prompt, index, layer in keys.tolist():
        rows = np.flatnonzero(verify & (trace["row_prompt"] == prompt) & (trace["row_pass"] == index)
                              & (trace["row_layer"] == layer))
        groups = []
        for depth in np.unique(trace["row_depth"][rows]).tolist():
            group = rows[trace["row_depth"][rows] == depth]
            experts = trace["experts"][group]
            for e in np.unique(experts[experts >= 0]).tolist():
                cand, slot = np.nonzero(experts == e)
                users, weight = group[cand], g[group[cand], slot]
                where = (prompt, index, layer, depth, e)
                groups += [GroupInputs(*where, Matrix.GATE_UP, x[users], xm[users], xe[users], weight),
                           GroupInputs(*where, Matrix.DOWN, h[users, slot], hm[users, slot],
                                       he[users, slot], weight)]
        yield groups


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
    steps = []
    for groups in depth_groups(trace):
        layer = groups[0].layer
        by_expert: dict[int, list[MaskEntry]] = {}
        for grp in groups:
            chosen = dcu.select(grp.q, grp.m, grp.e, grp.g, selected_count(grp.q.shape[1], ratio))
            by_expert.setdefault(grp.expert, []).append(
                MaskEntry(grp.layer, grp.expert, grp.matrix, tuple(chosen.tolist())))
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
    return MaskTrace(f"{label} (depth-group integer |x|*W selection, ratio {ratio})", model, tuple(steps))
