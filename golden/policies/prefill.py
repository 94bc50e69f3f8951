"""EdgeXpert's prefill: prompt-wise expert reuse (docs/policies.md, "Prefill").

- A lightweight bidirectional encoder scores every prompt token: the CLS token's attention
  weights over the prompt in the encoder's last layer (mean over heads), a distribution over the
  prompt's tokens.
- Its training target is what a token loses when its expert budget is cut: per layer the MoE
  output error of top-1 routing against the model's top-K routing (`expert_cut_targets`).
- Two thresholds on score x prompt length (1.0: a uniform score) split the tokens into major,
  minor and trivial (`token_classes`).
- Per layer, the union of the major tokens' native top-K experts is the shared set S; minor and
  trivial tokens keep their top-1 expert and fill the rest of their budget (k, n experts in all)
  from S first, by router score, and from outside S only when S is short (`shared_set_route`).
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from safetensors import SafetensorError
from safetensors.torch import load_file
from torch import nn

from ...contracts.config import PolicyConfig, check_prefill_budgets
from ...contracts.errors import InputError
from ...contracts.trace import PassKind
from ...support.progress import progress_bar
from ..lm.checkpoint import bundled_checkpoint_dir, save_meta, save_tensors, weights_sha256
from ..decoding.decode import exact_logits, run_pass
from ..integer.int_encoder import IntTokenEncoder
from ..decoding.metrics import LogitComparison
from ..blocks import pru
from ..lm.model import KVCache, MoEModel, route, routing_weights
from ..lm.train import eval_windows

__all__ = ["MAJOR", "MINOR", "TRIVIAL", "EncoderError", "EncoderSettings", "TokenEncoder",
           "token_classes", "random_classes", "shared_set_route", "moe_inputs", "expert_cut_targets",
           "spearman", "train_encoder", "MODEL_HASH_FORM", "save_encoder", "load_encoder",
           "bundled_encoder_dir", "ENCODER_PATHS", "scoring_encoder", "PrefillRouting", "prefill_routing", "prefill_pass",
           "prefill_quality", "TARGET_DEFINITION"]

MAJOR, MINOR, TRIVIAL = pru.MAJOR, pru.MINOR, pru.TRIVIAL
ENCODER_VERSION = 1
#: encoder.json's `model_sha256`, the model an encoder was trained for: golden.lm.checkpoint's
#: weights_sha256 over float32 values with shapes, the form the bundled encoder records
MODEL_HASH_FORM = {"dtype": torch.float32, "shapes": True}

TARGET_DEFINITION = (
    "per prompt token t: sum over MoE layers l of ||MoE_l(h_t) with the model's top-K routing - "
    "MoE_l(h_t) with its top-1 expert only||^2 / mean over the window's tokens of "
    "||MoE_l(h) top-K||^2, on the float model's own residual stream (top-K everywhere); the "
    "encoder's CLS attention is trained to match the target normalised to sum 1 over the window "
    "(loss: KL(target || CLS attention))")


class EncoderError(InputError):
    """The encoder files are missing, malformed, or were trained for another model."""


@dataclass(frozen=True)
class EncoderSettings:
    """The encoder's shape and how `edgexpert prefill train` trains it."""
    width: int = 64               # encoder width (the model's embeddings are projected down)
    heads: int = 4
    layers: int = 2               # attention layers; the last one's CLS row is the score
    window: int = 128             # tokens per training window = the longest prompt it scores
    train_windows: int = 2048     # training-split windows the targets are measured on
    heldout_windows: int = 256    # held-out windows for the reported rank correlation
    steps: int = 1500
    batch: int = 32
    lr: float = 2e-3
    seed: int = 20261129


# ---------------------------------------------------------------------------------------------
# token classes and the shared-set routing


def token_classes(scores: torch.Tensor, tau_major: float, tau_minor: float) -> torch.Tensor:
    """MAJOR / MINOR / TRIVIAL per token from scores [T] (summing to 1): the score is multiplied
    by T so that thresholds do not depend on the prompt length (1.0 = the uniform score). The
    comparison is the PRU's integer one (golden.blocks.pru): scores and thresholds in Q.16."""
    if tau_minor > tau_major:
        raise ValueError(f"tau_minor = {tau_minor} is out of range: accepted 0..tau_major "
                         f"(= {tau_major})")
    return pru.token_classes(pru.score_q16(scores), pru.tau_q16(tau_major), pru.tau_q16(tau_minor))


