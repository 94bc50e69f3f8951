"""The registry of hardware blocks the CLI and the flows know by name.

A block is built from the validated configuration, so `edgexpert rtl`, `edgexpert synth` and the
cocotb benches all elaborate exactly the same RTL for the same config. Most blocks read only
`config.hardware`; the EMA controller also needs the model's shape, which fixes its memory map.

For the cost flow (`edgexpert synth`, docs/synthesis.md) a block also names its stimulus: a
function from the whole configuration to an `edgexpert.sim.stimulus.Stimulus`, which says what one
operation of the block is (a MAC, a byte fetched, a coalescing decision) and drives the block in
simulation for the switching activity behind its power and energy per operation. A block without
one is still synthesized and timed; its report says that power was not measured.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .contracts.config import Config, ConfigError
from .contracts.weight_layout import WeightLayout
from .hw.ema import EmaController, EmaSystem
from .hw.engine import ExpertEngine
from .hw.mac_lane import MacLane
from .sim.ema_stimulus import ema_stimulus
from .sim.engine_stimulus import engine_stimulus
from .sim.stimulus import Stimulus, mac_lane_stimulus

__all__ = ["Block", "BLOCKS", "get_block", "ema_parameters", "engine_parameters"]


@dataclass(frozen=True)
class Block:
    name: str
    description: str
    build: Callable[[Config], object]
    parameters: Callable[[Config], dict]
    stimulus: Callable[[Config], Stimulus] | None = None


def ema_parameters(config: Config) -> dict:
    """The EMA hardware parameters (keyword arguments of `EmaSystem`) from the config."""
    ema = config.hardware.ema
    return {"data_width": ema.axi_data_width, "addr_width": ema.axi_addr_width,
            "outstanding": ema.outstanding_reads, "buffer_bytes": ema.buffer_bytes,
            "buffer_banks": ema.buffer_banks, "slots": ema.slots}


def _ema(config: Config, with_memories: bool):
    params = ema_parameters(config)
    layout = WeightLayout.for_model(config.model)
    try:
        if with_memories:
            return EmaSystem(layout, **params)
        del params["buffer_banks"]
        return EmaController(layout, **params)
    except ValueError as exc:  # a combination the config ranges alone cannot rule out
        raise ConfigError(f"hardware.ema: {exc}") from None


def engine_parameters(config: Config) -> dict:
    """The expert engine's parameters (keyword arguments of `ExpertEngine`): the model's
    d_model and expert_ffn, the EMA's buffer word, `hardware.engine.*`."""
    e = config.hardware.engine
    return {"d_model": config.model.d_model, "expert_ffn": config.model.expert_ffn,
            "candidates": e.candidates, "lanes": e.lanes,
            "word_bits": config.hardware.ema.axi_data_width, "tokens": e.tokens}


def _engine(config: Config) -> ExpertEngine:
    try:
        return ExpertEngine(**engine_parameters(config))
    except TypeError as exc:  # lanes that do not divide the buffer word's int4 values
        raise ConfigError(f"hardware.engine: {exc}") from None


BLOCKS: dict[str, Block] = {
    "mac_lane": Block(
        "mac_lane",
        "stream-fed A8W4 dot-product lane (int8 x int4, int32 accumulate)",
        lambda c: MacLane(c.hardware.mac_lane.pairs_per_beat),
        lambda c: {"pairs_per_beat": c.hardware.mac_lane.pairs_per_beat},
        mac_lane_stimulus,
    ),
    "ema": Block(
        "ema",
        "EMA controller: channel-masked expert weights over AXI4 into the weight buffer "
        "(logic only: buffer, location table and residency memories are outside)",
        lambda c: _ema(c, with_memories=False),
        ema_parameters,
        ema_stimulus,
    ),
    "engine": Block(
        "engine",
        "expert engine: GATE_UP and DOWN MAC arrays, requantization, SiLU, quantize_vec and "
        "the routing-weighted combine of one expert for a group of candidates (memories cut "
        "out: activations, accumulators, scales, sigmoid table, MoE sums)",
        _engine,
        engine_parameters,
        engine_stimulus,
    ),
    "ema_system": Block(
        "ema_system",
        "EMA controller with its banked weight buffer, location table and residency memories "
        "(what the benches simulate; memories synthesize to flip-flops)",
        lambda c: _ema(c, with_memories=True),
        ema_parameters,
    ),
}


def get_block(name: str) -> Block:
    try:
        return BLOCKS[name]
    except KeyError:
        raise ConfigError(f"block {name!r} is not known: accepted {', '.join(sorted(BLOCKS))}") from None
