"""Autoregressive and speculative decoding over the float or the integer model.

Self-speculative drafting: the draft is the target model itself with a smaller expert budget
(top-`draft_experts` routing), reading the target's KV cache for the prefix and its own cache
entries for the tree it is building. A policy may instead draft with an EAGLE head
(golden/decoding/eagle/): one small decoder layer on the target's features of the accepted
prefix, which every target pass then records next to its KV cache.

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
routed experts its tokens use (whole experts, scales included, per edgexpert.contracts.weight_layout);
nothing stays on chip between passes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from ...contracts.config import DecodeConfig
from ...contracts.trace import PassKind
from ...contracts.weight_layout import WeightLayout
from ...support.progress import progress_bar
from .eagle.draft import EagleTree, record_features
from ..lm.model import KVCache, LayerTrace, MoEModel, route
from .policy import Policy

__all__ = ["FloatEngine", "exact_logits", "PassCost", "PassTrace", "DecodeResult", "run_pass",
           "prefill", "decode_ar", "decode_speculative", "draft_and_verify", "keep_path", "Tree",
           "build_tree", "pass_kinds", "summarize", "compare_modes", "default_policy"]


class FloatEngine:
    """The float model in float64 for decoding: a token's logits then do not depend, beyond
    rounding far below any logit gap seen, on which other tokens share its pass."""

    def __init__(self, model: MoEModel):
        self.cfg = model.cfg
        self.model = MoEModel(model.cfg).double()
        self.model.load_state_dict({k: v.double() for k, v in model.state_dict().items()})
        self.model.eval()

    def step(self, tokens, positions, cache, allowed, router=None, channels=None):
        return self.model.step(tokens, positions, cache, allowed, router, channels)


@torch.no_grad()
def exact_logits(engine: FloatEngine, tokens: list[int]) -> torch.Tensor:
    """The exact float model's teacher-forced logits for positions 1.. of `tokens`: the reference
    every quality measurement compares a policy's logits with."""
    n = len(tokens) - 1
    logits, _ = engine.step(torch.tensor(tokens[:-1]), torch.arange(n), KVCache(),
                            torch.tril(torch.ones(n, n, dtype=torch.bool)))
    return logits


@dataclass
class PassCost:
    """One forward pass: the distinct routed experts per layer, the bytes the policy's expert
    fetches moved, and the KV-cache entries its tokens attend to that were cached before it
    (`context`: what the pass reads from the cache; its own tokens' entries it writes). An
    EAGLE draft pass (golden/decoding/eagle/draft.py) does not run the target (`reads_target`
    False: no expert, no target weight, its one layer's KV cache) and reads the head's weights
    instead (`draft_head_bytes`, at their storage precision)."""
    kind: PassKind
    tokens: int
    experts_per_layer: list[int]
    bytes: int
    context: int = 0
    draft_head_bytes: int = 0
    reads_target: bool = True


@dataclass
class PassTrace:
    """One forward pass kept for trace export: its tokens, their depth in the draft tree (0 for
    the root and for autoregressive steps), what each layer did, and for a verification pass
    each token's parent as a row of the pass (-1 for the root; None elsewhere)."""
    kind: PassKind
    step: int
    tokens: list[int]
    depths: list[int]
    layers: list[LayerTrace]
    parents: list[int] | None = None


@dataclass
class DecodeResult:
    tokens: list[int]                                    # generated tokens
    steps: int                                           # decoding steps (target passes)
    accepted: list[int] = field(default_factory=list)    # draft tokens accepted per step
    passes: list[PassCost] = field(default_factory=list)
    traces: list[PassTrace] = field(default_factory=list)


def run_pass(engine, policy: Policy, kind: PassKind, tokens: torch.Tensor, positions, cache,
             allowed, depths: torch.Tensor):
    """One forward pass of `kind` over `tokens` at `positions`, attending to the cache entries
    `allowed` [len(tokens), cache + len(tokens)] permits, under the policy's routing and channel
    choice (`depths`: each token's depth group in the draft tree, 0 outside one); the tokens'
    entries are appended to `cache`. Returns (logits, per-layer traces, PassCost)."""
    hook = policy.channels(kind, depths)
    extra = {"channels": hook} if hook is not None else {}
    context = len(cache)
    logits, traces = engine.step(tokens, positions, cache, allowed, policy.router(kind, tokens),
                                 **extra)
    if policy.eagle is not None:      # the next draft reads these tokens' target features
        record_features(cache, tokens, traces, policy.eagle.settings.fused)
    cost = PassCost(kind, len(tokens), [int(torch.unique(t.experts[t.experts >= 0]).numel())
                                        for t in traces], policy.pass_bytes(kind, traces, hook),
                    context)
    return logits, traces, cost


