"""EMA (external-memory access) controller: channel-masked expert weights from AXI4 into the
on-chip weight buffer.

A descriptor names one matrix of one expert and carries its input-channel mask (docs/blocks/ema.md,
`edgexpert.contracts.ema`). The controller is a pipeline of small components joined by streams
(docs/blocks/ema.md has the picture):

1. `Decoder` (decoder.py, with `SlotTable` and `RunFinder` in slots.py) looks the matrix up in
   the slot table of the current step (a hit means some of its channels are already resident),
   drops the resident channels from the mask (de-duplication), marks the rest resident, and turns
   every run of neighbouring selected channels into one item (the scale block, when asked for, is
   one more; a marker ends the descriptor);
2. `Allocator` (allocator.py) gives each item its address (`WeightLayout`), its length in beats
   and its buffer lines (bump allocation from line 0 of the step); the read goes to the work
   queue, where its columns start to the location queue, which the `LocationWriter` writes into
   the location table;
3. `BurstIssuer` (issuer.py) splits each read into AXI4 INCR bursts that never cross a 4 KB
   boundary nor exceed 256 beats, and issues them with up to `outstanding` bursts in flight, one
   AR per cycle, each burst's destination going into the in-flight queue;
4. `BeatWriter` (writer.py) writes every R beat into the buffer line reserved for it, and after a
   descriptor's last beat delivers its completion;
5. `Registers` (registers.py) latches the first error, counts, and answers register reads.

Contract:
- completions come in command order, one per descriptor, with a status (`EmaStatus`);
- AR issue never waits for R data: only the outstanding limit and the memory's `arready` hold it;
- `rready` is high whenever a burst's beats are due, except on the one cycle per descriptor that its
  completion leaves, and while a completion waits for the consumer;
- SLVERR / DECERR on any beat, a bad descriptor, a full slot table or a full buffer latch the first
  error (code and descriptor tag) in STATUS; the engine stops issuing, drains every burst already
  issued (beats after the error are dropped, never written), keeps consuming commands so the host
  never blocks, and completes each remaining descriptor as FAILED or ABORTED. A reset clears it all.
- the buffer, location table and residency words are memories outside `EmaController` (ports
  `buf_wr`, `loc_wr`, `res_rd`, `res_wr`), so synthesis of the controller counts logic only;
  `EmaSystem` (system.py) puts them together.

The memory map is elaborated from a `WeightLayout`: the address arithmetic uses only constant
multipliers (by the expert size and the column strides).
"""

from .controller import DEFAULTS, EmaController
from .geometry import AXI_ID_WIDTH, COUNTER_BITS, DATA_WIDTHS, EmaGeometry
from .system import EmaSystem

__all__ = ["DATA_WIDTHS", "AXI_ID_WIDTH", "COUNTER_BITS", "DEFAULTS", "EmaGeometry",
           "EmaController", "EmaSystem"]
