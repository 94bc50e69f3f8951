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

__all__ = ["TopOp", "TopCsr", "TOP_CSR_ADDR_BITS", "TOP_CSR_BASE"]


class TopOp(enum.IntEnum, shape=4):
    #: an EMA command word (descriptor, mask word or NEW_STEP)
    EMA = 0
    #: one candidate of the next group (x scale, token slot, routing weight, last)
    CAND = 1
    #: one int8 MoE input of a candidate of the group in flight
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
