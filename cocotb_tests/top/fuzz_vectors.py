"""The top fuzz bench's sequences (fuzz.py, docs/blocks/top.md "Fuzz bench"): random command
sequences, some with bad commands, and what the golden model says each must give. Runs in the
pytest process (torch and the golden model load here, not in the simulator); the bench reads
the file it writes.

A *sequence* is one batch of the host model (host.py): 1..tokens token rows of one layer (the
MoE inputs of real rows of the bundled trace, so the values are the integer path's own), each
row choosing 1..2 experts of a small random pool (so groups have several candidates) with
random Q.16 routing weights, in one of four mask modes: whole experts (`naive_sd`), the host's
EdgeXpert masks (`edgexpert`), the DCU's in the top (`dcu`: the `ahead` order, `dcu_inline`;
an engine group takes an expert's depth groups as parts, since 2026-12-04), at a random
coalescing ratio. Every expected output is golden's
(golden/traces/expert_outputs.py `groups_outputs`: the integer model and golden/blocks/dcu.py
on the checkpoint's weights); the bench compares and computes nothing.

Bad commands (`FAULTS`), at most one per DCU job and one per host descriptor (the top
reports a job's or descriptor's first bad field only), each with what the contract says happens
(docs/contracts.md, "The top's commands: accepted ranges", "DCU jobs: accepted ranges",
docs/blocks/top.md "A rejected DCU job"):

- `op`: a beat with an op the top does not have (7, 10-15), anywhere: dropped, `TopError.OP`;
- `stray_x`: an X beat with no group open (the sequence's first beat): dropped, `CANDIDATE`;
- `down_count` (DCU modes): a DOWN job's count other than its group's: `DOWN_COUNT`, the job
  runs with the group's count;
- `down_more` (DCU modes): a DOWN job's `more` flipped: set on its engine group's last part,
  cleared on an earlier part: `DOWN_MORE`, the job runs with its part's (before 2026-12-04 a
  `more` on the last part held its descriptor in `MaskUnion` for a job that never came: the top
  hung);
- `keep_zero`, `keep_above`, `prune_reserved` (DCU modes): a GATE_UP or DOWN job with k = 0,
  k = C + 1, or a reserved PRUNE bit: the DCU rejects it (`DcuError` KEEP, KEEP, RESERVED, the
  job's tag) and the top fetches the matrix whole; golden computes that matrix on every
  channel (and a DOWN selection on the hidden vectors of that whole GATE_UP);
- `entry_weight`, `entry_reserved` (DCU modes): a GATE_UP job's entry (the host's; a DOWN job's
  are the top's) with g = 65537 or a reserved bit: `WEIGHT`, `RESERVED`, the matrix whole;
- `stray_mask` (host modes): a MASK word where a DESCRIPTOR belongs: `STRAY_MASK` (the feeder
  drops it) and the EMA's BAD_COMMAND, which stops the EMA; the sequence's outputs are then not
  meaningful (*poison*: the bench counts them, compares none of the sequence's) and the host
  resets after it (`recover`: the EMA stopped);
- `no_scales`, `no_channel` (host modes; `BAD_DESCRIPTORS`): a descriptor without its scale
  block, or with every mask word 0: `NO_SCALES`, `NO_CHANNEL`, poison (the feeder gives the
  engine zeros for what the descriptor did not fetch, hw/top/feeder.py `MaskWalker`); the EMA
  does not stop, so no reset follows and the next sequence is compared as any. Until
  2026-12-03 both hung the feeder, which read a stale location entry for them (found by the
  long run, sequence 466 of seed 20261203; `bad_descriptor_sequences` is the shortest case);
- `bus_error`: SLVERR or DECERR on a beat of the sequence's first or second burst: the EMA's
  STATUS (poison, `recover`);
- `reset`: a reset after a random number of the sequence's beats (its outputs discarded).

Every valid command (group, flush) of a sequence without poison is checked bit for bit; every
invalid one is counted in the CSR the contract names.

The file (JSON, `write_sequences`): {"seed", "hardware", "sequences": [...]}, each sequence
with its `beats` (hex), `rows`, `groups` ([expert, [[row, slot], ...]]), `parts` ([candidates,
ends its group] per depth group, the DCU's jobs' order), golden's arrays
(`hidden_q`, `hidden_m`, `hidden_e`, `expert_out_q16`, `moe_out_q16`, nested lists), the
`faults`, the rejections due (`command`, `dcu`: [code, tag] lists), `poison`, `recover` (the
EMA stops: the host resets after the sequence), `reset_after` (beats) and `bus_error`
({"burst", "beat", "resp"}).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
from cocotbext.axi.constants import AxiResp

from edgexpert.contracts.dcu import G_MAX, LANES, DcuError, dcu_entry_layout
from edgexpert.contracts.ema import EmaOp
from edgexpert.contracts.top import TopError, TopOp, inputs_per_beat, x_item
from edgexpert.contracts.trace import PassKind
from edgexpert.contracts.weight_layout import Matrix
from edgexpert.hw.ema import EmaGeometry
from edgexpert.hw.engine.layouts import x_layout
from edgexpert.hw.top import command_layout

from .host import batch_commands, expert_groups, plan_batches

__all__ = ["MODES", "FAULTS", "BAD_DESCRIPTORS", "REJECTED_JOBS", "FuzzTrace", "make_sequence",
           "write_sequences", "directed_sequences", "bad_descriptor_sequences"]

#: the mask modes (host.py, contracts/cycles.py TOP_MASKS) and the DCU modes' job orders
MODES = {"naive_sd": None, "edgexpert": None, "dcu": "ahead", "dcu_inline": "inline"}
#: coalescing ratios drawn per masked sequence: the default policy's 0.5 (configs/default.yaml
#: policies.coalescing_ratio) and the ablation's ends (docs/policies.md)
RATIOS = (0.25, 0.5, 0.75)
#: the host's descriptors the feeder rejects but the EMA fetches (module doc)
BAD_DESCRIPTORS = ("no_scales", "no_channel")
#: per kind, the n of the draws random.Random(f"probe-{kind}-{n}") whose bad descriptor's
#: stale location entry names a line past its step's last: the first such n (a hang of the
#: feeder before 2026-12-03, checked on main at c90605c; n 0..4 of no_scales read a line the
#: step writes, or no stale entry)
HUNG = {"no_scales": 5, "no_channel": 0}
#: bad commands by mode kind (module doc)
FAULTS = {"any": ("op", "stray_x", "bus_error", "reset"),
          "dcu": ("down_count", "down_more", "keep_zero", "keep_above", "prune_reserved",
                  "entry_weight", "entry_reserved"),
          "host": ("stray_mask",) + BAD_DESCRIPTORS}
#: faults that stop the EMA (its STATUS keeps the first error; the host resets after)
EMA_ERRORS = ("bus_error", "stray_mask")
#: the DCU job faults whose job the DCU rejects (its matrix then fetched whole)
REJECTED_JOBS = ("keep_zero", "keep_above", "prune_reserved", "entry_weight", "entry_reserved")
#: ops the top without a PRU does not have (TopOp: 7 and 10-15 unused, 8 and 9 the PRU's)
BAD_OPS = (7, 8, 9, 10, 11, 12, 13, 14, 15)
#: share of sequences with bad commands, and the most a sequence gets
FAULT_SHARE, MAX_FAULTS = 0.5, 3
#: how often a kind is drawn: the faults after which nothing is compared (resets, poison) half
#: as often as the others, so most sequences are checked
WEIGHTS = {"reset": 1, "bus_error": 1, "stray_mask": 1, "no_scales": 1, "no_channel": 1}
#: share of sequences with 1..tokens rows (else 1..3)
FULL_BATCHES = 0.25
#: AXI responses of an error beat
ERROR_RESPONSES = (AxiResp.SLVERR, AxiResp.DECERR)


class FuzzTrace:
    """A trace-like view (host.py and golden's `groups_outputs` read `trace[name]` and
    `trace.layout`) of a sequence's rows: row r is real trace row `rows[r]`'s MoE inputs with
    the sequence's experts, routing weights and depth groups."""

    def __init__(self, trace, rows: list[int], experts, weights, depth):
        self.layout = trace.layout
        n = len(rows)
        k = experts.shape[1]
        self._arrays = {
            "x_q": trace["x_q"][rows], "x_m": trace["x_m"][rows], "x_e": trace["x_e"][rows],
            "experts": experts, "weights_q16": weights, "row_depth": depth,
            "row_prompt": np.zeros(n, np.int64), "row_pass": np.zeros(n, np.int64),
            "row_layer": trace["row_layer"][rows],
            "row_kind": np.full(n, int(PassKind.DRAFT), np.int64),
            **{name: np.zeros((n, k) + trace[name].shape[2:], trace[name].dtype)
               for name in ("hidden_q", "hidden_m", "hidden_e", "expert_out_q16")},
            "moe_out_q16": np.zeros((n,) + trace["moe_out_q16"].shape[1:],
                                    trace["moe_out_q16"].dtype)}

    def __getitem__(self, name: str):
        return self._arrays[name]


