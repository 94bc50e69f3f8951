"""What a block that checks its commands reports for one it rejects: the shape shared by the
DCU (edgexpert.contracts.dcu), the PRU (edgexpert.contracts.pru) and the top's command path
(edgexpert.contracts.top), so that their status registers read alike (docs/contracts.md,
"Rejected commands").

A rejected command completes with one cycle of `rejected` (`reject_layout`: its first bad
field's code and a tag naming the command) instead of its work; the block latches the first
one since reset in STATUS (`reject_status_layout`: the EMA's `ema_status_layout` without busy)
and counts the commands completed and rejected; the three registers are read at `RejectCsr`'s
addresses (64 bits, one cycle after the address, as the EMA's).
"""

from __future__ import annotations

from amaranth.hdl import Shape, unsigned
from amaranth.lib import data, enum

__all__ = ["RejectCsr", "STATUS_TAG_OFFSET", "reject_layout", "reject_status_layout"]


class RejectCsr(enum.IntEnum, shape=2):
    """Register map of a checking block's read port (read-only, 64 bits)."""
    STATUS = 0        # reject_status_layout
    COMPLETED = 1     # commands completed with their work
    REJECTED = 2      # commands rejected


#: STATUS's tag starts at bit 8, as the EMA's (ema_status_layout: busy, error, status, tag)
STATUS_TAG_OFFSET = 8


def reject_layout(code, tag_bits: int) -> data.StructLayout:
    """A rejected command's completion: its first bad field (`code`, an enum with NONE = 0) and
    the tag that names the command."""
    return data.StructLayout({"code": code, "tag": unsigned(tag_bits)})


def reject_status_layout(code, tag_bits: int) -> data.StructLayout:
    """STATUS: bit 0 error (a command was rejected), the first one's code from bit 1, its tag
    from bit 8."""
    width = Shape.cast(code).width
    if not 1 <= width <= STATUS_TAG_OFFSET - 1:
        raise ValueError(f"code width = {width} is out of range: accepted 1..{STATUS_TAG_OFFSET - 1}")
    return data.StructLayout({"error": 1, "code": code,
                              "reserved": STATUS_TAG_OFFSET - 1 - width,
                              "tag": unsigned(tag_bits)})
