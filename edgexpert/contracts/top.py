"""The accelerator top's command codes and register map (hw/top/, docs/blocks/top.md).

The top takes one command stream: each beat is an `TopOp` and its argument. EMA beats go to the
EMA controller unchanged (its command contract, edgexpert.contracts.ema) and, except NEW_STEP,
to the feeder, which reads the mask words to know which columns of each fetched matrix to
stream into the engine; CAND, X and FLUSH beats are the expert engine's `cand`, `x` and `flush`
items (hw/engine/layouts.py); ROUTE and DATA beats are the DCU's (edgexpert.contracts.dcu),
whose EMA commands join the host's in front of the EMA and the feeder; DCU_CAND is a CAND whose
group's DOWN job the DCU makes from the engine's hidden outputs; SCORE and LOGIT beats are the
PRU's `score` and `logit` items (hw/pru/, in a top built with it), whose fetch words join
the EMA commands too. The register map is one read port: the top's own registers at
`TOP_CSR_BASE` and above, the EMA controller's (`EmaCsr`) below.

The codes are `IntEnum`s with an Amaranth shape, shared by the RTL and the benches.

The command path checks every beat's fields against the instance (docs/contracts.md, "The
top's commands: accepted ranges"); a bad beat is reported as every checking block reports a
command (edgexpert.contracts.rejects: `TopError`, the beat's op as the tag) and the stream
goes on. `cand_item`, `x_item` and `flush_item` give the engine items' fields for an instance
and refuse an out-of-range one with one `ValueError` naming it and its range.
"""

from __future__ import annotations

from amaranth.lib import enum

from .ema import CSR_ADDR_BITS
from .rejects import reject_layout, reject_status_layout

__all__ = ["TopOp", "TopCsr", "TopError", "TOP_CSR_ADDR_BITS", "TOP_CSR_BASE", "OP_BITS",
           "top_reject_layout", "top_status_layout", "WEIGHT_MAX", "inputs_per_beat",
           "input_beats", "EXPERT_OUT_VALUES", "outputs_per_beat", "value_beats", "cand_item",
           "mask_item", "x_item", "flush_item"]


class TopOp(enum.IntEnum, shape=4):
    #: an EMA command word (descriptor, mask word or NEW_STEP)
    EMA = 0
    #: one candidate of the next group (x scale, token slot, routing weight, last)
    CAND = 1
    #: a beat of one candidate's int8 MoE inputs, `inputs_per_beat` of them (`input_beats`)
    X = 2
    #: read a token slot's MoE sum out and clear it
    FLUSH = 3
    #: one beat of a DCU job's `route` (`last` on the host's last beat of the job): a GATE_UP
    #: job's header, prune words and entries; a DOWN job's header and prune words only (the top
    #: adds the entries from the engine's hidden scales and the CAND routing weights)
    ROUTE = 4
    #: one `data` beat of a GATE_UP job (32 int8 inputs; `last` on the job's last)
    DATA = 5
    #: CAND of a group whose DOWN job the DCU makes: the top keeps its routing weight and
    #: passes the group's hidden values and scales to that job
    DCU_CAND = 6
    #: a prompt token's score for the PRU (score Q.16, the prompt's length); codes 8 and up are
    #: the PRU's (a top built with it, hw/top/top.py)
    SCORE = 8
    #: one beat of a token's router logits for the PRU (its `lanes` Q.16 logits)
    LOGIT = 9


#: bits of a command beat's op: a rejected beat's tag
OP_BITS = 4
#: the largest routing weight, 1.0 in Q.16 (the engine's 17-bit field holds more)
WEIGHT_MAX = 1 << 16


