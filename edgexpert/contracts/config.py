"""Typed configuration: YAML -> frozen dataclasses, validated on load.

Every field declares its accepted range (numbers) or choices (strings) next to its default. A bad value raises `ConfigError`
with one line naming the dotted key, the value and the accepted range; the CLI prints that line
and exits non-zero.

A YAML file may give any subset of the keys: the rest keep the defaults of the bundled
`configs/default.yaml`. Unknown keys are errors, never ignored.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import yaml

from .errors import InputError

__all__ = [
    "ConfigError", "MacLaneConfig", "EmaConfig", "EngineConfig", "HardwareConfig", "ModelConfig", "TrainConfig", "DecodeConfig",
    "PolicyConfig", "PrefillConfig", "S2MoeConfig", "SpecterConfig", "CombinedConfig",
    "ScalingConfig", "SynthConfig", "DramConfig", "PlatformConfig", "DRAM_MAX_DATA_RATE_MTPS",
    "Config",
    "load_config", "apply_overrides", "build_dataclass", "RENAMED", "MODEL_NAMES",
    "checkpoint_folder",
]


class ConfigError(InputError):
    """A configuration value is missing, malformed or out of range. The message is one line."""


def _int(lo: int, hi: int, default: int, doc: str):
    return field(default=default, metadata={"range": (lo, hi), "doc": doc})


def _float(lo: float, hi: float, default: float, doc: str):
    return field(default=default, metadata={"range": (lo, hi), "doc": doc})


def _factor(doc: str):
    """A scaling factor from 180 nm to the target node, or None: derived from the published
    equations (synth/scaling.py). Above 1 would make the target node worse than 180 nm; the
    derived factors (x0.0051 and up: energy at 22 nm, 0.7 V) lie far above the lower bound."""
    return field(default=None, metadata={"range": (0.0001, 1.0), "doc": doc})


def _bool(default: bool, doc: str):
    return field(default=default, metadata={"doc": doc})


def _choice(choices: tuple, default, doc: str):
    return field(default=default, metadata={"choices": choices, "doc": doc})


@dataclass(frozen=True)
class MacLaneConfig:
    """The stream-fed A8W4 dot-product lane (seed of the MAC cluster)."""
    pairs_per_beat: int = _int(1, 64, 4, "int8 x int4 products summed per input beat")


@dataclass(frozen=True)
class EmaConfig:
    """The external-memory access controller (hw/ema/, docs/blocks/ema.md)."""
    axi_data_width: int = _choice((64, 128, 256), 256, "AXI4 read data bus width, bits")
    axi_addr_width: int = _int(16, 64, 32, "AXI4 address width, bits (must cover the weights)")
    outstanding_reads: int = _int(1, 64, 48, "AXI read bursts in flight at once; hides latency")
    buffer_bytes: int = _choice(tuple(2**n for n in range(10, 21)), 262144,
                                 "on-chip weight buffer size, bytes (a power of two)")
    buffer_banks: int = _choice((1, 2, 4, 8), 4, "weight buffer banks, lines interleaved")
    slots: int = _int(1, 128, 32, "distinct (layer, expert, matrix) resident in one step")


@dataclass(frozen=True)
class EngineConfig:
    """The expert engine (hw/engine/, docs/blocks/engine.md); its buffer word is the EMA's
    axi_data_width, and lanes must divide that word's int4 values."""
    candidates: int = _int(1, 64, 4, "candidates (token, expert choices) of one group")
    lanes: int = _choice((1, 2, 4, 8, 16, 32, 64), 64, "int8 x int4 products per cycle of each "
                         "MAC array (GATE_UP, DOWN)")
    tokens: int = _int(1, 4096, 8, "token slots of the MoE sums")


@dataclass(frozen=True)
class HardwareConfig:
    mac_lane: MacLaneConfig = field(default_factory=MacLaneConfig)
    ema: EmaConfig = field(default_factory=EmaConfig)
    engine: EngineConfig = field(default_factory=EngineConfig)


#: the bundled models, each a checkpoint folder of golden/ and, past the first, a settings file
#: configs/<name>.yaml that `model.name` brings in over the defaults (`load_config`)
MODEL_NAMES = ("coarse", "fine")


