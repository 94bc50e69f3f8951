"""The configured hardware's parameters: the `hardware.*` sections of a validated configuration
as the keyword arguments of hw/'s blocks. hw/ takes its parameters as arguments and never reads
the configuration; this is where the configuration's names become the blocks' (below hw/ and the
benches, which build the bundled blocks too, and below the block registry, edgexpert/blocks.py,
which builds them for the CLI)."""

from __future__ import annotations

from .config import Config

__all__ = ["ema_parameters", "top_parameters"]


def ema_parameters(config: Config) -> dict:
    """The EMA hardware parameters (keyword arguments of `EmaSystem`) from `hardware.ema`."""
    ema = config.hardware.ema
    return {"data_width": ema.axi_data_width, "addr_width": ema.axi_addr_width,
            "outstanding": ema.outstanding_reads, "buffer_bytes": ema.buffer_bytes,
            "buffer_banks": ema.buffer_banks, "slots": ema.slots}


def top_parameters(config: Config) -> dict:
    """`AcceleratorTop`'s keyword arguments (all but the layout): the EMA system's
    (`ema_parameters`) and the engine's candidates, lanes and token slots (`hardware.engine`)."""
    engine = config.hardware.engine
    return {"ema": ema_parameters(config), "candidates": engine.candidates,
            "lanes": engine.lanes, "tokens": engine.tokens}