def prefill(engine, prompt: list[int], policy: Policy | None = None) -> tuple[KVCache, PassCost]:
    """Run the prompt except its last token (the first root) in one causal pass."""
    if len(prompt) < 1:
        raise ValueError("a prompt needs at least one token")
    policy = policy or default_policy(engine)
    cache = KVCache()
    body = torch.tensor(prompt[:-1], dtype=torch.long)
    n = len(body)
    if n == 0:
        return cache, PassCost(PassKind.PREFILL, 0, [0] * engine.cfg.n_layers, 0)
    _, _, cost = run_pass(engine, policy, PassKind.PREFILL, body, torch.arange(n), cache,
                          torch.tril(torch.ones(n, n, dtype=torch.bool)), torch.zeros(n, dtype=torch.long))
    return cache, cost


def default_policy(engine, cfg: DecodeConfig | None = None) -> Policy:
    """Naive speculative decoding's policy for the engine's model."""
    return Policy(WeightLayout.for_model(engine.cfg), cfg or DecodeConfig())


def _pick(logits: torch.Tensor, cfg: DecodeConfig, gen: torch.Generator | None) -> int:
    if cfg.temperature == 0:
        return int(torch.argmax(logits))
    return int(torch.multinomial(torch.softmax(logits / cfg.temperature, -1), 1, generator=gen))


def _done(out: list[int], cfg: DecodeConfig, eot: int | None) -> bool:
    return len(out) >= cfg.max_new_tokens or (eot is not None and eot in out)


def _trim(out: list[int], cfg: DecodeConfig, eot: int | None) -> list[int]:
    out = out[:cfg.max_new_tokens]
    return out[:out.index(eot) + 1] if eot is not None and eot in out else out


def _run(engine, prompt: list[int], cfg: DecodeConfig, eot: int | None, policy: Policy,
         step) -> DecodeResult:
    """The decoding loop both modes share: prefill, then `step(cache, root, result, gen)` ->
    (accepted draft tokens, next root) until enough tokens or the end-of-text token."""
    gen = torch.Generator().manual_seed(cfg.seed)
    policy.start(prompt)
    cache, cost = prefill(engine, prompt, policy)
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
              keep_traces: bool = False, policy: Policy | None = None) -> DecodeResult:
    """Plain decoding: one target pass per generated token."""
    policy = policy or default_policy(engine, cfg)

    def step(cache, root, result, gen):
        pos = len(cache)
        logits, traces, cost = run_pass(engine, policy, PassKind.AR, torch.tensor([root]),
                                        torch.tensor([pos]), cache,
                                        torch.ones(1, pos + 1, dtype=torch.bool),
                                        torch.zeros(1, dtype=torch.long))
        result.passes.append(cost)
        if keep_traces:
            result.traces.append(PassTrace(PassKind.AR, result.steps, [root], [0], traces))
        return [], _pick(logits[0], cfg, gen)
    return _run(engine, prompt, cfg, eot, policy, step)


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
               traces_out: list[PassTrace] | None = None, step: int = 0,
               policy: Policy | None = None) -> Tree:
    """Draft a tree after `root` with the policy's draft: the self-speculative one (see the
    module doc; the policy's DRAFT routing and channels apply to every draft pass), or its
    EAGLE head (golden/decoding/eagle/draft.py: no target pass, no trace kept)."""
    policy = policy or default_policy(engine, cfg)
    eagle = EagleTree(policy.eagle_for(engine), cache, root) if policy.eagle is not None else None
    drafter = policy.draft_engine(engine)
    fork = cache.fork()
    prefix = len(cache)
    pool = Tree([], [], [], [])
    entry_of: dict[int, int] = {}             # tree node -> its entry in the draft cache
    routed: dict[int, torch.Tensor] = {}      # drafted node -> its draft routing [layers, top_k]
    expansion = policy.expansion(cfg, engine.cfg.top_k)
    frontier = [-1]                           # -1: the root
    for depth in range(1, cfg.max_depth + 1):
        tokens = [root if n < 0 else pool.tokens[n] for n in frontier]
        if eagle is not None:
            logits, count, context = eagle.run(frontier, pool.parents, tokens)
            passes.append(PassCost(PassKind.DRAFT, count, [0] * engine.cfg.n_layers, 0, context,
                                   policy.eagle_bytes, reads_target=False))
        else:
            first = len(fork)   # the root's entry is `prefix`, written by the first pass
            for r, n in enumerate(frontier):
                if n >= 0:
                    entry_of[n] = first + r
            allowed = _tree_mask(prefix, pool.parents, frontier, prefix, entry_of,
                                 first + len(frontier))
            positions = torch.full((len(frontier),), prefix + depth - 1, dtype=torch.long)
            logits, traces, cost = run_pass(drafter, policy, PassKind.DRAFT,
                                            torch.tensor(tokens), positions, fork, allowed,
                                            torch.full((len(frontier),), depth - 1))
            passes.append(cost)
            if traces_out is not None:
                traces_out.append(PassTrace(PassKind.DRAFT, step, tokens,
                                            [depth - 1] * len(tokens), traces))
            # the target's top-k by the draft's router logits: what verifying the node will
            # likely fetch (policies that size the tree by its expert cost read it)
            for r, n in enumerate(frontier):
                routed[n] = torch.stack([route(t.router_logits[r], engine.cfg.top_k)
                                         for t in traces])
        grow = set(expansion.admit(pool, routed, frontier))
        logp = torch.log_softmax(logits, dim=-1)
        top = torch.sort(-logp, dim=-1, stable=True)
        children = []
        for r, n in enumerate(frontier):
            if n not in grow:
                continue
            for c in range(cfg.branch):
                tok = int(top.indices[r, c])
                children.append(((pool.scores[n] if n >= 0 else 0.0) + float(logp[r, tok]), n, tok))
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
        if not frontier:
            break
    best = expansion.select(pool, routed)
    # sorted by (depth, rank) so parents precede children
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