def checkpoint_folder(name: str) -> str:
    """The folder of golden/ that holds bundled model `name`: checkpoint/ for the first,
    checkpoint_<name>/ for the others."""
    return "checkpoint" if name == MODEL_NAMES[0] else f"checkpoint_{name}"


@dataclass(frozen=True)
class ModelConfig:
    """Shape of the MoE language model the golden model builds and trains."""
    name: str = _choice(MODEL_NAMES, "coarse", "the bundled model commands load when no "
                        "--checkpoint is given: coarse (golden/checkpoint/, 32 experts, top-4, "
                        "width 64) or fine (golden/checkpoint_fine/, 64 experts, top-8, width 32: "
                        "OLMoE's granularity, its shape from configs/fine.yaml)")
    vocab_size: int = _int(2, 1 << 20, 4096, "vocabulary size")
    d_model: int = _int(16, 8192, 192, "residual stream width")
    n_layers: int = _int(1, 128, 4, "decoder layers")
    n_heads: int = _int(1, 128, 6, "attention heads (must divide d_model)")
    n_experts: int = _int(1, 512, 32, "routed experts per MoE layer")
    top_k: int = _int(1, 64, 4, "routed experts per token (at most n_experts)")
    expert_ffn: int = _int(8, 65536, 64, "hidden width of one SwiGLU expert")
    n_shared_experts: int = _int(0, 8, 0, "always-active shared experts per layer")
    max_seq_len: int = _int(16, 1 << 20, 512, "longest sequence (the position table's length)")
    # What real MoE checkpoints need (golden/lm/hf_loader.py); the bundled model uses the defaults.
    n_kv_heads: int = _int(0, 128, 0, "key/value heads for grouped-query attention; 0: n_heads")
    head_dim: int = _int(0, 1024, 0, "width of one attention head; 0: d_model / n_heads")
    rope_theta: float = _float(0.0, 1e9, 0.0, "rotary position base; 0: learned positions")
    qk_norm: str = _choice(("none", "head", "full"), "none", "RMSNorm on queries and keys: "
                           "per head (Qwen3), over the whole projection (OLMoE), or none")
    tie_embeddings: bool = _bool(True, "the output head is the token embedding")
    norm_topk_prob: bool = _bool(True, "routing weights: softmax over the top-k logits (true) or "
                                       "the top-k of a softmax over all experts (false, OLMoE)")
    rms_eps: float = _float(1e-12, 1e-2, 1e-5, "RMSNorm epsilon")

    def __post_init__(self):
        if self.top_k > self.n_experts:
            raise ConfigError(f"model.top_k = {self.top_k} is out of range: accepted 1..n_experts "
                              f"(n_experts = {self.n_experts})")
        if self.head_dim == 0 and self.d_model % self.n_heads:
            raise ConfigError(f"model.n_heads = {self.n_heads} does not divide model.d_model = "
                              f"{self.d_model}: accepted divisors of d_model")
        if self.kv_heads > self.n_heads or self.n_heads % self.kv_heads:
            raise ConfigError(f"model.n_kv_heads = {self.n_kv_heads} is not accepted: accepted 0 "
                              f"or divisors of n_heads (= {self.n_heads})")
        if self.rope_theta and self.dim_head % 2:
            raise ConfigError(f"head width {self.dim_head} is odd: rotary positions need an even "
                              "head_dim")

    @property
    def kv_heads(self) -> int:
        return self.n_kv_heads or self.n_heads

    @property
    def dim_head(self) -> int:
        return self.head_dim or self.d_model // self.n_heads


@dataclass(frozen=True)
class TrainConfig:
    """How `edgexpert train` trains the golden model (deterministic for a given seed)."""
    seed: int = _int(0, 2**31 - 1, 20261129, "seeds the data order and the initial weights")
    seq_len: int = _int(16, 32768, 512, "tokens per training window (at most model.max_seq_len)")
    batch_size: int = _int(1, 4096, 8, "windows per step")
    steps: int = _int(1, 10_000_000, 3000, "optimizer steps")
    lr: float = _float(1e-6, 1.0, 3e-3, "peak learning rate (AdamW)")
    warmup_steps: int = _int(0, 1_000_000, 100, "linear warm-up steps, then cosine decay to lr/10")
    weight_decay: float = _float(0.0, 1.0, 0.1, "AdamW weight decay on matrices")
    balance_coef: float = _float(0.0, 10.0, 0.01, "weight of the load-balancing loss")
    zloss_coef: float = _float(0.0, 10.0, 0.001, "weight of the router z-loss")
    eval_windows: int = _int(1, 100_000, 64, "held-out windows of seq_len tokens in the evaluation")
    threads: int = _int(1, 256, 2, "torch CPU threads")


