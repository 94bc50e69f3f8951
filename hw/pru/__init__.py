"""PRU (prompt routing unit): EdgeXpert's prefill routing in hardware (docs/blocks/pru.md).

Scores and router logits in, per token its class, experts and weights out, and per chunk the
fetch list as EMA commands; the contract is docs/contracts.md, "Prompt routing", and its
reference golden/blocks/pru.py. Small components joined by streams:

1. `Classifier` (classifier.py): the encoder's Q.16 score x the prompt length against the Q.16
   thresholds, one class per token;
2. `Sequencer` (sequencer.py): holds the prompt's classes and issues, per layer, a shared-set
   job and then a routing job per token;
3. `Selector` (selector.py): a token's logits into a register file, then one pick per cycle by
   a max tree (n_experts - 1 comparators, log2(n_experts) deep; no comparator per pair), or one
   per two cycles with a register inside a deep tree (`pick_register`); keeps the shared set S;
4. `Renormalizer` (renorm.py): the chosen logits' `softmax_q16` by the exp2 table and a
   restoring divider;
5. `FetchList` (fetch.py): per chunk, its distinct experts as EMA DESCRIPTOR + MASK words.

Input order (the engine's side of the contract): a prompt's `length` scores; then per layer the
router logits of every token twice, in token order, `n_experts / lanes` beats per token: once for the
shared-set phase, once for the routing phase. Outputs: `route`, per routing-phase token its
picks in pick order (the last one marked) with class and weight; `cmd`, per chunk of each
layer its EMA step, in chunk order. A prompt with a field out of range for the instance is
rejected (`rejected`, STATUS and counters on `csr`, hw/rejects.py) with its beats taken and
dropped; the next prompt is taken as usual.
"""

from .params import PRU_LOGIT_LANES, PRU_MAX_TOKENS, PruParams, pick_register_for
from .top import Pru

__all__ = ["Pru", "PruParams", "PRU_MAX_TOKENS", "PRU_LOGIT_LANES", "pick_register_for"]