def random_classes(classes: torch.Tensor, seed: int) -> torch.Tensor:
    """The ablation's classes: as many major and minor tokens as `classes` has, at positions
    drawn with a fixed seed (so the cost of the shared set is comparable, only the choice of
    tokens is random)."""
    order = torch.randperm(len(classes), generator=torch.Generator().manual_seed(seed))
    majors, minors = int((classes == MAJOR).sum()), int((classes == MINOR).sum())
    out = torch.full_like(classes, TRIVIAL)
    out[order[:majors]] = MAJOR
    out[order[majors:majors + minors]] = MINOR
    return out


def shared_set_route(logits: torch.Tensor, classes: torch.Tensor, top_k: int, budget_minor: int,
                     budget_trivial: int) -> torch.Tensor:
    """Expert indices [T, top_k] (-1 pads) for one layer of a prefill pass.

    Major tokens take the router's top-K; S is the union of those experts. A minor (trivial)
    token takes its top-1 expert, then up to budget_minor (budget_trivial) experts in all: first
    S's experts by the token's router logit, then, only if S runs out, the others by logit.
    The PRU's integer routing (golden.blocks.pru.route_layer) on the logits as Q.16: exact for the
    integer path's logits, a rounding onto 2**-16 for the float path's."""
    return pru.route_layer(pru.logit_q16(logits), classes, top_k, budget_minor, budget_trivial)


# ---------------------------------------------------------------------------------------------
# the training target


@torch.no_grad()
def moe_inputs(model: MoEModel, windows: torch.Tensor) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """The exact model's MoE inputs h [B*S, D] and MoE outputs [B*S, D] per layer for `windows`
    [B, S] (causal, top-K routing everywhere)."""
    inputs, outputs = [], []

    def keep(module, args, result):   # returns None: the output is left as it is
        inputs.append(args[0])
        outputs.append(result[0])
    hooks = [block.moe.register_forward_hook(keep) for block in model.layers]
    try:
        model(windows)
    finally:
        for hook in hooks:
            hook.remove()
    return inputs, outputs


@torch.no_grad()
def expert_cut_targets(model: MoEModel, windows: torch.Tensor) -> torch.Tensor:
    """The encoder's target [B, S] for windows [B, S] (TARGET_DEFINITION)."""
    b, s = windows.shape
    target = torch.zeros(b, s)
    inputs, outputs = moe_inputs(model, windows)
    for block, h, full in zip(model.layers, inputs, outputs):
        moe = block.moe
        logits = moe.router(h)
        top1 = route(logits, 1)
        cut = moe.dispatch_grouped(h, top1, routing_weights(logits, top1, moe.norm_topk_prob)) \
            + moe.shared(h)
        err = (full - cut).pow(2).sum(-1).view(b, s)
        scale = full.pow(2).sum(-1).view(b, s).mean(1, keepdim=True)
        target += err / scale
    return target


def spearman(a: torch.Tensor, b: torch.Tensor) -> float:
    """Rank correlation of two vectors (ties broken by position: the scores are continuous)."""
    ra = torch.argsort(torch.argsort(a)).double()
    rb = torch.argsort(torch.argsort(b)).double()
    ra, rb = ra - ra.mean(), rb - rb.mean()
    return float((ra * rb).sum() / math.sqrt(float((ra * ra).sum() * (rb * rb).sum())))


# ---------------------------------------------------------------------------------------------
# the encoder


