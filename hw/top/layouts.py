"""Payloads of the top's streams: the host's command beat, the DCU path's job beats and the
feeder's items."""

from __future__ import annotations

from amaranth.hdl import unsigned
from amaranth.lib import data

from ...contracts.dcu import dcu_data_layout, dcu_route_layout
from ...contracts.ema import ema_command_layout
from ...contracts.top import TopOp
from ...contracts.top import inputs_per_beat
from ..engine.layouts import cand_layout, flush_layout, index_bits, x_layout

__all__ = ["command_layout", "job_layout", "route_item_layout", "data_item_layout",
           "host_cand_layout", "cand_item_layout", "channel_layout", "line_layout", "word_layout"]

#: a DCU `route` beat and whether it is the last its source gives for the job; `more` (read on
#: the job's header): the job is a part of an engine group whose next part's job of the same
#: matrix follows, so its descriptor waits to be merged with the next (docs/blocks/top.md, "The
#: DCU path")
route_item_layout = data.StructLayout({"beat": dcu_route_layout, "last": 1, "more": 1})
#: a DCU `data` beat and whether it is the job's last
data_item_layout = data.StructLayout({"beat": dcu_data_layout, "last": 1})


def host_cand_layout(tokens: int, ffn: int) -> data.StructLayout:
    """A CAND or DCU_CAND beat: the engine's candidate fields (hw/engine/layouts.py), the
    candidate's DOWN mask (bit f: hidden channel f enters its DOWN sums; the group's DOWN
    columns are the union of its candidates' masks, docs/contracts.md) and `part_last`: on a
    DCU_CAND, the last candidate of a part (the candidates of one pair of DCU jobs) that is not
    the group's last (`last` ends the group's last part)."""
    fields = dict(cand_layout(tokens).members)
    last = fields.pop("last")
    return data.StructLayout({**fields, "down": ffn, "part_last": 1, "last": last})


def cand_item_layout(tokens: int, ffn: int) -> data.StructLayout:
    """A candidate on its way to the engine, and whether the DCU makes its group's DOWN job."""
    return data.StructLayout({"cand": host_cand_layout(tokens, ffn), "feedback": 1})


def command_layout(tokens: int, candidates: int, d_model: int, word_bits: int,
                   pru=None, *, expert_ffn: int) -> data.StructLayout:
    """One beat of the host's command stream: the op and its argument (an EMA command word,
    one of the engine's `cand`, `x` (a beat of word_bits / 8 inputs), `flush` items, or a DCU
    route or data beat with `last`; with `pru`, a PruParams, also the PRU's `score` and `logit`
    items)."""
    arms = {"ema": ema_command_layout, "cand": host_cand_layout(tokens, expert_ffn),
            "x": x_layout(candidates, d_model, inputs_per_beat(word_bits)),
            "flush": flush_layout(tokens),
            "route": route_item_layout, "data": data_item_layout}
    if pru is not None:
        arms.update(score=pru.score_layout, logit=pru.logit_layout)
    return data.StructLayout({"op": TopOp, "arg": data.UnionLayout(arms)})


def job_layout(max_uses: int) -> data.StructLayout:
    """An EMA command word on its way to the feeder, with `uses`: how many engine groups walk
    the descriptor pair it starts (meaningful on a pair's first DESCRIPTOR word; 0 and 1 both
    mean once), up to `max_uses`."""
    return data.StructLayout({"cmd": ema_command_layout, "uses": unsigned(max_uses.bit_length())})


def _item(channels: int, extra: dict) -> data.StructLayout:
    # `last`: the engine port's last word (the scale block's, or the matrix's last column's);
    # `end`: the descriptor's last word (its scale block's when it selects no channel)
    return data.StructLayout({"matrix": 1, "scale": 1, "channel": index_bits(channels), **extra,
                              "last": 1, "end": 1})


def channel_layout(channels: int, slot_bits: int) -> data.StructLayout:
    """A selected channel of a fetched matrix (or, with `scale`, its scale block) and its slot;
    `zero`: an item the descriptor did not fetch (the scale block of one without `scales`, the
    channel 0 of one selecting none), fed as zeros without a buffer read (hw/top/feeder.py)."""
    return _item(channels, {"slot": unsigned(slot_bits), "zero": 1})


def line_layout(channels: int, line_bits: int) -> data.StructLayout:
    """The same, with the buffer line where its column (or scale block) starts (not read for a
    `zero` item)."""
    return _item(channels, {"line": unsigned(line_bits), "zero": 1})


def word_layout(channels: int, word_bits: int) -> data.StructLayout:
    """One buffer word of a column (or scale block), on its way to the engine."""
    return _item(channels, {"data": unsigned(word_bits)})
