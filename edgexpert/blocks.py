"""The registry of hardware blocks the CLI and the flows know by name.

A block is built from the validated configuration, so `edgexpert rtl`, `edgexpert synth` and the
cocotb benches all elaborate exactly the same RTL for the same config. Most blocks read only
`config.hardware`; the EMA controller also needs the model's shape, which fixes its memory map.

For the cost flow (`edgexpert synth`, docs/synthesis.md) a block also names its stimulus: a
function from the whole configuration to an `edgexpert.sim.stimuli.common.Stimulus`, which says what one
operation of the block is (a MAC, a byte fetched, a coalescing decision) and drives the block in
simulation for the switching activity behind its power and energy per operation. A block without
one is still synthesized and timed; its report says that power was not measured.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .contracts.config import Config, ConfigError
from .contracts.hardware import ema_parameters, top_parameters
from .contracts.pru import tau_q16
from .contracts.weight_layout import WeightLayout
from .hw.dcu import Dcu
from .hw.ema import EmaController, EmaSystem
from .contracts.top import EXPERT_OUT_VALUES, outputs_per_beat
from .hw.engine import ExpertEngine
from .hw.engine.column_mac import ColumnMac
from .hw.engine.combine import Combine
from .hw.engine.quantizer import Quantizer
from .hw.engine.requant import Requant
from .hw.engine.swiglu import SwiGlu
from .hw.top import AcceleratorTop
from .hw.mac_lane import MacLane
from .hw.pru import PRU_LOGIT_LANES, PRU_MAX_TOKENS, Pru, PruParams, pick_register_for
from .sim.stimuli.dcu import dcu_stimulus
from .sim.stimuli.ema import ema_stimulus
from .sim.stimuli.engine import engine_stimulus
from .sim.perf.models import model_spec
from .sim.stimuli.pru import pru_stimulus
from .sim.stimuli.common import Stimulus, mac_lane_stimulus
from .sim.stimuli.top import top_stimulus

__all__ = ["Block", "BLOCKS", "get_block", "ema_parameters", "pru_parameters", "pru_experts_per_step",
           "dcu_parameters", "engine_parameters", "engine_large_parameters", "top_parameters",
           "accelerator_parameters", "ENGINE_PARTS"]


@dataclass(frozen=True)
class Block:
    name: str
    description: str
    build: Callable[[Config], object]
    parameters: Callable[[Config], dict]
    stimulus: Callable[[Config], Stimulus] | None = None


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


#: the PRU at the scale of Qwen3-30B-A3B's routing (128 experts, top-8; sim.perf.models has the shape)
PRU_LARGE_MODEL = "qwen3-30b-a3b"


def _large_shape() -> dict:
    spec = model_spec(PRU_LARGE_MODEL)
    return {"n_experts": spec.n_experts, "top_k": spec.top_k, "n_layers": spec.n_layers,
            "d_model": spec.d_model, "expert_ffn": spec.expert_ffn}


def pru_experts_per_step(config: Config, **model) -> int:
    """Whole experts of the model (`model` overrides its shape) one step of the configured EMA
    holds; at least 1: an expert larger than the buffer is still one step (the EMA then fails
    it BUFFER_FULL; docs/blocks/pru.md, limits)."""
    from .golden.blocks.pru import experts_per_step
    shape = {k: getattr(config.model, k) for k in ("n_layers", "n_experts", "d_model",
                                                    "expert_ffn", "n_shared_experts")}
    layout = WeightLayout(**{**shape, **{k: v for k, v in model.items() if k in shape}})
    ema = config.hardware.ema
    return max(1, experts_per_step(layout, ema.axi_data_width // 8, ema.buffer_bytes, ema.slots))


def pru_parameters(config: Config, **model) -> dict:
    """The PRU's parameters (keyword arguments of `PruParams`) from the config's model and
    prefill policy; `model` overrides the model's shape (`_large_shape`)."""
    m, p = config.model, config.policies.prefill
    shape = {"n_experts": m.n_experts, "top_k": m.top_k, "n_layers": m.n_layers,
             "d_model": m.d_model, "expert_ffn": m.expert_ffn, **model}
    return {**shape, "chunk": p.chunk, "max_tokens": PRU_MAX_TOKENS, "lanes": PRU_LOGIT_LANES,
            "experts_per_step": pru_experts_per_step(config, **model),
            "pick_register": pick_register_for(shape["n_experts"]),
            "tau_major_q16": tau_q16(p.tau_major), "tau_minor_q16": tau_q16(p.tau_minor),
            "budget_minor": p.budget_minor, "budget_trivial": p.budget_trivial}


