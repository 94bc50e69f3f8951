"""The blocks `edgexpert prove` checks, each at one small instance, and the run of their property
sets: one SymbiYosys task per set, under build/formal/."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..contracts.weight_layout import WeightLayout
from ..hw.dcu import Dcu
from ..hw.top.feedback import WholeOnReject
from ..support.tools import build_root
from .ema import EMA_MUTANTS, EmaReadMasterCheck
from .rules import PropertyWrapper
from .sby import SbyResult, run_job, write_job
from .streams import StreamRulesCheck

__all__ = ["Target", "TARGETS", "EMA_LAYOUT", "EMA_PARAMS", "prove", "cover"]

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
