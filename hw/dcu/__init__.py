"""DCU (depth coalescing unit): per depth group of the draft tree and per expert, the input
channels worth fetching, as EMA commands (docs/blocks/dcu.md).

A pipeline of small components joined by streams; a job is one (group, expert, matrix), and the
selector works on one while the first three stages take the next:

1. `Collector` (collector.py) takes the route port: the job's header, its pruning words (prune
   memory) and its candidates' scales and routing weights (entry memory), finds the size S of
   the group's largest weighted scale, and checks every field against the instance;
2. `Weigher` (weigher.py) turns each candidate's scale and weight into one 16-bit weight W_c
   (weight memory);
3. `Accumulator` (accumulator.py) adds |q| * W_c for 32 channels per cycle into the importance
   memory;
4. `Selector` (selector.py) finds the k-th largest key two bits at a time with three
   popcounts per word, then emits NEW_STEP (when asked), the DESCRIPTOR and the MASK words
   for the EMA; a rejected job (a field out of range) emits nothing and is reported on
   `rejected` instead, and `RejectRegisters` (hw/rejects.py) keeps the first in STATUS and counts.

The arithmetic is docs/contracts.md's "Depth coalescing" (reference: golden/blocks/dcu.py).
"""

from .geometry import DcuGeometry
from .top import Dcu

__all__ = ["Dcu", "DcuGeometry"]
