"""EdgeXpert's two mechanisms on one bundled model, with the measurements that explain what they
save (`edgexpert mechanisms`, docs/policies.md "The two bundled models").

- Decode coalescing: naive speculative decoding against EdgeXpert's depth coalescing alone
  (its prefill routes natively), both on the configured EAGLE tree, as `edgexpert compare`
  measures a policy (greedy decoding of the prompts, teacher-forced quality on held-out windows):
  experts and routed-expert bytes per decoding step and per generated token.
- Prefill reuse: EdgeXpert's shared-set prefill routing against native top-K on held-out prompt
  windows (golden/policies/prefill.py `prefill_quality`): prefill expert bytes per prompt token
  and the perplexity ratio.
- Why, measured in the same runs (`CoalescingRecorder`, `PrefillRecorder`):
  - channel-importance skew: per depth group, expert and matrix, the share of the summed
    importance sum_c |x_c[j]| g_c,e (the DCU's, without pruning) held by the hottest quarter of
    the channels (0.25 when flat), and the share the selected channels hold;
  - candidates' agreement on channels: of each candidate's own `ratio` most important channels,
    the share its group's selection holds;
  - the union each pass fetches per (layer, expert, matrix): depth groups of one pass that use
    the same expert fetch different channels, and the residency keeps them all, so the pass's
    share of the expert's channels is what a pass pays;
  - co-activation of same-depth candidates (EdgeXpert's motivation): candidates sharing at
    least 3 experts with another candidate of their depth group (`analysis.group_sharing`);
  - the shared set: per prompt and layer, |S| (the major tokens' experts) over the experts,
    the tokens' classes, and the distinct experts per chunk-layer with and without the reuse.
"""

from __future__ import annotations

import torch

from ...contracts.trace import PassKind
from ...contracts.weight_layout import Matrix, WeightLayout
from ..decoding.decode import FloatEngine, decode_ar
from ..decoding.policy import ChannelHook, Policy
from ..policies.prefill import MAJOR, MINOR, prefill_quality, prefill_routing
from ..policies.registry import build_policy
from .analysis import group_sharing
from .evaluate import measure

__all__ = ["CoalescingRecorder", "PrefillRecorder", "mechanisms", "MIN_SHARED", "HOT_SHARE"]

#: EdgeXpert's co-activation figure counts candidates sharing at least 3 experts (REFERENCES.md:
#: "up to 88.4% of them co-activate >= 3 experts")
MIN_SHARED = 3
#: the skew measure's hottest share of the channels (as `routing_skew`'s hottest quarter of experts)
HOT_SHARE = 0.25


class _Sums:
    """Running sums of named measurements, reported as means."""

    def __init__(self):
        self.sums: dict[str, float] = {}
        self.counts: dict[str, int] = {}

    def add(self, name: str, value: float) -> None:
        self.sums[name] = self.sums.get(name, 0.0) + float(value)
        self.counts[name] = self.counts.get(name, 0) + 1

    def means(self) -> dict:
        return {k: round(v / self.counts[k], 4) for k, v in self.sums.items()}