class _Block(nn.Module):
    """Pre-norm transformer block without a causal mask."""

    def __init__(self, width: int, heads: int):
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.out = nn.Linear(width, width)
        self.norm2 = nn.LayerNorm(width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

    def split(self, x):
        """x [B, S, W] -> q, k, v [B, H, S, W / H]."""
        b, s, w = x.shape
        return [t.view(b, s, self.heads, w // self.heads).transpose(1, 2)
                for t in self.qkv(self.norm1(x)).chunk(3, dim=-1)]

    def forward(self, x):
        b, s, w = x.shape
        q, k, v = self.split(x)
        att = F.scaled_dot_product_attention(q, k, v)
        x = x + self.out(att.transpose(1, 2).reshape(b, s, w))
        return x + self.mlp(self.norm2(x))


class TokenEncoder(nn.Module):
    """Bidirectional token-importance encoder over [CLS, prompt tokens].

    Input: the golden model's frozen token embeddings projected to `width`, plus learned
    positions (the CLS token is a learned vector). `layers - 1` full blocks, then the last
    layer's attention: the CLS query against the prompt tokens' keys, softmax, mean over heads;
    that row is the score (it sums to 1 over the prompt). The rest of the last layer would only
    feed outputs nobody reads, so it is not built. The embedding table is the model's, not a
    parameter of the encoder (it is neither trained nor stored with it)."""

    def __init__(self, embeddings: torch.Tensor, settings: EncoderSettings):
        super().__init__()
        w = settings.width
        if w % settings.heads:
            raise ValueError(f"encoder width {w} is not a multiple of heads {settings.heads}")
        self.settings = settings
        self.embeddings = embeddings.detach().float()
        self.proj = nn.Linear(embeddings.shape[1], w)
        self.pos = nn.Parameter(torch.randn(settings.window, w) * 0.02)
        self.cls = nn.Parameter(torch.randn(w) * 0.02)
        self.blocks = nn.ModuleList(_Block(w, settings.heads) for _ in range(settings.layers - 1))
        self.score_norm = nn.LayerNorm(w)
        self.score_qk = nn.Linear(w, 2 * w)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """tokens [B, T] -> scores [B, T], each row summing to 1."""
        b, t = tokens.shape
        if not 1 <= t <= self.settings.window:
            raise ValueError(f"prompt of {t} tokens is out of range for the prefill encoder: "
                             f"accepted 1..{self.settings.window} tokens")
        x = self.proj(self.embeddings[tokens]) + self.pos[:t]
        x = torch.cat([self.cls.expand(b, 1, -1), x], dim=1)
        for block in self.blocks:
            x = block(x)
        q, k = self.score_qk(self.score_norm(x)).chunk(2, dim=-1)
        h = self.settings.heads
        q = q[:, :1].view(b, 1, h, -1).transpose(1, 2)          # the CLS query   [B, H, 1, d]
        k = k[:, 1:].view(b, t, h, -1).transpose(1, 2)          # the tokens' keys [B, H, T, d]
        att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]), dim=-1)
        return att.mean(1)[:, 0]


def _train_windows(stream: np.ndarray, window: int, count: int) -> torch.Tensor:
    # eval_windows gives seq_len + 1 tokens: windows of exactly `window` tokens
    return eval_windows(stream, window - 1, count)


