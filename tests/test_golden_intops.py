"""Integer primitives: each against its definition or an exact reference."""

import math
import random

import pytest
import torch

from edgexpert.golden.integer.intops import (Dyadic, bitlength, dyadic_mul, fp16_dyadic, isqrt,
                                     quantize_vec, rsqrt_dyadic, rshift, sigmoid_q15, softmax_q16)


def test_rshift_rounds_half_up():
    x = torch.tensor([5, -5, 6, -6, 7, -7, 0])
    assert rshift(x, 1).tolist() == [3, -2, 3, -3, 4, -3, 0]
    assert rshift(x, 0).tolist() == x.tolist()
    assert rshift(x, -3).tolist() == [v * 8 for v in x.tolist()]
    assert rshift(torch.tensor([10, 10]), torch.tensor([2, -1])).tolist() == [3, 20]


def test_bitlength_exact_near_powers_of_two():
    values = [0, 1, 2, 3, (1 << 53) - 1, 1 << 53, (1 << 62) - 1, 1 << 62]
    assert bitlength(torch.tensor(values)).tolist() == [v.bit_length() for v in values]


def test_quantize_vec_definition():
    rng = random.Random(1)
    for _ in range(200):
        row = [rng.randint(-(1 << 40), 1 << 40) >> rng.randint(0, 40) for _ in range(17)]
        q, s = quantize_vec(torch.tensor([row]), 16)
        a = max(abs(v) for v in row)
        if a == 0:
            assert q.abs().max() == 0 and int(s.m[0]) == 0
            continue
        expected = [(1 if v > 0 else -1) * ((254 * abs(v) + a) // (2 * a)) if v else 0 for v in row]
        assert q[0].tolist() == expected
        assert 8257 <= int(s.m[0]) <= 16513
        assert math.isclose(float(s.value()[0]), a / 127 / 2**16, rel_tol=1e-4)


def test_fp16_scales_decode_exactly():
    scales = torch.tensor([1e-7, 0.0123, 1.5, 3e4], dtype=torch.float64)
    words, d = fp16_dyadic(scales)
    assert torch.equal(d.value(), scales.to(torch.float16).to(torch.float64))
    assert int(d.m.max()) < 2048
    with pytest.raises(ValueError, match="positive and fit float16"):
        fp16_dyadic(torch.tensor([1e6]))


def test_isqrt_and_rsqrt():
    ys = [1, 2, 3, 99, 12345678, (1 << 52) - 1, (1 << 40) + 7]
    assert isqrt(torch.tensor(ys)).tolist() == [math.isqrt(y) for y in ys]
    d = rsqrt_dyadic(torch.tensor(ys[:-2] + [(1 << 60) + 3]))
    for y, v in zip(ys[:-2] + [(1 << 60) + 3], d.value().tolist()):
        assert math.isclose(v, 1 / math.sqrt(y), rel_tol=1e-4)
    assert int(d.m.max()) < 1 << 15


def test_dyadic_mul_normalizes():
    p = dyadic_mul(Dyadic(torch.tensor([30000]), torch.tensor([10])),
                   Dyadic(torch.tensor([25000]), torch.tensor([3])))
    assert int(p.m) < 1 << 15
    assert math.isclose(float(p.value()), 30000 * 25000 / 2**13, rel_tol=1e-4)


def test_sigmoid_table():
    z = torch.tensor([-20, -8, -1, 0, 1, 7.9, 20]) * 65536
    got = sigmoid_q15(z.to(torch.int64)).tolist()
    for zi, g in zip(z.tolist(), got):
        assert abs(g / 32768 - 1 / (1 + math.exp(-max(-8, min(7.984, zi / 65536))))) < 0.004


def test_softmax_q16():
    gen = torch.Generator().manual_seed(0)
    z = (torch.randn(50, 9, generator=gen) * 3 * 65536).to(torch.int64)
    p = softmax_q16(z)
    ref = torch.softmax(z.double() / 65536, -1) * 65536
    assert (p - ref).abs().max() < 64            # within 0.1% of the total mass
    assert (p.sum(-1) - 65536).abs().max() <= 9  # rounding per entry
    allowed = torch.rand(50, 9, generator=gen) < 0.5
    allowed[:, 0] = True
    pm = softmax_q16(z, allowed)
    assert int(pm[~allowed].abs().max()) == 0
    # the masked softmax equals the softmax of the allowed entries alone
    row = z[3][allowed[3]][None]
    assert softmax_q16(row)[0].tolist() == pm[3][allowed[3]].tolist()