class CoalescingRecorder:
    """Wraps a policy's channel hooks (`watch`) and records, per matrix, what its coalescing
    selects against what the candidates' importances ask for, and per pass the fetched union
    and the same-depth candidates' shared experts."""

    def __init__(self, layout: WeightLayout, ratio: float):
        self.layout, self.ratio = layout, ratio
        self.stats = {m: _Sums() for m in (Matrix.GATE_UP, Matrix.DOWN)}
        self.sharing = {"groups": 0, "candidates": 0, "sharing": 0, "pairs": 0,
                        "sharing_pairs": 0}

    def watch(self, policy: Policy) -> Policy:
        inner = policy.channels

        def channels(kind, depths):
            hook = inner(kind, depths)
            return None if hook is None else _RecordingHook(self, hook)

        policy.channels = channels
        return policy

    def group(self, matrix: Matrix, values: torch.Tensor, weights: torch.Tensor,
              fetched: torch.Tensor) -> None:
        """One depth group of one expert: its candidates' values [n, C], routing weights [n]
        and the channels the policy fetched for it ([C], 0/1)."""
        s, channels = self.stats[matrix], values.shape[1]
        keep = max(1, min(channels, round(self.ratio * channels)))
        own = values.abs() * weights[:, None].abs()
        total = own.sum(0)
        mass = float(total.sum())
        s.add("candidates_per_group", len(values))
        if mass > 0:
            hot = max(1, round(HOT_SHARE * channels))
            s.add("hot_quarter_importance", total.topk(hot).values.sum() / mass)
            s.add("selected_importance", (total * (fetched > 0)).sum() / mass)
        mine = own.topk(keep, dim=1).indices
        s.add("own_channels_selected", float((fetched[mine] > 0).float().mean()))

    def finish_pass(self, fetches, rows_experts: dict[int, dict[int, set[int]]],
                    depths: torch.Tensor) -> None:
        """At a pass's end: the fetched share of each (layer, expert, matrix) it used, and the
        same-depth candidates' shared experts per layer."""
        for (_, _, matrix), have in fetches.resident.items():
            self.stats[matrix].add("pass_fetched_share",
                                   len(have) / self.layout.in_channels(matrix))
        for experts in rows_experts.values():
            for d in torch.unique(depths[depths > 0]).tolist():
                rows = torch.nonzero(depths == d)[:, 0].tolist()
                if len(rows) >= 2:
                    found = group_sharing([experts.get(r, set()) for r in rows], MIN_SHARED)
                    for key, value in found.items():
                        self.sharing[key] += value

    def report(self) -> dict:
        sh = self.sharing
        return {"ratio": self.ratio,
                "gate_up": self.stats[Matrix.GATE_UP].means(),
                "down": self.stats[Matrix.DOWN].means(),
                "coactivation": {"min_shared": MIN_SHARED, "groups": sh["groups"],
                                 "candidate_fraction": round(sh["sharing"]
                                                             / max(sh["candidates"], 1), 4),
                                 "pair_fraction": round(sh["sharing_pairs"]
                                                        / max(sh["pairs"], 1), 4)}}


class _RecordingHook(ChannelHook):
    """A policy's hook for one pass, unchanged, with what it chose recorded."""

    def __init__(self, recorder: CoalescingRecorder, inner: ChannelHook):
        self.recorder, self.inner = recorder, inner
        self.depths, self.fetches = inner.depths, inner.fetches
        self.rows_experts: dict[int, dict[int, set[int]]] = {}
        self.done = False

    @property
    def bytes(self) -> int:
        # read once per pass, by Policy.pass_bytes, after the pass
        if not self.done:
            self.done = True
            self.recorder.finish_pass(self.fetches, self.rows_experts, self.depths)
        return self.inner.bytes

    def _record(self, matrix, rows, values, weights, mask) -> torch.Tensor:
        depths = self.depths[rows]
        for d in torch.unique(depths).tolist():
            group = torch.nonzero(depths == d)[:, 0]
            self.recorder.group(matrix, values[group], weights[group], mask[group[0]])
        return mask

    def gate_up(self, layer, expert, rows, x, weights):
        for r in torch.as_tensor(rows).tolist():
            self.rows_experts.setdefault(layer, {}).setdefault(r, set()).add(expert)
        return self._record(Matrix.GATE_UP, rows, x, weights,
                            self.inner.gate_up(layer, expert, rows, x, weights))

    def down(self, layer, expert, rows, hidden, weights):
        return self._record(Matrix.DOWN, rows, hidden, weights,
                            self.inner.down(layer, expert, rows, hidden, weights))