class TopError(enum.IntEnum, shape=4):
    """The first bad field of a rejected command beat (docs/contracts.md, "The top's commands:
    accepted ranges"): the command path's (1-7), the feeder's (8-11), which checks the EMA
    command words it walks, and the DCU path's (12), which checks a DOWN job's header against
    its group."""
    NONE = 0
    #: an op the instance does not have (7, 10-15; SCORE and LOGIT without a PRU)
    OP = 1
    #: a CAND, DCU_CAND or FLUSH token slot past the engine's `tokens`
    TOKEN = 2
    #: a CAND or DCU_CAND routing weight above WEIGHT_MAX
    WEIGHT = 3
    #: the group's candidates-th CAND without `last` (a group has at most `candidates`)
    COUNT = 4
    #: an X beat with no group open for inputs, or of a candidate past the group's
    CANDIDATE = 5
    #: an X beat's number past the last (ceil(d_model / inputs_per_beat) beats per candidate)
    BEAT = 6
    #: `last` not on the group's n x beats-th X beat (of its last candidate), or the group's X
    #: beats cut short by the next CAND
    LAST = 7
    #: a DESCRIPTOR without `scales` (the engine needs the scale block: it gets one of zeros)
    NO_SCALES = 8
    #: a MASK bit past the matrix's last channel (not walked; the EMA's BAD_DESCRIPTOR too)
    MASK_TAIL = 9
    #: a descriptor selecting no channel (the engine needs a column: it gets channel 0 as zeros)
    NO_CHANNEL = 10
    #: a MASK word where a DESCRIPTOR belongs (dropped; the EMA's BAD_COMMAND too)
    STRAY_MASK = 11
    #: a DOWN job's count that is not its group's (the DCU_CAND beats up to `last`); the job
    #: runs with the group's
    DOWN_COUNT = 12
    #: a DOWN job's `more` that disagrees with its part: set on the part that ends its engine
    #: group (`last`) or clear on one that does not (`part_last`); the job runs with the part's
    DOWN_MORE = 13


#: a rejected command beat's completion: its first bad field and its op
top_reject_layout = reject_layout(TopError, OP_BITS)
#: COMMAND_STATUS: the first rejected beat since reset (bit 0 error, bits 1-4 the code, bits
#: 8-11 its op: EMA for the feeder's)
top_status_layout = reject_status_layout(TopError, OP_BITS)


def _in_range(name: str, value, lo: int, hi: int) -> int:
    if not lo <= int(value) <= hi:
        raise ValueError(f"{name} = {int(value)} is out of range: accepted {lo}..{hi}")
    return int(value)


def cand_item(x_m: int, x_e: int, token: int, weight: int, last: bool, tokens: int, ffn: int,
              down_channels=None, part_last: bool = False) -> dict:
    """A CAND (or DCU_CAND) beat's fields for an engine of `tokens` token slots and a model of
    `ffn` hidden channels: the candidate's input scale (m 0..2^15 - 1, e int16: every value, the
    requantization shifts by any amount), its token slot, its Q.16 routing weight, its DOWN
    mask: the hidden channels (0..ffn - 1) its DOWN sums take, every one when None (docs/
    contracts.md, "Candidates of several depth groups in one engine group"), and on a DCU_CAND
    whether it ends a part of its group (docs/blocks/top.md, "The DCU path")."""
    channels = range(ffn) if down_channels is None else down_channels
    return {"x": {"m": _in_range("x scale m", x_m, 0, 2**15 - 1),
                  "e": _in_range("x scale e", x_e, -2**15, 2**15 - 1)},
            "token": _in_range("token slot", token, 0, tokens - 1),
            "weight": _in_range("routing weight", weight, 0, WEIGHT_MAX),
            "down": sum(1 << _in_range("DOWN mask channel", f, 0, ffn - 1) for f in set(channels)),
            "part_last": int(part_last), "last": int(last)}


def mask_item(channels, count: int, last: bool) -> dict:
    """An engine mask item's fields (hw/engine/layouts.py `mask_layout`): bit j for each of the
    `channels` (each 0..count - 1) a candidate's sums take, and whether it is its group's last
    candidate."""
    return {"mask": sum(1 << _in_range("mask channel", j, 0, count - 1) for j in set(channels)),
            "last": int(last)}