def train_encoder(model: MoEModel, train_stream: np.ndarray, heldout_stream: np.ndarray,
                  settings: EncoderSettings = EncoderSettings(), log=print,
                  progress: bool = True) -> tuple[TokenEncoder, dict]:
    """Train the encoder on training-split windows; report the held-out rank correlation.
    Deterministic for settings.seed on one thread (the caller sets torch's thread count).
    `progress`: a bar over the training steps."""
    start = time.time()
    torch.manual_seed(settings.seed)
    model.eval()
    windows = _train_windows(train_stream, settings.window, settings.train_windows)
    targets = torch.cat([expert_cut_targets(model, windows[i:i + 64])
                         for i in range(0, len(windows), 64)])
    goal = targets / targets.sum(1, keepdim=True)
    log(f"prefill encoder: targets on {len(windows)} training windows of {settings.window} tokens "
        f"({time.time() - start:.0f} s); seed {settings.seed}")
    encoder = TokenEncoder(model.tok_emb.weight, settings)
    optimizer = torch.optim.AdamW(encoder.parameters(), lr=settings.lr, weight_decay=0.01)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: 0.5 * (1 + math.cos(math.pi * step / settings.steps)))
    gen = torch.Generator().manual_seed(settings.seed)
    encoder.train()
    for step in progress_bar(range(settings.steps), desc="prefill encoder", unit="step",
                             enabled=progress):
        batch = torch.randint(len(windows), (settings.batch,), generator=gen)
        scores = encoder(windows[batch])
        p = goal[batch]
        loss = (p * (torch.log(p.clamp_min(1e-12)) - torch.log(scores.clamp_min(1e-12)))).sum(1).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        schedule.step()
        if step % 250 == 0 or step == settings.steps - 1:
            log(f"  step {step:5d}  KL {loss.item():.4f}")
    encoder.eval()
    held = _train_windows(heldout_stream, settings.window, settings.heldout_windows)
    held_targets = expert_cut_targets(model, held)
    with torch.no_grad():
        held_scores = encoder(held)
    rho = [spearman(s, t) for s, t in zip(held_scores, held_targets)]
    meta = {"encoder_version": ENCODER_VERSION, "settings": asdict(settings),
            "target": TARGET_DEFINITION, "model_sha256": weights_sha256(model, **MODEL_HASH_FORM),
            "heldout_spearman": round(sum(rho) / len(rho), 4),
            "heldout_windows": len(held), "train_windows": len(windows),
            "train_seconds": round(time.time() - start, 1), "torch": torch.__version__}
    return encoder, meta


def bundled_encoder_dir() -> Path:
    """The bundled encoder sits next to the model it was trained for."""
    return bundled_checkpoint_dir()