def _field(layout, *path) -> tuple[int, int]:
    """(offset, width) of a nested field of a packed layout."""
    offset = 0
    for name in path:
        field = layout[name]
        offset += field.offset
        layout = field.shape
    return offset, field.width


def _with(beat: int, at: tuple[int, int], value: int) -> int:
    offset, width = at
    mask = ((1 << width) - 1) << offset
    return beat & ~mask | (value << offset & mask)


class _Beats:
    """Where a command beat's fields sit, for the faults that edit beats."""

    def __init__(self, lay):
        self.op = _field(lay, "op")
        route = ("arg", "route", "beat")
        self.route_last = _field(lay, "arg", "route", "last")
        self.route_more = _field(lay, "arg", "route", "more")
        self.header = {name: _field(lay, *route, "header", name)
                       for name in ("tag", "matrix", "count", "keep")}
        self.prune = _field(lay, *route, "prune")
        self.ema_op = _field(lay, "arg", "ema", "op")
        self.scales = _field(lay, "arg", "ema", "arg", "descriptor", "scales")
        self.matrix = _field(lay, "arg", "ema", "arg", "descriptor", "matrix")
        self.mask = _field(lay, "arg", "ema", "arg", "mask")
        self.entry_g = _field(lay, *route, "entry", "g")

    def get(self, beat: int, at: tuple[int, int]) -> int:
        return beat >> at[0] & ((1 << at[1]) - 1)

    def headers(self, beats: list[int]) -> dict[tuple[int, int], int]:
        """(tag, matrix) -> index of every DCU job's header beat (the ROUTE beat after one with
        `last`, or the first)."""
        found, first = {}, True
        for i, beat in enumerate(beats):
            if self.get(beat, self.op) != TopOp.ROUTE:
                continue
            if first:
                found[(self.get(beat, self.header["tag"]),
                       self.get(beat, self.header["matrix"]))] = i
            first = bool(self.get(beat, self.route_last))
        return found

    def descriptors(self, beats: list[int]) -> list[int]:
        return [i for i, b in enumerate(beats) if self.get(b, self.op) == TopOp.EMA
                and self.get(b, self.ema_op) == EmaOp.DESCRIPTOR]