def x_item(candidate: int, beat: int, values, last: bool, group: int, d_model: int,
           word_bits: int) -> dict:
    """An X beat's fields for a group of `group` candidates: its candidate, its beat number
    (0..ceil(d_model / inputs_per_beat) - 1) and its int8 values (`input_beats`)."""
    beats = -(-d_model // inputs_per_beat(word_bits))
    return {"candidate": _in_range("X candidate", candidate, 0, group - 1),
            "beat": _in_range("X beat", beat, 0, beats - 1),
            "values": [_in_range("X input", v, -128, 127) for v in values], "last": int(last)}


def flush_item(token: int, tokens: int) -> dict:
    """A FLUSH beat's fields: the token slot read out."""
    return {"token": _in_range("token slot", token, 0, tokens - 1)}


def inputs_per_beat(word_bits: int) -> int:
    """int8 MoE inputs an X beat carries: a weight-buffer word's bits of them (word_bits / 8,
    the engine's word, the EMA's AXI data width), so the engine takes a word of inputs per cycle
    as it takes a word of weights (docs/contracts.md, "The engine's input beats")."""
    if not isinstance(word_bits, int) or isinstance(word_bits, bool) \
            or not 16 <= word_bits <= 1024 or word_bits & (word_bits - 1):
        raise ValueError(f"word_bits must be a power of two in 16..1024, not {word_bits!r}")
    return word_bits // 8


def input_beats(x_q, word_bits: int) -> list[list[int]]:
    """One candidate's int8 inputs x_q[0..D-1] as X beat values (docs/contracts.md, "The
    engine's input beats"): beat b holds input channels b * V .. b * V + V - 1 with
    V = inputs_per_beat(word_bits), channel b * V + i in value i; the last beat's values beyond
    D are 0; ceil(D / V) beats in channel order."""
    return value_beats(x_q, inputs_per_beat(word_bits))


#: output channels an `expert_out` beat carries: the DOWN drain's four a cycle, 4j .. 4j + 3 in
#: beat j (docs/contracts.md, "The engine's output beats"; four since 2026-12-03: a layer's last
#: group drains with nothing behind it, D / 4 cycles per candidate instead of D / 2)
EXPERT_OUT_VALUES = 4


def outputs_per_beat(word_bits: int) -> int:
    """int32 MoE sums a `moe_out` beat carries: a weight word's bits of them (word_bits / 32),
    at least the EXPERT_OUT_VALUES a DOWN drain cycle adds, so a flush reads a token out at a
    word per cycle (docs/contracts.md, "The engine's output beats")."""
    return max(EXPERT_OUT_VALUES, inputs_per_beat(word_bits) // 4)


def value_beats(values, per_beat: int) -> list[list[int]]:
    """A vector as beats of `per_beat` values: beat b holds elements b * per_beat ..
    b * per_beat + per_beat - 1 in order, the last beat's places beyond the vector 0."""
    out = [int(v) for v in values]
    out += [0] * (-len(out) % per_beat)
    return [out[b:b + per_beat] for b in range(0, len(out), per_beat)]


#: the read port's address: one more bit than the EMA controller's map, which it includes
TOP_CSR_ADDR_BITS = CSR_ADDR_BITS + 1
#: the top's registers start above the EMA controller's 2**CSR_ADDR_BITS addresses
TOP_CSR_BASE = 1 << CSR_ADDR_BITS


class TopCsr(enum.IntEnum, shape=TOP_CSR_ADDR_BITS):
    """The top's registers (read-only, 64 bits; counters count from reset)."""
    #: bit 0 busy (work anywhere), bit 1 error (an EMA completion was not OK), bits 2-3 the
    #: first such completion's status, bits 8-15 its tag
    STATUS = TOP_CSR_BASE + 0
    #: cycles with work anywhere: a descriptor the feeder has not finished, a group in the
    #: engine, or a word on its way through the feeder
    BUSY_CYCLES = TOP_CSR_BASE + 1
    #: cycles a group's inputs are loaded and the feeder waits for the EMA's completion of the
    #: matrix the engine needs next (the weights are not in the buffer yet)
    MEMORY_WAIT_CYCLES = TOP_CSR_BASE + 2
    #: cycles a group is in the engine and not waiting on memory
    COMPUTE_CYCLES = TOP_CSR_BASE + 3
    #: groups started (a `last` candidate accepted)
    GROUPS = TOP_CSR_BASE + 4
    #: matrices fed (EMA descriptors whose scale block and columns went to the engine)
    MATRICES = TOP_CSR_BASE + 5
    #: buffer words streamed into the engine (scale blocks and columns)
    WORDS = TOP_CSR_BASE + 6
    #: DCU jobs started (headers into the DCU)
    DCU_JOBS = TOP_CSR_BASE + 7
    #: cycles a group in the engine still needs a matrix and the feeder has no descriptor to
    #: walk (its job queue is empty): the DCU (or the host) has not made it yet
    DESCRIPTOR_WAIT_CYCLES = TOP_CSR_BASE + 8
    #: cycles a DOWN job waits for its group's hidden scales (its entries) or hidden values
    #: (its data) from the engine
    FEEDBACK_WAIT_CYCLES = TOP_CSR_BASE + 9
    #: the command path's `top_status_layout`: the first rejected command beat
    COMMAND_STATUS = TOP_CSR_BASE + 10
    #: command beats rejected
    COMMAND_REJECTED = TOP_CSR_BASE + 11
    #: the DCU's STATUS (`dcu_status_layout`: its first rejected job)
    DCU_STATUS = TOP_CSR_BASE + 12
    #: DCU jobs rejected
    DCU_REJECTED = TOP_CSR_BASE + 13
    #: the PRU's STATUS (`pru_status_layout`: its first rejected prompt; 0 without a PRU)
    PRU_STATUS = TOP_CSR_BASE + 14
    #: prompts the PRU rejected
    PRU_REJECTED = TOP_CSR_BASE + 15
