"""Bit-level number-format helpers shared by the Triton kernels.

They are written with integer operations only, so that they give the same bytes under
``TRITON_INTERPRET=1`` (whose fp8/bf16 casts truncate, flush fp8 subnormals and mishandle overflow) as on a
GPU.  Every helper rounds to nearest, ties to even, like ``torch.Tensor.to`` and the PTX ``cvt.rn``
conversions vLLM uses.
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def ceil_log2_ratio(amax, QFRAC: tl.constexpr, QEXP: tl.constexpr, E_MIN: tl.constexpr):
    """Smallest integer e with ``amax <= Q * 2**e``, at least ``E_MIN``; exact, no log2.

    ``Q = (1 + QFRAC / 2**23) * 2**QEXP`` (448 = 1.75 * 2**8 -> QFRAC 0x600000, QEXP 8;
    6 = 1.5 * 2**2 -> QFRAC 0x400000, QEXP 2).  ``amax`` is fp32 and >= 0.  This equals vLLM's
    ``ceil(log2(max(amax, floor) / Q))`` for every finite amax (the floor sets E_MIN).
    """
    bits = amax.to(tl.int32, bitcast=True)
    expo = ((bits >> 23) & 0xFF) - 127
    frac = bits & 0x7FFFFF
    e = expo - QEXP + (frac > QFRAC).to(tl.int32)
    return tl.maximum(e, E_MIN)


@triton.jit
def ceil_log2_fp32(s):
    """``ceil(log2(s))`` with the log2 taken in fp32, as vLLM's V3.2 Triton writers take it
    (``tl.math.exp2(tl.math.ceil(tl.math.log2(scale)))``), for positive normal fp32 ``s``; integer ops only.

    With ``s = 2**k * (1 + j * 2**-23)``, log2(s) = k + log2(1 + j * 2**-23) lies in (k, k + 1) for j > 0,
    and its fp32 rounding falls back onto k when the fractional part is at most half the fp32 spacing next
    to k on that side (2**p below): then ceil gives k, where the exact rule gives k + 1. That happens for j
    up to J = floor((2**(2**p) - 1) * 2**23): 0 near k = 0, at most 22 (|k| from 65 to 127; normal fp32 has
    no larger |k|), 1 or 2 for the V3.2 scales around 2**-9. Assumes the device's fp32 log2 is correctly rounded at these points
    (``scripts/gpu-check.sh`` probes it).
    """
    bits = s.to(tl.int32, bitcast=True)
    k = ((bits >> 23) & 0xFF) - 127
    j = bits & 0x7FFFFF
    m = tl.abs(k)
    lg = ((m >= 2).to(tl.int32) + (m >= 4).to(tl.int32) + (m >= 8).to(tl.int32) + (m >= 16).to(tl.int32)
          + (m >= 32).to(tl.int32) + (m >= 64).to(tl.int32) + (m >= 128).to(tl.int32))
    # below a negative power of two the spacing halves: k + frac moves toward zero, into the finer binade
    p = lg - 24 - ((k < 0) & ((m & (m - 1)) == 0)).to(tl.int32)
    jmax = tl.where(p <= -23, 0, tl.where(p == -22, 1, tl.where(p == -21, 2, tl.where(
        p == -20, 5, tl.where(p == -19, 11, 22)))))  # p >= -18 only for |k| > 64
    up = (j > 0) & ((k == 0) | (j > jmax))
    return k + up.to(tl.int32)


@triton.jit
def pow2(e):
    """2.0 ** e as fp32 for integer tensors e in [-126, 127]."""
    return ((e + 127) << 23).to(tl.float32, bitcast=True)


@triton.jit
def ue8m0_to_f32(b):
    """ue8m0 scale byte (int32 0..255) -> ``2.0 ** (b - 127)`` as fp32, exactly, over the whole byte range.

    Byte 0 gives the fp32 subnormal 2**-127 and byte 255 gives +inf, the values of vLLM's dequantisers
    (``tl.exp2(byte - 127.0)``, ``models/deepseek_v4/common/ops/cache_utils.py``) and of
    ``torch.ldexp(1.0, byte - 127)`` in :func:`kvcalc_kernels.reference.dequantize_ref`.  (OCP MX reads
    0xFF as NaN; the quantisers never write 0 or 255: their exponents stay within [-126, 120].)
    Bytes 1..254 are the fp32 exponent field itself; 255 << 23 is the bit pattern of +inf.
    """
    return tl.where(b == 0, 0x400000, b << 23).to(tl.float32, bitcast=True)


@triton.jit
def f32_to_e4m3(y):
    """fp32 -> fp8 e4m3fn byte (int32 0..255), round to nearest even.  |y| must be <= 448 (clamp first)."""
    bits = y.to(tl.int32, bitcast=True)
    sign = (bits >> 24) & 0x80
    a = bits & 0x7FFFFFFF
    # normal range (|y| >= 2**-6): drop 20 mantissa bits with round-half-even, rebias 127 -> 7
    r = a + 0x7FFFF + ((a >> 20) & 1)
    normal = tl.minimum((r >> 20) - (120 << 3), 0x7E)
    # subnormal range: multiples of 2**-9, rounded by the fp32 adder (exact product, one rounding)
    af = a.to(tl.float32, bitcast=True)
    t = af * 512.0 + 8388608.0
    sub = t.to(tl.int32, bitcast=True) - 0x4B000000
    code = tl.where(a < 0x3C800000, sub, normal)
    return code | sign


@triton.jit
def e4m3_to_f32(c):
    """fp8 e4m3fn byte (int32 0..255) -> fp32 (exact); 0x7F / 0xFF give NaN."""
    e = (c >> 3) & 0xF
    m = c & 7
    normal = (((e + 120) << 23) | (m << 20)).to(tl.float32, bitcast=True)
    sub = m.to(tl.float32) * 0.001953125
    mag = tl.where(e == 0, sub, normal)
    mag = tl.where((e == 15) & (m == 7), float("nan"), mag)
    return tl.where((c & 0x80) != 0, -mag, mag)


@triton.jit
def f32_to_e2m1(y):
    """fp32 -> e2m1 nibble (int32 0..15), round to nearest even, saturating at +-6 (cvt.rn.satfinite)."""
    q = tl.abs(y)
    # grid 0, .5, 1, 1.5, 2, 3, 4, 6: midpoints with ties going to the even code
    code = (
        (q > 0.25).to(tl.int32) + (q >= 0.75).to(tl.int32) + (q > 1.25).to(tl.int32)
        + (q >= 1.75).to(tl.int32) + (q > 2.5).to(tl.int32) + (q >= 3.5).to(tl.int32)
        + (q > 5.0).to(tl.int32)
    )
    sign = (y.to(tl.int32, bitcast=True) >> 28) & 0x8
    return code | sign


@triton.jit
def e2m1_to_f32(c):
    """e2m1 nibble (int32 0..15) -> fp32 (exact)."""
    e = (c >> 1) & 3
    mb = c & 1
    normal = (2 + mb).to(tl.float32) * pow2(e - 2)
    mag = tl.where(e == 0, mb.to(tl.float32) * 0.5, normal)
    return tl.where((c & 8) != 0, -mag, mag)


@triton.jit
def f32_to_bf16_bits(x):
    """fp32 -> bf16 bit pattern (int32 0..65535), round to nearest even (NaN inputs unsupported)."""
    bits = x.to(tl.int32, bitcast=True)
    r = bits + 0x7FFF + ((bits >> 16) & 1)
    return (r >> 16) & 0xFFFF


@triton.jit
def bf16_bits_to_f32(b):
    """bf16 bit pattern (int32 0..65535) -> fp32 (exact)."""
    return (b << 16).to(tl.float32, bitcast=True)
