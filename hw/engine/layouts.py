"""Payloads of the expert engine's streams and the checks every part shares.

Every stream carries one item per transfer with its indices (candidate, channel, output index),
so a part never infers an index from arrival order it cannot see; `last` closes a group.
"""

from __future__ import annotations

from amaranth.hdl import Const, Mux, signed, unsigned
from amaranth.lib import data

__all__ = ["ACC_WIDTH", "Q16_WIDTH", "H_WIDTH", "SCALE_M_BITS", "SCALE_E_BITS", "WEIGHT_BITS",
           "index_bits", "check_positive", "check_word", "dyadic_layout", "act_layout",
           "x_layout", "column_layout",
           "scale_words_layout", "sum_layout", "h_layout", "cand_layout", "mask_layout",
           "hidden_scale_layout",
           "flush_layout", "moe_layout", "fp16_decode", "rshift_amounts", "rshift_apply", "SPLITS",
           "check_split"]

#: int32 accumulators and Q.16 values (docs/contracts.md, number formats)
ACC_WIDTH = 32
Q16_WIDTH = 32
#: h = rshift(silu * up, 16): |silu| <= |gate| < 2**31 and |up| < 2**31 give |h| <= 2**46 + 1,
#: so 48 signed bits hold it exactly (the contract's int32 range is not assumed here: quantize_vec
#: divides by max |h| whatever its size)
H_WIDTH = 48
#: activation and hidden scale mantissas: normalize() keeps m < 2**15, quantize_vec's m <= 16513
SCALE_M_BITS = 15
#: scale exponents travel as int16, the trace's x_e / hidden_e dtype (edgexpert.contracts.trace)
SCALE_E_BITS = 16
#: routing weights: Q.16 unsigned, at most 65536 (trace check of weights_q16)
WEIGHT_BITS = 17


def index_bits(n: int) -> int:
    """Bits that hold 0..n-1."""
    return max(1, (n - 1).bit_length())


def check_positive(name: str, value, low: int = 1, high: int | None = None) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < low \
            or (high is not None and value > high):
        upper = "" if high is None else f"..{high}"
        raise TypeError(f"{name} must be an integer in {low}{upper or '..'}, not {value!r}")
    return value


