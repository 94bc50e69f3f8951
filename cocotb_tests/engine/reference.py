"""An expert's outputs from golden/integer/intops.py on weights given as the weight image holds
them (int4 values, float16 scale words), for the Amaranth-simulator tests of the engine and the
top's command path (tests/test_engine_sim.py, tests/test_top_command_sim.py): docs/contracts.md,
"Mixture of experts", with masked input channels."""

from __future__ import annotations

import numpy as np
import torch

from edgexpert.contracts.weight_image import ExpertWeights
from edgexpert.golden.integer.intops import (Dyadic, fp16_dyadic, int_matmul, quantize_vec,
                                             requant, rshift, sigmoid_q15)

__all__ = ["scale_words", "decode", "expert_reference"]


def scale_words(rng: np.random.Generator, n: int) -> np.ndarray:
    # positive finite float16 words with exponent 0..20 (subnormals included): with the x
    # scales below, gate and up span the sigmoid table's clamp on both sides and stay in int32
    exp = rng.integers(0, 21, n)
    frac = rng.integers(0, 1024, n)
    frac = np.where((exp == 0) & (frac == 0), 1, frac)
    return ((exp << 10) | frac).astype(np.uint16)


def decode(words: np.ndarray) -> Dyadic:
    half = torch.from_numpy(words.astype(np.int16)).view(torch.float16)
    bits, dy = fp16_dyadic(half.to(torch.float32))
    assert (bits == torch.from_numpy(words.astype(np.int64))).all()
    return dy


def expert_reference(x8, sx: Dyadic, w: ExpertWeights, gu_mask, dn_mask):
    """docs/contracts.md step 3 with golden/integer/intops.py, masked input channels giving no products."""
    f = w.gate.shape[0]
    gate = torch.from_numpy(w.gate * gu_mask[None, :]).to(torch.float64)
    up = torch.from_numpy(w.up * gu_mask[None, :]).to(torch.float64)
    down = torch.from_numpy(w.down * dn_mask[None, :]).to(torch.float64)
    s_gu, s_dn = decode(w.scales_gate_up), decode(w.scales_down)
    g = requant(int_matmul(x8, gate), sx, s_gu[:f], 16)
    u = requant(int_matmul(x8, up), sx, s_gu[f:], 16)
    assert int(g.abs().max()) < 2**31 and int(u.abs().max()) < 2**31
    h8, sh = quantize_vec(rshift(rshift(g * sigmoid_q15(g), 15) * u, 16), 16)
    return h8, sh, requant(int_matmul(h8, down), sh, s_dn, 16)
