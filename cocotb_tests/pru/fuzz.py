"""The PRU's fuzz bench in Amaranth's simulator (docs/blocks/pru.md, "Fuzz bench"; issue 28):
random sequences of good prompts (prompts.py's, golden's routes and EMA words through a synthetic
prefill trace) and bad ones (every `PruError`) played by block_fuzz.py under random pauses on
`score`, `logit`, `route` and `cmd` and random resets. `edgexpert bench fuzz --block pru`
runs it long; tests/test_block_fuzz.py short."""

from __future__ import annotations

import dataclasses
import random

import torch

from edgexpert.cocotb_tests.block_fuzz import Sequence, run_block_fuzz
from edgexpert.cocotb_tests.pru.prompts import (BAD_KINDS, SETTINGS, random_bad_prompt,
                                                random_prompt, small_model)
from edgexpert.cocotb_tests.pru.vectors import prompt_vectors, pru_params
from edgexpert.contracts.pru import PROMPT_TAG_BITS, PruCsr, PruError
from edgexpert.golden.traces.prefill_trace import synthetic_prefill_trace
from edgexpert.hw.pru import Pru, PruParams

__all__ = ["FUZZ_SHAPE", "MAX_PROMPTS", "BAD_SHARE", "fuzz_params", "pru_sequence",
           "run_pru_fuzz"]

#: the fuzzed instance, small (tests/test_pru_sim.py's): 8 experts, top_k 3, 2 layers,
#: prompts of up to 8 tokens, 2 logit lanes, chunks of 3 tokens, the selector registered
FUZZ_SHAPE = {"n_experts": 8, "top_k": 3, "n_layers": 2, "max_tokens": 8, "lanes": 2,
              "pick_register": 2}
#: prompts per sequence: 1..MAX_PROMPTS, each bad with probability BAD_SHARE
MAX_PROMPTS = 3
BAD_SHARE = 0.35


def _model():
    s = FUZZ_SHAPE
    return small_model(s["n_experts"], s["top_k"], s["n_layers"])


def fuzz_params() -> PruParams:
    s, model = FUZZ_SHAPE, _model()
    one = synthetic_prefill_trace(model, SETTINGS, [(torch.tensor([65536]), torch.zeros(
        1, s["n_layers"], s["n_experts"], dtype=torch.long))], {})
    return dataclasses.replace(pru_params(one, s["max_tokens"], s["lanes"]),
                               pick_register=s["pick_register"])


def prompt_cycles(params: PruParams, scores: list[int], logits: list[int], tokens: int,
                  outputs: int) -> int:
    """A prompt's cycles at full speed, at most (docs/blocks/pru.md, "Timing"): its score and
    logit beats, per token and layer the picks (2 cycles each with `pick_register`, shared set
    and routing) and the renormalizer's 2j + 12, its outputs one a cycle, and 20 for the hand-
    overs."""
    picks = max(params.top_k, params.budget_minor, params.budget_trivial)
    return (len(scores) + len(logits) + tokens * params.n_layers * (6 * picks + 15) + outputs
            + 20)


def pru_sequence(rng: random.Random, params: PruParams, model) -> Sequence:
    """1..MAX_PROMPTS prompts, each bad (any of BAD_KINDS) with probability BAD_SHARE, else good;
    one synthetic trace of the good ones gives their expected outputs."""
    plan = [rng.choice(list(BAD_KINDS)) if rng.random() < BAD_SHARE else None
            for _ in range(rng.randint(1, MAX_PROMPTS))]
    good = [random_prompt(rng, params) for kind in plan if kind is None]
    trace = synthetic_prefill_trace(model, SETTINGS, good, {}) if good else None
    inputs = {"score": [], "logit": []}
    outputs = {"route": [], "cmd": []}
    rejections, counts, bound, g = [], {"valid_prompts": 0, "invalid_prompts": 0}, 0, 0
    for number, kind in enumerate(plan):
        if kind is None:
            v = prompt_vectors(trace, g, params)
            scores, logits, tokens = v.scores, v.logits, v.tokens
            outputs["route"] += v.routes
            outputs["cmd"] += v.ema
            owed = len(v.routes) + len(v.ema)
            g += 1
            counts["valid_prompts"] += 1
        else:
            scores, logits = random_bad_prompt(rng, params, kind)
            tokens, owed = len(logits) * params.lanes // (2 * params.n_layers * params.n_experts), 0
            rejections.append((int(BAD_KINDS[kind]), number))
            counts["invalid_prompts"] += 1
            counts[f"invalid_{kind}"] = counts.get(f"invalid_{kind}", 0) + 1
        inputs["score"] += scores
        inputs["logit"] += logits
        bound += prompt_cycles(params, scores, logits, tokens, owed)
    return Sequence(inputs, outputs, rejections, counts["valid_prompts"], bound, counts,
                    numbered=len(plan))


def run_pru_fuzz(sequences: int, seed: int, progress: bool = False) -> dict:
    """`sequences` of pru_sequence's sequences on the FUZZ_SHAPE instance:
    block_fuzz.run_block_fuzz's report and the hardware."""
    params, model = fuzz_params(), _model()
    report = run_block_fuzz(
        "pru", Pru(params), lambda d: {"score": d.score, "logit": d.logit},
        lambda d: {"route": d.route, "cmd": d.cmd}, PruCsr,
        lambda rng: pru_sequence(rng, params, model), PruError, PROMPT_TAG_BITS, sequences,
        seed, progress=progress)
    return {**report, "hardware": dict(FUZZ_SHAPE)}
