"""The routing model of the full-size estimates (issue 26 item 2; docs/performance-model.md,
"Routing model"): how many distinct experts a layer fetches for a draft tree's verification, a
chain of consecutive tokens (a prefill chunk, Specter's verification) or any tree shape, when
routing is not uniform.

One MoE layer, E experts, top-k per token. Three parameters:

- **popularity** is skewed: expert r (by rank) has weight r^-s (Zipf). A token's own order of
  preference over the experts is a Plackett-Luce draw from these weights (Gumbel-max: log w +
  Gumbel noise, sorted); its top-k are its first k. `skew` is what s gives: the share of
  token-expert assignments on the hottest 25 % of experts (SpecMoE's "skewness", Table I), the
  scale-free form in which the popularity carries over to a model with another E or k.
- **consecutive tokens share experts** (`q_seq`): each of a token's k slots takes, with
  probability q_seq, its most preferred expert of its parent's set (the previous token; in a
  draft tree the node it extends) that it has not chosen yet.
- **tree siblings share experts** (`q_sib`): in a draft tree, a candidate with earlier
  candidates at its depth (the alternatives EdgeXpert coalesces) first tries, with probability
  q_sib per slot, its most preferred unchosen expert of one of them (chosen uniformly).
  Otherwise the slot takes the token's most preferred unchosen expert overall.

Expected distinct experts are computed by seeded Monte Carlo over `SAMPLES` draws of the tree.
The parameters are fitted (method of simulated moments, `fit_routing`) on a bundled model's
routing (golden/studies/routing_stats.py, `edgexpert routing`): s on the plain-decoding tokens'
hot-25 % share at the same sample size (so that the finite sample's own skew is not read as
popularity), q_seq on the mean overlap |S_t & S_t-1| / k of consecutive plain-decoding tokens,
q_sib on the mean overlap of same-depth candidates of the verification trees. The distinct
experts per verification and per 16-token window are checked in-sample against the traces.

A full-size model takes a twin's routing at that twin's E and top-k, and otherwise the routing
carried to its E through both twins (`scaled_params`: each parameter a line in log2 E, the
skew's through its logit over uniform routing); its top-k enters through the Zipf exponent
that keeps the carried skew (`params_for`).
"""

from __future__ import annotations

import functools
import math
from dataclasses import asdict, dataclass

import numpy as np

__all__ = ["RoutingParams", "TreeShape", "FITTED", "MC_SEED", "SAMPLES", "VALIDATION",
           "HOT_FRACTION", "TREE_NODES_PER_DEPTH", "canonical_tree", "chain", "simulate",
           "distinct_experts", "model_experts", "coactivation_share", "hot_share",
           "zipf_for_skew", "scaled_params", "params_for", "fit_routing", "observed_moments",
           "nodes_per_depth", "validations"]

#: the Monte Carlo's seed and draws per estimate (printed with every fit and in the notes)
MC_SEED = 20261129
SAMPLES = 128
#: SpecMoE's skewness: the share of routed assignments on the hottest 25 % of experts
HOT_FRACTION = 0.25


@dataclass(frozen=True)
class RoutingParams:
    """A fitted routing model: popularity (as `skew`, and the Zipf exponent `zipf_s` it took at
    the fitted model's `experts`/`top_k`), the context's spread `sigma`, consecutive-token and
    sibling copy probabilities."""
    model: str
    experts: int
    top_k: int
    skew: float
    zipf_s: float
    sigma: float
    context: float
    q_seq: float
    q_sib: float
    source: str


@dataclass(frozen=True)
class TreeShape:
    """Tokens of one pass in order (parents before children): each one's parent index (-1 for
    none) and depth (0: the root, or a chain's tokens; siblings share a depth >= 1)."""
    parents: tuple[int, ...]
    depths: tuple[int, ...]

    @property
    def tokens(self) -> int:
        return len(self.parents)


