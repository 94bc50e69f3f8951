"""The accelerator top's command codes and register map (hw/top/, docs/blocks/top.md).

The top takes one command stream: each beat is an `TopOp` and its argument. EMA beats go to the
EMA controller unchanged (its command contract, edgexpert.contracts.ema) and, except NEW_STEP,
to the feeder, which reads the mask words to know which columns of each fetched matrix to
stream into the engine; CAND, X and FLUSH beats are the expert engine's `cand`, `x` and `flush`
items (hw/engine/layouts.py); ROUTE and DATA beats are the DCU's (edgexpert.contracts.dcu),
whose EMA commands join the host's in front of the EMA and the feeder; DCU_CAND is a CAND whose
group's DOWN job the DCU makes from the engine's hidden outputs; SCORE and LOGIT beats are the
PRU's `i_score` and `i_logit` items (hw/pru/, in a top built with it), whose fetch words join
the EMA commands too. The register map is one read port: the top's own registers at
`TOP_CSR_BASE` and above, the EMA controller's (`EmaCsr`) below.

The codes are `IntEnum`s with an Amaranth shape, shared by the RTL and the benches.
"""

from __future__ import annotations

from amaranth.lib import enum

from .ema import CSR_ADDR_BITS

__all__ = ["TopOp", "TopCsr", "TOP_CSR_ADDR_BITS", "TOP_CSR_BASE", "inputs_per_beat",
           "input_beats", "EXPERT_OUT_VALUES", "outputs_per_beat", "value_beats"]


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


#: output channels an `expert_out` beat carries: the DOWN drain's two a cycle, 2j and 2j + 1 in
#: beat j (docs/contracts.md, "The engine's output beats")
EXPERT_OUT_VALUES = 2


def outputs_per_beat(word_bits: int) -> int:
    """int32 MoE sums a `moe_out` beat carries: a weight word's bits of them (word_bits / 32),
    at least the two a DOWN drain cycle adds, so a flush reads a token out at a word per cycle
    (docs/contracts.md, "The engine's output beats")."""
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