def check_word(lanes, word_bits) -> None:
    """A buffer word of `word_bits` (a power of two, 16..1024) holds word_bits / 4 int4 values;
    `lanes` of them are multiplied per cycle, so lanes divides that count."""
    check_positive("word_bits", word_bits, 16, 1024)
    if word_bits & (word_bits - 1):
        raise TypeError(f"word_bits must be a power of two in 16..1024, not {word_bits!r}")
    check_positive("lanes", lanes, 1, word_bits // 4)
    if (word_bits // 4) % lanes:
        raise TypeError(f"lanes must divide the {word_bits // 4} int4 values of a "
                        f"{word_bits}-bit word, not {lanes!r}")


dyadic_layout = data.StructLayout({"m": unsigned(SCALE_M_BITS), "e": signed(SCALE_E_BITS)})


def act_layout(candidates: int, channels: int) -> data.StructLayout:
    """One int8 activation of one candidate on one input channel; `last` on the group's last."""
    return data.StructLayout({"candidate": index_bits(candidates), "channel": index_bits(channels),
                              "value": signed(8), "last": 1})


def x_layout(candidates: int, channels: int, values: int) -> data.StructLayout:
    """A beat of one candidate's int8 inputs: input channels beat * values .. beat * values +
    values - 1, channel beat * values + i in `values[i]` (edgexpert.contracts.top.input_beats,
    with values = inputs_per_beat(word_bits)); `last` on the group's last beat."""
    return data.StructLayout({"candidate": index_bits(candidates),
                              "beat": index_bits(-(-channels // values)),
                              "values": data.ArrayLayout(signed(8), values), "last": 1})


def column_layout(channels: int, word_bits: int) -> data.StructLayout:
    """One weight-buffer word of input channel `channel`'s column; `last` on the matrix's last
    word of the group. A column is every word that holds its values, in order."""
    return data.StructLayout({"channel": index_bits(channels), "data": word_bits, "last": 1})


def scale_words_layout(word_bits: int) -> data.StructLayout:
    """One buffer word of a matrix's scale block (word_bits / 16 float16 words, the first in
    the low bits)."""
    return data.StructLayout({"data": word_bits, "last": 1})


#: how a drain of several parts picks its outputs: "halves" (two parts) drains output `index`
#: and `index` + outputs / 2 (GATE_UP's gate and up of one hidden channel), "neighbours" outputs
#: parts x `index` .. parts x `index` + parts - 1 (DOWN: EXPERT_OUT_VALUES expert outputs a
#: cycle into the combine)
SPLITS = ("halves", "neighbours")


def sum_layout(candidates: int, outputs: int, parts: int = 1) -> data.StructLayout:
    """An int32 value of one candidate's output channel `index` (sums, then Q.16 values).

    With `parts` > 1 that many outputs travel side by side, `value[p]` one of them (which ones:
    the producer's split, SPLITS); `index` counts to outputs / parts."""
    value = signed(ACC_WIDTH) if parts == 1 else data.ArrayLayout(signed(ACC_WIDTH), parts)
    return data.StructLayout({"candidate": index_bits(candidates),
                              "index": index_bits(outputs // parts), "value": value, "last": 1})


def h_layout(candidates: int, ffn: int) -> data.StructLayout:
    return data.StructLayout({"candidate": index_bits(candidates), "index": index_bits(ffn),
                              "value": signed(H_WIDTH), "last": 1})


def cand_layout(tokens: int) -> data.StructLayout:
    """One candidate of a group: its MoE input's scale, its token slot and routing weight."""
    return data.StructLayout({"x": dyadic_layout, "token": index_bits(tokens),
                              "weight": unsigned(WEIGHT_BITS), "last": 1})


def mask_layout(channels: int) -> data.StructLayout:
    """One candidate's mask of a matrix's input channels (bit j: channel j enters its sums; the
    group's columns are the union of its candidates' masks, so candidates of several depth
    groups share one walk); `last` on the group's last candidate."""
    return data.StructLayout({"mask": channels, "last": 1})


def hidden_scale_layout(candidates: int) -> data.StructLayout:
    return data.StructLayout({"candidate": index_bits(candidates), "scale": dyadic_layout})


def flush_layout(tokens: int) -> data.StructLayout:
    return data.StructLayout({"token": index_bits(tokens)})


def moe_layout(tokens: int, d_model: int, values: int) -> data.StructLayout:
    """A beat of a flushed token's MoE sums: channels beat * values .. beat * values + values
    - 1 in `values` (edgexpert.contracts.top.outputs_per_beat); `last` on the token's last."""
    return data.StructLayout({"token": index_bits(tokens),
                              "beat": index_bits(-(-d_model // values)),
                              "values": data.ArrayLayout(signed(Q16_WIDTH), values), "last": 1})


#: the most parts a split drains side by side: gate and up (halves); the DOWN drain's
#: EXPERT_OUT_VALUES (neighbours)
MAX_PARTS = {"halves": 2, "neighbours": 4}


def check_split(split: str, parts: int, outputs: int) -> str:
    """The split, once `parts` suits it and divides the `outputs`; TypeError naming the range."""
    if split not in SPLITS:
        raise TypeError(f"split must be one of {', '.join(SPLITS)}, not {split!r}")
    check_positive("parts", parts, 1, MAX_PARTS[split])
    if outputs % parts:
        raise TypeError(f"parts must divide the {outputs} outputs, not {parts!r}")
    return split


def fp16_decode(word):
    """(m, e) of a float16 scale word as its exact value m * 2**-e (docs/contracts.md, weight
    scales): normal m = 1024 + fraction, e = 25 - exponent; subnormal m = fraction, e = 24."""
    exp, frac = word[10:15], word[0:10]
    m = Mux(exp != 0, frac + 1024, frac)
    # 25 - exponent runs from 24 down to -6 (exponent 31 is not a finite scale; decoded alike)
    e = Mux(exp != 0, Const(25, signed(7)) - exp, 24)
    return m[0:11], e


def rshift_amounts(amount, max_right: int, max_left: int):
    """The contract's rounding shift by a signed amount (add 2**(s-1), shift right
    arithmetically: round half up; a negative amount shifts left), its first half: the right
    shift, the left shift and the rounding term, to register before `rshift_apply`.

    `max_right` caps a right shift where the result no longer changes: for |value| < 2**(b-1)
    every shift s >= b gives 0. `max_left` caps a left shift where the kept low bits no longer
    change: a result truncated to w bits is 0 for any left shift >= w."""
    right = Mux(amount >= 0, amount, 0).as_unsigned()
    right = Mux(right > max_right, max_right, right)[0:max_right.bit_length()]
    left = Mux(amount < 0, -amount, 0).as_unsigned()
    left = Mux(left > max_left, max_left, left)[0:max_left.bit_length()]
    half = (Const(1, max_right + 1) << right) >> 1
    return right, left, half


def rshift_apply(rounded, right, left):
    """The second half: `rounded` (the value plus the rounding term, which is 0 for a left
    shift) shifted right by `right` or left by `left` (at most one of them is not 0)."""
    return Mux(left.any(), rounded << left, rounded >> right)