def chain(n: int) -> TreeShape:
    """n consecutive tokens (a prefill chunk, a verified draft chain)."""
    return TreeShape(tuple(range(-1, n - 1)), (0,) * n)


#: nodes per depth of the bundled models' EAGLE trees (decode.max_depth 6, max_candidates 64,
#: width 8, branch 4), the root aside: the mean of the two twins' means over their
#: verifications (`edgexpert routing`, "tree_nodes_per_depth": coarse 4.0, 15.22, 22.46,
#: 14.71, 6.42, 1.2 (2026-12-02); fine 4.0, 15.66, 26.03, 13.55, 3.4, 1.35 (2026-12-04))
TREE_NODES_PER_DEPTH = (4.0, 15.44, 24.25, 14.13, 4.91, 1.28)


def canonical_tree(candidates: int, depth: int, width: int = 8,
                   profile: tuple[float, ...] = TREE_NODES_PER_DEPTH) -> TreeShape:
    """A draft tree of `candidates` nodes over `depth` levels after its root: the nodes per
    depth follow `profile` (the measured EAGLE trees' mean) cut to `depth` levels and scaled
    to `candidates` (at least one per level while nodes last); a level's nodes hang round-robin
    on the first `width` nodes of the level above (the most probable paths are the ones the
    tree builder expands)."""
    if candidates < 1 or depth < 1:
        raise ValueError(f"a tree needs candidates >= 1 and depth >= 1 (got {candidates}, {depth})")
    shares = list(profile[:depth]) + [profile[-1]] * max(0, depth - len(profile))
    total = sum(shares)
    counts = [max(1, round(candidates * s / total)) for s in shares]
    while sum(counts) > candidates:          # rounding: trim the deepest levels first
        i = max(i for i, c in enumerate(counts) if c > 0)
        counts[i] -= 1
    counts[-1] += candidates - sum(counts)
    parents, depths, above = [-1], [0], [0]
    for d, n in enumerate(counts, start=1):
        if n == 0:
            break
        level = []
        for j in range(n):
            parents.append(above[j % min(width, len(above))])
            depths.append(d)
            level.append(len(parents) - 1)
        above = level
    return TreeShape(tuple(parents), tuple(depths))


def _weights(experts: int, zipf_s: float) -> np.ndarray:
    return -zipf_s * np.log(np.arange(1, experts + 1))


def simulate(shape: TreeShape, experts: int, top_k: int, zipf_s: float, sigma: float,
             context: float, q_seq: float, q_sib: float, samples: int = SAMPLES,
             seed: int = MC_SEED) -> np.ndarray:
    """Routing of the tokens of `shape` (one context) in one layer: bool [samples, tokens,
    experts]. Each sample is a context: its weights are the Zipf weights times a log-normal
    factor of spread `sigma` per expert. Each of a token's k slots takes, in this order of
    trials: with probability q_sib its most preferred unchosen expert of an earlier same-depth
    candidate (one per token, chosen uniformly), with probability q_seq its parent's, with
    probability `context` its next draw from the context's weights, else its next draw from
    the global popularity (Plackett-Luce draws: Gumbel-max over the unchosen experts)."""
    rng = np.random.default_rng(seed)
    glob = _weights(experts, zipf_s)
    local = glob + sigma * rng.standard_normal((samples, experts))
    n = shape.tokens
    sets = np.zeros((samples, n, experts), bool)
    rows = np.arange(samples)
    by_depth: dict[int, list[int]] = {}
    for t in range(n):
        gumbel = rng.gumbel(size=(samples, experts))
        ctx, pop = local + gumbel, glob + gumbel
        parent, depth = shape.parents[t], shape.depths[t]
        earlier = by_depth.setdefault(depth, []) if depth > 0 else []
        refs = []
        if earlier and q_sib:
            refs.append((sets[rows, np.asarray(earlier)[rng.integers(len(earlier), size=samples)]],
                         q_sib))
        if parent >= 0 and q_seq:
            refs.append((sets[:, parent], q_seq))
        chosen = np.zeros((samples, experts), bool)
        fast = not refs and context in (0.0, 1.0)
        if fast:
            # every slot draws from one weighting: the token's top-k of its Gumbel-max scores
            top = np.argpartition(-(ctx if context else pop), top_k - 1, axis=1)[:, :top_k]
            chosen[rows[:, None], top] = True
        for _ in range(0 if fast else top_k):
            free = ~chosen
            use_ctx = rng.random(samples) < context
            score = np.where(use_ctx[:, None], ctx, pop)
            pick = free
            copied = np.zeros(samples, bool)
            for ref, q in refs:
                cand = ref & free
                use = ~copied & (rng.random(samples) < q) & cand.any(1)
                pick = np.where(use[:, None], cand, pick)
                score = np.where(use[:, None], ctx, score)
                copied |= use
            chosen[rows, np.where(pick, score, -np.inf).argmax(1)] = True
        sets[:, t] = chosen
        if depth > 0:
            earlier.append(t)
    return sets


