"""The expert engine (docs/blocks/engine.md): one routed expert for a group of candidates, from
the int8 MoE inputs and the expert's weight columns to the routing-weighted MoE sum, bit-exact
to docs/contracts.md ("Mixture of experts").

A pipeline of small components joined by streams:

1. `ColumnMac` (column_mac.py), GATE_UP: every candidate's int8 input times each column word
   of the expert's GATE_UP matrix (2F int4 values per input channel, as stored by
   `WeightLayout`), `lanes` products per cycle, into int32 accumulators; columns carry their
   channel index, so a channel no candidate takes is simply not sent, and each candidate's
   mask zeroes its input on a column outside it;
2. `Requant` (requant.py): the sums to Q.16 with the candidate's scale and the float16 scale
   words of the matrix's scale block;
3. `SwiGlu` (swiglu.py): sigmoid from the 1024-entry table, silu, h = silu * up;
4. `Quantizer` (quantizer.py): quantize_vec of each candidate's h (a restoring divider for the
   scale and a reciprocal, then one value per cycle);
5. `ColumnMac`, DOWN, and a second `Requant`: the expert output y (Q.16);
6. `Combine` (combine.py): moe_out[token] += rshift(y * g, 16); `flush` reads a token out.

`ExpertEngine` (engine.py) joins them and sequences groups.
"""

from .column_mac import ColumnMac
from .combine import Combine
from .engine import ExpertEngine
from .quantizer import Quantizer
from .requant import Requant
from .swiglu import SIGMOID_TABLE, SwiGlu

__all__ = ["ColumnMac", "Requant", "SwiGlu", "Quantizer", "Combine", "ExpertEngine",
           "SIGMOID_TABLE"]
