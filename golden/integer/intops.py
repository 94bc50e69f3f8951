"""Integer primitives of the A8W4 reference path: the arithmetic the RTL matches bit for bit.

Every value is an integer; a real number is an integer with a known binary point (fixed point,
`Q.F`: real = int * 2**-F) or with a dyadic scale (`Dyadic`: real = int * m * 2**-e). Tensors
are torch.int64; matrix products of int8 x int4 (or int8) operands are computed in float64,
which is exact while |sum| < 2**53 (here < 2**31), and converted back.

Rounding: `rshift(x, s)` is the one rounding rule: add half, then shift right arithmetically
(round half up, toward +inf on ties); negative `s` shifts left exactly. Division-based steps say
their rounding where they are defined.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

__all__ = [
    "I64", "rshift", "bitlength", "Dyadic", "fp16_dyadic", "quantize_vec", "dyadic_mul",
    "normalize", "requant", "int_matmul", "isqrt", "rsqrt_dyadic", "inv_rms", "SIGMOID_LUT",
    "sigmoid_q15",
    "EXP2_LUT", "softmax_q16", "MANTISSA_BITS",
]

I64 = torch.int64
#: activation scale mantissas are normalized into [2**13, 2**15)
MANTISSA_BITS = 15


def rshift(x: torch.Tensor, s) -> torch.Tensor:
    """Round-half-up arithmetic shift right of int64 `x` by `s` bits (tensor or int); s <= 0
    shifts left."""
    s = torch.as_tensor(s, dtype=I64)
    right = torch.clamp(s, min=0)
    half = torch.where(right > 0,
                       torch.bitwise_left_shift(torch.ones_like(right), torch.clamp(right - 1, min=0)),
                       torch.zeros_like(right))
    shifted = torch.bitwise_right_shift(x + half, right)
    return torch.where(s >= 0, shifted, torch.bitwise_left_shift(x, torch.clamp(-s, min=0)))


def bitlength(x: torch.Tensor) -> torch.Tensor:
    """Number of bits of non-negative int64 `x` (0 for 0)."""
    # frexp of a float64 can round a 54+ bit value up to the next power of two: correct it
    e = torch.frexp(x.to(torch.float64)).exponent.to(I64)
    too_big = (e > 0) & (torch.bitwise_left_shift(torch.ones_like(e), torch.clamp(e - 1, min=0)) > x)
    return torch.where(too_big, e - 1, e)


@dataclass
class Dyadic:
    """Per-row scales m * 2**-e (m, e int64 tensors of the same shape)."""
    m: torch.Tensor
    e: torch.Tensor

    def __getitem__(self, index) -> "Dyadic":
        return Dyadic(self.m[index], self.e[index])

    def value(self) -> torch.Tensor:
        return self.m.to(torch.float64) * torch.pow(2.0, -self.e.to(torch.float64))


def fp16_dyadic(scale: torch.Tensor) -> tuple[torch.Tensor, Dyadic]:
    """Round positive float scales to IEEE float16 (the 16-bit scale word of the weight layout)
    and decode each word exactly: normal m = 1024 + fraction, e = 25 - exponent; subnormal
    m = fraction, e = 24. Returns (words as int64, Dyadic)."""
    half = scale.to(torch.float16)
    if not bool(torch.isfinite(half).all()) or bool((half <= 0).any()):
        raise ValueError("weight scales must be positive and fit float16 (up to 65504)")
    bits = half.view(torch.int16).to(I64) & 0xFFFF
    exp, frac = (bits >> 10) & 31, bits & 1023
    m = torch.where(exp > 0, frac + 1024, frac)
    e = torch.where(exp > 0, 25 - exp, torch.full_like(exp, 24))
    return bits, Dyadic(m, e)


def normalize(p: torch.Tensor, e: torch.Tensor) -> Dyadic:
    """p * 2**-e with p >= 0 as a Dyadic whose mantissa has at most MANTISSA_BITS bits
    (rounded half up; a carry out of the top bit renormalizes)."""
    t = torch.clamp(bitlength(p) - MANTISSA_BITS, min=0)
    m = rshift(p, t)
    carry = m >> MANTISSA_BITS
    return Dyadic(m >> carry, e - t - carry)


def dyadic_mul(a: Dyadic, b: Dyadic) -> Dyadic:
    return normalize(a.m * b.m, a.e + b.e)


def quantize_vec(v: torch.Tensor, frac_bits) -> tuple[torch.Tensor, Dyadic]:
    """Symmetric int8 quantization of each row of fixed-point `v` [..., n] (real v * 2**-frac_bits,
    frac_bits an int or a per-row tensor).

    a = max |v| of the row; q = sign(v) * floor((254 |v| + a) / (2a)) (127 |v| / a rounded half
    up, so |q| <= 127); the scale is a/127 as a Dyadic: k = 21 - bitlength(a),
    m = floor((2 a 2**k + 127) / 254) (for k < 0 the division takes 2**-k into the divisor),
    which puts m in [8257, 16513]; e = frac_bits + k. An all-zero row gives q = 0, scale 0.
    """
    a = v.abs().amax(dim=-1)
    safe = torch.clamp(a, min=1)
    q = torch.sign(v) * torch.div(254 * v.abs() + safe[..., None], 2 * safe[..., None],
                                  rounding_mode="floor")
    k = 21 - bitlength(safe)
    up, down = torch.clamp(k, min=0), torch.clamp(-k, min=0)
    num = 2 * torch.bitwise_left_shift(safe, up) + 127 * torch.bitwise_left_shift(torch.ones_like(down), down)
    m = torch.div(num, 254 * torch.bitwise_left_shift(torch.ones_like(down), down), rounding_mode="floor")
    m = torch.where(a > 0, m, torch.zeros_like(m))
    e = torch.where(a > 0, torch.as_tensor(frac_bits, dtype=I64) + k, torch.zeros_like(k))
    return q, Dyadic(m, e)


def int_matmul(q: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """q [..., n] (int8 values) times w [o, n] (int4 / int8 values, held as float64 so the
    conversion is paid once) transposed: exact integer sums."""
    return torch.matmul(q.to(torch.float64), w.t()).to(I64)


def requant(acc: torch.Tensor, x: Dyadic, w: Dyadic, frac_bits: int) -> torch.Tensor:
    """Accumulators acc [..., o] of inputs with per-row scale x [...] and weights with per-output
    scale w [o], as fixed point Q.frac_bits: rshift(acc * m_x * m_w, e_x + e_w - frac_bits).
    |acc| < 2**31, m_x < 2**15, m_w < 2**11: the product stays below 2**57."""
    return rshift(acc * x.m[..., None] * w.m, x.e[..., None] + w.e - frac_bits)


def isqrt(y: torch.Tensor) -> torch.Tensor:
    """floor(sqrt(y)) of non-negative int64 y < 2**52, exactly."""
    s = torch.sqrt(y.to(torch.float64)).floor().to(I64)
    s = torch.where(s * s > y, s - 1, s)
    return torch.where((s + 1) * (s + 1) <= y, s + 1, s)


def rsqrt_dyadic(y: torch.Tensor) -> Dyadic:
    """1 / sqrt(y) of positive int64 y as a Dyadic.

    y is scaled by an even power of two into [2**30, 2**32): y_n = y * 2**(2j) with
    j = floor((32 - bitlength(y)) / 2) (a right shift, flooring, when j < 0);
    s = isqrt(y_n) in [2**15, 2**16); R = floor(2**45 / s) in (2**29, 2**30];
    1/sqrt(y) = R * 2**(j - 45), normalized."""
    j = torch.div(32 - bitlength(y), 2, rounding_mode="floor")
    y_n = torch.where(j >= 0, torch.bitwise_left_shift(y, torch.clamp(j, min=0) * 2),
                      torch.bitwise_right_shift(y, torch.clamp(-j, min=0) * 2))
    s = isqrt(y_n)
    r = torch.div(torch.full_like(s, 1 << 45), s, rounding_mode="floor")
    return normalize(r, 45 - j)


def inv_rms(x: torch.Tensor, frac: int, eps: float) -> Dyadic:
    """1 / sqrt(mean(x^2) + eps) per row of Q.frac `x`, as a Dyadic.

    With x8 = rshift(x, frac - 8) (Q.8) and S = sum x8^2 (Q.16):
    1/sqrt(S 2**-16 / n + eps) = sqrt(n) 2**8 / sqrt(S + eps n 2**16); sqrt(n) is the Q.12
    constant round(sqrt(n) 2**12)."""
    n = x.shape[-1]
    x8 = rshift(x, frac - 8)
    y = (x8 * x8).sum(-1) + round(eps * n * 65536)
    root_n = Dyadic(torch.full_like(y, round(math.sqrt(n) * 4096)), torch.full_like(y, 12 - 8))
    return dyadic_mul(root_n, rsqrt_dyadic(y))


#: sigmoid(i / 64) for i in -512..511, as Q.15 (index i + 512)
SIGMOID_LUT = torch.tensor([round(32768 / (1 + math.exp(-i / 64))) for i in range(-512, 512)],
                           dtype=I64)


def sigmoid_q15(z_q16: torch.Tensor) -> torch.Tensor:
    """sigmoid of Q.16 values as Q.15, from the table in steps of 1/64 over [-8, 8)."""
    index = torch.clamp(rshift(z_q16, 10), -512, 511) + 512
    return SIGMOID_LUT[index]


#: 2**(-f / 1024) for f in 0..1023, as Q.15
EXP2_LUT = torch.tensor([round(32768 * 2 ** (-f / 1024)) for f in range(1024)], dtype=I64)
#: log2(e) in Q.16
LOG2E_Q16 = round(math.log2(math.e) * 65536)


def softmax_q16(z_q16: torch.Tensor, allowed: torch.Tensor | None = None) -> torch.Tensor:
    """Softmax of Q.16 scores along the last axis, as Q.16 probabilities (integers summing to
    about 65536), over the `allowed` entries only (others get 0).

    x = z - max(z) <= 0; y = rshift(x * LOG2E_Q16, 16) = x * log2(e) in Q.16; with n = floor(-y / 2**16)
    and f the top 10 bits of the fraction of -y, exp(x) ~ EXP2_LUT[f] * 2**-n (rshift by n);
    p = floor((e * 2**16 + S / 2) / S) with S the row sum (S >= 2**15: the maximum entry has e = 2**15).
    """
    if allowed is None:
        allowed = torch.ones_like(z_q16, dtype=torch.bool)
    low = torch.iinfo(I64).min // 4
    masked = torch.where(allowed, z_q16, torch.full_like(z_q16, low))
    x = masked - masked.amax(dim=-1, keepdim=True)
    neg_y = -rshift(torch.clamp(x, min=-(1 << 40)) * LOG2E_Q16, 16)
    n = neg_y >> 16
    f = (neg_y & 0xFFFF) >> 6
    e = torch.where(n < 17, rshift(EXP2_LUT[f], torch.clamp(n, max=17)), torch.zeros_like(n))
    e = torch.where(allowed, e, torch.zeros_like(e))
    total = e.sum(dim=-1, keepdim=True)
    return torch.div(e * 65536 + total // 2, total, rounding_mode="floor")