@functools.lru_cache(maxsize=256)
def distinct_experts(shape: TreeShape, experts: int, top_k: int, zipf_s: float, sigma: float,
                     context: float, q_seq: float, q_sib: float, samples: int = SAMPLES,
                     seed: int = MC_SEED) -> float:
    """Expected distinct experts one layer fetches for the tokens of `shape`."""
    sets = simulate(shape, experts, top_k, zipf_s, sigma, context, q_seq, q_sib, samples, seed)
    return float(sets.any(1).sum(1).mean())


def coactivation_share(sets: np.ndarray, depths, min_shared: int = 3) -> float:
    """EdgeXpert's co-activation figure on simulated (or observed) sets [samples, tokens,
    experts]: the share of candidates that share >= `min_shared` experts with another
    candidate of their depth (depth groups of two or more; golden/studies/analysis.py
    `coactivation` on traces)."""
    depths = np.asarray(depths)
    sharing = total = 0
    for d in np.unique(depths[depths > 0]):
        idx = np.nonzero(depths == d)[0]
        if len(idx) < 2:
            continue
        s = sets[:, idx].astype(np.int32)
        common = np.einsum("nie,nje->nij", s, s)
        common[:, np.arange(len(idx)), np.arange(len(idx))] = 0
        sharing += int((common >= min_shared).any(2).sum())
        total += s.shape[0] * len(idx)
    return sharing / max(total, 1)


def _hot_share_of(chosen: np.ndarray, experts: int) -> float:
    counts = np.bincount(np.asarray(chosen).ravel(), minlength=experts)
    hot = max(1, round(HOT_FRACTION * experts))
    return float(np.sort(counts)[::-1][:hot].sum() / counts.sum())


def hot_share(experts: int, top_k: int, zipf_s: float, sigma: float, context: float,
              q_seq: float, contexts: int = 512, tokens: int = 16, replicas: int = 1,
              seed: int = MC_SEED) -> float:
    """The model's hot-25 % share of assignments pooled over `contexts` contexts of `tokens`
    consecutive tokens each, the mean over `replicas` such samples (a trace's own size, or a
    large one for the model's value)."""
    sets = simulate(chain(tokens), experts, top_k, zipf_s, sigma, context, q_seq, 0.0,
                    contexts * replicas, seed)
    counts = sets.reshape(replicas, contexts * tokens, experts).sum(1)
    hot = max(1, round(HOT_FRACTION * experts))
    return float(np.mean(np.sort(counts, 1)[:, ::-1][:, :hot].sum(1) / counts.sum(1)))


def _bisect(f, target: float, lo: float, hi: float, steps: int = 30) -> float:
    """x in [lo, hi] with f(x) = target for an increasing f (clamped at the ends)."""
    if f(lo) >= target:
        return lo
    if f(hi) <= target:
        return hi
    for _ in range(steps):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if f(mid) < target else (lo, mid)
    return (lo + hi) / 2


