"""The outputs of the trace's experts on EdgeXpert's channel masks, from the golden model's
integer operations (golden/integer/intops.py) and the bundled checkpoint's weights: an independent
reference for the top bench's `edgexpert` and `dcu` masks (the trace itself holds whole-expert
outputs), and for a prefill trace's MoE arrays (`prefill_outputs`: whole experts on the PRU's
routes).

The groups are the top's: per (prompt, pass, layer) the rows in batches of at most `tokens`, in
each batch per (expert, depth group) its candidates (row, routing slot) in row order, in groups
of at most `candidates` (one engine group; the DCU in the top selects for one such group). Per
group: the GATE_UP mask is the DCU's selection (golden/blocks/dcu.py) on the candidates' MoE inputs
(x_q, x_m, x_e and routing weights); every candidate computes its hidden vector on those channels
(GATE_UP sums over the mask, h quantized over all F values); the DOWN mask is the DCU's
selection on *those* hidden vectors and their scales (what the live policy,
golden/policies/edgexpert.py `CoalescingHook`, selects on, and all the hardware can see), and the
DOWN sums run over it.
`policies.coalescing_ratio` of the channels each; pruning mask all ones (golden/traces/masks.py).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from edgexpert.contracts.trace import Trace
from edgexpert.golden.blocks import dcu
from edgexpert.golden.lm.checkpoint import load_checkpoint
from edgexpert.golden.integer.int_model import IntModel, RESIDUAL_FRAC, weight_rows
from edgexpert.golden.integer.intops import Dyadic, int_matmul, quantize_vec, requant, rshift, sigmoid_q15
from edgexpert.golden.policies.edgexpert import selected_count

from .host import expert_groups

__all__ = ["masked_outputs", "group_reference", "groups_outputs", "hidden_on_channels",
           "down_on_channels", "top_groups", "prefill_outputs"]


def hidden_on_channels(x8, sx: Dyadic, gate, up, gate_up_mask):
    """The SwiGLU expert's hidden vector (docs/contracts.md) on int8 rows x8 with only the
    masked GATE_UP channels' products: (h8, its scale)."""
    xm = x8 * gate_up_mask
    g = requant(int_matmul(xm, gate.f64), sx, gate.scale, RESIDUAL_FRAC)
    u = requant(int_matmul(xm, up.f64), sx, up.scale, RESIDUAL_FRAC)
    silu = rshift(g * sigmoid_q15(g), 15)
    return quantize_vec(rshift(silu * u, RESIDUAL_FRAC), RESIDUAL_FRAC)


def down_on_channels(h8, sh: Dyadic, down, down_mask):
    """The expert's output y (Q.16) from its hidden vectors on the masked DOWN channels."""
    return requant(int_matmul(h8 * down_mask, down.f64), sh, down.scale, RESIDUAL_FRAC)


def top_groups(trace: Trace, tokens: int, candidates: int):
    """(layer, [(row, slot), ...]) of every group the top runs (module doc)."""
    t = trace
    keys = np.stack([t["row_prompt"], t["row_pass"], t["row_layer"]], 1)
    for key in np.unique(keys, axis=0).tolist():
        rows = np.flatnonzero((keys == key).all(1)).tolist()
        for i in range(0, len(rows), tokens):
            for _, cands in expert_groups(t, rows[i:i + tokens], candidates, by_depth=True):
                yield key[2], cands


def group_reference(w: dict, expert: int, x_q, x_m, x_e, g, keep: tuple) -> dict:
    """One group of the top: the candidates' int8 inputs x_q [n, D] with their scales (x_m,
    x_e) and Q.16 routing weights g [n] on `expert` of a layer's weights `w`. `keep`: per matrix
    (GATE_UP, DOWN) the DCU's selection of that many channels (golden/blocks/dcu.py; DOWN on the
    hidden vectors of the masked GATE_UP), or None for every channel. Returns the masks
    (`gate_up`, `down`: uint8 [D], [F]), `hidden_q`, `hidden_m`, `hidden_e`, `expert_out_q16`
    and each candidate's MoE share (`moe`: y g >> 16)."""
    g = np.asarray(g, np.int64)
    x8 = torch.as_tensor(np.asarray(x_q, np.int64))
    sx = Dyadic(torch.as_tensor(np.asarray(x_m, np.int64)),
                torch.as_tensor(np.asarray(x_e, np.int64)))
    gate, up, down = (weight_rows(w[name], expert) for name in ("gate", "up", "down"))
    gu = np.ones(x8.shape[1], np.uint8)
    if keep[0] is not None:
        gu[:] = 0
        gu[dcu.select(np.asarray(x_q), np.asarray(x_m), np.asarray(x_e), g,
                      keep[0]).numpy()] = 1
    h8, sh = hidden_on_channels(x8, sx, gate, up, torch.as_tensor(gu.astype(np.int64)))
    dn = np.ones(h8.shape[1], np.uint8)
    if keep[1] is not None:
        # the DOWN selection on the hidden vectors computed from the masked GATE_UP
        dn[:] = 0
        dn[dcu.select(h8, sh.m, sh.e, g, keep[1]).numpy()] = 1
    y = down_on_channels(h8, sh, down, torch.as_tensor(dn.astype(np.int64)))
    return {"gate_up": gu, "down": dn, "hidden_q": h8.numpy(), "hidden_m": sh.m.numpy(),
            "hidden_e": sh.e.numpy(), "expert_out_q16": y.numpy(),
            "moe": rshift(y * torch.as_tensor(g)[:, None], 16).numpy()}


