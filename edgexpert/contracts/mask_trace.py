"""Channel-mask traces: which input channels of which expert matrices each step fetches.

The golden model's traces give them (edgexpert.golden.traces.masks: one step = the fetches between two
NEW_STEP commands, e.g. part of one MoE layer of one verification pass, expert by expert, each
expert's depth groups in order); the EMA bench and benchmark replay them.

File format (JSON, docs/blocks/ema.md):

    {"format": "edgexpert-mask-trace", "version": 1,
     "source": where the masks come from (e.g. "golden: ..."),
     "model": {"n_layers": 4, "n_experts": 32, "d_model": 192, "expert_ffn": 96,
               "n_shared_experts": 0},
     "steps": [[{"layer": 0, "expert": 3, "matrix": "GATE_UP", "channels": [0, 1, 2, 17]},
                ...],
               ...]}

`channels` are input-channel indices of that matrix (0..d_model-1 for GATE_UP,
0..expert_ffn-1 for DOWN), ascending, without repeats. An entry may repeat a matrix already
fetched in the step: the EMA controller fetches only what is not yet resident.
`read_mask_trace` checks all of it and names the first offending place.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from .errors import InputError
from .weight_layout import Matrix, WeightLayout

__all__ = ["FORMAT", "VERSION", "MaskTraceError", "MaskEntry", "MaskTrace", "read_mask_trace",
           "write_mask_trace"]

FORMAT = "edgexpert-mask-trace"
VERSION = 1
_MODEL_KEYS = ("n_layers", "n_experts", "d_model", "expert_ffn", "n_shared_experts")


class MaskTraceError(InputError):
    """A mask trace is malformed or does not fit the layout; the message names where."""


@dataclass(frozen=True)
class MaskEntry:
    layer: int
    expert: int
    matrix: Matrix
    channels: tuple[int, ...]


@dataclass(frozen=True)
class MaskTrace:
    source: str
    model: dict
    steps: tuple[tuple[MaskEntry, ...], ...]

    def layout(self, base_address: int = 0) -> WeightLayout:
        return WeightLayout(**self.model, base_address=base_address)


def _int(value, where: str, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise MaskTraceError(f"{where} = {value!r} is not an integer: accepted {lo}..{hi}")
    if not lo <= value <= hi:
        raise MaskTraceError(f"{where} = {value} is out of range: accepted {lo}..{hi}")
    return value


def _parse(data, origin: str) -> MaskTrace:
    if not isinstance(data, dict):
        raise MaskTraceError(f"{origin}: the top level must be an object, not "
                             f"{type(data).__name__}")
    if data.get("format") != FORMAT:
        raise MaskTraceError(f"{origin}: format = {data.get('format')!r}: accepted {FORMAT!r}")
    if data.get("version") != VERSION:
        raise MaskTraceError(f"{origin}: version = {data.get('version')!r}: accepted {VERSION}")
    source = data.get("source")
    if not isinstance(source, str) or not source:
        raise MaskTraceError(f"{origin}: source must be a non-empty string, not {source!r}")
    model = data.get("model")
    if not isinstance(model, dict) or set(model) != set(_MODEL_KEYS):
        raise MaskTraceError(f"{origin}: model must be an object with exactly the keys "
                             f"{', '.join(_MODEL_KEYS)}")
    try:
        layout = WeightLayout(**model)
    except (TypeError, ValueError) as exc:
        raise MaskTraceError(f"{origin}: model: {exc}") from None
    steps = data.get("steps")
    if not isinstance(steps, list):
        raise MaskTraceError(f"{origin}: steps must be a list, not {type(steps).__name__}")
    out = []
    for s, step in enumerate(steps):
        if not isinstance(step, list):
            raise MaskTraceError(f"{origin}: steps[{s}] must be a list of entries")
        entries = []
        for e, entry in enumerate(step):
            where = f"{origin}: steps[{s}][{e}]"
            if not isinstance(entry, dict) or set(entry) != {"layer", "expert", "matrix",
                                                              "channels"}:
                raise MaskTraceError(f"{where} must be an object with exactly the keys layer, "
                                     "expert, matrix, channels")
            layer = _int(entry["layer"], f"{where}.layer", 0, layout.n_layers - 1)
            expert = _int(entry["expert"], f"{where}.expert", 0, layout.experts_per_layer - 1)
            if entry["matrix"] not in Matrix.__members__:
                raise MaskTraceError(f"{where}.matrix = {entry['matrix']!r}: accepted "
                                     f"{', '.join(Matrix.__members__)}")
            matrix = Matrix[entry["matrix"]]
            channels = entry["channels"]
            if not isinstance(channels, list):
                raise MaskTraceError(f"{where}.channels must be a list of channel indices")
            top = layout.in_channels(matrix) - 1
            for c, ch in enumerate(channels):
                _int(ch, f"{where}.channels[{c}]", 0, top)
                if c and ch <= channels[c - 1]:
                    raise MaskTraceError(f"{where}.channels[{c}] = {ch} follows {channels[c - 1]}:"
                                         " channels must be ascending without repeats")
            entries.append(MaskEntry(layer, expert, matrix, tuple(channels)))
        out.append(tuple(entries))
    return MaskTrace(source, dict(model), tuple(out))


def read_mask_trace(path: str | Path, layout: WeightLayout | None = None) -> MaskTrace:
    """Read and check a trace; with `layout`, also check that the trace was made for its shape."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise MaskTraceError(f"cannot read mask trace {path}: {exc.strerror}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise MaskTraceError(f"{path} is not valid JSON: {exc}") from None
    trace = _parse(data, str(path))
    if layout is not None:
        for key in _MODEL_KEYS:
            if trace.model[key] != getattr(layout, key):
                raise MaskTraceError(f"{path}: made for {key} = {trace.model[key]}, the layout "
                                     f"has {getattr(layout, key)}")
    return trace


def write_mask_trace(path: str | Path, trace: MaskTrace) -> None:
    data = {"format": FORMAT, "version": VERSION, "source": trace.source, "model": trace.model,
            "steps": [[{"layer": e.layer, "expert": e.expert, "matrix": e.matrix.name,
                        "channels": list(e.channels)} for e in step] for step in trace.steps]}
    _parse(data, str(path))  # never write what the reader would reject
    Path(path).write_text(json.dumps(data, separators=(",", ":")) + "\n")
