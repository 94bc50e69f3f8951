"""`edgexpert train`: the golden model, trained here on the standard library's source.

Deterministic for a seed: the vocabulary, the initial weights and the order of training windows
all follow from it. Loss = next-token cross entropy + balance_coef x load-balancing loss +
zloss_coef x router z-loss (golden.lm.model.balance_losses). AdamW with linear warm-up and cosine
decay to a tenth of the peak rate. The held-out evaluation uses `eval_windows` windows spread
evenly over the held-out token stream, on the float16-stored weights exactly as a user loads them.
"""

from __future__ import annotations

import ctypes
import hashlib
import math
import sys
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from tqdm import tqdm

from ...contracts.config import Config
from .checkpoint import load_checkpoint, save_checkpoint
from .corpus import Corpus, load_corpus
from .model import MoEModel, balance_losses
from .tokenizer import encode_texts, train_tokenizer

__all__ = ["token_streams", "heldout_stream", "eval_windows", "heldout_loss", "bigram_baseline", "keep_freed_memory",
           "fit", "train"]


def token_streams(corpus: Corpus, tokenizer) -> tuple[np.ndarray, np.ndarray]:
    """(training tokens, held-out tokens) as int32 arrays."""
    return (np.asarray(encode_texts(tokenizer, corpus.texts(heldout=False)), dtype=np.int32),
            heldout_stream(corpus, tokenizer))


def heldout_stream(corpus: Corpus, tokenizer) -> np.ndarray:
    """The held-out tokens alone (`token_streams`' second array), without encoding the training
    split: what the measurements on held-out windows need."""
    return np.asarray(encode_texts(tokenizer, corpus.texts(heldout=True)), dtype=np.int32)


def eval_windows(heldout: np.ndarray, seq_len: int, count: int) -> torch.Tensor:
    """`count` windows of seq_len + 1 tokens spread evenly over the held-out stream."""
    span = len(heldout) - seq_len - 1
    if span < 0:
        raise ValueError(f"held-out stream of {len(heldout)} tokens is shorter than one window")
    starts = np.linspace(0, span, count).astype(np.int64)
    return torch.from_numpy(np.stack([heldout[s:s + seq_len + 1] for s in starts]).astype(np.int64))


@torch.no_grad()
def heldout_loss(model: MoEModel, windows: torch.Tensor, batch: int = 16) -> float:
    """Mean next-token cross entropy (nats/token) over the windows."""
    model.eval()
    total, count = 0.0, 0
    for i in range(0, len(windows), batch):
        w = windows[i:i + batch]
        logits = model(w[:, :-1])[0]
        total += float(F.cross_entropy(logits.reshape(-1, logits.shape[-1]), w[:, 1:].reshape(-1),
                                       reduction="sum"))
        count += w[:, 1:].numel()
    return total / count


def bigram_baseline(train_ids: np.ndarray, windows: torch.Tensor, vocab: int) -> tuple[float, float]:
    """Held-out loss of a bigram model interpolated with the unigram distribution,
    P(b|a) = (c(a,b) + beta P(b)) / (c(a) + beta), with beta chosen on the evaluation windows
    themselves: the strongest bigram baseline this data allows. Returns (loss, beta)."""
    pairs = train_ids[:-1].astype(np.int64) * vocab + train_ids[1:]
    counts = np.bincount(pairs, minlength=vocab * vocab).reshape(vocab, vocab).astype(np.float64)
    unigram = (np.bincount(train_ids, minlength=vocab) + 1.0)
    unigram /= unigram.sum()
    prev = windows[:, :-1].reshape(-1).numpy()
    nxt = windows[:, 1:].reshape(-1).numpy()
    row_total = counts.sum(1)
    best = (math.inf, 0.0)
    for beta in (0.1, 0.3, 1, 3, 10, 30, 100, 300, 1000):
        p = (counts[prev, nxt] + beta * unigram[nxt]) / (row_total[prev] + beta)
        best = min(best, (float(-np.log(p).mean()), beta))
    return best


def _lr(step: int, cfg) -> float:
    if step < cfg.warmup_steps:
        return cfg.lr * (step + 1) / cfg.warmup_steps
    progress = (step - cfg.warmup_steps) / max(1, cfg.steps - cfg.warmup_steps)
    return cfg.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


def keep_freed_memory() -> None:
    """Ask glibc to keep freed blocks instead of returning them to the kernel, for the rest of the
    process (`edgexpert train` and `edgexpert prune` call it before training): the expert buffers
    change shape every step, and unmapping and faulting them back in cost a third of the step
    time here (sys time 8.0 s -> 2.2 s over 12 steps, 3.5k -> 4.7k tokens/s). Without glibc it
    does nothing."""
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:  # not glibc: nothing to tune
        return
    m_trim_threshold, m_mmap_threshold = -1, -3
    libc.mallopt(m_mmap_threshold, 1 << 30)
    libc.mallopt(m_trim_threshold, (1 << 31) - 1)


