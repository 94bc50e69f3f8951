"""What the PRU is fed and must answer for one prompt of a prefill trace, as stream words
(plain integers: no simulator needed). The answers come from the trace, that is from golden: the
routes from the integer model's run, the EMA words from `golden.blocks.pru.fetch_commands` over the
trace's per-chunk fetch sets."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from edgexpert.contracts.prefill_trace import PrefillTrace
from edgexpert.contracts.pru import logit_beats, score_beats
from edgexpert.golden.blocks.pru import experts_per_step, fetch_commands
from edgexpert.hw.pru import PruParams, pick_register_for

__all__ = ["PromptVectors", "pru_params", "prompt_vectors"]


def pru_params(trace: PrefillTrace, max_tokens: int, lanes: int) -> PruParams:
    """The PRU for a trace's model and settings; its EMA steps sized for the default
    configuration's EMA and its selector pipelined as edgexpert.blocks builds the registered
    block."""
    from edgexpert.contracts.config import load_config
    m, s = trace.model, trace.prefill
    ema = load_config().hardware.ema
    per_step = max(1, experts_per_step(trace.layout, ema.axi_data_width // 8, ema.buffer_bytes,
                                       ema.slots))
    return PruParams(lanes=lanes, experts_per_step=per_step,
                     pick_register=pick_register_for(m.n_experts), n_experts=m.n_experts, top_k=m.top_k, n_layers=m.n_layers,
                     d_model=m.d_model, expert_ffn=m.expert_ffn, chunk=s["chunk"],
                     max_tokens=max_tokens, tau_major_q16=s["tau_major_q16"],
                     tau_minor_q16=s["tau_minor_q16"], budget_minor=s["budget_minor"],
                     budget_trivial=s["budget_trivial"])


@dataclass
class PromptVectors:
    scores: list[int]        # score payloads
    logits: list[int]        # logit payloads (`lanes` two's complement LOGIT_BITS words)
    routes: list[int]        # route payloads expected, in order
    ema: list[int]           # cmd words expected, in order
    tokens: int


def prompt_vectors(trace: PrefillTrace, prompt: int, params: PruParams) -> PromptVectors:
    rows = trace.prompt(prompt)
    t = len(rows["score_q16"])
    scores = score_beats(rows["score_q16"].tolist(), params.max_tokens)
    logits = []
    for layer in range(params.n_layers):
        z = logit_beats(rows["logits_q16"][:, layer].tolist(), params.lanes)
        logits += z + z            # the shared-set phase, then the routing phase
    routes = []
    for layer in range(params.n_layers):
        for tok in range(t):
            chosen = [(int(e), int(w)) for e, w in zip(rows["experts"][tok, layer],
                                                       rows["weights_q16"][tok, layer]) if e >= 0]
            for j, (e, w) in enumerate(chosen):
                routes.append(params.route_layout.const({
                    "cls": int(rows["token_class"][tok]), "expert": e, "weight": w,
                    "last": int(j == len(chosen) - 1)}).as_value().value)
    fetch = np.flatnonzero(trace["fetch_prompt"] == prompt)
    layout = trace.layout
    ema = []
    for c in fetch[np.lexsort((trace["fetch_chunk"][fetch], trace["fetch_layer"][fetch]))]:
        experts = np.flatnonzero(np.unpackbits(trace["fetch_experts"][c])[:params.n_experts])
        ema += fetch_commands(layout, int(trace["fetch_layer"][c]), experts.tolist(),
                              params.experts_per_step)
    return PromptVectors(scores, logits, routes, ema, t)