@functools.lru_cache(maxsize=64)
def zipf_for_skew(experts: int, top_k: int, params: "RoutingParams") -> float:
    """The Zipf exponent that gives `params.skew` (hot-25 % share over many contexts) at E
    experts, top-k, with the other parameters of `params`."""
    return round(_bisect(lambda s: hot_share(experts, top_k, s, params.sigma, params.context,
                                             params.q_seq), params.skew, 0.0, 4.0, 18), 4)


# --- fitting ------------------------------------------------------------------------------

def _overlap(a, b, k: int) -> float:
    return len(set(a) & set(b)) / k


def observed_moments(obs: dict, window: int = 16) -> dict:
    """What the fit matches and what the in-sample check compares, from routing observations
    (golden/studies/routing_stats.py): over the plain-decoding tokens, per layer, the hot-25 %
    share, the mean overlap |S_t & S_t-1| / k of consecutive tokens and the distinct experts of
    `window` consecutive tokens (a prefill chunk's size); over the verification passes the
    mean overlap of same-depth candidate pairs, the distinct experts per layer and EdgeXpert's
    co-activation share."""
    k, e, layers = obs["top_k"], obs["experts"], obs["layers"]
    hot, seq = [], []
    curve: dict[int, list[int]] = {w: [] for w in UNION_WINDOWS}
    for layer in range(layers):
        hot.append(_hot_share_of([tok[layer] for run in obs["ar"] for tok in run], e))
        for run in obs["ar"]:
            seq += [_overlap(run[t][layer], run[t - 1][layer], k) for t in range(1, len(run))]
            for w in UNION_WINDOWS:
                curve[w] += [len({x for tok in run[t:t + w] for x in tok[layer]})
                             for t in range(0, len(run) - w + 1, w)]
    sib, union, coact = [], [], []
    for p in obs["verify"]:
        depths = np.asarray(p["depths"])
        experts = np.asarray(p["experts"])           # [rows, layers, k]
        onehot = np.zeros((layers, len(depths), e), bool)
        for layer in range(layers):
            onehot[layer, np.arange(len(depths))[:, None], experts[:, layer]] = True
        union += onehot.any(1).sum(1).tolist()
        coact.append(coactivation_share(onehot, depths))
        sib.append(_pair_overlap(onehot, _same_depth_pairs(depths), k))
    return {"prompts": len(obs["ar"]),
            "tokens_per_prompt": round(float(np.mean([len(r) for r in obs["ar"]])), 2),
            "hot_share": float(np.mean(hot)), "seq_overlap": float(np.mean(seq)),
            "window": window, "window_experts": float(np.mean(curve[window])),
            "union_curve": {w: float(np.mean(v)) for w, v in curve.items() if v},
            "sib_overlap": float(np.mean(sib)), "verify_experts": float(np.mean(union)),
            "verify_tokens": float(np.mean([len(p["depths"]) for p in obs["verify"]])),
            "coactivation": float(np.mean(coact)), "verify_passes": len(obs["verify"])}


def _pair_overlap(sets: np.ndarray, pairs: list[tuple[int, int]], k: int) -> float:
    """Mean |S_a & S_b| / k over `pairs` of token rows of sets [samples, tokens, experts]."""
    if not pairs:
        return 0.0
    a = np.asarray([i for i, _ in pairs])
    b = np.asarray([j for _, j in pairs])
    return float((sets[:, a] & sets[:, b]).sum(2).mean() / k)


def _same_depth_pairs(depths) -> list[tuple[int, int]]:
    depths = np.asarray(depths)
    out = []
    for d in np.unique(depths[depths > 0]):
        idx = np.nonzero(depths == d)[0].tolist()
        out += [(a, b) for i, a in enumerate(idx) for b in idx[i + 1:]]
    return out


def _shapes(obs: dict, count: int) -> list[TreeShape]:
    """`count` of the observed verification trees, evenly spaced over the run."""
    passes = obs["verify"]
    picks = sorted({round(i * (len(passes) - 1) / max(count - 1, 1)) for i in range(count)})
    return [TreeShape(tuple(passes[i]["parents"]), tuple(passes[i]["depths"])) for i in picks]