@dataclass(frozen=True)
class DecodeConfig:
    """Speculative decoding with a self-speculative draft tree (golden/decoding/decode.py)."""
    max_new_tokens: int = _int(1, 100_000, 64, "tokens generated per prompt")
    draft_experts: int = _int(1, 64, 1, "routed experts per token in the draft (at most model.top_k)")
    max_depth: int = _int(1, 32, 6, "deepest level of the draft tree")
    max_candidates: int = _int(1, 1024, 64, "draft tokens in the tree (verified in one pass)")
    branch: int = _int(1, 64, 4, "children drafted per expanded node")
    width: int = _int(1, 256, 8, "nodes expanded per depth (the most probable paths)")
    temperature: float = _float(0.0, 10.0, 0.0, "0: greedy; > 0: sampling with lossless "
                                                "rejection-sampling acceptance")
    seed: int = _int(0, 2**31 - 1, 20261129, "seeds sampling")


@dataclass(frozen=True)
class PrefillConfig:
    """EdgeXpert's prefill (golden/policies/prefill.py); the values are `edgexpert calibrate
    prefill`'s."""
    chunk: int = _int(1, 4096, 16, "prompt tokens whose activations stay on chip while "
                      "each expert is streamed once (the prefill cost model)")
    tau_major: float = _float(0.0, 1000.0, 1.0, "EdgeXpert prefill: a token whose "
                              "encoder score x prompt length is at least this is major")
    tau_minor: float = _float(0.0, 1000.0, 0.75, "EdgeXpert prefill: ... at least this "
                              "(and below tau_major) is minor, else trivial")
    budget_minor: int = _int(1, 64, 4, "EdgeXpert prefill: experts of a minor token, "
                             "its top-1 included (at most model.top_k)")
    budget_trivial: int = _int(1, 64, 3, "EdgeXpert prefill: experts of a trivial token, "
                               "its top-1 included (at most budget_minor)")
    classes: str = _choice(("encoder", "random"), "encoder", "EdgeXpert prefill: token "
                           "classes from the encoder's scores, or random with the same "
                           "class sizes (the ablation)")
    seed: int = _int(0, 2**31 - 1, 20261129, "seeds the random token classes")
    encoder: str = _choice(("float", "int"), "float", "EdgeXpert prefill: the encoder's "
                           "arithmetic: float, or the A8W4 integer path the MAC clusters "
                           "run (golden/integer/int_encoder.py)")

    def __post_init__(self):
        if self.budget_trivial > self.budget_minor:
            raise ConfigError(f"policies.prefill.budget_trivial = {self.budget_trivial} is out "
                              f"of range: accepted 1..policies.prefill.budget_minor "
                              f"(= {self.budget_minor})")
        if self.tau_minor > self.tau_major:
            raise ConfigError(f"policies.prefill.tau_minor = {self.tau_minor} is out of range: "
                              f"accepted 0.0..policies.prefill.tau_major (= {self.tau_major})")


@dataclass(frozen=True)
class S2MoeConfig:
    """S2-MoE (golden/policies/s2moe.py)."""
    threshold: float = _float(0.0, 1e6, 1.0, "S2-MoE: score a node needs to join the tree "
                              "(expected accepted tokens per new expert, in units of an "
                              "autoregressive step's tokens per expert)")
    cap: int = _int(1, 1024, 8, "S2-MoE: experts preferred by reuse-aware gating (model.top_k "
                    "..model.n_experts; the paper uses 1.5-2.5x top-k)")


@dataclass(frozen=True)
class SpecterConfig:
    """Specter (golden/policies/specter.py)."""
    chain: int = _int(1, 32, 1, "Specter: draft tokens per step (a chain; chosen by "
                      "`edgexpert ablate chain`)")
    draft_bits: int = _int(2, 4, 2, "Specter: bits of the draft's quantized experts")


