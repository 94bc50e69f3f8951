"""The A8W4 reference arithmetic: exact products and sums, int32 wrap, range checks."""

import numpy as np
import pytest
import torch

from edgexpert.golden.integer.a8w4 import dot_a8w4, wrap_int32


def test_matches_exact_integer_dot_products():
    rng = np.random.default_rng(7)
    act = rng.integers(-128, 128, size=(50, 37))
    wgt = rng.integers(-8, 8, size=(50, 37))
    got = dot_a8w4(torch.tensor(act, dtype=torch.int8), torch.tensor(wgt, dtype=torch.int8))
    assert got.dtype == torch.int32
    assert got.tolist() == [int(sum(int(a) * int(w) for a, w in zip(ra, rw)))
                            for ra, rw in zip(act, wgt)]


def test_extremes_and_wrap():
    assert int(dot_a8w4(torch.tensor([-128]), torch.tensor([-8]))) == 1024
    # 2**21 largest products sum to exactly 2**31, which an int32 register holds as -2**31
    n = 2**21
    big = dot_a8w4(torch.full((n,), -128), torch.full((n,), -8))
    assert int(big) == -2**31
    assert wrap_int32(torch.tensor([2**32 + 5, -2**31 - 1])).tolist() == [5, 2**31 - 1]


@pytest.mark.parametrize("act, wgt, message", [
    ([128], [1], "activations hold values in 128..128: accepted -128..127"),
    ([1], [8], "weights hold values in 8..8: accepted -8..7"),
    ([1, 2], [1], "must have the same shape"),
])
def test_rejects_out_of_range(act, wgt, message):
    with pytest.raises(ValueError, match=message):
        dot_a8w4(torch.tensor(act), torch.tensor(wgt))


def test_rejects_float_input():
    with pytest.raises(TypeError, match="must be an integer tensor"):
        dot_a8w4(torch.tensor([1.0]), torch.tensor([1]))
