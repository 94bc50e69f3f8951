"""The host's side of a prefill chunk through the top with its PRU (docs/blocks/top.md, "Prefill"):
command beats and the outputs they must produce, from a prefill trace (contracts/prefill_trace.py,
version 2). Knows the contracts and the top's payload layouts, never the RTL's arithmetic.

Per prompt the host sends the chunk's scores (SCORE beats) once; per layer the router logits of
every token twice (LOGIT beats: the PRU's shared-set and routing phases), then reads the PRU's
routes of the layer and, from them, forms the engine's groups in the order the feeder walks the
PRU's fetches: experts ascending (the PRU's fetch list), each expert's (token, pick) choices in
token order, `candidates` per group; per group its CAND and X beats; then a FLUSH of each token.
It sends no EMA word: the PRU fetches each expert once and the top walks it once per group.
"""

from __future__ import annotations

from dataclasses import dataclass

from edgexpert.cocotb_tests.engine.host import group_outputs, moe_items
from edgexpert.contracts.top import (TopOp, cand_item, flush_item, input_beats, inputs_per_beat,
                                     x_item)
from edgexpert.hw.engine.layouts import flush_layout, x_layout
from edgexpert.hw.top.layouts import host_cand_layout

__all__ = ["PrefillGroup", "score_beats", "logit_beats", "groups_from_routes", "group_beats",
           "expected_group_outputs", "expected_moe"]


@dataclass
class PrefillGroup:
    expert: int
    cands: list              # (token, pick index k, routing weight Q.16) in token order


def _beat(lay, op: TopOp, bits: int) -> int:
    """A command beat (`lay`: the top's command_layout): the op, the argument's packed bits."""
    return int(op) << lay["op"].offset | bits << lay["arg"].offset


def score_beats(lay, scores: list[int]) -> list[int]:
    """SCORE beats of the PRU's score payloads (cocotb_tests/pru/vectors.py)."""
    return [_beat(lay, TopOp.SCORE, s) for s in scores]


def logit_beats(lay, logits: list[int], layer: int, tokens: int, beats_per_token: int) -> list[int]:
    """LOGIT beats of one layer: both phases' logit payloads (cocotb_tests/pru/vectors.py
    lists every layer's, each layer 2 x tokens x beats_per_token of them)."""
    per_layer = 2 * tokens * beats_per_token
    return [_beat(lay, TopOp.LOGIT, v) for v in logits[layer * per_layer:(layer + 1) * per_layer]]


def groups_from_routes(routes: list[dict], candidates: int) -> list[PrefillGroup]:
    """One layer's routes as read from the top (dicts with `expert`, `weight`, `last`, in
    token order, each token's picks in pick order) into the engine's groups."""
    chosen: dict[int, list] = {}
    token, k = 0, 0
    for r in routes:
        chosen.setdefault(int(r["expert"]), []).append((token, k, int(r["weight"])))
        k += 1
        if r["last"]:
            token, k = token + 1, 0
    return [PrefillGroup(e, cands[j:j + candidates]) for e, cands in sorted(chosen.items())
            for j in range(0, len(cands), candidates)]


def group_beats(lay, trace_rows: dict, layer: int, groups: list[PrefillGroup], *,
                candidates: int, tokens: int, d_model: int, expert_ffn: int,
                word_bits: int) -> list[int]:
    """CAND and X beats of every group (token t of the chunk in token slot t), then a FLUSH of
    each token slot. `trace_rows`: the prompt's token arrays (PrefillTrace.prompt); `word_bits`:
    the engine's word, which sets the X beat's inputs."""
    cand, flush = host_cand_layout(tokens, expert_ffn), flush_layout(tokens)
    act = x_layout(candidates, d_model, inputs_per_beat(word_bits))
    x_q, x_m, x_e = trace_rows["x_q"], trace_rows["x_m"], trace_rows["x_e"]
    beats = []
    for grp in groups:
        n = len(grp.cands)
        beats += [_beat(lay, TopOp.CAND, cand.const(cand_item(
            x_m[tok, layer], x_e[tok, layer], tok, weight, c == n - 1, tokens,
            expert_ffn)).as_bits())
            for c, (tok, _, weight) in enumerate(grp.cands)]
        for c, (tok, _, _) in enumerate(grp.cands):
            xs = input_beats(x_q[tok, layer], word_bits)
            beats += [_beat(lay, TopOp.X, act.const(x_item(
                c, b, v, c == n - 1 and b == len(xs) - 1, n, d_model, word_bits)).as_bits())
                for b, v in enumerate(xs)]
    n_tokens = 1 + max(tok for grp in groups for tok, _, _ in grp.cands)
    beats += [_beat(lay, TopOp.FLUSH, flush.const(flush_item(s, tokens)).as_bits())
              for s in range(n_tokens)]
    return beats


def expected_group_outputs(trace_rows: dict, layer: int, groups: list[PrefillGroup]) -> dict:
    """hidden, hidden_scale and expert_out per group, in order, from the trace."""
    want = {"hidden": [], "hidden_scale": [], "expert_out": []}
    for grp in groups:
        tok, k = [c[0] for c in grp.cands], [c[1] for c in grp.cands]
        for name, items in group_outputs(trace_rows["hidden_q"][tok, layer, k],
                                         trace_rows["hidden_m"][tok, layer, k],
                                         trace_rows["hidden_e"][tok, layer, k],
                                         trace_rows["expert_out_q16"][tok, layer, k]).items():
            want[name] += items
    return want


def expected_moe(trace_rows: dict, layer: int, tokens: int, word_bits: int) -> list[dict]:
    """moe_out of each token slot after its FLUSH, from the trace, in the engine's beats."""
    return [item for s in range(tokens)
            for item in moe_items(s, trace_rows["moe_out_q16"][s, layer], word_bits)]