@dataclass(frozen=True)
class CombinedConfig:
    """Our combined policy (golden/policies/combined.py, docs/policies.md)."""
    threshold: float = _float(0.0, 1e6, 1.0, "combined: adaptive-expansion threshold, "
                              "new experts priced only when not on chip")
    depth: int = _int(1, 32, 3, "combined with the EAGLE head: draft passes per step "
                      "(its tree's depth; chosen by `edgexpert ablate tree` for the "
                      "fewest total bytes per token)")
    candidates: int = _int(1, 1024, 8, "combined with the EAGLE head: candidates "
                           "verified per step (chosen with depth)")
    prefill_reuse: bool = _bool(False, "combined: EdgeXpert's shared-set prefill routing "
                                "(fewer prefill bytes, no longer lossless)")


@dataclass(frozen=True)
class PolicyConfig:
    """The decoding policies `edgexpert compare` measures (golden/policies/registry.py)."""
    coalescing_ratio: float = _float(0.01, 1.0, 0.75, "EdgeXpert: share of each matrix's input "
                                     "channels a depth group fetches")
    pruning_sparsity: float = _float(0.0, 0.95, 0.0, "EdgeXpert: share of each expert's input "
                                     "channels the magnitude pruning mask removes")
    calibration: bool = _bool(True, "EdgeXpert: every candidate computes on all fetched channels")
    pruned_checkpoint: str = _choice(("none", "bundled"), "none", "EdgeXpert runs on the bundled "
                                     "pruned-and-recovered checkpoint (golden/checkpoint_pruned/, "
                                     "its own mask) instead of the compared model")
    draft: str = _choice(("paper", "self", "eagle"), "paper", "what the speculative policies "
                         "draft with: each its paper's draft (golden/policies/registry.py PAPER_DRAFT), "
                         "the target's own layers, or the EAGLE head wherever a policy can")
    moe_spec_budget: int = _int(1, 1024, 12, "MoE-Spec: experts kept per layer in verification "
                                "(at least model.top_k)")
    onchip_expert_kib: int = _int(1, 1 << 20, 480, "on-chip buffer for whole experts kept "
                                  "between passes (SpecMoE, Specter, combined), split evenly over "
                                  "the layers; with resident_nonexpert_kib at most "
                                  "platform.sram_bytes")
    resident_nonexpert_kib: int = _int(0, 1 << 20, 32, "on-chip buffer for non-expert weights "
                                       "(norms, routers, attention, ..., in that order, whole "
                                       "tensors) that every pass then reads from SRAM")
    eval_windows: int = _int(1, 10_000, 8, "held-out windows of the teacher-forced quality check")
    eval_prompt_tokens: int = _int(2, 100_000, 96, "prompt tokens of each quality window")
    eval_continuation: int = _int(1, 100_000, 32, "continuation tokens predicted per window")
    prefill: PrefillConfig = field(default_factory=PrefillConfig)
    s2moe: S2MoeConfig = field(default_factory=S2MoeConfig)
    specter: SpecterConfig = field(default_factory=SpecterConfig)
    combined: CombinedConfig = field(default_factory=CombinedConfig)


#: keys that were flat fields sharing a prefix before they became sections (issue 27): old
#: dotted key -> new; a configuration giving an old key is refused with the new one's name
RENAMED = {f"policies.{section}_{f.name}": f"policies.{section}.{f.name}"
           for section, typ in typing.get_type_hints(PolicyConfig).items()
           if dataclasses.is_dataclass(typ) for f in dataclasses.fields(typ)}


#: the target nodes synth/ scales to: where CACTI 7 has technology files to interpolate between
#: (22..180 nm, its parameter.cc `find_upper_and_lower_tech`) and Stillmaker & Baas's rows
#: (synth/scaling.py) have a nominal supply near `target_vdd_v`'s 0.7..1.0 V (65 nm bulk 1.1 V;
#: 90 nm's 1.2 V and above are left out)
TARGET_NODE_RANGE_NM = (22, 65)