def groups_outputs(trace, engine: IntModel, groups, keep) -> dict:
    """`masked_outputs`' arrays for `groups` ((layer, [(row, slot), ...]) each) of `trace`'s
    rows, each group's matrices selected by `keep(index, layer, cands)` (`group_reference`)."""
    t = trace
    r_n, k_n = t["experts"].shape
    d, f = t["x_q"].shape[1], t["hidden_q"].shape[2]
    out = {"gate_up_mask": np.zeros((r_n, k_n, d), np.uint8),
           "down_mask": np.zeros((r_n, k_n, f), np.uint8),
           "hidden_q": np.zeros_like(t["hidden_q"]), "hidden_m": np.zeros_like(t["hidden_m"]),
           "hidden_e": np.zeros_like(t["hidden_e"]),
           "expert_out_q16": np.zeros_like(t["expert_out_q16"])}
    moe = np.zeros(t["moe_out_q16"].shape, np.int64)
    for i, (layer, cands) in enumerate(groups):
        users = np.array([row for row, _ in cands])
        slot = np.array([k for _, k in cands])
        e = int(t["experts"][users[0], slot[0]])
        got = group_reference(engine.layers[layer], e, t["x_q"][users], t["x_m"][users],
                              t["x_e"][users], t["weights_q16"][users, slot],
                              keep(i, layer, cands))
        out["gate_up_mask"][users, slot] = got["gate_up"]
        out["down_mask"][users, slot] = got["down"]
        for name in ("hidden_q", "hidden_m", "hidden_e", "expert_out_q16"):
            out[name][users, slot] = got[name]
        np.add.at(moe, users, got["moe"])
    # the contract keeps the MoE sum in int32 registers (docs/contracts.md, number formats)
    out["moe_out_q16"] = ((moe + 2**31) % 2**32 - 2**31).astype(t["moe_out_q16"].dtype)
    return out


def masked_outputs(trace: Trace, ratio: float, path: Path, tokens: int, candidates: int,
                   dense: bool = False) -> dict:
    """Write (and return) `gate_up_mask` [R, K, D], `down_mask` [R, K, F] (uint8) and
    `hidden_q`, `hidden_m`, `hidden_e`, `expert_out_q16`, `moe_out_q16` as the trace's arrays
    on those masks, for the top's groups of at most `candidates` in batches of at most `tokens`
    rows. `dense`: every channel (then the arrays equal the trace's). The weights are the
    checkpoint's the trace's source names (`edgexpert decode --traces` and the benches record
    it), else the bundled one's."""
    checkpoint = trace.header.get("source", {}).get("checkpoint")
    engine = IntModel(load_checkpoint(checkpoint and Path(checkpoint)).model.eval())
    d, f = trace["x_q"].shape[1], trace["hidden_q"].shape[2]
    keep = (None, None) if dense else (selected_count(d, ratio), selected_count(f, ratio))
    out = groups_outputs(trace, engine, top_groups(trace, tokens, candidates),
                         lambda *_: keep)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(path, **out)
    return out


def prefill_outputs(trace, model=None) -> dict:
    """A prefill trace's (contracts/prefill_trace.py) `hidden_q`, `hidden_m`, `hidden_e`,
    `expert_out_q16` and `moe_out_q16` recomputed from its `x_q`, `x_m`, `x_e`, `experts` and
    `weights_q16` with whole experts (every channel), `model` the float checkpoint's (default
    the bundled one). Per (layer, expert) over the tokens of every prompt that chose it."""
    engine = IntModel((model or load_checkpoint().model).eval())
    t = trace
    n, l_n, k_n = t["experts"].shape
    d, f = t["x_q"].shape[2], t["hidden_q"].shape[3]
    out = {name: np.zeros_like(t[name]) for name in ("hidden_q", "hidden_m", "hidden_e",
                                                    "expert_out_q16", "moe_out_q16")}
    moe = np.zeros((n, l_n, d), np.int64)
    ones_d, ones_f = torch.ones(d, dtype=torch.int64), torch.ones(f, dtype=torch.int64)
    for layer in range(l_n):
        w = engine.layers[layer]
        experts = t["experts"][:, layer]
        for e in np.unique(experts[experts >= 0]).tolist():
            users, slot = np.nonzero(experts == e)
            x8 = torch.as_tensor(t["x_q"][users, layer].astype(np.int64))
            sx = Dyadic(torch.as_tensor(t["x_m"][users, layer].astype(np.int64)),
                        torch.as_tensor(t["x_e"][users, layer].astype(np.int64)))
            h8, sh = hidden_on_channels(x8, sx, weight_rows(w["gate"], e),
                                        weight_rows(w["up"], e), ones_d)
            y = down_on_channels(h8, sh, weight_rows(w["down"], e), ones_f)
            out["hidden_q"][users, layer, slot] = h8.numpy()
            out["hidden_m"][users, layer, slot] = sh.m.numpy()
            out["hidden_e"][users, layer, slot] = sh.e.numpy()
            out["expert_out_q16"][users, layer, slot] = y.numpy()
            g = torch.as_tensor(t["weights_q16"][users, layer, slot].astype(np.int64))
            np.add.at(moe, (users, layer), rshift(y * g[:, None], 16).numpy())
    # the contract keeps the MoE sum in int32 registers (docs/contracts.md, number formats)
    out["moe_out_q16"] = ((moe + 2**31) % 2**32 - 2**31).astype(t["moe_out_q16"].dtype)
    return out