def save_encoder(encoder: TokenEncoder, meta: dict, out: Path) -> Path:
    """encoder.safetensors and encoder.json in `out`. encoder.json keeps what reproduces the
    encoder: `train_encoder`'s wall time (`train_seconds`) is left out, and the checkpoint it was
    trained on (`checkpoint`, which `edgexpert prefill train` adds as a path) is kept by folder
    name: `model_sha256` identifies that model on any machine."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    save_tensors({k: v.contiguous() for k, v in encoder.state_dict().items()},
                 out / "encoder.safetensors")
    if "checkpoint" in meta:
        meta = {**meta, "checkpoint": Path(meta["checkpoint"]).name}
    save_meta(meta, out / "encoder.json")
    return out


def load_encoder(model: MoEModel, path: Path | None = None) -> tuple[TokenEncoder, dict]:
    """The encoder in `path` (default: the bundled one), checked against `model`."""
    path = Path(path) if path is not None else bundled_encoder_dir()
    meta_file, weights_file = path / "encoder.json", path / "encoder.safetensors"
    for f in (meta_file, weights_file):
        if not f.is_file():
            raise EncoderError(f"no prefill encoder: {f} is missing (run `edgexpert prefill train "
                               "--install`)")
    try:
        meta = json.loads(meta_file.read_text())
        settings = EncoderSettings(**meta["settings"])
        expected = meta["model_sha256"]
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise EncoderError(f"{meta_file} is malformed ({type(exc).__name__}: {exc}): accepted the "
                           "JSON `edgexpert prefill train` writes") from None
    if meta.get("encoder_version") != ENCODER_VERSION:
        raise EncoderError(f"{meta_file} has encoder_version {meta.get('encoder_version')!r}: "
                           f"accepted {ENCODER_VERSION}")
    actual = weights_sha256(model, **MODEL_HASH_FORM)
    if actual != expected:
        raise EncoderError(f"{path} holds a prefill encoder trained for model {expected[:12]}..., "
                           f"not this model ({actual[:12]}...): retrain it with `edgexpert prefill "
                           "train --install`")
    encoder = TokenEncoder(model.tok_emb.weight, settings)
    try:
        encoder.load_state_dict(load_file(str(weights_file)))
    except (SafetensorError, OSError, RuntimeError) as exc:
        first = str(exc).splitlines()[0]
        raise EncoderError(f"{weights_file} does not hold the encoder {meta_file} describes: "
                           f"{first}") from None
    encoder.eval()
    return encoder, meta


# ---------------------------------------------------------------------------------------------
# the policy's prefill routing and its measurement

#: `policies.prefill.encoder`: the trained float encoder, or its A8W4 integer twin
ENCODER_PATHS = ("float", "int")


def scoring_encoder(encoder: TokenEncoder, path: str):
    """What scores prompts for `policies.prefill.encoder` = path: the float `encoder` itself,
    or its integer twin (golden.integer.int_encoder; the same interface, scores on the Q.16 grid)."""
    if path not in ENCODER_PATHS:
        raise ValueError(f"prefill encoder {path!r} is not accepted: accepted "
                         f"{', '.join(ENCODER_PATHS)}")
    return encoder if path == "float" else IntTokenEncoder(encoder)


@dataclass(frozen=True)
class PrefillRouting:
    """EdgeXpert's prefill routing settings (policies.prefill_*) with the encoder that scores
    (`scoring_encoder`: the float one or its integer twin)."""
    encoder: TokenEncoder | IntTokenEncoder
    tau_major: float
    tau_minor: float
    budget_minor: int
    budget_trivial: int
    classes: str = "encoder"      # or "random": the ablation
    seed: int = 20261129

    def token_classes(self, tokens: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            scores = self.encoder(tokens[None].long())[0]
        classes = token_classes(scores, self.tau_major, self.tau_minor)
        if self.classes == "random":
            return random_classes(classes, self.seed)
        return classes

    def router(self, tokens: torch.Tensor, top_k: int):
        """The Router (golden.lm.model) of a prefill pass over `tokens`: classes are per token and
        the same in every layer; S is per layer."""
        classes = self.token_classes(tokens)
        return lambda layer, logits, h: shared_set_route(logits, classes, top_k, self.budget_minor,
                                                         self.budget_trivial)


def prefill_routing(policies: PolicyConfig, encoder: TokenEncoder | None,
                    top_k: int) -> PrefillRouting | None:
    """EdgeXpert's shared-set prefill routing from the configuration's `policies` section for a
    model routing top_k experts, or None without an encoder (the budgets are checked either
    way); `policies.prefill.encoder` says which arithmetic scores."""
    check_prefill_budgets(policies, top_k)
    p = policies.prefill
    return None if encoder is None else PrefillRouting(
        scoring_encoder(encoder, p.encoder), p.tau_major, p.tau_minor, p.budget_minor,
        p.budget_trivial, p.classes, p.seed)


def prefill_pass(engine, policy, prompt: list[int]):
    """The policy's prefill pass over prompt[:-1] (as golden.decoding.decode.prefill runs it): the
    logits it computed for every position, and its PassCost."""
    policy.start(prompt)
    n = len(prompt) - 1
    logits, _, cost = run_pass(engine, policy, PassKind.PREFILL, torch.tensor(prompt[:-1]),
                               torch.arange(n), KVCache(),
                               torch.tril(torch.ones(n, n, dtype=torch.bool)),
                               torch.zeros(n, dtype=torch.long))
    return logits, cost


def prefill_quality(engine, policy, baseline, windows: list[list[int]]) -> dict:
    """The prefill pass of `policy` on held-out prompt windows against the exact float model:
    the prompt tokens' own next-token logits (top-1 agreement, mean KL(exact || policy),
    perplexity ratio of the true next tokens) and the prefill EMA bytes per prompt token
    relative to `baseline` (the model's own top-K routing, same cost model)."""
    scores = LogitComparison()
    moved = moved_base = 0
    for tokens in windows:
        exact = exact_logits(engine, tokens)
        mine, cost = prefill_pass(engine, policy, tokens)
        _, base = prefill_pass(engine, baseline, tokens)
        scores.add(exact, mine, torch.tensor(tokens[1:]))
        moved, moved_base = moved + cost.bytes, moved_base + base.bytes
    count = scores.count
    return {"prompt_tokens": count, "top1_agreement": scores.top1_agreement(),
            "mean_kl": scores.mean_kl(), "ppl_ratio": scores.ppl_ratio(),
            "prefill_bytes_per_token": round(moved / count),
            "native_prefill_bytes_per_token": round(moved_base / count),
            "prefill_bytes_reduction": round(1 - moved / moved_base, 4)}