@dataclass(frozen=True)
class ScalingConfig:
    """Factors from the measured osu018 180 nm, 1.8 V figures to `synth.target_node_nm`
    (synth/scaling.py). Each is null by default: derived from Stillmaker & Baas 2017
    (Integration 58, 74-81), interpolated between its rows around the node at
    `synth.target_vdd_v` (28 nm, 1.0 V: area x0.0200, delay x0.1375, energy x0.0173). A number
    replaces the derived factor, e.g. to try another source's (docs/synthesis.md lists some).
    The memories are CACTI runs at the target node and are not scaled."""
    area: float | None = _factor("area factor (null: Stillmaker & Baas, x0.0200 at 28 nm)")
    delay: float | None = _factor("delay factor; fmax is divided by it (null: Stillmaker & "
                                  "Baas at synth.target_vdd_v, x0.1375 at 28 nm, 1.0 V)")
    energy: float | None = _factor("energy per operation factor, leakage included (null: "
                                   "Stillmaker & Baas at synth.target_vdd_v, x0.0173 at 28 nm, "
                                   "1.0 V)")


@dataclass(frozen=True)
class SynthConfig:
    """Constraints of the synthesis and timing runs (180 nm osu018 cells)."""
    clock_period_ns: float = _float(0.5, 1000.0, 10.0, "clock the timing run checks against; "
                                    "also ABC's delay target")
    output_load_pf: float = _float(0.0, 10.0, 0.01, "capacitive load on every output port")
    activity_cycles: int = _int(16, 200_000, 2000, "clock cycles the stimulus runs to measure "
                                "switching activity for power")
    activity_seed: int = _int(0, 2**31 - 1, 20261129, "seed of the stimulus's random data")
    default_activity: float = _float(0.0, 2.0, 0.1, "toggles per cycle given to nets whose "
                                     "values the activity evaluation cannot compute")
    activity_operands: str = _choice(("uniform", "gaussian"), "uniform", "distribution of the "
                                     "stimulus's int8/int4 operands (sim/stimuli/common.py)")
    target_node_nm: int = _int(*TARGET_NODE_RANGE_NM, 28, "technology node the 180 nm figures "
                               "are scaled to and CACTI models the memories at (EdgeXpert: "
                               "Samsung 28 nm FDSOI)")
    target_vdd_v: float = _float(0.7, 1.0, 1.0, "supply voltage of the target node "
                                 "(EdgeXpert: 1.0 V)")
    clock_gating: bool = _bool(True, "gate the clock of every group of enable flip-flops "
                               "(synth/clock_gating.py), as a commercial flow does; the "
                               "default since 2026-12-05")
    clock_gating_min_bits: int = _int(1, 1024, 4, "the smallest group of flip-flops sharing "
                                      "an enable that gets a clock gate")
    clock_gating_max_bits: int = _int(1, 1_000_000, 16, "the most flip-flops one clock gate "
                                      "drives: a larger group gets a gate per this many (the "
                                      "flow builds no clock tree)")
    scaling: ScalingConfig = field(default_factory=ScalingConfig)


#: the fastest speed bin of each DRAM type sim/perf/dram.py models, MT/s per pin: LPDDR4X-4266
#: (JEDEC JESD209-4-1), LPDDR5-6400 (JEDEC JESD209-5)
DRAM_MAX_DATA_RATE_MTPS = {"LPDDR4X": 4266, "LPDDR5": 6400}


@dataclass(frozen=True)
class DramConfig:
    """External memory of the performance model (sim/perf/dram.py, docs/performance-model.md)."""
    type: str = _choice(tuple(DRAM_MAX_DATA_RATE_MTPS), "LPDDR4X", "DRAM type (its timing "
                        "and currents are in sim/perf/dram.py)")
    channels: int = _int(1, 16, 2, "x16 channels")
    data_rate_mtps: int = _int(200, 6400, 4000, "data rate per pin, MT/s (at most the type's "
                               "speed bin: LPDDR4X 4266, LPDDR5 6400)")
    interleave_bytes: int = _choice((32, 64, 128, 256, 512, 1024, 2048), 64, "bytes of "
                                    "consecutive addresses on one channel before the next")

    def __post_init__(self):
        top = DRAM_MAX_DATA_RATE_MTPS[self.type]
        if self.data_rate_mtps > top:
            raise ConfigError(f"platform.dram.data_rate_mtps = {self.data_rate_mtps} is out of "
                              f"range for {self.type}: accepted integers 200..{top}")

    @property
    def peak_bytes_per_s(self) -> float:
        """x16 channels: 2 bytes per transfer."""
        return self.channels * self.data_rate_mtps * 1e6 * 2