def make_sequence(trace, engine, hw: dict, index: int, rng: random.Random, *,
                  mode: str | None = None, faults: list[dict] | None = None,
                  rows: int | None = None, pool: int | None = None, choices: int | None = None,
                  layer: int | None = None) -> dict:
    """Sequence `index` (module doc), drawn from `rng`; the keyword arguments fix what is
    otherwise drawn (`faults`: dicts {"kind", "group", "matrix"} for the job faults)."""
    from edgexpert.golden.traces.expert_outputs import groups_outputs

    layout = trace.layout
    tokens, candidates = hw["tokens"], hw["candidates"]
    word_bits = hw["ema"]["data_width"]
    mode = rng.choice(list(MODES)) if mode is None else mode
    layer = rng.randrange(layout.n_layers) if layer is None else layer
    pool_rows = np.flatnonzero(trace["row_layer"] == layer).tolist()
    if rows is None:
        # mostly short batches (the run's length), a quarter up to every token slot
        rows = rng.randint(1, tokens) if rng.random() < FULL_BATCHES else rng.randint(1, 3)
    n = min(rows, len(pool_rows))
    real = rng.sample(pool_rows, n)
    experts_pool = rng.sample(range(layout.experts_per_layer), rng.randint(1, 3)
                              if pool is None else pool)
    k = min(rng.randint(1, 2) if choices is None else choices, len(experts_pool))
    experts = np.array([rng.sample(experts_pool, k) for _ in range(n)], np.int64)
    if pool is not None and choices == 1:
        experts[:, 0] = [experts_pool[r % len(experts_pool)] for r in range(n)]
    weights = np.array([[rng.choice((0, 65536, rng.randint(0, 65536))) for _ in range(k)]
                        for _ in range(n)], np.int64)
    depth = np.array([rng.randrange(2) for _ in range(n)], np.int64)
    ft = FuzzTrace(trace, real, experts, weights, depth)
    masked = mode != "naive_sd"
    ratio = rng.choice(RATIOS) if masked else 1.0
    groups = expert_groups(ft, list(range(n)), candidates, by_depth=masked)
    if faults is None:
        faults = _draw_faults(rng, mode, len(groups))
    whole = {(f["group"], f["matrix"]) for f in faults if f["kind"] in REJECTED_JOBS}
    from edgexpert.golden.policies.edgexpert import selected_count
    chans = (layout.d_model, layout.expert_ffn)
    keep = tuple(selected_count(c, ratio) for c in chans) if masked else (None, None)
    values = groups_outputs(ft, engine, [(layer, c) for _, c in groups], lambda i, _l, _c: tuple(
        None if (i, m) in whole else keep[m] for m in range(2)))
    geometry = EmaGeometry(layout, word_bits, hw["ema"]["buffer_bytes"], hw["ema"]["slots"])
    # the host plans the step on the channels the top fetches (a rejected job's whole matrix):
    # with too little room the EMA would fail the fetch (NO_ROOM, an EMA error, reported)
    dcu = MODES[mode] is not None
    # the DCU's masks: an engine group takes an expert's consecutive depth groups (its parts,
    # each with its own pair of jobs; docs/blocks/top.md, "Parts"), as the step bench plans them
    batch, = plan_batches(ft, values if masked else None, list(range(n)), candidates, tokens,
                          geometry, merge_parts=dcu)
    beats = batch_commands(ft, batch, candidates=candidates, tokens=tokens, word_bits=word_bits,
                           dcu=keep if dcu else None, order=MODES[mode] or "ahead")
    seq = {"index": index, "mode": mode, "layer": layer, "ratio": ratio, "rows": real,
           "groups": [[g.expert, [list(c) for c in g.cands]] for g in batch.groups],
           # per depth group (a DCU job pair each): its candidates and whether it ends its
           # engine group
           "parts": [[len(p), int(j == len(g.job_parts) - 1)]
                     for g in batch.groups for j, p in enumerate(g.job_parts)],
           "faults": faults, "command": [], "dcu": [], "poison": False,
           "recover": any(f["kind"] in EMA_ERRORS for f in faults), "reset_after": None,
           "bus_error": None}
    beats = _apply_faults(seq, beats, rng, layout, hw)
    seq["beats"] = [f"{b:x}" for b in beats]
    for name in ("hidden_q", "hidden_m", "hidden_e", "expert_out_q16", "moe_out_q16"):
        seq[name] = values[name].tolist()
    return seq


