"""Fixtures shared by the plain tests."""

import pytest

#: a model small enough for quick tests, in the bundled model's regime: many experts, top-k > 1,
#: SwiGLU experts narrower than d_model
SMALL_MODEL = ["model.vocab_size=300", "model.d_model=48", "model.n_layers=2", "model.n_heads=4",
               "model.n_experts=8", "model.top_k=2", "model.expert_ffn=16",
               "model.max_seq_len=128", "train.seq_len=64",
               # EdgeXpert's prefill budgets must fit top_k = 2
               "policies.prefill_budget_minor=2", "policies.prefill_budget_trivial=1"]


@pytest.fixture(scope="session")
def small_model() -> list[str]:
    """Configuration overrides of the small test model."""
    return list(SMALL_MODEL)
