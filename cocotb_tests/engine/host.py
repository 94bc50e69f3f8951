"""The host's side of the expert engine: a group's stream items packed from the weight image
(exactly the bytes `WeightLayout` places in external memory, as the EMA brings them into the
buffer) and the item fields unpacked from the engine's outputs.

Used by the cocotb bench and the Amaranth-simulator test; knows the contracts and the engine's
payload layouts, never its arithmetic.
"""

from __future__ import annotations

from collections.abc import Sequence

from amaranth.hdl import Shape
from amaranth.lib import data

from edgexpert.contracts.top import (EXPERT_OUT_VALUES, cand_item, flush_item, input_beats,
                                     inputs_per_beat, mask_item, outputs_per_beat, value_beats,
                                     x_item)
from edgexpert.contracts.weight_layout import Matrix, WeightLayout
from edgexpert.hw.engine.layouts import (act_layout, cand_layout, column_layout, flush_layout,
                                         hidden_scale_layout, mask_layout, moe_layout,
                                         scale_words_layout, sum_layout, x_layout)

__all__ = ["INPUTS", "OUTPUTS", "layouts", "scale_words", "group_items", "flush_items",
           "unpack", "words_per_column", "plan_groups", "group_outputs", "moe_items",
           "values_in"]

#: the engine's input and output streams, by port name
INPUTS = ("cand", "gate_up_mask", "down_mask", "x", "gate_up", "gate_up_scales", "down",
          "down_scales", "flush")
OUTPUTS = ("hidden", "hidden_scale", "expert_out", "moe_out")


def layouts(d_model: int, expert_ffn: int, candidates: int, word_bits: int, tokens: int) -> dict:
    """Payload layout of every port (hw/engine/layouts.py)."""
    return {
        "cand": cand_layout(tokens),
        "gate_up_mask": mask_layout(d_model), "down_mask": mask_layout(expert_ffn),
        "x": x_layout(candidates, d_model, inputs_per_beat(word_bits)),
        "gate_up": column_layout(d_model, word_bits), "down": column_layout(expert_ffn, word_bits),
        "gate_up_scales": scale_words_layout(word_bits),
        "down_scales": scale_words_layout(word_bits), "flush": flush_layout(tokens),
        "hidden": act_layout(candidates, expert_ffn),
        "hidden_scale": hidden_scale_layout(candidates),
        "expert_out": sum_layout(candidates, d_model, EXPERT_OUT_VALUES),
        "moe_out": moe_layout(tokens, d_model, outputs_per_beat(word_bits)),
    }


def scale_words(rng, n: int):
    """n random scale words (uint16) for the Amaranth-simulator tests of the engine and the
    top's command path: positive finite float16 words with exponent 0..20 (subnormals
    included), so that with their x scales gate and up span the sigmoid table's clamp on both
    sides and stay in int32."""
    import numpy as np
    exp = rng.integers(0, 21, n)
    frac = rng.integers(0, 1024, n)
    frac = np.where((exp == 0) & (frac == 0), 1, frac)
    return ((exp << 10) | frac).astype(np.uint16)