def draft_and_verify(engine, policy: Policy, cache: KVCache, root: int, cfg: DecodeConfig,
                     passes: list[PassCost], traces_out: list[PassTrace] | None = None,
                     step: int = 0) -> tuple[Tree, torch.Tensor]:
    """One speculative step before acceptance: draft a tree after `root`, then verify the root
    and every node in one pass. Returns the tree and the verification logits (row 0: the root,
    row 1 + i: node i); the cache holds the root's and every node's entries after the prefix."""
    prefix = len(cache)
    tree = build_tree(engine, cache, root, cfg, passes, traces_out, step, policy)
    n = len(tree.tokens)
    entry_of = {i: prefix + 1 + i for i in range(n)}
    allowed = _tree_mask(prefix, tree.parents, [-1] + list(range(n)), prefix, entry_of,
                         prefix + 1 + n)
    tokens = torch.tensor([root] + tree.tokens)
    positions = prefix + torch.tensor([0] + tree.depths)
    logits, traces, cost = run_pass(engine, policy, PassKind.VERIFY, tokens, positions, cache,
                                    allowed, torch.tensor([0] + tree.depths))
    passes.append(cost)
    if traces_out is not None:
        # row 0 is the root, row 1 + i node i
        traces_out.append(PassTrace(PassKind.VERIFY, step, tokens.tolist(), [0] + tree.depths,
                                    traces, [-1] + [p + 1 for p in tree.parents]))
    return tree, logits


def keep_path(cache: KVCache, prefix: int, path: list[int]) -> None:
    """After acceptance: keep the prefix, the root and the accepted nodes' entries."""
    cache.keep(torch.cat([torch.arange(prefix + 1),
                          torch.tensor([prefix + 1 + i for i in path], dtype=torch.long)]))


def decode_speculative(engine, prompt: list[int], cfg: DecodeConfig, eot: int | None = None,
                       keep_traces: bool = False, policy: Policy | None = None) -> DecodeResult:
    """Speculative decoding with the self-speculative draft tree and tree verification."""
    policy = policy or default_policy(engine, cfg)

    def step(cache, root, result, gen):
        prefix = len(cache)
        tree, logits = draft_and_verify(engine, policy, cache, root, cfg, result.passes,
                                        result.traces if keep_traces else None, result.steps)
        path, bonus = _accept(logits, tree, cfg, gen)
        keep_path(cache, prefix, path)
        return [tree.tokens[i] for i in path], bonus
    return _run(engine, prompt, cfg, eot, policy, step)


