"""The host's side of the accelerator top: a decode step's MoE layers as command beats, and the
outputs they must produce.

Per batch (the rows of one pass and layer, at most `tokens` of them, one token slot each) the
host forms the engine's groups (each chosen expert with up to `candidates` of its (token, slot)
choices; the host's masks: candidates of several depth groups together, each on its own depth
group's masks, `merge_depths`; the DCU's masks: an expert's consecutive depth groups, the
DCU's *parts*, each selected on by the DCU, `merge_parts`), packs them into EMA steps that fit
the slots and the buffer, and sends per step either (host masks) a NEW_STEP, then per group its
two descriptors (GATE_UP, DOWN, with the scale blocks and the group's masks), the GATE_UP
`HOST_LEAD` groups ahead, each followed by its group's CAND and X beats (GU(g + 1), its CAND and
X, then D(g) at 1); or (the DCU's masks) per group a GATE_UP job per part (its route and its
inputs as data beats; the step's first asks for the NEW_STEP) and a DOWN job's header and prune
words per part, `more` on every part's jobs but the last, with DCU_CAND beats (`part_last` on
each part's last candidate), in the order `ahead` (GU(g + DCU_LEAD) with g + DCU_LEAD's CAND
and X, then D(g)) or `inline` (GU(g), D(g), then g's CAND and X): `fetch_order`. At the end a
FLUSH of each token slot. A layer's batches go back to back (`layer_commands`), with the host's
and the DCU's masks the next batch's first GATE_UP ahead of the batch's last `CROSS` DOWNs.
Knows the contracts and the top's payload layouts, never the RTL's arithmetic.

The steps are packed on golden's selection in both mask modes, so both fetch alike (a
host without it would pack on the upper bound, `keep` channels per matrix and group).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from edgexpert.cocotb_tests.engine.host import group_outputs, moe_items
from edgexpert.contracts.dcu import LANES, DcuJob, encode_job
from edgexpert.contracts.ema import Descriptor, encode_descriptor, new_step_command
from edgexpert.contracts.top import (TopOp, cand_item, flush_item, input_beats, inputs_per_beat,
                                     x_item)
from edgexpert.contracts.trace import PassKind
from edgexpert.contracts.weight_layout import Matrix
from edgexpert.hw.ema import EmaGeometry
from edgexpert.hw.engine.engine import X_QUEUE
from edgexpert.hw.engine.layouts import flush_layout, x_layout
from edgexpert.hw.top import command_layout
from edgexpert.hw.top.layouts import data_item_layout, host_cand_layout, route_item_layout

__all__ = ["Group", "Batch", "expert_groups", "top_groups", "plan_batches", "batch_commands",
           "expected_outputs", "fetch_order", "layer_commands", "HOST_LEAD", "DCU_LEAD",
           "DCU_LEAD_LIMIT", "CROSS", "CROSSING", "cycle_bound"]

#: GATE_UP descriptors the host sends ahead of a group's DOWN with its own masks, and GATE_UP
#: jobs ahead of a DOWN job in the DCU's `ahead` order, each with its group's CAND and X, as
#: measured (`edgexpert bench top --quick`, docs/blocks/top.md, Cycles, 2026-12-03 evening): the
#: host's masks 171,693 cycles at 1, 171,426 at 2; the DCU's 213,380 at 1, 188,350 at 2, 187,115
#: at 3, a hang at 4 (a DOWN job waits for its group's hidden vectors; the GATE_UP jobs and
#: inputs ahead of it keep the bus and the GATE_UP array busy meanwhile); with the DCU's parts
#: merged (2026-12-04) 182,371 at 2 and 183,445 at 3; with the radix-16 search (2026-12-04
#: night) 192,510 at 1, 178,995 at 2, 180,337 at 3
HOST_LEAD = 1
DCU_LEAD = 2
#: the most GATE_UP jobs, with their inputs, the DCU's order may send ahead of a DOWN job: while
#: D(g) is not in the DCU, g's hidden values fill the top's packed queue (one group) and g + 1's
#: cannot leave the engine, whose GATE_UP side then holds X_QUEUE groups (g + 1 draining, the one
#: in its MAC, the one loading): the inputs of g + 1 + X_QUEUE would wait for D(g), sent after
#: them (lead 4 hangs the bundled step, docs/blocks/top.md "The DCU path")
DCU_LEAD_LIMIT = X_QUEUE
#: DOWNs at a batch's end sent after the next batch's first GATE_UP (the next batch of the same
#: pass and layer: its tokens do not depend on this batch's outputs), for the masks that gain
#: from it (`CROSSING`). The step's last DOWNs wait for their groups' hidden vectors (the DCU's
#: decisions on them, or the DOWN MACs the host's masks feed) with nothing of their own step left
#: to fetch; the next batch's GATE_UP (its NEW_STEP ahead of them, so they are fetched in its
#: first step, which `plan_batches` packs with them) fills the bus instead. Its CAND and X beats
#: stay behind the batch's flushes.
CROSS = 2
#: the masks whose batches cross, as measured (`edgexpert bench top --quick`, docs/blocks/top.md,
#: Cycles, 2026-12-05): the DCU's 178,995 cycles without, 176,891 at 1, 176,566 at 2, 178,016
#: at 3; the host's 171,693 without, 170,959 at 2; whole experts 215,149 without, 215,524 at 2,
#: so they do not cross
CROSSING = ("dcu", "edgexpert")


@dataclass
class Group:
    expert: int
    cands: list                  # (row, k) in row order
    gate_up: tuple               # selected input channels (merged depth groups: the union)
    down: tuple
    # per candidate its own (gate_up, down) channels when the group merges depth groups: its X
    # beats are 0 off its GATE_UP channels and its CAND carries its DOWN channels, so the
    # group's one walk of the union gives each candidate its own masked sums
    # (docs/contracts.md, "Candidates of several depth groups in one engine group")
    own: list | None = None
    # with the DCU's masks, the candidates of each of its parts (a depth group's candidates of
    # the expert, `top_groups`' group, on whose inputs the DCU selects), part after part: one
    # pair of DCU jobs per part, one descriptor per matrix for the group (docs/blocks/top.md,
    # "The DCU path")
    parts: list | None = None

    @property
    def job_parts(self) -> list:
        """The candidates of each pair of DCU jobs: the parts, or the whole group as one."""
        return self.parts or [self.cands]


@dataclass
class Batch:
    prompt: int
    pass_index: int
    kind: PassKind
    layer: int
    rows: list
    groups: list = field(default_factory=list)
    steps: list = field(default_factory=list)   # lists of group indices
    # groups of the batch before whose DOWNs this batch's first step holds (`CROSS`)
    carried: int = 0


def _channels(mask_row) -> tuple:
    return tuple(np.flatnonzero(mask_row).tolist())


def expert_groups(trace, rows: list, candidates: int, by_depth: bool) -> list[tuple[int, list]]:
    """The engine groups of one batch's rows: per expert (and depth group, `by_depth`),
    ascending, its (row, routing slot) choices in row order, at most `candidates` per group."""
    chosen: dict[tuple, list] = {}
    for row in rows:
        for k, e in enumerate(trace["experts"][row]):
            if e >= 0:
                depth = int(trace["row_depth"][row]) if by_depth else -1
                chosen.setdefault((int(e), depth), []).append((row, k))
    return [(e, cands[j:j + candidates]) for (e, _), cands in sorted(chosen.items())
            for j in range(0, len(cands), candidates)]


def top_groups(trace, tokens: int, candidates: int):
    """(layer, [(row, slot), ...]) of every group the top runs with EdgeXpert's masks: per
    (prompt, pass, layer) the rows in batches of at most `tokens`, in each batch the
    `expert_groups` by depth group (the groups golden's masked outputs are computed on,
    golden/traces/expert_outputs.py)."""
    t = trace
    keys = np.stack([t["row_prompt"], t["row_pass"], t["row_layer"]], 1)
    for key in np.unique(keys, axis=0).tolist():
        rows = np.flatnonzero((keys == key).all(1)).tolist()
        for i in range(0, len(rows), tokens):
            for _, cands in expert_groups(t, rows[i:i + tokens], candidates, by_depth=True):
                yield key[2], cands


def plan_batches(trace, masks: dict | None, rows_of: list, candidates: int, tokens: int,
                 geometry: EmaGeometry, merge_depths: bool = False,
                 merge_parts: bool = False, carry: int = 0) -> list[Batch]:
    """Batches of the given rows (sorted by prompt, pass, layer) with their groups and steps.
    `masks`: None for whole experts, else golden's masked arrays (`prepare_masked`), one mask
    per depth group and expert; `merge_depths`: an engine group takes an expert's candidates of
    every depth group, each on its own masks (the host's masks); `merge_parts`: an engine group
    takes an expert's consecutive depth groups (the DCU's parts) while their candidates fit
    (the DCU's masks, selected per part); `carry`: a batch's first step also holds the DOWN
    matrices of up to `carry` groups of the batch before (its last step's last groups; same pass
    and layer), when they fit with its first group (`Batch.carried`, `CROSS`)."""
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
            by_depth = masks is not None and not merge_depths
            for e, cands in expert_groups(t, part, candidates, by_depth=by_depth):
                last = batch.groups[-1] if batch.groups else None
                if (merge_parts and last is not None and last.expert == e
                        and len(last.cands) + len(cands) <= candidates):
                    row, k = cands[0]
                    last.cands += cands
                    last.parts.append(cands)
                    last.gate_up, last.down = (tuple(sorted(set(have) | set(_channels(
                        masks[name][row, k])))) for have, name in (
                        (last.gate_up, "gate_up_mask"), (last.down, "down_mask")))
                    continue
                if masks is None:
                    gu, dn = tuple(range(t.layout.d_model)), tuple(range(t.layout.expert_ffn))
                    batch.groups.append(Group(e, cands, gu, dn))
                elif merge_depths:
                    own = [(_channels(masks["gate_up_mask"][row, k]),
                            _channels(masks["down_mask"][row, k])) for row, k in cands]
                    gu, dn = (tuple(sorted(set().union(*(o[m] for o in own)))) for m in range(2))
                    batch.groups.append(Group(e, cands, gu, dn, own))
                else:
                    # one mask per group of the top (`top_groups`): its first candidate's
                    row, k = cands[0]
                    batch.groups.append(Group(e, list(cands),
                                              _channels(masks["gate_up_mask"][row, k]),
                                              _channels(masks["down_mask"][row, k]),
                                              parts=[cands] if merge_parts else None))
            # i > 0: the batch before is of the same pass and layer
            if carry and i > 0 and batch.groups and batches[-1].steps:
                before = batches[-1]
                carried = [before.groups[j] for j in before.steps[-1][-carry:]]
                batch.steps = _pack_steps(batch.groups, geometry, carried)
                batch.carried = len(carried) if batch.steps else 0
            if not batch.steps:
                batch.steps = _pack_steps(batch.groups, geometry)
            batches.append(batch)
    return batches


def _matrices(grp: Group, matrices=tuple(Matrix)) -> list[tuple[Matrix, tuple]]:
    """(matrix, selected channels) of the group's `matrices`."""
    return [(m, grp.gate_up if m == Matrix.GATE_UP else grp.down) for m in matrices]


def _need(grp: Group, resident: dict, g: EmaGeometry,
          matrices=tuple(Matrix)) -> tuple[int, int]:
    """Buffer lines (an upper bound: each new channel's stride, each new matrix's scale block)
    and slots the group's `matrices` add to a step holding `resident`."""
    lines, slots = 0, 0
    for matrix, chans in _matrices(grp, matrices):
        have = resident.get((grp.expert, matrix))
        if have is None:
            slots += 1
            lines += g.scale_beats(matrix)
            have = set()
        lines += len(set(chans) - have) * g.stride_beats(matrix)
    return lines, slots


def _pack_steps(groups: list[Group], g: EmaGeometry,
                carried: list[Group] = ()) -> list[list[int]]:
    """Consecutive groups per EMA step while the slots and the buffer lines suffice. The first
    step also holds the DOWN matrices of `carried` (groups of the batch before); [] when they
    do not fit with the first group."""
    steps, step = [], []
    resident: dict[tuple, set] = {}
    lines = 0
    for grp in carried:
        lines += _need(grp, resident, g, (Matrix.DOWN,))[0]
        _hold(grp, resident, (Matrix.DOWN,))
    if carried and groups:
        need, slots = _need(groups[0], resident, g)
        if len(resident) + slots > g.slots or lines + need > g.lines:
            return []
    for i, grp in enumerate(groups):
        need, slots = _need(grp, resident, g)
        if step and (len(resident) + slots > g.slots or lines + need > g.lines):
            steps.append(step)
            step, resident, lines = [], {}, 0
            need, slots = _need(grp, resident, g)
        if need > g.lines or slots > g.slots:
            raise ValueError(f"a group of expert {grp.expert} needs {need} buffer lines and "
                             f"{slots} slots: the EMA has {g.lines} and {g.slots}")
        _hold(grp, resident)
        lines += need
        step.append(i)
    if step:
        steps.append(step)
    return steps


def _hold(grp: Group, resident: dict, matrices=tuple(Matrix)):
    """The group's `matrices` resident in the step from now on."""
    for matrix, chans in _matrices(grp, matrices):
        resident.setdefault((grp.expert, matrix), set()).update(chans)


def _beat(lay, op: TopOp, bits: int) -> int:
    """A command beat: the op in its field, the argument's packed bits in the union."""
    return int(op) << lay["op"].offset | bits << lay["arg"].offset


def batch_commands(trace, batch: Batch, *, candidates: int, tokens: int, word_bits: int,
                   dcu: tuple[int, int] | None = None, order: str = "ahead",
                   segments: bool = False) -> list:
    """The command beats of one batch (module doc for the order). `dcu`: the DCU selects, keeping
    (GATE_UP, DOWN) channels per group; None: the groups' masks go in EMA descriptors.
    `word_bits`: the engine's word (the EMA's data width), which sets the X beat's inputs.
    `segments`: the beats in (kind, beats) runs, kind "new_step" (the host's), "gate_up" (a
    group's GATE_UP descriptor or jobs), "inputs" (its CAND and X), "down" (its DOWN descriptor
    or jobs) or "flush" (`layer_commands`)."""
    if order not in ("ahead", "inline"):
        raise ValueError(f"order = {order!r}: accepted 'ahead' or 'inline'")
    t, layout = trace, trace.layout
    lay = command_layout(tokens, candidates, layout.d_model, word_bits,
                         expert_ffn=layout.expert_ffn)
    eng = {"cand": host_cand_layout(tokens, layout.expert_ffn),
           "x": x_layout(candidates, layout.d_model, inputs_per_beat(word_bits)),
           "flush": flush_layout(tokens)}
    slot_of = {row: i for i, row in enumerate(batch.rows)}

    def descriptor(i: int, matrix: Matrix) -> list[int]:
        """Group i's descriptor of `matrix`, tagged 2i (GATE_UP) or 2i + 1 (DOWN)."""
        grp = batch.groups[i]
        chans = grp.gate_up if matrix == Matrix.GATE_UP else grp.down
        d = Descriptor((2 * i + int(matrix == Matrix.DOWN)) % 256, batch.layer, grp.expert,
                       matrix, chans, scales=True)
        return [_beat(lay, TopOp.EMA, w) for w in encode_descriptor(layout, d)]

    cand_op = TopOp.CAND if dcu is None else TopOp.DCU_CAND

    def inputs(i: int) -> list[int]:
        grp = batch.groups[i]
        n = len(grp.cands)
        own = grp.own or [(None, None)] * n
        # a DCU part's last candidate (but the group's last, which `last` marks)
        ends = set(np.cumsum([len(p) for p in grp.job_parts])[:-1] - 1)
        out = [_beat(lay, cand_op, eng["cand"].const(cand_item(
            t["x_m"][row], t["x_e"][row], slot_of[row], t["weights_q16"][row, k], c == n - 1,
            tokens, layout.expert_ffn, own[c][1], part_last=c in ends)).as_bits())
            for c, (row, k) in enumerate(grp.cands)]
        for c, (row, _) in enumerate(grp.cands):
            x = np.array(t["x_q"][row])
            if own[c][0] is not None:
                off = np.ones(len(x), bool)
                off[list(own[c][0])] = False
                x[off] = 0
            xs = input_beats(x, word_bits)
            out += [_beat(lay, TopOp.X, eng["x"].const(x_item(
                c, b, v, c == n - 1 and b == len(xs) - 1, n, layout.d_model,
                word_bits)).as_bits())
                for b, v in enumerate(xs)]
        return out

    flushes = [_beat(lay, TopOp.FLUSH, eng["flush"].const(flush_item(s, tokens)).as_bits())
               for s in range(len(batch.rows))]
    if dcu is not None:
        run = _dcu_commands(trace, batch, lay, dcu, order, inputs) + [("flush", flushes)]
        return run if segments else _flat(run)
    run = []
    for step in batch.steps:
        run.append(("new_step", [_beat(lay, TopOp.EMA, new_step_command())]))
        # the next groups' GATE_UPs, each with its inputs, go ahead of this group's DOWN
        # (within the step): the bus fetches them and the GATE_UP array multiplies them while
        # this group's hidden vectors are made (docs/blocks/top.md, "Host masks")
        for kind, n in fetch_order(len(step), HOST_LEAD):
            if kind == "gate_up":
                run += [("gate_up", descriptor(step[n], Matrix.GATE_UP)),
                        ("inputs", inputs(step[n]))]
            else:
                run.append(("down", descriptor(step[n], Matrix.DOWN)))
    run.append(("flush", flushes))
    return run if segments else _flat(run)


def layer_commands(trace, batches: list[Batch], *, candidates: int, tokens: int,
                   word_bits: int, dcu: tuple[int, int] | None = None,
                   order: str = "ahead") -> list[int]:
    """The command beats of one pass and layer's batches, back to back (`batch_commands`); a
    batch's first GATE_UP (the DCU's job: its route and data beats; or the host's NEW_STEP and
    descriptor) goes ahead of the batch before's last `Batch.carried` DOWNs (`CROSS`), its CAND
    and X beats stay behind that batch's flushes."""
    runs = [batch_commands(trace, b, candidates=candidates, tokens=tokens, word_bits=word_bits,
                           dcu=dcu, order=order, segments=True) for b in batches]
    for before, (batch, run) in zip(runs, zip(batches[1:], runs[1:])):
        if batch.carried:
            # the first GATE_UP job or descriptor, and the host's NEW_STEP before it
            first = next(j for j, (kind, _) in enumerate(run) if kind == "gate_up")
            at = [j for j, (kind, _) in enumerate(before) if kind == "down"][-batch.carried]
            before[at:at] = run[:first + 1]
            del run[:first + 1]
    return [beat for run in runs for beat in _flat(run)]


def _flat(run: list[tuple[str, list[int]]]) -> list[int]:
    """The beats of (kind, beats) segments, in order."""
    return [beat for _, part in run for beat in part]


def _dcu_commands(trace, batch: Batch, lay, keep: tuple[int, int], order: str,
                  inputs) -> list[tuple[str, list[int]]]:
    """The DCU jobs and the CAND and X beats of a batch's groups, step by step, as (kind,
    beats) segments (`batch_commands`)."""
    t, layout = trace, trace.layout
    route_last = route_item_layout["last"].offset
    route_more = route_item_layout["more"].offset
    data_last = data_item_layout["last"].offset

    def marked(words, offset, op, more=False):
        # `last` on the job's last beat; `more` (ROUTE) on its header
        return [_beat(lay, op, w | int(j == len(words) - 1) << offset
                      | int(more and op == TopOp.ROUTE and j == 0) << route_more)
                for j, w in enumerate(words)]

    def jobs(expert: int, cands: list, first: bool, tag: int,
             more: bool) -> tuple[list[int], list[int]]:
        """A part's GATE_UP job (route and data beats), DOWN job header and prune words; `more`:
        the group's next part's jobs follow."""
        rows, slots = [r for r, _ in cands], [k for _, k in cands]
        n = len(rows)
        gu_route, gu_data = encode_job(layout, DcuJob(
            tag % 256, batch.layer, expert, Matrix.GATE_UP, t["x_q"][rows], t["x_m"][rows],
            t["x_e"][rows], t["weights_q16"][rows, slots], keep[0], scales=True,
            new_step=first))
        f = layout.expert_ffn
        # the DOWN job's entries and data are the top's: only the header and prune words here
        dn_route, _ = encode_job(layout, DcuJob(
            (tag + 1) % 256, batch.layer, expert, Matrix.DOWN, np.zeros((n, f), np.int64),
            np.zeros(n, np.int64), np.zeros(n, np.int64), np.zeros(n, np.int64), keep[1],
            scales=True))
        dn_route = dn_route[:1 + -(-f // LANES)]
        return (marked(gu_route, route_last, TopOp.ROUTE, more)
                + marked(gu_data, data_last, TopOp.DATA),
                marked(dn_route, route_last, TopOp.ROUTE, more))

    beats = []
    tag = 0
    for step in batch.steps:
        made = []
        for n, i in enumerate(step):
            grp = batch.groups[i]
            parts = grp.job_parts
            gu, dn = [], []
            for p, cands in enumerate(parts):
                g_beats, d_beats = jobs(grp.expert, cands, n == 0 and p == 0, tag,
                                        p < len(parts) - 1)
                gu += g_beats
                dn += d_beats
                tag += 2
            made.append((gu, dn))
        # `ahead`: a group's CAND and X right behind its GATE_UP job, so the engine multiplies
        # the next groups while a DOWN job waits in the DCU for its group's hidden vectors
        # (sent behind D(g) they would wait for it: the route queue holds one GATE_UP job)
        ahead = order == "ahead"
        for kind, n in fetch_order(len(step), DCU_LEAD if ahead else 0):
            if kind == "gate_up":
                beats += [("gate_up", made[n][0])] + ([("inputs", inputs(step[n]))] if ahead
                                                      else [])
            else:
                beats += [("down", made[n][1])] + ([] if ahead
                                                   else [("inputs", inputs(step[n]))])
    return beats


def fetch_order(groups: int, lead: int) -> list[tuple[str, int]]:
    """A step's order with `lead` GATE_UPs ahead: ("gate_up", g) for group g's GATE_UP, ("down",
    g) for its DOWN (`batch_commands` puts g's CAND and X behind the one or the other).
    GU(0..lead-1) first; then per group g: GU(g + lead), D(g). `lead` 0 is `inline` (GU(g),
    D(g))."""
    order = [("gate_up", g) for g in range(min(lead, groups))]
    for g in range(groups):
        if g + lead < groups or lead == 0:
            order.append(("gate_up", g + lead))
        order.append(("down", g))
    return order


def expected_outputs(values, batch: Batch, word_bits: int) -> dict[str, list]:
    """The engine outputs of one batch, in order, from `values` (the trace, or golden's masked
    arrays): hidden, hidden_scale and expert_out per group, moe_out per token (the engine's
    beats at `word_bits`, cocotb_tests/engine/host.py)."""
    want = {"hidden": [], "hidden_scale": [], "expert_out": [], "moe_out": []}
    for grp in batch.groups:
        rk = tuple(zip(*grp.cands))
        for name, items in group_outputs(values["hidden_q"][rk], values["hidden_m"][rk],
                                         values["hidden_e"][rk],
                                         values["expert_out_q16"][rk]).items():
            want[name] += items
    for s, row in enumerate(batch.rows):
        want["moe_out"] += moe_items(s, values["moe_out_q16"][row], word_bits)
    return want


def cycle_bound(batch: Batch, beats: list[int], expect: dict, geometry: EmaGeometry,
                latency: int) -> int:
    """Cycles a batch may take before a bench calls it a hang: 40 per command beat, buffer
    word fed (its groups' masks; whole matrices when the masks are not known) and output item,
    and 8 memory latencies per step and group, plus 5,000 (a margin, not a model: the benches'
    random pauses hold each stream about half the cycles)."""
    def words(grp):
        gu = len(grp.gate_up) or geometry.layout.d_model
        dn = len(grp.down) or geometry.layout.expert_ffn
        return gu * geometry.column_beats(0) + dn * geometry.column_beats(1)
    return 40 * (len(beats) + sum(words(g) for g in batch.groups)
                 + sum(len(v) for v in expect.values())) \
        + 8 * latency * (max(1, len(batch.steps)) + len(batch.groups)) + 5000