def words_per_column(layout: WeightLayout, matrix: Matrix, word_bits: int) -> int:
    """Buffer words that hold a column's values (its column_bytes, from a word boundary)."""
    return -(-layout.column_bytes(matrix) * 8 // word_bits)


def _words(image, at: int, count: int, word_bytes: int) -> list[int]:
    return [int.from_bytes(bytes(image[at + i * word_bytes:at + (i + 1) * word_bytes]), "little")
            for i in range(count)]


def group_items(layout: WeightLayout, image, layer: int, expert: int, x_q, x_m: Sequence[int],
                x_e: Sequence[int], tokens: Sequence[int], weights: Sequence[int], *,
                candidates: int, word_bits: int, token_slots: int,
                gate_up_channels: Sequence[int] | None = None,
                down_channels: Sequence[int] | None = None,
                cand_gate_up_channels: Sequence[Sequence[int]] | None = None,
                cand_down_channels: Sequence[Sequence[int]] | None = None
                ) -> dict[str, list[int]]:
    """Every input item of one group (candidates x_q[i] with scale (x_m[i], x_e[i]), token slot
    and Q.16 routing weight) for one expert, as packed payload integers per port. The columns
    are read from `image` (bytes from `layout.base_address`) at the layout's addresses; only
    the given channels are sent (default: all), in increasing order. `cand_gate_up_channels`,
    `cand_down_channels`: each candidate's masks (default: every channel)."""
    lay = layouts(layout.d_model, layout.expert_ffn, candidates, word_bits, token_slots)
    n = len(x_q)
    if not 1 <= n <= candidates:
        raise ValueError(f"a group holds 1..{candidates} candidates, not {n}")
    word_bytes = word_bits // 8
    base = layout.base_address
    cands = [cand_item(x_m[i], x_e[i], tokens[i], weights[i], i == n - 1, token_slots,
                       layout.expert_ffn, (cand_down_channels or [None] * n)[i])
             for i in range(n)]
    gate_up = cand_gate_up_channels or [range(layout.d_model)] * n
    items = {"cand": [lay["cand"].const({k: c[k] for k, _ in lay["cand"]}).as_bits()
                      for c in cands],
             "gate_up_mask": [lay["gate_up_mask"].const(mask_item(gate_up[i], layout.d_model,
                                                                  i == n - 1)).as_bits()
                              for i in range(n)],
             "down_mask": [lay["down_mask"].const({"mask": c["down"], "last": c["last"]}).as_bits()
                           for c in cands]}
    items["x"] = []
    for i in range(n):
        beats = input_beats(x_q[i], word_bits)
        items["x"] += [lay["x"].const(x_item(i, b, v, i == n - 1 and b == len(beats) - 1, n,
                                             layout.d_model, word_bits)).as_bits()
                       for b, v in enumerate(beats)]
    for matrix, name, channels in ((Matrix.GATE_UP, "gate_up", gate_up_channels),
                                   (Matrix.DOWN, "down", down_channels)):
        block = layout.block_address(layer, expert, matrix) - base
        scale_words = -(-layout.scale_bytes(matrix) // word_bytes)
        scales = _words(image, block, scale_words, word_bytes)
        items[f"{name}_scales"] = [lay[f"{name}_scales"].const(
            {"data": w, "last": int(i == len(scales) - 1)}).as_bits() for i, w in enumerate(scales)]
        chans = range(layout.in_channels(matrix)) if channels is None else sorted(channels)
        per_col = words_per_column(layout, matrix, word_bits)
        col_items = []
        for ch in chans:
            at = layout.column_address(layer, expert, matrix, ch) - base
            for w in _words(image, at, per_col, word_bytes):
                col_items.append({"channel": ch, "data": w, "last": 0})
        if not col_items:
            raise ValueError(f"{matrix.name}: a group needs at least one column")
        col_items[-1]["last"] = 1
        items[name] = [lay[name].const(c).as_bits() for c in col_items]
    return items


def flush_items(token_slots: int, tokens: Sequence[int]) -> list[int]:
    return [flush_layout(token_slots).const(flush_item(t, token_slots)).as_bits() for t in tokens]


def unpack(layout: data.Layout, bits: int):
    """The fields of a packed payload (a dict; an array's elements a list), signed fields as
    signed integers."""
    if isinstance(layout, data.ArrayLayout):
        width = Shape.cast(layout.elem_shape).width
        return [_field(layout.elem_shape, bits >> (i * width), width) for i in range(layout.length)]
    return {name: _field(field.shape, bits >> field.offset, field.width) for name, field in layout}


def _field(shape, bits: int, width: int):
    raw = bits & ((1 << width) - 1)
    if isinstance(shape, data.Layout):
        return unpack(shape, raw)
    signed = Shape.cast(shape).signed
    return raw - (1 << width) if signed and raw >> (width - 1) else raw


def group_outputs(hidden_q, hidden_m, hidden_e, expert_out) -> dict[str, list[dict]]:
    """The `hidden_scale`, `hidden` and `expert_out` items of one group, in the engine's order,
    from golden's values (each argument indexed by the group's candidates in order: the hidden
    vector, its scale's m and e, the expert's Q.16 output); `expert_out` in beats of
    EXPERT_OUT_VALUES (docs/contracts.md, "The engine's output beats")."""
    n = len(hidden_q)
    want = {"hidden_scale": [], "hidden": [], "expert_out": []}
    for c in range(n):
        want["hidden_scale"].append({"candidate": c, "scale": {"m": int(hidden_m[c]),
                                                               "e": int(hidden_e[c])}})
        f = len(hidden_q[c])
        want["hidden"] += [{"candidate": c, "channel": j, "value": int(hidden_q[c][j]),
                            "last": int(c == n - 1 and j == f - 1)} for j in range(f)]
        beats = value_beats(expert_out[c], EXPERT_OUT_VALUES)
        want["expert_out"] += [{"candidate": c, "index": j, "value": v,
                                "last": int(c == n - 1 and j == len(beats) - 1)}
                               for j, v in enumerate(beats)]
    return want


def moe_items(slot: int, moe, word_bits: int) -> list[dict]:
    """The `moe_out` items of a flushed token slot holding golden's MoE sums `moe` (D int32),
    in beats of outputs_per_beat(word_bits)."""
    beats = value_beats(moe, outputs_per_beat(word_bits))
    return [{"token": slot, "beat": b, "values": v, "last": int(b == len(beats) - 1)}
            for b, v in enumerate(beats)]


def plan_groups(experts, rows: Sequence[int], candidates: int) -> list[tuple[int, list]]:
    """The groups that serve token rows `rows` (indices into the trace's `experts` [R, K]):
    per chosen expert, in increasing order, its (row, slot) candidates in row order, at most
    `candidates` per group."""
    chosen: dict[int, list] = {}
    for row in rows:
        for slot, e in enumerate(experts[row]):
            if e >= 0:
                chosen.setdefault(int(e), []).append((int(row), slot))
    return [(e, cands[i:i + candidates]) for e, cands in sorted(chosen.items())
            for i in range(0, len(cands), candidates)]


def values_in(items: list[dict]) -> int:
    """The values a list of output items carries (a beat of an `expert_out` or `moe_out` counts
    its values), so that the benches report values compared, whatever the beat widths."""
    return sum(len(v) if isinstance(v, list) else 1
               for item in items for v in [item.get("values", item.get("value"))])