def pass_kinds(results: list[DecodeResult]) -> dict:
    """Per decoding pass kind, keyed by its label ("ar", "draft", "verify"; prefill aside): runs
    per step and, per run, the mean tokens, cached entries attended (`context`), routed-expert
    bytes, draft-head weight bytes and share of runs that read the target (`reads_target`: 0 for
    EAGLE drafts). This is what sim/perf/traffic.py turns into every byte a token costs
    (docs/policies.md, "Total traffic")."""
    steps = sum(r.steps for r in results)
    runs: dict[PassKind, list[PassCost]] = {}
    for r in results:
        for p in r.passes:
            if p.kind != PassKind.PREFILL:
                runs.setdefault(p.kind, []).append(p)
    # unrounded, so that runs x mean gives back the sums (the byte columns stay exact)
    return {kind.label: {"runs_per_step": len(ps) / steps,
                         "tokens": sum(p.tokens for p in ps) / len(ps),
                         "context": sum(p.context for p in ps) / len(ps),
                         "expert_bytes": sum(p.bytes for p in ps) / len(ps),
                         "draft_head_bytes": sum(p.draft_head_bytes for p in ps) / len(ps),
                         "reads_target": sum(p.reads_target for p in ps) / len(ps)}
            for kind, ps in sorted(runs.items())}


def summarize(results: list[DecodeResult]) -> dict:
    """Metrics over prompts, each a ratio of sums (so long prompts weigh by their tokens).
    Prefill bytes are per prompt token (the prompt minus its last token, which is the first
    root)."""
    tokens = sum(len(r.tokens) for r in results)
    steps = sum(r.steps for r in results)
    experts: dict[PassKind, int] = {}
    moved: dict[PassKind, int] = {}
    prompt_tokens = 0
    for r in results:
        for p in r.passes:
            experts[p.kind] = experts.get(p.kind, 0) + sum(p.experts_per_layer)
            moved[p.kind] = moved.get(p.kind, 0) + p.bytes
            if p.kind == PassKind.PREFILL:
                prompt_tokens += p.tokens
    target = sum(v for k, v in experts.items() if k in (PassKind.AR, PassKind.VERIFY))
    return {
        "pass_kinds": pass_kinds(results),
        "tokens": tokens,
        "steps": steps,
        "tokens_per_step": round(tokens / steps, 4),
        "acceptance_length": round(sum(sum(r.accepted) for r in results) / steps, 4),
        "experts_per_step": round(target / steps, 3),
        "draft_experts_per_step": round(experts.get(PassKind.DRAFT, 0) / steps, 3),
        # every pass also reads the non-expert weights (attention, embeddings) unless they stay on
        # chip: the sim/ model prices that; here only the count
        "passes_per_token": round(sum(1 for r in results for p in r.passes
                                      if p.kind != PassKind.PREFILL) / tokens, 4),
        "ema_bytes_per_token": round(sum(v for k, v in moved.items() if k != PassKind.PREFILL)
                                     / tokens),
        "ema_bytes_per_token_verify": round(sum(v for k, v in moved.items()
                                                if k in (PassKind.AR, PassKind.VERIFY)) / tokens),
        "ema_bytes_per_token_draft": round(moved.get(PassKind.DRAFT, 0) / tokens),
        "ema_bytes_per_token_prefill": round(moved.get(PassKind.PREFILL, 0)
                                             / max(prompt_tokens, 1)),
    }


def compare_modes(engine, prompts: list[list[int]], cfg: DecodeConfig, eot: int | None = None,
                  keep_traces: bool = False, progress: bool = False) -> dict:
    """Autoregressive ("ar") and naive speculative ("naive_sd") decoding of every prompt, with
    their metrics, whether speculative decoding gave exactly the autoregressive output, and the
    runs themselves ("runs": {"ar": [...], "naive_sd": [...]}; traces kept on request).
    `progress`: a bar over the prompts of each mode."""
    ar = [decode_ar(engine, p, cfg, eot, keep_traces)
          for p in progress_bar(prompts, desc="decode ar", unit="prompt", enabled=progress)]
    sd = [decode_speculative(engine, p, cfg, eot, keep_traces)
          for p in progress_bar(prompts, desc="decode naive_sd", unit="prompt",
                                enabled=progress)]
    same = [a.tokens == s.tokens for a, s in zip(ar, sd)]
    return {"ar": summarize(ar), "naive_sd": summarize(sd),
            "lossless": all(same), "lossless_per_prompt": same,
            "runs": {"ar": ar, "naive_sd": sd}}