@dataclass(frozen=True)
class PlatformConfig:
    """The machine a performance estimate is for (sim/, docs/performance-model.md). Independent
    of `hardware.*`, which is what the RTL is elaborated with: `configs/rtl.yaml` sets this
    section to what our RTL synthesizes to."""
    clock_hz: int = _int(1_000_000, 5_000_000_000, 800_000_000, "clock of the accelerator, Hz")
    macs: int = _int(1, 1 << 20, 8192, "A8W4 multiply-accumulate units")
    mac_clusters: int = _int(1, 1024, 8, "clusters the MACs are split into")
    sram_bytes: int = _int(1024, 1 << 30, 524288, "on-chip SRAM shared by weights and "
                           "activations, bytes")
    sram_banks: int = _int(1, 1024, 8, "SRAM banks read in parallel")
    ema_bus_bits: int = _choice((64, 128, 256), 256, "width of the EMA's AXI read bus, bits")
    ema_outstanding: int = _int(1, 64, 48, "AXI read bursts the EMA keeps in flight")
    compute_utilization: float = _float(0.01, 1.0, 0.8, "share of the MAC array's peak a pass "
                                        "keeps busy (open: EdgeXpert gives only its 13.1 TOPS "
                                        "peak; our choice, `estimate --calibrate` measures the "
                                        "RTL top's)")
    control_power_w: float = _float(0.0, 100.0, 0.076, "power of the controllers (top, PRU, "
                                    "DCU, EMA) and clock tree while a pass runs, W (open: 5 % "
                                    "of EdgeXpert's 1.52 W without DRAM, MICRO 2026; our "
                                    "choice, no synthesized control block yet)")
    dram: DramConfig = field(default_factory=DramConfig)

    def __post_init__(self):
        if self.macs % self.mac_clusters:
            raise ConfigError(f"platform.mac_clusters = {self.mac_clusters} does not divide "
                              f"platform.macs = {self.macs}: accepted divisors of macs")


def check_prefill_budgets(policies: PolicyConfig, top_k: int) -> None:
    """The prefill budgets against the top-k of the model they route (checked when the prefill
    routing is built, so that other model sizes load without setting them)."""
    if policies.prefill.budget_minor > top_k:
        raise ConfigError(f"policies.prefill.budget_minor = {policies.prefill.budget_minor} is "
                          f"out of range: accepted 1..model.top_k (= {top_k})")