def _pru(config: Config, **model):
    try:
        return Pru(PruParams(**pru_parameters(config, **model)))
    except ValueError as exc:  # budgets or chunk the config ranges alone cannot rule out
        raise ConfigError(f"pru: {exc}") from None


def dcu_parameters(config: Config) -> dict:
    """The DCU's parameters (keyword arguments of `Dcu`): the model's channel counts, the
    draft tree's candidates (decode.max_candidates) and the layers and experts per layer a job
    may name. The full-size point (Qwen3-30B-A3B: d_model 2048, expert width 768) is `--set
    model.d_model=2048 --set model.n_heads=16 --set model.expert_ffn=768` (docs/blocks/dcu.md)."""
    model = config.model
    layout = WeightLayout.for_model(model)
    return {"gate_up_channels": model.d_model, "down_channels": model.expert_ffn,
            "max_group": config.decode.max_candidates, "layers": layout.n_layers,
            "experts": layout.experts_per_layer}


def _dcu(config: Config) -> Dcu:
    try:
        return Dcu(**dcu_parameters(config))
    except ValueError as exc:
        raise ConfigError(f"DCU: {exc}") from None


def engine_parameters(config: Config) -> dict:
    """The expert engine's parameters (keyword arguments of `ExpertEngine`): the model's
    d_model and expert_ffn, the EMA's buffer word, `hardware.engine.*`."""
    e = config.hardware.engine
    return {"d_model": config.model.d_model, "expert_ffn": config.model.expert_ffn,
            "candidates": e.candidates, "lanes": e.lanes,
            "word_bits": config.hardware.ema.axi_data_width, "tokens": e.tokens}


#: the engine's larger synthesis point: twice the lanes of the largest configurable array and the
#: 512-bit word they need (lanes divide a word's int4 values; hardware.ema.axi_data_width stops at
#: 256), the rest as configured (docs/synthesis.md, "Scaling to EdgeXpert's 8K MACs")
ENGINE_LARGE = {"lanes": 128, "word_bits": 512}
#: the engine's smaller synthesis points, for a least-squares fit over more than two sizes: a
#: quarter and a half of the configured lanes, each on the word its int4 values fill (lanes x 4
#: bits), the rest as configured; minutes to synthesize where `engine_l128` takes hours
ENGINE_SMALL = {"engine_l16": {"lanes": 16, "word_bits": 64},
                "engine_l32": {"lanes": 32, "word_bits": 128}}


def engine_large_parameters(config: Config) -> dict:
    """The larger engine's parameters: `engine_parameters` with `ENGINE_LARGE` over them."""
    return {**engine_parameters(config), **ENGINE_LARGE}


def _engine_at(sizes: dict) -> Callable[[Config], dict]:
    """The parameters of an engine of other `sizes`: `engine_parameters` with them over it."""
    return lambda config: {**engine_parameters(config), **sizes}


def _engine(config: Config, **override) -> ExpertEngine:
    try:
        return ExpertEngine(**{**engine_parameters(config), **override})
    except TypeError as exc:  # lanes that do not divide the buffer word's int4 values
        raise ConfigError(f"hardware.engine: {exc}") from None


def _engine_part(build: Callable[[dict], object]) -> Callable[[Config], object]:
    """One part of the configured engine (hw/engine/), built from the engine's parameters:
    synthesized alone its critical path is its own, minutes faster than the whole engine's."""
    def part(config: Config):
        try:
            return build(engine_parameters(config))
        except TypeError as exc:     # the engine's own refusal (_engine)
            raise ConfigError(f"hardware.engine: {exc}") from None
    return part


#: the engine's arithmetic parts, each timed alone (docs/blocks/engine.md, "Timing")
ENGINE_PARTS = {
    "engine_down_mac": ("the DOWN MAC array with its accumulators and its four-output drain",
                        lambda p: ColumnMac(p["expert_ffn"], p["d_model"], p["candidates"],
                                            p["lanes"], p["word_bits"], 1,
                                            parts=EXPERT_OUT_VALUES, split="neighbours",
                                            early=True)),
    "engine_requant": ("the DOWN requantizer, four outputs a cycle in four stages",
                       lambda p: Requant(p["candidates"], p["d_model"], p["word_bits"],
                                         parts=EXPERT_OUT_VALUES, split="neighbours")),
    "engine_swiglu": ("SiLU(gate) x up in four stages",
                      lambda p: SwiGlu(p["candidates"], p["expert_ffn"])),
    "engine_quantizer": ("quantize_vec of each candidate's hidden vector: collector, dividers, "
                         "a five-stage value pipeline",
                         lambda p: Quantizer(p["candidates"], p["expert_ffn"])),
    "engine_combine": ("the routing-weighted MoE sums and their word-wide read-out",
                       lambda p: Combine(p["candidates"], p["d_model"], p["tokens"],
                                         outputs_per_beat(p["word_bits"]))),
}


