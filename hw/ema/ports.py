"""Port shapes the EMA controller's parts share: the error report to the status register."""

from __future__ import annotations

from amaranth.lib import data, stream

from ...contracts.ema import TAG_BITS, EmaError

__all__ = ["error_layout", "ErrorSignature"]


#: an error a part reports to the status register (`Registers`): what, and which descriptor
error_layout = data.StructLayout({"code": EmaError, "tag": TAG_BITS})

#: errors are never refused: the status register latches the first one and ignores the rest
ErrorSignature = stream.Signature(error_layout, always_ready=True)