def _draw_faults(rng: random.Random, mode: str, groups: int) -> list[dict]:
    if rng.random() >= FAULT_SHARE:
        return []
    kinds = FAULTS["any"] + FAULTS["dcu" if MODES[mode] is not None else "host"]
    faults, jobs = [], set()
    for _ in range(rng.randint(1, MAX_FAULTS)):
        kind = rng.choices(kinds, [WEIGHTS.get(k, 2) for k in kinds])[0]
        fault = {"kind": kind, "group": rng.randrange(groups), "matrix": rng.randrange(2)}
        if kind in FAULTS["dcu"]:
            if kind in ("down_count", "down_more"):
                fault["matrix"] = int(Matrix.DOWN)
            elif kind.startswith("entry_"):
                fault["matrix"] = int(Matrix.GATE_UP)
            job = (fault["group"], fault["matrix"])
            if job in jobs:
                continue          # one fault per DCU job: its first bad field is then known
            jobs.add(job)
        if kind == "reset" and any(f["kind"] == kind for f in faults):
            continue
        if kind in EMA_ERRORS and any(f["kind"] in EMA_ERRORS for f in faults):
            continue          # one EMA error a sequence: the first stops the EMA, STATUS names it
        if kind in BAD_DESCRIPTORS and sum(f["kind"] in BAD_DESCRIPTORS
                                           for f in faults) == 2 * groups:
            continue          # one a descriptor (_apply_faults): each host group has two
        faults.append(fault)
    return faults