#: window sizes (consecutive plain-decoding tokens) of the union curve the fit checks
UNION_WINDOWS = (4, 8, 16, 32, 64)


#: context shares the fit tries (the union curve chooses among them)
CONTEXT_GRID = (0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)


def _fit_context(e: int, k: int, m: dict, context: float, rounds: int, seed: int) -> tuple:
    """s, sigma, q_seq at context share `context`: each by bisection with common random
    numbers on the moment it moves most, `rounds` times over as they interact."""
    contexts, per = m["prompts"], round(m["tokens_per_prompt"])
    window, pair = chain(m["window"]), chain(2)
    s = sigma = q_seq = 0.0
    for _ in range(rounds):
        s = _bisect(lambda z: hot_share(e, k, z, sigma, context, q_seq, contexts, per, 4, seed),
                    m["hot_share"], 0.0, 4.0, 12)
        sigma = _bisect(lambda g: -distinct_experts(window, e, k, s, g, context, q_seq, 0.0, 128,
                                                    seed),
                        -m["window_experts"], 0.0, 8.0, 12)
        q_seq = _bisect(lambda q: _pair_overlap(simulate(pair, e, k, s, sigma, context, q, 0.0,
                                                         1024, seed), [(0, 1)], k),
                        m["seq_overlap"], 0.0, 1.0, 12)
    return s, sigma, q_seq


def _union_curve(e: int, k: int, s: float, sigma: float, context: float, q_seq: float,
                 seed: int) -> dict:
    return {w: distinct_experts(chain(w), e, k, s, sigma, context, q_seq, 0.0, 64, seed)
            for w in UNION_WINDOWS}


def fit_routing(obs: dict, trees: int = 6, samples: int = 64, rounds: int = 2,
                seed: int = MC_SEED) -> dict:
    """Fit the routing model on observations (method of simulated moments): for each context
    share of `CONTEXT_GRID`, s on the pooled hot-25 % share (at the trace's prompts x tokens),
    sigma on the distinct experts of a 16-token window, q_seq on consecutive tokens' overlap;
    the share whose union curve (distinct experts of 4..64 consecutive tokens) is nearest the
    trace's (least squares of relative errors); then q_sib on same-depth candidates' overlap in
    `trees` of the observed trees. In-sample check, not fitted on: the distinct experts per
    verification and the co-activation share on those trees. Returns {"params", "observed",
    "model", "errors", "union_curve", "seed", "samples", "trees"}."""
    e, k = obs["experts"], obs["top_k"]
    m = observed_moments(obs)
    best = None
    for context in CONTEXT_GRID:
        s, sigma, q_seq = _fit_context(e, k, m, context, rounds, seed)
        curve = _union_curve(e, k, s, sigma, context, q_seq, seed)
        loss = sum((curve[w] / got - 1) ** 2 for w, got in m["union_curve"].items())
        if best is None or loss < best[0] - 1e-12:
            best = (loss, context, s, sigma, q_seq, curve)
    _, context, s, sigma, q_seq, curve = best
    shapes = _shapes(obs, trees)

    def sib_overlap(q: float) -> float:
        return float(np.mean([_pair_overlap(simulate(t, e, k, s, sigma, context, q_seq, q,
                                                     samples, seed),
                                            _same_depth_pairs(t.depths), k) for t in shapes]))
    q_sib = _bisect(sib_overlap, m["sib_overlap"], 0.0, 1.0, 10)
    params = RoutingParams(obs["model"], e, k,
                           round(hot_share(e, k, s, sigma, context, q_seq), 4), round(s, 4),
                           round(sigma, 4), context, round(q_seq, 4), round(q_sib, 4),
                           f"fitted on the {obs['model']} model's routing (`edgexpert routing`)")
    sims = [simulate(t, e, k, s, sigma, context, q_seq, q_sib, samples, seed) for t in shapes]
    contexts, per = m["prompts"], round(m["tokens_per_prompt"])
    model = {"hot_share": hot_share(e, k, s, sigma, context, q_seq, contexts, per, 4, seed),
             "window_experts": curve[m["window"]],
             "seq_overlap": _pair_overlap(simulate(chain(2), e, k, s, sigma, context, q_seq, 0.0,
                                                   1024, seed), [(0, 1)], k),
             "sib_overlap": sib_overlap(q_sib),
             "verify_experts": float(np.mean([x.any(1).sum(1).mean() for x in sims])),
             "coactivation": float(np.mean([coactivation_share(x, t.depths)
                                            for x, t in zip(sims, shapes)]))}
    return {"params": asdict(params), "observed": m, "model": model,
            "errors": {key: round(model[key] / m[key] - 1, 4) if m[key] else None
                       for key in model},
            "union_curve": {str(w): {"observed": round(got, 3), "model": round(curve[w], 3)}
                            for w, got in m["union_curve"].items()},
            "seed": seed, "samples": samples, "trees": len(shapes)}