class PrefillRecorder:
    """Wraps a policy's prefill router (`watch`): per prompt and layer the shared set's size,
    per chunk-layer the distinct experts with the reuse and with native top-K, and the classes."""

    def __init__(self, n_experts: int, top_k: int, chunk: int):
        self.n_experts, self.top_k, self.chunk = n_experts, top_k, chunk
        self.s = _Sums()

    def watch(self, policy: Policy) -> Policy:
        inner = policy.router

        def router(kind, tokens):
            route = inner(kind, tokens)
            if kind != PassKind.PREFILL or route is None:
                return route
            classes = policy.prefill.token_classes(tokens)
            self.s.add("major_share", float((classes == MAJOR).float().mean()))
            self.s.add("minor_share", float((classes == MINOR).float().mean()))

            def recorded(layer, logits, h):
                idx = route(layer, logits, h)
                self._layer(idx, classes, logits.topk(self.top_k, dim=-1).indices)
                return idx
            return recorded

        policy.router = router
        return policy

    def _layer(self, idx: torch.Tensor, classes: torch.Tensor, native: torch.Tensor) -> None:
        major = idx[classes == MAJOR]
        self.s.add("shared_set_share", torch.unique(major[major >= 0]).numel() / self.n_experts)
        for start in range(0, len(idx), self.chunk):
            mine, theirs = idx[start:start + self.chunk], native[start:start + self.chunk]
            self.s.add("chunk_experts_reuse", torch.unique(mine[mine >= 0]).numel())
            self.s.add("chunk_experts_native", torch.unique(theirs).numel())

    def report(self) -> dict:
        out = self.s.means()
        out["chunk"], out["n_experts"] = self.chunk, self.n_experts
        return out


def mechanisms(config, model, prompts: list[list[int]], windows: list[list[int]],
               prompt_windows: list[list[int]], eot: int | None, encoder, eagle) -> dict:
    """Decode coalescing and prefill reuse of EdgeXpert on `model` at the configuration's
    settings, with the measurements behind them (the module doc)."""
    engine = FloatEngine(model)
    layout = WeightLayout.for_model(model.cfg)
    p = config.policies
    reference = [decode_ar(engine, q, config.decode, eot) for q in prompts]
    naive = measure(engine, build_policy("naive_sd", config, model, layout, None, eagle),
                    prompts, reference, windows, p.eval_prompt_tokens, eot)
    recorder = CoalescingRecorder(layout, p.coalescing_ratio)
    coalesced = measure(engine, recorder.watch(build_policy("edgexpert", config, model, layout,
                                                            None, eagle)),
                        prompts, reference, windows, p.eval_prompt_tokens, eot)
    decode = {}
    for name, m in (("naive_sd", naive), ("edgexpert", coalesced)):
        decode[name] = {k: m[k] for k in ("tokens_per_step", "experts_per_step",
                                          "ema_bytes_per_token_decode", "top1_agreement",
                                          "mean_kl", "ppl_ratio")}
        # a decoding step's routed-expert bytes, and as whole experts' worth
        per_step = m["ema_bytes_per_token_decode"] * m["tokens_per_step"]
        decode[name]["ema_bytes_per_step"] = round(per_step)
        decode[name]["expert_equivalents_per_step"] = round(per_step / layout.expert_fetch_bytes,
                                                            2)
    base, mine = decode["naive_sd"], decode["edgexpert"]
    decode["saving_per_step"] = round(1 - mine["ema_bytes_per_step"] / base["ema_bytes_per_step"],
                                      4)
    decode["saving_per_token"] = round(1 - mine["ema_bytes_per_token_decode"]
                                       / base["ema_bytes_per_token_decode"], 4)
    decode["explanation"] = recorder.report()

    routing = prefill_routing(p, encoder, model.cfg.top_k)
    prefill_recorder = PrefillRecorder(model.cfg.n_experts, model.cfg.top_k, p.prefill.chunk)
    policy = prefill_recorder.watch(build_policy("edgexpert", config, model, layout, encoder,
                                                 eagle))
    native = Policy(layout, config.decode, prefill_chunk=p.prefill.chunk)
    prefill = prefill_quality(engine, policy, native, prompt_windows)
    prefill["settings"] = {"tau_major": routing.tau_major, "tau_minor": routing.tau_minor,
                           "budget_minor": routing.budget_minor,
                           "budget_trivial": routing.budget_trivial}
    prefill["explanation"] = prefill_recorder.report()
    return {"model": {"n_experts": model.cfg.n_experts, "top_k": model.cfg.top_k,
                      "expert_ffn": model.cfg.expert_ffn, "d_model": model.cfg.d_model,
                      "expert_bytes": layout.expert_fetch_bytes},
            "decode": decode, "prefill": prefill}