def accelerator_parameters(config: Config) -> dict:
    """The synthesized top's parameters: the benches' top (`top_parameters`: EMA system, DCU,
    engine) with its PRU (`pru_parameters`, as a dict) and a token slot per token of a prefill
    chunk, as the prefill bench builds it (cocotb_tests/top `prefill_hardware`): the whole
    accelerator of docs/blocks/top.md."""
    hw = top_parameters(config)
    return {**hw, "tokens": max(hw["tokens"], config.policies.prefill.chunk),
            "pru": pru_parameters(config)}


def _top(config: Config) -> AcceleratorTop:
    params = accelerator_parameters(config)
    try:
        pru = PruParams(**params.pop("pru"))
    except ValueError as exc:  # budgets or chunk the config ranges alone cannot rule out
        raise ConfigError(f"pru: {exc}") from None
    try:
        return AcceleratorTop(WeightLayout.for_model(config.model), **params, pru=pru)
    except ValueError as exc:
        raise ConfigError(f"hardware.ema: {exc}") from None
    except TypeError as exc:
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
    "dcu": Block(
        "dcu",
        "depth coalescing unit: per depth group and expert the channels to fetch, as EMA "
        "commands (the model's channel counts)",
        _dcu,
        dcu_parameters,
        dcu_stimulus,
    ),
    "engine": Block(
        "engine",
        "expert engine: GATE_UP and DOWN MAC arrays, requantization, SiLU, quantize_vec and "
        "the routing-weighted combine of one expert for a group of candidates, accumulators "
        "in registers (memories cut out: activations, scales, sigmoid table, gate and h "
        "buffers, MoE sums)",
        _engine,
        engine_parameters,
        engine_stimulus,
    ),
    "engine_l128": Block(
        "engine_l128",
        "expert engine with 128 lanes per MAC array on a 512-bit weight word (twice the "
        "configurable peak: 256 MACs per cycle), the rest as `engine`; the larger point of the "
        "scaling to EdgeXpert's 8K MACs",
        lambda c: _engine(c, **ENGINE_LARGE),
        engine_large_parameters,
        engine_stimulus,
    ),
    **{name: Block(
        name,
        f"expert engine with {sizes['lanes']} lanes per MAC array on a {sizes['word_bits']}-bit "
        "weight word, the rest as `engine`; a smaller "
        "point of the scaling to EdgeXpert's 8K MACs",
        lambda c, sizes=sizes: _engine(c, **sizes),
        _engine_at(sizes),
        engine_stimulus,
    ) for name, sizes in ENGINE_SMALL.items()},
    "top": Block(
        "top",
        "accelerator top: a host command stream driving the EMA system, the DCU, the PRU, the "
        "feeder (location table and weight buffer to the engine's column streams) and the "
        "expert engine, with status and cycle counters (memories cut out: buffer, location "
        "table, residency, the engine's)",
        _top,
        accelerator_parameters,
        top_stimulus,
    ),
    "ema_system": Block(
        "ema_system",
        "EMA controller with its banked weight buffer, location table and residency memories "
        "(what the benches simulate; memories synthesize to flip-flops)",
        lambda c: _ema(c, with_memories=True),
        ema_parameters,
    ),
    "pru": Block(
        "pru",
        "prompt routing unit: token classes, shared set, budgeted top-k and weights, per-chunk "
        "EMA fetch list (the configured model's experts)",
        _pru,
        pru_parameters,
        pru_stimulus,
    ),
    **{name: Block(name, f"expert engine part: {what} (timing alone; memories cut out)",
                   _engine_part(build), engine_parameters)
       for name, (what, build) in ENGINE_PARTS.items()},
    "pru_e128": Block(
        "pru_e128",
        "prompt routing unit at Qwen3-30B-A3B's routing (128 experts, top-8)",
        lambda c: _pru(c, **_large_shape()),
        lambda c: pru_parameters(c, **_large_shape()),
        pru_stimulus,
    ),
}


def get_block(name: str) -> Block:
    try:
        return BLOCKS[name]
    except KeyError:
        raise ConfigError(f"block {name!r} is not known: accepted {', '.join(sorted(BLOCKS))}") from None