def fit(model: MoEModel, train_ids: np.ndarray, tc, steps: int, progress: bool) -> float:
    """`steps` AdamW steps of the training loss (cross entropy + balance and z losses) on random
    windows of `train_ids`, the learning rate following `tc` (deterministic for tc.seed); the
    seconds they took. Gradient hooks on the parameters (edgexpert prune's masks) apply."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": tc.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}], lr=tc.lr, betas=(0.9, 0.95))
    data = torch.from_numpy(train_ids.astype(np.int64))
    gen = torch.Generator().manual_seed(tc.seed)
    tokens_per_step = tc.batch_size * tc.seq_len
    start = time.time()
    bar = tqdm(range(steps), disable=not progress, unit="step", file=sys.stderr)
    for step in bar:
        starts = torch.randint(0, len(data) - tc.seq_len - 1, (tc.batch_size,), generator=gen)
        batch = torch.stack([data[s:s + tc.seq_len + 1] for s in starts.tolist()])
        for group in opt.param_groups:
            group["lr"] = _lr(step, tc)
        model.train()
        logits, router_logits, chosen = model(batch[:, :-1])
        ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch[:, 1:].reshape(-1))
        lb, z = balance_losses(router_logits, chosen, model.cfg.n_experts)
        loss = ce + tc.balance_coef * lb + tc.zloss_coef * z
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % 10 == 0 or step == steps - 1:
            rate = (step + 1) * tokens_per_step / (time.time() - start)
            bar.set_postfix(loss=f"{ce.item():.3f}", balance=f"{lb.item():.3f}", tok_s=f"{rate:.0f}")
    return time.time() - start


def train(config: Config, out: Path, command: str, progress: bool = True,
          corpus_root: Path | None = None) -> dict:
    """Train, store the checkpoint in `out`, and return its metadata with the run's wall-time
    figures added (`train_seconds`, `train_tokens_per_second`: reported, not stored, since they
    do not reproduce the checkpoint); `command` is recorded. `corpus_root` replaces the standard
    library as the corpus (tests use a small one)."""
    tc, mc = config.train, config.model
    keep_freed_memory()
    torch.set_num_threads(tc.threads)
    torch.manual_seed(tc.seed)
    log = (lambda msg: tqdm.write(msg, file=sys.stderr)) if progress else (lambda msg: None)
    log(f"edgexpert train: seed {tc.seed}, {tc.steps} steps of {tc.batch_size} x {tc.seq_len} tokens")

    corpus = load_corpus(corpus_root)
    tokenizer = train_tokenizer(corpus.texts(heldout=False), mc.vocab_size)
    train_ids, heldout_ids = token_streams(corpus, tokenizer)
    windows = eval_windows(heldout_ids, tc.seq_len, tc.eval_windows)
    log(f"corpus {corpus.root}: {corpus.count(False)[0]} training files ({len(train_ids)} tokens), "
        f"{corpus.count(True)[0]} held-out files ({len(heldout_ids)} tokens), "
        f"manifest {corpus.manifest_hash[:16]}")

    model = MoEModel(mc)
    train_seconds = fit(model, train_ids, tc, tc.steps, progress)
    tokens_per_step = tc.batch_size * tc.seq_len

    # evaluate the weights as stored (float16), exactly as load_checkpoint gives them back
    meta = {
        "seed": tc.seed, "train": asdict(tc),
        # the corpus by folder name: the manifest hash identifies it on any machine
        "corpus": {"root": corpus.root.name, "manifest_sha256": corpus.manifest_hash,
                   "train_files": corpus.count(False)[0], "heldout_files": corpus.count(True)[0],
                   "train_tokens": int(len(train_ids)), "heldout_tokens": int(len(heldout_ids)),
                   "skipped_non_utf8": list(corpus.skipped)},
        "tokenizer_sha256": hashlib.sha256(tokenizer.to_str().encode()).hexdigest(),
        "command": command,
        "torch": torch.__version__,
    }
    save_checkpoint(model, tokenizer, meta, out)
    stored = load_checkpoint(out)
    loss = heldout_loss(stored.model, windows)
    bigram, beta = bigram_baseline(train_ids, windows, mc.vocab_size)
    meta.update(heldout_loss=round(loss, 5), heldout_ppl=round(math.exp(loss), 3),
                bigram_heldout_loss=round(bigram, 5), bigram_beta=beta,
                eval={"windows": tc.eval_windows, "seq_len": tc.seq_len})
    save_checkpoint(model, tokenizer, meta, out)
    run = {"train_seconds": round(train_seconds, 3),   # a tiny test run takes well under 0.1 s
           "train_tokens_per_second": round(tc.steps * tokens_per_step / train_seconds)}
    log(f"held-out loss {loss:.4f} nats/token (ppl {math.exp(loss):.2f}); bigram baseline "
        f"{bigram:.4f} (beta {beta}); {run['train_tokens_per_second']} tokens/s")
    return {**load_checkpoint(out).meta, **run}
