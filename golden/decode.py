"""Autoregressive and speculative decoding over the float or the integer model.

Self-speculative drafting: the draft is the target model itself with a smaller expert budget
(top-`draft_experts` routing), reading the target's KV cache for the prefix and its own cache
entries for the tree it is building.

Dynamic draft tree (in the manner of EAGLE-2): the root is the last known token. At each depth
the draft runs once on the `width` most probable frontier nodes and proposes `branch` children
each; nodes are ranked by the draft's cumulative log-probability of their path. After
`max_depth` levels the `max_candidates` best nodes form the tree (a path's probability never
rises, so the best nodes include their ancestors).

Verification: the target runs the root and every tree node in one pass, each attending to the
prefix and to its ancestors (tree attention mask). Greedy acceptance walks from the root while
the target's argmax is a child in the tree; the target's argmax at the last accepted node is the
bonus token. The output is therefore exactly plain greedy decoding. With temperature > 0, each
node's children are tried in order and child c is accepted with the residual probability p(c)
(p renormalized after every rejection); on rejection of all, the bonus is drawn from the
residual: the accepted tokens follow the target's sampling distribution exactly.

EMA accounting (docs/golden-model.md): every forward pass fetches, per layer, the union of the
routed experts its tokens use (whole experts, scales included, per edgexpert.weight_layout);
nothing stays on chip between passes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from ..config import DecodeConfig
from ..weight_layout import WeightLayout
from .model import KVCache, LayerTrace, MoEModel, route

__all__ = ["FloatEngine", "PassCost", "PassTrace", "DecodeResult", "prefill", "decode_ar", "decode_speculative",
           "Tree", "build_tree", "summarize", "compare_modes"]


class FloatEngine:
    """The float model in float64 for decoding: a token's logits then do not depend, beyond
    rounding far below any logit gap seen, on which other tokens share its pass."""

    def __init__(self, model: MoEModel):
        self.cfg = model.cfg
        self.model = MoEModel(model.cfg).double()
        self.model.load_state_dict({k: v.double() for k, v in model.state_dict().items()})
        self.model.eval()

    def step(self, tokens, positions, cache, allowed, router=None):
        return self.model.step(tokens, positions, cache, allowed, router)


@dataclass
class PassCost:
    """Experts fetched by one forward pass: the distinct routed experts per layer."""
    kind: str                     # "prefill", "ar", "draft", "verify"
    tokens: int
    experts_per_layer: list[int]


@dataclass
class PassTrace:
    """One forward pass kept for trace export: its tokens, their depth in the draft tree (0 for
    the root and for autoregressive steps) and what each layer did."""
    kind: str
    step: int
    tokens: list[int]
    depths: list[int]
    layers: list[LayerTrace]


@dataclass
class DecodeResult:
    tokens: list[int]                                    # generated tokens
    steps: int                                           # decoding steps (target passes)
    accepted: list[int] = field(default_factory=list)    # draft tokens accepted per step
    passes: list[PassCost] = field(default_factory=list)
    traces: list[PassTrace] = field(default_factory=list)


def _cost(kind: str, tokens: int, traces: list[LayerTrace]) -> PassCost:
    return PassCost(kind, tokens, [int(torch.unique(t.experts[t.experts >= 0]).numel())
                                   for t in traces])


def prefill(engine, prompt: list[int]) -> tuple[KVCache, PassCost]:
    """Run the prompt except its last token (the first root) in one causal pass."""
    if len(prompt) < 1:
        raise ValueError("a prompt needs at least one token")
    cache = KVCache()
    body = torch.tensor(prompt[:-1], dtype=torch.long)
    n = len(body)
    if n == 0:
        return cache, PassCost("prefill", 0, [0] * engine.cfg.n_layers)
    _, traces = engine.step(body, torch.arange(n), cache, torch.tril(torch.ones(n, n, dtype=torch.bool)))
    return cache, _cost("prefill", n, traces)


def _pick(logits: torch.Tensor, cfg: DecodeConfig, gen: torch.Generator | None) -> int:
    if cfg.temperature == 0:
        return int(torch.argmax(logits))
    return int(torch.multinomial(torch.softmax(logits / cfg.temperature, -1), 1, generator=gen))


def _done(out: list[int], cfg: DecodeConfig, eot: int | None) -> bool:
    return len(out) >= cfg.max_new_tokens or (eot is not None and eot in out)


def _trim(out: list[int], cfg: DecodeConfig, eot: int | None) -> list[int]:
    out = out[:cfg.max_new_tokens]
    return out[:out.index(eot) + 1] if eot is not None and eot in out else out


def _run(engine, prompt: list[int], cfg: DecodeConfig, eot: int | None, step) -> DecodeResult:
    """The decoding loop both modes share: prefill, then `step(cache, root, result, gen)` ->
    (accepted draft tokens, next root) until enough tokens or the end-of-text token."""
    gen = torch.Generator().manual_seed(cfg.seed)
    cache, cost = prefill(engine, prompt)
    result = DecodeResult([], 0, passes=[cost])
    root = prompt[-1]
    while not _done(result.tokens, cfg, eot):
        accepted, root = step(cache, root, result, gen)
        result.tokens.extend(accepted)
        result.tokens.append(root)
        result.accepted.append(len(accepted))
        result.steps += 1
    result.tokens = _trim(result.tokens, cfg, eot)
    return result


def decode_ar(engine, prompt: list[int], cfg: DecodeConfig, eot: int | None = None,
              keep_traces: bool = False) -> DecodeResult:
    """Plain decoding: one target pass per generated token."""
    def step(cache, root, result, gen):
        pos = len(cache)
        logits, traces = engine.step(torch.tensor([root]), torch.tensor([pos]), cache,
                                     torch.ones(1, pos + 1, dtype=torch.bool))
        result.passes.append(_cost("ar", 1, traces))
        if keep_traces:
            result.traces.append(PassTrace("ar", result.steps, [root], [0], traces))
        return [], _pick(logits[0], cfg, gen)
    return _run(engine, prompt, cfg, eot, step)


@dataclass
class Tree:
    """Draft tree nodes (the root excluded), in depth order: token, parent (-1: the root),
    depth (1 for the root's children) and the draft's cumulative log-probability."""
    tokens: list[int]
    parents: list[int]
    depths: list[int]
    scores: list[float]

    def ancestors(self, i: int) -> list[int]:
        path = []
        while i >= 0:
            path.append(i)
            i = self.parents[i]
        return path[::-1]


def _tree_mask(prefix: int, parents: list[int], rows: list[int], root_entry: int,
               entry_of: dict[int, int], total: int) -> torch.Tensor:
    """allowed [len(rows), total]: the prefix, the root's entry, and each row node's ancestors
    (itself included) at their cache entries."""
    allowed = torch.zeros(len(rows), total, dtype=torch.bool)
    allowed[:, :prefix] = True
    allowed[:, root_entry] = True
    for r, node in enumerate(rows):
        while node >= 0:
            allowed[r, entry_of[node]] = True
            node = parents[node]
    return allowed


def build_tree(engine, cache: KVCache, root: int, cfg: DecodeConfig, passes: list[PassCost],
               traces_out: list[PassTrace] | None = None, step: int = 0) -> Tree:
    """Draft a tree after `root` with the self-speculative draft (see the module doc)."""
    draft_k = cfg.draft_experts
    draft_router = lambda layer, logits, h: route(logits, draft_k)
    fork = cache.fork()
    prefix = len(cache)
    pool = Tree([], [], [], [])
    entry_of: dict[int, int] = {}             # tree node -> its entry in the draft cache
    frontier, front_scores = [-1], [0.0]      # -1: the root
    for depth in range(1, cfg.max_depth + 1):
        tokens = [root if n < 0 else pool.tokens[n] for n in frontier]
        first = len(fork)   # the root's entry is `prefix`, written by the first pass
        for r, n in enumerate(frontier):
            if n >= 0:
                entry_of[n] = first + r
        allowed = _tree_mask(prefix, pool.parents, frontier, prefix, entry_of, first + len(frontier))
        positions = torch.full((len(frontier),), prefix + depth - 1, dtype=torch.long)
        logits, traces = engine.step(torch.tensor(tokens), positions, fork, allowed, draft_router)
        passes.append(_cost("draft", len(frontier), traces))
        if traces_out is not None:
            traces_out.append(PassTrace("draft", step, tokens, [depth - 1] * len(tokens), traces))
        logp = torch.log_softmax(logits, dim=-1)
        top = torch.sort(-logp, dim=-1, stable=True)
        children = []
        for r, n in enumerate(frontier):
            for c in range(cfg.branch):
                tok = int(top.indices[r, c])
                children.append((front_scores[r] + float(logp[r, tok]), n, tok))
        # most probable first; ties by parent, then token, so the tree is deterministic
        children.sort(key=lambda item: (-item[0], item[1], item[2]))
        new = []
        for score, parent, tok in children:
            pool.tokens.append(tok)
            pool.parents.append(parent)
            pool.depths.append(depth)
            pool.scores.append(score)
            new.append(len(pool.tokens) - 1)
        frontier = new[:cfg.width]
        front_scores = [pool.scores[n] for n in frontier]
    # the best max_candidates nodes; sorted by (depth, rank) so parents precede children
    best = sorted(range(len(pool.tokens)), key=lambda n: (-pool.scores[n], n))[:cfg.max_candidates]
    best.sort(key=lambda n: (pool.depths[n], n))
    remap = {old: new for new, old in enumerate(best)}
    return Tree([pool.tokens[n] for n in best],
                [remap[pool.parents[n]] if pool.parents[n] >= 0 else -1 for n in best],
                [pool.depths[n] for n in best], [pool.scores[n] for n in best])


def _accept(logits: torch.Tensor, tree: Tree, cfg: DecodeConfig,
            gen: torch.Generator) -> tuple[list[int], int]:
    """(accepted tree nodes along one path, bonus token) from the verification logits
    (row 0: the root, row 1 + i: tree node i)."""
    children: dict[int, list[int]] = {}
    for i, parent in enumerate(tree.parents):
        children.setdefault(parent, []).append(i)
    path, node = [], -1
    while True:
        row = logits[node + 1]
        kids = children.get(node, [])
        if cfg.temperature == 0:
            best = int(torch.argmax(row))
            nxt = next((c for c in kids if tree.tokens[c] == best), None)
            if nxt is None:
                return path, best
        else:
            p = torch.softmax(row / cfg.temperature, dim=-1)
            nxt = None
            for c in kids:
                tok = tree.tokens[c]
                if float(torch.rand(1, generator=gen)) < float(p[tok]):
                    nxt = c
                    break
                p[tok] = 0.0
                p = p / p.sum()
            if nxt is None:
                return path, int(torch.multinomial(p, 1, generator=gen))
        path.append(nxt)
        node = nxt


def decode_speculative(engine, prompt: list[int], cfg: DecodeConfig, eot: int | None = None,
                       keep_traces: bool = False) -> DecodeResult:
    """Speculative decoding with the self-speculative draft tree and tree verification."""
    def step(cache, root, result, gen):
        prefix = len(cache)
        tree = build_tree(engine, cache, root, cfg, result.passes,
                          result.traces if keep_traces else None, result.steps)
        n = len(tree.tokens)
        entry_of = {i: prefix + 1 + i for i in range(n)}
        allowed = _tree_mask(prefix, tree.parents, [-1] + list(range(n)), prefix, entry_of,
                             prefix + 1 + n)
        tokens = torch.tensor([root] + tree.tokens)
        positions = prefix + torch.tensor([0] + tree.depths)
        logits, traces = engine.step(tokens, positions, cache, allowed)
        result.passes.append(_cost("verify", len(tokens), traces))
        if keep_traces:
            result.traces.append(PassTrace("verify", result.steps, tokens.tolist(), [0] + tree.depths,
                                           traces))
        path, bonus = _accept(logits, tree, cfg, gen)
        cache.keep(torch.cat([torch.arange(prefix + 1),
                              torch.tensor([prefix + 1 + i for i in path], dtype=torch.long)]))
        return [tree.tokens[i] for i in path], bonus
    return _run(engine, prompt, cfg, eot, step)


def summarize(results: list[DecodeResult], layout: WeightLayout) -> dict:
    """Metrics over prompts, each a ratio of sums (so long prompts weigh by their tokens)."""
    tokens = sum(len(r.tokens) for r in results)
    steps = sum(r.steps for r in results)
    per_expert = layout.expert_fetch_bytes
    by_kind: dict[str, int] = {}
    for r in results:
        for p in r.passes:
            by_kind[p.kind] = by_kind.get(p.kind, 0) + sum(p.experts_per_layer)
    target = [p for r in results for p in r.passes if p.kind in ("ar", "verify")]
    decode_experts = sum(v for k, v in by_kind.items() if k != "prefill")
    return {
        "tokens": tokens,
        "steps": steps,
        "tokens_per_step": round(tokens / steps, 4),
        "acceptance_length": round(sum(sum(r.accepted) for r in results) / steps, 4),
        "experts_per_step": round(sum(sum(p.experts_per_layer) for p in target) / steps, 3),
        "draft_experts_per_step": round(by_kind.get("draft", 0) / steps, 3),
        "ema_bytes_per_token": round(decode_experts * per_expert / tokens),
        "ema_bytes_per_token_verify": round(sum(v for k, v in by_kind.items() if k in ("ar", "verify"))
                                            * per_expert / tokens),
        "ema_bytes_per_token_draft": round(by_kind.get("draft", 0) * per_expert / tokens),
    }



def compare_modes(engine, prompts: list[list[int]], cfg: DecodeConfig, layout: WeightLayout,
                  eot: int | None = None, keep_traces: bool = False) -> dict:
    """Autoregressive ("ar") and naive speculative ("naive_sd") decoding of every prompt, with
    their metrics, whether speculative decoding gave exactly the autoregressive output, and the
    runs themselves ("runs": {"ar": [...], "naive_sd": [...]}; traces kept on request)."""
    ar = [decode_ar(engine, p, cfg, eot, keep_traces) for p in prompts]
    sd = [decode_speculative(engine, p, cfg, eot, keep_traces) for p in prompts]
    same = [a.tokens == s.tokens for a, s in zip(ar, sd)]
    return {"ar": summarize(ar, layout), "naive_sd": summarize(sd, layout),
            "lossless": all(same), "lossless_per_prompt": same,
            "runs": {"ar": ar, "naive_sd": sd}}
