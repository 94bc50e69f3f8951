"""`edgexpert bench dispatch`: training throughput of the grouped expert dispatch against the
plain per-expert loop, measured side by side (alternating steps) on the bundled model's shape."""

from __future__ import annotations

import time

import torch
import torch.nn.functional as F

from ...contracts.config import Config
from ...support.progress import progress_bar
from ..lm.model import MoE, MoEModel, balance_losses

__all__ = ["measure_dispatch"]


def measure_dispatch(config: Config, steps: int = 6, seed: int = 0, progress: bool = True) -> dict:
    """Tokens per second of forward + backward + AdamW for each dispatch, alternating the two so
    that machine load hits both alike; the first step of each is a warm-up. `progress`: a bar
    over the steps."""
    mc, tc = config.model, config.train
    torch.set_num_threads(tc.threads)
    torch.manual_seed(seed)
    model = MoEModel(mc)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    gen = torch.Generator().manual_seed(seed)
    times = {"grouped": [], "loop": []}
    for step in progress_bar(range(steps + 1), desc="bench dispatch", unit="step",
                             enabled=progress):
        batch = torch.randint(0, mc.vocab_size, (tc.batch_size, tc.seq_len + 1), generator=gen)
        for name in times:
            for module in model.modules():
                if isinstance(module, MoE):
                    module.dispatch = name
            start = time.perf_counter()
            logits, router_logits, chosen = model(batch[:, :-1])
            loss = F.cross_entropy(logits.reshape(-1, mc.vocab_size), batch[:, 1:].reshape(-1))
            lb, z = balance_losses(router_logits, chosen, mc.n_experts)
            opt.zero_grad(set_to_none=True)
            (loss + tc.balance_coef * lb + tc.zloss_coef * z).backward()
            opt.step()
            if step:
                times[name].append(time.perf_counter() - start)
    tokens = tc.batch_size * tc.seq_len
    rate = {name: round(tokens * len(t) / sum(t)) for name, t in times.items()}
    return {"tokens_per_step": tokens, "steps": steps, "threads": tc.threads,
            "tokens_per_second": rate, "speedup": round(rate["grouped"] / rate["loop"], 3)}
