"""The blocks `edgexpert prove` checks, each at one small instance, and the run of their property
sets: one SymbiYosys task per set, under build/formal/."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from amaranth.lib import wiring

from ..contracts.weight_layout import WeightLayout
from ..hw.dcu import Dcu
from ..hw.ema.geometry import EmaGeometry
from ..hw.engine.engine import ExpertEngine
from ..hw.pru import Pru, PruParams
from ..hw.top.command import CommandFork, CommandMerge, Dispatcher
from ..hw.top.feedback import (CandidateTap, DataMux, DownJobs, HiddenPacker, MaskSource,
                               MaskUnion, ScaleTap, WholeOnReject)
from ..hw.top.lanes import Feeder
from ..hw.top.prefill import UseCounter
from ..support.tools import build_root
from .ema import EMA_MUTANTS, EmaReadMasterCheck
from .rules import PropertyWrapper
from .sby import SbyResult, run_job, write_job
from .streams import StreamRulesCheck

__all__ = ["Target", "TARGETS", "EMA_LAYOUT", "EMA_PARAMS", "ENGINE_PARAMS", "PRU_PARAMS",
           "TOP_PARAMS", "prove", "cover"]

#: the EMA instance: a 64-bit bus, so a 4 KiB page is 512 beats and AXI4's 256-beat limit cuts
#: too (a whole GATE_UP run is 63 x 8 + 5 = 509 beats: F = 40 makes 40-byte columns in a
#: 64-byte stride); the base 0xFC0 puts the first scale block across a page boundary; d_model 64
#: gives two mask words (a run continues across them); 2 outstanding bursts are reached in 9
#: cycles; the smallest buffer and 16 address bits keep the state small
EMA_LAYOUT = WeightLayout(n_layers=1, n_experts=2, d_model=64, expert_ffn=40, base_address=0xFC0)
EMA_PARAMS = {"data_width": 64, "addr_width": 16, "outstanding": 2, "buffer_bytes": 1024,
              "slots": 2}

#: the DCU instance: 32 channels in both matrices (one pruning word), groups of up to 2
#: candidates, 2 layers and 2 experts a job may name
DCU_PARAMS = {"gate_up_channels": 32, "down_channels": 32, "max_group": 2, "layers": 2,
              "experts": 2}


@dataclass(frozen=True)
class Target:
    name: str
    what: str
    build: Callable[..., PropertyWrapper]        # (check=, mutant=) -> wrapper
    sets: dict[str, str]
    instance: dict
    mutants: dict[str, str] = field(default_factory=dict)   # mutant -> the set it breaks


def _ema(check=None, mutant=None):
    return EmaReadMasterCheck(EMA_LAYOUT, check=check, mutant=mutant, **EMA_PARAMS)


def _dcu(check=None, mutant=None):
    return StreamRulesCheck(Dcu(**DCU_PARAMS), check=check)


#: the top's stand-in for rejected DCU jobs at DCU_PARAMS' channels, two rejections owed at most
WHOLE_PARAMS = {"gate_up_channels": 32, "down_channels": 32, "pending": 2}


def _whole(check=None, mutant=None):
    # the DCU's `rejected` is free here: any pulse in any cycle, also where the DCU never
    # rejects (while a command of it waits)
    return StreamRulesCheck(WholeOnReject(**WHOLE_PARAMS), check=check)


#: the engine's smallest instance: 4 outputs (one DOWN drain beat of EXPERT_OUT_VALUES), 2
#: hidden channels, 2 candidates, one 16-bit word of 4 lanes, 2 token slots; the first expert
#: output can be taken at step 42 and the last output stream's at 52 (its cover)
ENGINE_PARAMS = {"d_model": 4, "expert_ffn": 2, "candidates": 2, "lanes": 4, "word_bits": 16,
                 "tokens": 2}
#: the PRU at 4 experts, top-2, chunks of 2 tokens of at most 4, one logit a beat: its first
#: route is taken at step 15, its first EMA command at 27
PRU_PARAMS = PruParams(n_experts=4, top_k=2, n_layers=1, d_model=16, expert_ffn=8, chunk=2,
                       max_tokens=4, tau_major_q16=40000, tau_minor_q16=10000, budget_minor=1,
                       budget_trivial=1)
#: the top's parts (hw/top/) at one small top: 2 experts of d_model 16 and width 8, a 64-bit
#: bus, 2 slots of a 1 KiB buffer in 2 banks; 2 candidates, 2 token slots
TOP_LAYOUT = WeightLayout(n_layers=1, n_experts=2, d_model=16, expert_ffn=8)
TOP_GEOMETRY = EmaGeometry(TOP_LAYOUT, 64, 1024, 2)
TOP_PARAMS = {"n_experts": TOP_LAYOUT.n_experts, "d_model": TOP_LAYOUT.d_model,
              "expert_ffn": TOP_LAYOUT.expert_ffn, "data_width": TOP_GEOMETRY.data_width,
              "buffer_bytes": 1024, "slots": 2, "banks": 2, "candidates": 2, "tokens": 2}


def _streams(name: str, what: str, component: Callable[[], wiring.Component],
             instance: dict, held_while: dict[str, str] | None = None) -> Target:
    """A target whose one set is the stream rule on every output of `component()`, built anew
    for each run."""
    return Target(name, what, lambda check=None, mutant=None:
                  StreamRulesCheck(component(), check=check, held_while=held_while),
                  StreamRulesCheck.SETS, instance)


#: the top's parts, each under the stream rule alone: the top joins them port to port
#: (`wiring.connect`), so each part keeping the rule on its outputs given its inputs do is the
#: rule on every stream inside the top (docs/formal.md, "The top's parts")
_PARTS = [
    _streams("pru", "Pru: its routes and its EMA commands", lambda: Pru(PRU_PARAMS),
             {k: getattr(PRU_PARAMS, k) for k in ("n_experts", "top_k", "chunk", "max_tokens",
                                                   "lanes")}),
    _streams("engine", "ExpertEngine: hidden, hidden scales, expert outputs, MoE sums",
             lambda: ExpertEngine(**ENGINE_PARAMS), ENGINE_PARAMS),
    _streams("dispatcher", "Dispatcher (the top's command path): every stream it splits "
             "the host's commands into",
             lambda: Dispatcher(TOP_PARAMS["tokens"], TOP_PARAMS["candidates"],
                                TOP_LAYOUT.d_model, TOP_LAYOUT.expert_ffn,
                                TOP_GEOMETRY.data_width),
             TOP_PARAMS),
    _streams("command_merge", "CommandMerge: three command sources, a whole command at a time",
             lambda: CommandMerge(TOP_GEOMETRY, sources=3), TOP_PARAMS),
    _streams("command_fork", "CommandFork: the merged commands to the EMA and the job queue",
             CommandFork, TOP_PARAMS),
    _streams("feeder", "Feeder: the engine's four word streams, the buffer and location reads",
             lambda: Feeder(TOP_GEOMETRY, TOP_PARAMS["banks"], 2), TOP_PARAMS),
    _streams("use_counter", "UseCounter: the PRU's routes and fetch words with their uses",
             lambda: UseCounter(PRU_PARAMS.route_layout, n_experts=PRU_PARAMS.n_experts,
                                chunk=PRU_PARAMS.chunk, candidates=TOP_PARAMS["candidates"],
                                length_bits=3), TOP_PARAMS,
             # one prompt at a time (UseCounter's contract): the next prompt's length comes
             # once this prompt's routes are out, so it does not change under a waiting route
             held_while={"length": "i_route"}),
    _streams("candidate_tap",
             "CandidateTap: candidates and mask tickets to the engine, weights, marks, parts",
             lambda: CandidateTap(TOP_PARAMS["tokens"], TOP_LAYOUT.expert_ffn), TOP_PARAMS),
    _streams("mask_source", "MaskSource: each candidate's DOWN mask, the host's or its part's",
             lambda: MaskSource(TOP_LAYOUT.expert_ffn, host_mask=True), TOP_PARAMS),
    _streams("mask_union", "MaskUnion: the DCU's commands with parts merged, each job's mask",
             lambda: MaskUnion(TOP_LAYOUT.d_model, TOP_LAYOUT.expert_ffn), TOP_PARAMS),
    _streams("scale_tap", "ScaleTap: hidden scales to the host and the DCU's entries",
             lambda: ScaleTap(TOP_PARAMS["candidates"]), TOP_PARAMS),
    _streams("hidden_packer", "HiddenPacker: hidden values to the host and packed for the DCU",
             lambda: HiddenPacker(TOP_PARAMS["candidates"], TOP_LAYOUT.expert_ffn),
             TOP_PARAMS),
    _streams("down_jobs", "DownJobs: the DCU's route beats, job order and job records",
             DownJobs, TOP_PARAMS),
    _streams("data_mux", "DataMux: the DCU's data, the host's or the packed hidden values",
             DataMux, TOP_PARAMS),
]

TARGETS = {
    "ema": Target("ema", "EmaController: its AXI4 read master and its completion stream",
                  _ema, EmaReadMasterCheck.SETS,
                  {**{k: getattr(EMA_LAYOUT, k) for k in ("n_layers", "n_experts", "d_model",
                                                          "expert_ffn", "base_address")},
                   **EMA_PARAMS}, EMA_MUTANTS),
    "dcu": Target("dcu", "Dcu: its EMA command stream", _dcu, StreamRulesCheck.SETS,
                  DCU_PARAMS),
    "whole_on_reject": Target("whole_on_reject", "WholeOnReject (the top's DCU path): the EMA "
                              "commands for the DCU's and a rejected job's", _whole,
                              StreamRulesCheck.SETS, WHOLE_PARAMS),
    **{part.name: part for part in _PARTS},
}


def _workdir(target: Target, mutant: str | None, kind: str) -> Path:
    return build_root() / "formal" / (f"{target.name}-{mutant}" if mutant else target.name) / kind


def prove(name: str, depth: int, *, sets: list[str] | None = None, mutant: str | None = None,
          progress: Callable[[str, int], None] = lambda set_name, step: None,
          timeout_s: float | None = None) -> list[SbyResult]:
    """Bounded model checking of `name`'s property sets (all, or `sets`) to `depth` cycles,
    one SymbiYosys task each; `progress(set, step)` as the solver passes each step."""
    target = TARGETS[name]
    chosen = list(target.sets) if sets is None else sets
    for s in chosen:
        if s not in target.sets:
            raise ValueError(f"no property set {s!r} for {name}: accepted "
                             f"{', '.join(target.sets)}")
    results = []
    for s in chosen:
        job = write_job(target.build(check=s, mutant=mutant), f"{name}_{s}",
                        _workdir(target, mutant, s), depth)
        results.append(run_job(job, depth, name=s, timeout_s=timeout_s,
                               progress=lambda step, s=s: progress(s, step)))
    return results


_REACHED = re.compile(r"summary:\s+reached cover statement .* at\s+step (\d+)")
_UNREACHED = re.compile(r"summary:\s+unreached cover statement")


def cover(name: str, depth: int, *,
          progress=lambda step: None) -> tuple[SbyResult, list[int], int]:
    """Cover mode: a trace for every `Cover` of `name`'s wrapper within `depth` cycles (the
    properties are not vacuous there); returns the run, the step each reached cover was reached
    at, and how many were not reached."""
    target = TARGETS[name]
    job = write_job(target.build(), f"{name}_cover", _workdir(target, None, "cover"), depth,
                    mode="cover")
    result = run_job(job, depth, name="cover", progress=progress)
    log = (result.workdir / "logfile.txt").read_text()
    return (result, sorted(int(step) for step in _REACHED.findall(log)),
            len(_UNREACHED.findall(log)))
