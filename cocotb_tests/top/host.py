"""The host's side of the accelerator top: a decode step's MoE layers as command beats, and the
outputs they must produce.

Per batch (the rows of one pass and layer, at most `tokens` of them, one token slot each) the
host forms the engine's groups (naive: each chosen expert with up to `candidates` of its
(token, slot) choices; EdgeXpert: the same within each depth group, which shares one mask),
packs them into EMA steps that fit the slots and the buffer, and sends per step a NEW_STEP, then
per group its two descriptors (GATE_UP, DOWN, with the scale blocks and the group's masks) one
group ahead of the group's CAND and X beats, and at the end a FLUSH of each token slot. Knows
the contracts and the top's payload layouts, never the RTL's arithmetic.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from edgexpert.contracts.ema import Descriptor, encode_descriptor, new_step_command
from edgexpert.contracts.top import TopOp
from edgexpert.contracts.trace import PassKind
from edgexpert.contracts.weight_layout import Matrix
from edgexpert.hw.ema import EmaGeometry
from edgexpert.hw.engine.layouts import act_layout, cand_layout, flush_layout
from edgexpert.hw.top import command_layout

__all__ = ["Group", "Batch", "plan_batches", "batch_commands", "expected_outputs"]


@dataclass
class Group:
    expert: int
    cands: list                  # (row, k) in row order
    gate_up: tuple               # selected input channels
    down: tuple


@dataclass
class Batch:
    prompt: int
    pass_index: int
    kind: PassKind
    layer: int
    rows: list
    groups: list = field(default_factory=list)
    steps: list = field(default_factory=list)   # lists of group indices


def _channels(mask_row) -> tuple:
    return tuple(np.flatnonzero(mask_row).tolist())


def plan_batches(trace, masks: dict | None, rows_of: list, candidates: int, tokens: int,
                 geometry: EmaGeometry) -> list[Batch]:
    """Batches of the given rows (sorted by prompt, pass, layer) with their groups and steps.
    `masks`: None for whole experts, else the arrays of reference.masked_outputs."""
    t = trace
    selected = set(rows_of)
    batches = []
    keys = sorted({(int(t["row_prompt"][r]), int(t["row_pass"][r]), int(t["row_layer"][r]))
                   for r in selected})
    for prompt, index, layer in keys:
        rows = [r for r in np.flatnonzero((t["row_prompt"] == prompt) & (t["row_pass"] == index)
                                          & (t["row_layer"] == layer)).tolist() if r in selected]
        for i in range(0, len(rows), tokens):
            part = rows[i:i + tokens]
            batch = Batch(prompt, index, PassKind(int(t["row_kind"][part[0]])), layer, part)
            # one mask per (depth group, expert): naive masks are every channel (depth ignored)
            chosen: dict[tuple, list] = {}
            for row in part:
                for k, e in enumerate(t["experts"][row]):
                    if e >= 0:
                        depth = -1 if masks is None else int(t["row_depth"][row])
                        chosen.setdefault((int(e), depth), []).append((row, k))
            for (e, _), cands in sorted(chosen.items()):
                if masks is None:
                    gu, dn = tuple(range(t.layout.d_model)), tuple(range(t.layout.expert_ffn))
                else:
                    row, k = cands[0]
                    gu = _channels(masks["gate_up_mask"][row, k])
                    dn = _channels(masks["down_mask"][row, k])
                for j in range(0, len(cands), candidates):
                    batch.groups.append(Group(e, cands[j:j + candidates], gu, dn))
            batch.steps = _pack_steps(batch.groups, geometry)
            batches.append(batch)
    return batches


def _need(grp: Group, resident: dict, g: EmaGeometry) -> tuple[int, int]:
    """Buffer lines (an upper bound: each new channel's stride, each new matrix's scale block)
    and slots a group adds to a step holding `resident`."""
    lines, slots = 0, 0
    for matrix, chans in ((Matrix.GATE_UP, grp.gate_up), (Matrix.DOWN, grp.down)):
        have = resident.get((grp.expert, matrix))
        if have is None:
            slots += 1
            lines += g.scale_beats(matrix)
            have = set()
        lines += len(set(chans) - have) * g.stride_beats(matrix)
    return lines, slots


def _pack_steps(groups: list[Group], g: EmaGeometry) -> list[list[int]]:
    """Consecutive groups per EMA step while the slots and the buffer lines suffice."""
    steps, step = [], []
    resident: dict[tuple, set] = {}
    lines = 0
    for i, grp in enumerate(groups):
        need, slots = _need(grp, resident, g)
        if step and (len(resident) + slots > g.slots or lines + need > g.lines):
            steps.append(step)
            step, resident, lines = [], {}, 0
            need, slots = _need(grp, resident, g)
        if need > g.lines or slots > g.slots:
            raise ValueError(f"a group of expert {grp.expert} needs {need} buffer lines and "
                             f"{slots} slots: the EMA has {g.lines} and {g.slots}")
        for matrix, chans in ((Matrix.GATE_UP, grp.gate_up), (Matrix.DOWN, grp.down)):
            resident.setdefault((grp.expert, matrix), set()).update(chans)
        lines += need
        step.append(i)
    if step:
        steps.append(step)
    return steps


def _beat(lay, op: TopOp, bits: int) -> int:
    """A command beat: the op in its field, the argument's packed bits in the union."""
    return int(op) << lay["op"].offset | bits << lay["arg"].offset