def nodes_per_depth(obs: dict) -> list[float]:
    """Mean nodes per depth (1..) of the observed verification trees (the root aside)."""
    depth = max(max(p["depths"]) for p in obs["verify"])
    return [round(float(np.mean([p["depths"].count(d) for p in obs["verify"]])), 2)
            for d in range(1, depth + 1)]


# --- the fitted models and their use at full size ------------------------------------------

_FIT = ("fitted on the {0} model's decoding routing: `edgexpert routing --set model.name={0}` "
        "(8 bundled prompts x 64 tokens, A8W4 integer path, greedy; naive_sd on the EAGLE head, "
        "decode.seed 20261129, Monte Carlo seed 20261129); build/routing/{0}.json")

#: the two bundled twins' fitted routing (`edgexpert routing`, coarse 2026-12-02; fine 2026-12-04,
#: the 3,000-step checkpoint: the 1,600-step one, git 6c3d7aa, fitted skew 0.4938, Zipf s 1.2095,
#: sigma 2.7314)
FITTED = {
    "coarse": RoutingParams("coarse", 32, 4, skew=0.3758, zipf_s=0.5161, sigma=2.1494,
                            context=1.0, q_seq=0.0, q_sib=0.0, source=_FIT.format("coarse")),
    "fine": RoutingParams("fine", 64, 8, skew=0.4755, zipf_s=0.9546, sigma=2.1807, context=1.0,
                          q_seq=0.0, q_sib=0.0, source=_FIT.format("fine")),
}


def _logit_excess(skew: float) -> float:
    """The skew as the logit of its share of the way from uniform routing (HOT_FRACTION) to 1."""
    x = (skew - HOT_FRACTION) / (1 - HOT_FRACTION)
    return math.log(x / (1 - x))


def _skew_of(logit: float) -> float:
    return HOT_FRACTION + (1 - HOT_FRACTION) / (1 + math.exp(-logit))


@functools.lru_cache(maxsize=64)
def scaled_params(experts: int) -> RoutingParams:
    """The routing of a model of E experts carried through both twins: they have the same
    top-k / E (1/8) at E = 32 and 64, so they pin how routing concentrates as experts get finer.
    Each parameter is a straight line in log2 E through them, the skew as the logit of its
    excess over uniform routing (a share between HOT_FRACTION and 1: a straight skew leaves
    that range, below 0.25 at E = 8), sigma at 0 or more, context and the copy probabilities
    within 0..1. At a twin's E it is that twin's routing. `zipf_s` is left at 0: the Zipf
    exponent depends on top-k as well (`params_for`)."""
    a, b = FITTED["coarse"], FITTED["fine"]
    t = (math.log2(experts) - math.log2(a.experts)) / (math.log2(b.experts) - math.log2(a.experts))

    def along(x: float, y: float) -> float:
        return x + (y - x) * t

    def line(x: float, y: float, high: float = math.inf) -> float:
        return round(min(high, max(0.0, along(x, y))), 4)
    return RoutingParams(
        f"coarse+fine at E={experts}", experts, 0,
        skew=round(_skew_of(along(_logit_excess(a.skew), _logit_excess(b.skew))), 4), zipf_s=0.0, sigma=line(a.sigma, b.sigma), context=line(a.context, b.context, 1.0),
        q_seq=line(a.q_seq, b.q_seq, 1.0), q_sib=line(a.q_sib, b.q_sib, 1.0),
        source=f"carried to E = {experts} in log2 E through both twins (coarse E = {a.experts}, "
               f"fine E = {b.experts}; the skew's logit over uniform routing, the others "
               f"straight): {a.source}; {b.source}")


