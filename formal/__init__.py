"""Formal properties of the RTL, checked by bounded model checking with SymbiYosys
(docs/formal.md).

- `rules.py`: what every property wrapper shares (a free mirror of the block's ports,
  one-cycle-old copies, the stream rule, properties grouped in named sets);
- `ema.py`: the EMA controller's AXI4 read master and completion stream, with an AXI4 slave
  environment that keeps the spec's rules, and the deliberately broken variants;
- `streams.py`: the valid-until-ready rule on every stream port of any block;
- `targets.py`: the instances checked and the runs, one SymbiYosys task per property set;
- `sby.py`: the job file, the run (`yowasp-sby`, smtbmc, Yices 2) and its result.

Layer: above `edgexpert.hw` (it elaborates the blocks) and blind to golden/, sim/ and the
benches; the command line (`edgexpert prove`) is above it.
"""

from .sby import SbyResult
from .targets import TARGETS, cover, prove

__all__ = ["SbyResult", "TARGETS", "cover", "prove"]