@dataclass(frozen=True)
class Config:
    hardware: HardwareConfig = field(default_factory=HardwareConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    decode: DecodeConfig = field(default_factory=DecodeConfig)
    policies: PolicyConfig = field(default_factory=PolicyConfig)
    synth: SynthConfig = field(default_factory=SynthConfig)
    platform: PlatformConfig = field(default_factory=PlatformConfig)

    def __post_init__(self):
        if self.decode.draft_experts > self.model.top_k:
            raise ConfigError(f"decode.draft_experts = {self.decode.draft_experts} is out of range: "
                              f"accepted 1..model.top_k (= {self.model.top_k})")
        p = self.policies
        if p.pruned_checkpoint == "bundled" and self.model.name != MODEL_NAMES[0]:
            raise ConfigError(f"policies.pruned_checkpoint = bundled is the {MODEL_NAMES[0]} "
                              f"model's pruned checkpoint, not the {self.model.name} model's: "
                              "accepted none")
        if self.train.seq_len > self.model.max_seq_len:
            raise ConfigError(f"train.seq_len = {self.train.seq_len} is out of range: accepted "
                              f"16..model.max_seq_len (= {self.model.max_seq_len})")


def _check_scalar(key: str, value, typ, meta: dict):
    if typing.get_origin(typ) in (typing.Union, types.UnionType):
        # `float | None`: null keeps the field's meaning of None (a derived value)
        if value is None:
            return None
        lo, hi = meta["range"]
        accepted = f"accepted values {lo}..{hi}, or null (derived)"
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{key} = {value!r} is not a number: {accepted}")
        if not lo <= value <= hi:  # NaN fails this too
            raise ConfigError(f"{key} = {value!r} is out of range: {accepted}")
        return float(value)
    if "choices" in meta:
        if typ is str and isinstance(value, str):
            # names are matched whatever their case (lpddr4x is LPDDR4X); the choice's own
            # spelling is what the configuration holds
            value = next((c for c in meta["choices"] if c.lower() == value.lower()), value)
        if value not in meta["choices"] or type(value) is not typ:
            accepted = ", ".join(str(c) for c in meta["choices"])
            raise ConfigError(f"{key} = {value!r} is not accepted: accepted {accepted}")
        return value
    if typ is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{key} = {value!r} is not a boolean: accepted true, false")
        return value
    lo, hi = meta["range"]
    kind = {int: "integers", float: "values"}[typ]
    # bool is a subclass of int in Python: a YAML `true` must not pass as a number
    numeric = (int,) if typ is int else (int, float)
    if isinstance(value, bool) or not isinstance(value, numeric):
        raise ConfigError(f"{key} = {value!r} is not {'an integer' if typ is int else 'a number'}: "
                          f"accepted {kind} {lo}..{hi}")
    if not lo <= value <= hi:  # NaN fails this too
        raise ConfigError(f"{key} = {value!r} is out of range: accepted {kind} {lo}..{hi}")
    return typ(value)


def build_dataclass(cls, data, prefix: str):
    """Build dataclass `cls` from a mapping, validating every key against `cls`'s fields."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{prefix or 'config'} must be a mapping, not {type(data).__name__}")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(fields))
    dotted = [f"{prefix}.{name}" if prefix else name for name in unknown]
    for key in dotted:
        if key in RENAMED:
            raise ConfigError(f"{key} was renamed {RENAMED[key]}")
    if unknown:
        raise ConfigError(f"{prefix + '.' if prefix else ''}{unknown[0]} is not a known key: "
                          f"accepted {', '.join(sorted(fields))}")
    kwargs = {}
    for name, f in fields.items():
        key = f"{prefix}.{name}" if prefix else name
        typ = hints[name]
        if dataclasses.is_dataclass(typ):
            kwargs[name] = build_dataclass(typ, data.get(name), key)
        elif name in data:
            kwargs[name] = _check_scalar(key, data[name], typ, f.metadata)
    return cls(**kwargs)


def _read_yaml(text: str, origin: str) -> dict:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{origin} is not valid YAML: {str(exc).splitlines()[0]}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{origin} must hold a mapping at the top, not {type(data).__name__}")
    return data


def _merge(base: dict, top: dict) -> dict:
    out = dict(base)
    for key, value in top.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def _default_data() -> dict:
    text = resources.files("edgexpert.contracts").joinpath("configs/default.yaml").read_text()
    return _read_yaml(text, "bundled configs/default.yaml")


def apply_overrides(data: dict, overrides: list[str]) -> dict:
    """Apply `dotted.key=value` strings (value parsed as YAML) on top of a config mapping."""
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"override {item!r} is malformed: accepted KEY=VALUE, "
                              "e.g. hardware.mac_lane.pairs_per_beat=8")
        value = _read_yaml(f"v: {raw}", f"override {item!r}")["v"]
        nested: dict = {}
        node = nested
        *parents, leaf = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
        data = _merge(data, nested)
    return data


def load_config(path: str | Path | None = None, overrides: list[str] = ()) -> Config:
    """Load the bundled defaults, then `path` (if given), then `overrides`; validate all. A
    bundled model other than the first (`model.name`, set in `path` or `overrides`) brings its
    settings file configs/<name>.yaml in between the defaults and the user's own values."""
    user: dict = {}
    if path is not None:
        path = Path(path)
        try:
            text = path.read_text()
        except OSError as exc:
            raise ConfigError(f"cannot read config {path}: {exc.strerror}") from None
        user = _read_yaml(text, str(path))
    user = apply_overrides(user, list(overrides))
    data = _default_data()
    model = user.get("model")
    name = model.get("name") if isinstance(model, dict) else None
    if name in MODEL_NAMES[1:]:     # any other value is refused below, naming the choices
        text = resources.files("edgexpert.contracts").joinpath(f"configs/{name}.yaml").read_text()
        data = _merge(data, _read_yaml(text, f"bundled configs/{name}.yaml"))
    return build_dataclass(Config, _merge(data, user), "")