def params_for(experts: int, top_k: int) -> tuple[RoutingParams, float]:
    """The routing parameters for a model of E experts, top-k: a twin's own at its E and k,
    otherwise `scaled_params(E)`; and the Zipf exponent that gives their skew at this E and k
    (the twins do not separate top-k from E: top-k enters only here)."""
    for twin in FITTED.values():
        if (experts, top_k) == (twin.experts, twin.top_k):
            return twin, twin.zipf_s
    params = scaled_params(experts)
    return params, zipf_for_skew(experts, top_k, params)


def model_experts(shape: TreeShape, experts: int, top_k: int) -> float:
    """Distinct experts per layer for the tokens of `shape` on a model of E experts, top-k."""
    twin, s = params_for(experts, top_k)
    return distinct_experts(shape, experts, top_k, s, twin.sigma, twin.context, twin.q_seq,
                            twin.q_sib)


# --- validation against published figures --------------------------------------------------

#: published routing figures the model is checked against (never fitted on)
VALIDATION = {
    "edgexpert_qwen3_experts": (
        52.1, "EdgeXpert (MICRO 2026, arXiv 2608.05303), motivation: Qwen3-30B-A3B with an "
        "EAGLE-3 tree (64 candidates, depth 6) activates 52.1 experts per layer per step "
        "(6.5x top-8); /work/shared/REFERENCES.md"),
    "edgexpert_coactivation": (
        0.884, "EdgeXpert (MICRO 2026): up to 88.4 % of same-depth candidates co-activate >= 3 "
        "experts (EAGLE-3 tree; the paper's maximum, the model not named: compared on "
        "Qwen3-30B-A3B); /work/shared/REFERENCES.md"),
    "specmoe_mixtral_skew": (
        0.32, "SpecMoE (DAC 2026, arXiv 2604.10152), Table I: Mixtral-8x7B skewness 0.32 (the "
        "share of routed tokens on the hottest 25 % of experts); /work/shared/seeds"),
}


def validations(tree: TreeShape) -> list[dict]:
    """Each published figure against the model transferred from its bundled twin (the tree:
    EdgeXpert's, 64 candidates over 6 levels), with the error model / published - 1."""
    twin, s = params_for(128, 8)
    sets = simulate(tree, 128, 8, s, twin.sigma, twin.context, twin.q_seq, twin.q_sib)
    mixtral, mixtral_s = params_for(8, 2)
    got = {"edgexpert_qwen3_experts": ("qwen3-30b-a3b", twin, float(sets.any(1).sum(1).mean())),
           "edgexpert_coactivation": ("qwen3-30b-a3b", twin, coactivation_share(sets, tree.depths)),
           "specmoe_mixtral_skew": ("mixtral-8x7b", mixtral,
                                    hot_share(8, 2, mixtral_s, mixtral.sigma, mixtral.context,
                                              mixtral.q_seq))}
    out = []
    for key, (published, source) in VALIDATION.items():
        model, params, value = got[key]
        out.append({"figure": key, "model": model, "routing_from": params.model,
                    "published": published, "modelled": round(value, 4),
                    "error": round(value / published - 1, 4), "source": source})
    return out