def batch_commands(trace, batch: Batch, *, candidates: int, tokens: int) -> list[int]:
    """The command beats of one batch (module doc for the order)."""
    t, layout = trace, trace.layout
    lay = command_layout(tokens, candidates, layout.d_model)
    eng = {"cand": cand_layout(tokens), "x": act_layout(candidates, layout.d_model),
           "flush": flush_layout(tokens)}
    slot_of = {row: i for i, row in enumerate(batch.rows)}
    beats = []

    def descriptors(i: int, tag: int) -> list[int]:
        grp = batch.groups[i]
        words = []
        for n, (matrix, chans) in enumerate(((Matrix.GATE_UP, grp.gate_up),
                                             (Matrix.DOWN, grp.down))):
            d = Descriptor((tag + n) % 256, batch.layer, grp.expert, matrix, chans, scales=True)
            words += encode_descriptor(layout, d)
        return [_beat(lay, TopOp.EMA, w) for w in words]

    def inputs(i: int) -> list[int]:
        grp = batch.groups[i]
        n = len(grp.cands)
        out = [_beat(lay, TopOp.CAND, eng["cand"].const({
            "x": {"m": int(t["x_m"][row]), "e": int(t["x_e"][row])}, "token": slot_of[row],
            "weight": int(t["weights_q16"][row, k]), "last": int(c == n - 1)}).as_bits())
            for c, (row, k) in enumerate(grp.cands)]
        d = layout.d_model
        out += [_beat(lay, TopOp.X, eng["x"].const({
            "candidate": c, "channel": j, "value": int(t["x_q"][row][j]),
            "last": int(c == n - 1 and j == d - 1)}).as_bits())
            for c, (row, _) in enumerate(grp.cands) for j in range(d)]
        return out

    tag = 0
    for step in batch.steps:
        beats.append(_beat(lay, TopOp.EMA, new_step_command()))
        beats += descriptors(step[0], tag)
        tag += 2
        for n, i in enumerate(step):
            # the next group's fetch goes ahead of this group's inputs (within the step)
            if n + 1 < len(step):
                beats += descriptors(step[n + 1], tag)
                tag += 2
            beats += inputs(i)
    beats += [_beat(lay, TopOp.FLUSH, eng["flush"].const({"token": s}).as_bits())
              for s in range(len(batch.rows))]
    return beats


def expected_outputs(values, batch: Batch) -> dict[str, list]:
    """The engine outputs of one batch, in order, from `values` (the trace, or the masked
    reference's arrays): hidden, hidden_scale and expert_out per group, moe_out per token."""
    d, f = values["expert_out_q16"].shape[2], values["hidden_q"].shape[2]
    want = {"hidden": [], "hidden_scale": [], "expert_out": [], "moe_out": []}
    for grp in batch.groups:
        n = len(grp.cands)
        for c, (row, k) in enumerate(grp.cands):
            want["hidden_scale"].append({"candidate": c, "scale": {
                "m": int(values["hidden_m"][row, k]), "e": int(values["hidden_e"][row, k])}})
            want["hidden"] += [{"candidate": c, "channel": j,
                                "value": int(values["hidden_q"][row, k, j]),
                                "last": int(c == n - 1 and j == f - 1)} for j in range(f)]
            want["expert_out"] += [{"candidate": c, "index": j,
                                    "value": int(values["expert_out_q16"][row, k, j]),
                                    "last": int(c == n - 1 and j == d - 1)} for j in range(d)]
    want["moe_out"] = [{"token": s, "index": j, "value": int(values["moe_out_q16"][row, j]),
                        "last": int(j == d - 1)} for s, row in enumerate(batch.rows)
                       for j in range(d)]
    return want
