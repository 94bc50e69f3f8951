"""EdgeXpert (docs/policies.md): depth-aware channel coalescing in every draft and verification
pass, by the DCU's integer selection (golden/blocks/dcu.py); with a prefill encoder, prompt-wise
expert reuse in the prefill pass (golden/policies/prefill.py)."""

from __future__ import annotations

import torch

from ...contracts.config import DecodeConfig
from ...contracts.trace import PassKind
from ...contracts.weight_layout import Matrix, WeightLayout
from ..blocks import dcu
from ..decoding.policy import ChannelHook, Policy
from ..integer.int_model import RESIDUAL_FRAC
from ..integer.intops import quantize_vec
from ..lm.model import MoEModel, Router
from ..lm.prune import load_pruned_checkpoint, pruning_masks
from .prefill import PrefillRouting

__all__ = ["selected_count", "integer_inputs", "salient_channels", "CoalescingHook", "EdgeXpert",
           "pruned_edgexpert"]


def selected_count(channels: int, ratio: float, prune: torch.Tensor | None = None) -> int:
    """How many channels a depth group fetches: `ratio` of them (rounded, at least one), and
    never a channel the pruning mask removed (golden/blocks/dcu.py, `keep_count`)."""
    return dcu.keep_count(channels, dcu.requested_count(channels, ratio), prune)


def integer_inputs(values: torch.Tensor, weights: torch.Tensor):
    """Float inputs [C rows, channels] and routing weights [C] as the integer path carries them
    into the DCU: each row in Q.16 quantized to int8 with its dyadic scale (`quantize_vec`,
    docs/contracts.md), the weights in Q.16. Returns (q, m, e, g_q16)."""
    q, scale = quantize_vec(torch.round(values.double() * 2**RESIDUAL_FRAC).to(torch.int64),
                            RESIDUAL_FRAC)
    return q, scale.m, scale.e, torch.round(weights.double() * 65536).to(torch.int64)


def salient_channels(values: torch.Tensor, weights: torch.Tensor, ratio: float,
                     prune: torch.Tensor | None = None) -> torch.Tensor:
    """EdgeXpert's selection for one depth group and expert, ascending: the DCU's integer
    selection (golden/blocks/dcu.py: importance sum_c |q_c[j]| * W_c over the group's
    candidates c, W_c from each candidate's scale and routing weight, the pruning mask m; the
    `ratio` share of the channels, at least one, ties to the lower channel) on the float inputs
    values [C, channels] and weights g [C] brought to the integer path's formats
    (`integer_inputs`). The mask traces (golden/traces/masks.py) call golden/blocks/dcu.py on the
    traces' integers directly."""
    q, m, e, g = integer_inputs(values, weights)
    return dcu.select(q, m, e, g, dcu.requested_count(values.shape[1], ratio), prune)


class CoalescingHook(ChannelHook):
    """EdgeXpert's depth coalescing for one pass: for each depth group and expert, the input
    channels with the largest summed importance sum_c |x_c[j]| * g_c,e * m_e,j over the group's
    candidates c that use the expert are fetched once for the group (`ratio` of the channels;
    DOWN likewise over the hidden vectors). With `calibration` every candidate of the group
    computes on all fetched channels; without it, on the fetched channels its own importance
    would also have chosen."""

    def __init__(self, layout: WeightLayout, depths: torch.Tensor, masks, ratio: float,
                 calibration: bool):
        super().__init__(layout, depths)
        self.masks = masks
        self.ratio = ratio
        self.calibration = calibration

    def _select(self, layer, expert, matrix, rows, values, weights) -> torch.Tensor:
        prune = self.masks[layer][matrix][expert]
        keep = selected_count(values.shape[1], self.ratio, prune)
        out = torch.zeros_like(values)
        for depth in torch.unique(self.depths[rows]).tolist():
            group = torch.nonzero(self.depths[rows] == depth)[:, 0]
            chosen = salient_channels(values[group], weights[group], self.ratio, prune)
            self.fetches.fetch(layer, expert, matrix, chosen.tolist())
            fetched = torch.zeros(values.shape[1], dtype=values.dtype)
            fetched[chosen] = 1
            if self.calibration:
                out[group] = fetched
            else:
                # each candidate's own choice: the same selection on a group of one
                q, m, e, g = integer_inputs(values[group], weights[group])
                mine = torch.stack([dcu.select_mask(q[i:i + 1], m[i:i + 1], e[i:i + 1],
                                                    g[i:i + 1], keep, prune)
                                    for i in range(len(group))]).to(values.dtype)
                out[group] = mine * fetched
        return out

    def gate_up(self, layer, expert, rows, x, weights):
        return self._select(layer, expert, Matrix.GATE_UP, rows, x, weights)

    def down(self, layer, expert, rows, hidden, weights):
        return self._select(layer, expert, Matrix.DOWN, rows, hidden, weights)


class EdgeXpert(Policy):
    """Decode: depth-aware channel coalescing (`CoalescingHook`) in every draft and
    verification pass, with the model's pruning mask (golden/lm/prune.py) in the importance.
    Prefill: with `prefill` (the encoder and the thresholds and budgets), the shared-set routing
    of golden/policies/prefill.py; without, the model's own routing. `own_model`: `model` is not
    the compared one (a pruned-and-recovered checkpoint) and the policy decodes on it
    (`Policy.model`)."""
    name = "edgexpert"

    def __init__(self, layout: WeightLayout, decode: DecodeConfig, model: MoEModel,
                 ratio: float = 0.5, sparsity: float = 0.25, calibration: bool = True,
                 prefill: PrefillRouting | None = None, own_model: bool = False, **base):
        super().__init__(layout, decode, **base)
        if not 0 < ratio <= 1:
            raise ValueError(f"ratio = {ratio} is out of range: accepted (0, 1]")
        self.ratio, self.calibration = ratio, calibration
        self.masks = pruning_masks(model, sparsity)
        self.top_k, self.prefill = model.cfg.top_k, prefill
        self.model = model if own_model else None

    def router(self, kind: PassKind, tokens: torch.Tensor) -> Router | None:
        if kind == PassKind.PREFILL and self.prefill is not None:
            return self.prefill.router(tokens, self.top_k)
        return super().router(kind, tokens)

    def channels(self, kind, depths):
        if kind not in (PassKind.DRAFT, PassKind.VERIFY):
            return None
        return CoalescingHook(self.layout, depths, self.masks, self.ratio, self.calibration)


def pruned_edgexpert(layout: WeightLayout, decode: DecodeConfig, model: MoEModel, ratio: float,
                     calibration: bool, prefill: PrefillRouting | None = None,
                     **base) -> EdgeXpert:
    """EdgeXpert decoding on the bundled pruned-and-recovered checkpoint of `model`, with that
    checkpoint's own mask (`Policy.model`: golden.studies.evaluate.measure runs it on that
    model)."""
    pruned = load_pruned_checkpoint(None, model)
    return EdgeXpert(layout, decode, pruned.model, ratio, pruned.meta["prune"]["sparsity"],
                     calibration, prefill=prefill, own_model=True, **base)
