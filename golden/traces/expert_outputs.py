"""A trace's expert outputs recomputed by the integer model (golden/integer/int_model.py
`expert_hidden`, `expert_down`) on the trace's own MoE inputs and routes: the expected values of
the top's benches where the trace holds none (EdgeXpert's channel masks, the fuzz bench's drawn
rows), and an independent check of a prefill trace's MoE arrays (`prefill_outputs`).

A group is one engine group: (layer, [(row, routing slot), ...]) of candidates sharing an
expert. Which rows share a group is the host's choice (the top takes any 1..candidates
candidates of one expert), so the caller passes the groups (cocotb_tests/top/host.py
`top_groups` for the trace's rows). Per group: the GATE_UP mask is the DCU's selection
(golden/blocks/dcu.py) on the candidates' MoE inputs (x_q, x_m, x_e and routing weights); every
candidate computes its hidden vector on those channels (GATE_UP sums over the mask, h quantized
over all F values); the DOWN mask is the DCU's selection on *those* hidden vectors and their
scales (what the live policy, golden/policies/edgexpert.py `CoalescingHook`, selects on, and
all the hardware can see), and the DOWN sums run over it. The pruning mask is all ones
(golden/traces/masks.py).
"""

from __future__ import annotations

import numpy as np
import torch

from ...contracts.trace import Trace
from ..blocks import dcu
from ..integer.int_model import IntModel, expert_down, expert_hidden, load_int_model, weight_rows
from ..integer.intops import Dyadic, rshift
from ..policies.edgexpert import selected_count

__all__ = ["source_int_model", "group_reference", "groups_outputs", "masked_outputs",
           "prefill_outputs"]


def source_int_model(trace) -> IntModel:
    """The integer model of the checkpoint the trace's source names (`edgexpert decode
    --traces` and the benches record it), else the bundled one's."""
    checkpoint = trace.header.get("source", {}).get("checkpoint")
    return load_int_model(checkpoint)


def _wrap_int32(moe: np.ndarray, dtype) -> np.ndarray:
    # the contract keeps the MoE sum in int32 registers (docs/contracts.md, number formats)
    return ((moe + 2**31) % 2**32 - 2**31).astype(dtype)


def group_reference(w: dict, expert: int, x_q, x_m, x_e, g, keep: tuple) -> dict:
    """One group: the candidates' int8 inputs x_q [n, D] with their scales (x_m, x_e) and Q.16
    routing weights g [n] on `expert` of a layer's weights `w`. `keep`: per matrix (GATE_UP,
    DOWN) the DCU's selection of that many channels (DOWN on the hidden vectors of the masked
    GATE_UP), or None for every channel. Returns the masks (`gate_up`, `down`: uint8 [D],
    [F]), `hidden_q`, `hidden_m`, `hidden_e`, `expert_out_q16` and each candidate's MoE share
    (`moe`: y g >> 16)."""
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
    h8, sh = expert_hidden(x8, sx, gate, up, torch.as_tensor(gu.astype(np.int64)))
    dn = np.ones(h8.shape[1], np.uint8)
    if keep[1] is not None:
        # the DOWN selection on the hidden vectors computed from the masked GATE_UP
        dn[:] = 0
        dn[dcu.select(h8, sh.m, sh.e, g, keep[1]).numpy()] = 1
    y = expert_down(h8, sh, down, torch.as_tensor(dn.astype(np.int64)))
    return {"gate_up": gu, "down": dn, "hidden_q": h8.numpy(), "hidden_m": sh.m.numpy(),
            "hidden_e": sh.e.numpy(), "expert_out_q16": y.numpy(),
            "moe": rshift(y * torch.as_tensor(g)[:, None], 16).numpy()}


def groups_outputs(trace, engine: IntModel, groups, keep) -> dict:
    """`gate_up_mask` [R, K, D], `down_mask` [R, K, F] (uint8) and `hidden_q`, `hidden_m`,
    `hidden_e`, `expert_out_q16`, `moe_out_q16` as the trace's arrays, for `groups`
    ((layer, [(row, slot), ...]) each) of `trace`'s rows, each group's matrices selected by
    `keep(index, layer, cands)` (`group_reference`); rows and slots in no group stay 0."""
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
    out["moe_out_q16"] = _wrap_int32(moe, t["moe_out_q16"].dtype)
    return out


def masked_outputs(trace: Trace, groups, ratio: float) -> dict:
    """`groups_outputs` with EdgeXpert's masks: `policies.coalescing_ratio` `ratio` of each
    matrix's channels per group, on the weights of the checkpoint the trace's source names."""
    d, f = trace["x_q"].shape[1], trace["hidden_q"].shape[2]
    keep = (selected_count(d, ratio), selected_count(f, ratio))
    return groups_outputs(trace, source_int_model(trace), groups, lambda *_: keep)


def prefill_outputs(trace) -> dict:
    """A prefill trace's (contracts/prefill_trace.py) `hidden_q`, `hidden_m`, `hidden_e`,
    `expert_out_q16` and `moe_out_q16` recomputed from its `x_q`, `x_m`, `x_e`, `experts` and
    `weights_q16` with whole experts (every channel) on the bundled checkpoint's weights. Per
    (layer, expert) over the tokens of every prompt that chose it."""
    engine = load_int_model()
    t = trace
    n, l_n, k_n = t["experts"].shape
    d = t["x_q"].shape[2]
    out = {name: np.zeros_like(t[name]) for name in ("hidden_q", "hidden_m", "hidden_e",
                                                    "expert_out_q16", "moe_out_q16")}
    moe = np.zeros((n, l_n, d), np.int64)
    for layer in range(l_n):
        w = engine.layers[layer]
        experts = t["experts"][:, layer]
        for e in np.unique(experts[experts >= 0]).tolist():
            users, slot = np.nonzero(experts == e)
            x8 = torch.as_tensor(t["x_q"][users, layer].astype(np.int64))
            sx = Dyadic(torch.as_tensor(t["x_m"][users, layer].astype(np.int64)),
                        torch.as_tensor(t["x_e"][users, layer].astype(np.int64)))
            h8, sh = expert_hidden(x8, sx, weight_rows(w["gate"], e), weight_rows(w["up"], e))
            y = expert_down(h8, sh, weight_rows(w["down"], e))
            out["hidden_q"][users, layer, slot] = h8.numpy()
            out["hidden_m"][users, layer, slot] = sh.m.numpy()
            out["hidden_e"][users, layer, slot] = sh.e.numpy()
            out["expert_out_q16"][users, layer, slot] = y.numpy()
            g = torch.as_tensor(t["weights_q16"][users, layer, slot].astype(np.int64))
            np.add.at(moe, (users, layer), rshift(y * g[:, None], 16).numpy())
    out["moe_out_q16"] = _wrap_int32(moe, t["moe_out_q16"].dtype)
    return out