def _apply_faults(seq: dict, beats: list[int], rng: random.Random, layout, hw: dict) -> list[int]:
    """Edit `beats` for the sequence's faults and note in `seq` what each must give."""
    lay = command_layout(hw["tokens"], hw["candidates"], layout.d_model, hw["ema"]["data_width"],
                         expert_ffn=layout.expert_ffn)
    at = _Beats(lay)
    headers = at.headers(beats)
    descriptors = at.descriptors(beats)
    inserts, jobs = [], []
    spoilt = set()              # the descriptors a BAD_DESCRIPTORS fault has taken
    for f in seq["faults"]:
        kind = f["kind"]
        tag = (2 * f["group"] + f["matrix"]) % 256
        if kind in FAULTS["dcu"]:
            i = headers[(tag, f["matrix"])]
            c = layout.in_channels(Matrix(f["matrix"]))
            if kind == "down_count":
                n = seq["parts"][f["group"]][0]
                bad = rng.choice([v for v in (0, n + 1, 127) if v != n])
                beats[i] = _with(beats[i], at.header["count"], bad)
                seq["command"].append([int(TopError.DOWN_COUNT), int(TopOp.ROUTE)])
            elif kind == "down_more":
                # the wrong `more`: set on a group's last part, clear on an earlier one
                beats[i] = _with(beats[i], at.route_more, seq["parts"][f["group"]][1])
                seq["command"].append([int(TopError.DOWN_MORE), int(TopOp.ROUTE)])
            elif kind == "prune_reserved":
                # bits 32..47 of a PRUNE beat (docs/contracts.md, "DCU jobs: accepted ranges")
                beats[i + 1] |= 1 << (at.prune[0] + LANES + rng.randrange(16))
                jobs.append((i, [int(DcuError.RESERVED), tag]))
            elif kind.startswith("entry_"):
                # the group's last entry: after the header and the prune words
                e = i + 1 + -(-c // LANES) + seq["parts"][f["group"]][0] - 1
                if kind == "entry_weight":
                    beats[e] = _with(beats[e], at.entry_g, G_MAX + 1)
                    jobs.append((i, [int(DcuError.WEIGHT), tag]))
                else:
                    # bits 40..47 of an ENTRY beat
                    beats[e] |= 1 << (at.prune[0] + dcu_entry_layout.size + rng.randrange(8))
                    jobs.append((i, [int(DcuError.RESERVED), tag]))
            else:
                beats[i] = _with(beats[i], at.header["keep"], 0 if kind == "keep_zero" else c + 1)
                jobs.append((i, [int(DcuError.KEEP), tag]))
        elif kind in BAD_DESCRIPTORS:
            # one fault a descriptor: the feeder reports a descriptor's first bad field only
            free = [d for d in descriptors if d not in spoilt]
            i = free[rng.randrange(len(free))]
            spoilt.add(i)
            if kind == "no_scales":
                beats[i] = _with(beats[i], at.scales, 0)
                seq["command"].append([int(TopError.NO_SCALES), int(TopOp.EMA)])
            else:
                words = -(-layout.in_channels(Matrix(at.get(beats[i], at.matrix))) // LANES)
                for w in range(i + 1, i + 1 + words):
                    beats[w] = _with(beats[w], at.mask, 0)
                seq["command"].append([int(TopError.NO_CHANNEL), int(TopOp.EMA)])
            seq["poison"] = True
        elif kind == "stray_mask":
            inserts.append((descriptors[rng.randrange(len(descriptors))],
                            _with(_with(0, at.op, int(TopOp.EMA)), at.ema_op, int(EmaOp.MASK))))
            seq["command"].append([int(TopError.STRAY_MASK), int(TopOp.EMA)])
            seq["poison"] = True
        elif kind == "op":
            op = rng.choice(BAD_OPS)
            inserts.append((rng.randrange(len(beats) + 1),
                            _with(rng.getrandbits(lay.size), at.op, op)))
            seq["command"].append([int(TopError.OP), op])
        elif kind == "stray_x":
            item = x_layout(hw["candidates"], layout.d_model,
                            inputs_per_beat(hw["ema"]["data_width"])).const(x_item(
                                0, 0, [0] * inputs_per_beat(hw["ema"]["data_width"]), False,
                                hw["candidates"], layout.d_model, hw["ema"]["data_width"]))
            inserts.append((0, int(TopOp.X) << at.op[0]
                            | item.as_bits() << lay["arg"].offset))
            seq["command"].append([int(TopError.CANDIDATE), int(TopOp.X)])
        elif kind == "bus_error":
            seq["bus_error"] = {"burst": rng.randrange(2), "beat": 0,
                                "resp": rng.choice(ERROR_RESPONSES)}
            seq["poison"] = True
        elif kind == "reset":
            seq["reset_after"] = rng.randrange(1, len(beats))
    # the DCU answers its jobs in the order they come (the `ahead` order sends GU(g + 1) first)
    seq["dcu"] = [entry for _, entry in sorted(jobs)]
    # from the last position down, so each index is the one drawn on the unedited list
    for i, beat in sorted(inserts, key=lambda p: -p[0]):
        beats.insert(i, beat)
    return beats


def _engine(trace):
    # torch and the golden model load only here, not in the simulator (fuzz.py)
    from edgexpert.golden.traces.expert_outputs import source_int_model
    return source_int_model(trace)


def write_sequences(trace, hw: dict, count: int, seed: int, path: Path) -> Path:
    """`count` random sequences (sequence i drawn from random.Random(f"{seed}-{i}"), so any one
    can be drawn again alone) to `path`."""
    engine = _engine(trace)
    seqs = [make_sequence(trace, engine, hw, i, random.Random(f"{seed}-{i}"))
            for i in range(count)]
    return _write(path, seed, hw, seqs)


def directed_sequences(trace, hw: dict, seed: int, path: Path) -> Path:
    """Issue 28's case in the top: one step of three groups with the DCU's masks whose middle
    group's DOWN job is rejected (k = 0) and whose last group's GATE_UP job is rejected (k past
    C), the first group's DOWN job with a wrong count and the last group's with `more`; then a
    good sequence."""
    engine = _engine(trace)
    rng = random.Random(f"{seed}-directed")
    bad = [{"kind": "down_count", "group": 0, "matrix": int(Matrix.DOWN)},
           {"kind": "keep_zero", "group": 1, "matrix": int(Matrix.DOWN)},
           {"kind": "keep_above", "group": 2, "matrix": int(Matrix.GATE_UP)},
           {"kind": "down_more", "group": 2, "matrix": int(Matrix.DOWN)}]
    common = {"mode": "dcu", "rows": 3, "pool": 3, "choices": 1, "layer": 0}
    seqs = [make_sequence(trace, engine, hw, 0, rng, faults=bad, **common),
            make_sequence(trace, engine, hw, 1, rng, faults=[], **common)]
    return _write(path, seed, hw, seqs)


def bad_descriptor_sequences(trace, hw: dict, path: Path) -> Path:
    """The shortest case of each `BAD_DESCRIPTORS` fault, which hung the feeder until
    2026-12-03: a sequence of whole experts (its step writes the location table far into the
    buffer), then a sequence with the host's masks with the fault on one of its descriptors
    (its slot's stale entry names a line the step does not write), then a good sequence of
    the host's masks (no reset before it: compared as any)."""
    engine = _engine(trace)
    seqs = []
    for kind in BAD_DESCRIPTORS:
        rng = random.Random(f"probe-{kind}-{HUNG[kind]}")
        fault = {"kind": kind, "group": 0, "matrix": int(Matrix.GATE_UP)}
        for mode, rows, faults in (("naive_sd", 3, []), ("edgexpert", 2, [fault]),
                                   ("edgexpert", 3, [])):
            seqs.append(make_sequence(trace, engine, hw, len(seqs), rng, mode=mode, rows=rows,
                                      faults=faults))
    return _write(path, 0, hw, seqs)


def _write(path: Path, seed: int, hw: dict, seqs: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"seed": seed, "hardware": hw, "sequences": seqs}))
    return path
