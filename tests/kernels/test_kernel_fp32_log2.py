"""vLLM's V3.2 writers take the scale exponent as ``ceil(log2(scale))`` in fp32 (issue 9.1). The
``*_fp32log2`` formats follow that arithmetic; these tests pin it with numbers worked out here, not with the
kernels' own table."""

import math

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

from kvcalc_kernels import _bits as B
from kvcalc_kernels import quant
from kvcalc_kernels import reference as R
from kvcalc_kernels.formats import get_format


@triton.jit
def _ceil_log2(s_ptr, o_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < n
    s = tl.load(s_ptr + i, mask=m, other=1.0)
    tl.store(o_ptr + i, B.ceil_log2_fp32(s), mask=m)


def _f32(k: int, j: int) -> float:
    """2**k * (1 + j * 2**-23) as an fp32 (k a normal exponent)."""
    return float(np.array([(k + 127) << 23 | j], dtype=np.uint32).view(np.float32)[0])


def _last_j_rounding_to_k(k: int) -> int:
    """The largest mantissa offset j whose log2 still rounds to k in fp32: log2 in float64 (accurate to far
    below the fp32 spacing), then numpy's round-to-nearest-even conversion to float32."""
    j = 0
    while np.float32(k + math.log2(1 + (j + 1) * 2.0**-23)) == np.float32(k):
        j += 1
    return j


def test_fp32_log2_exponent_for_every_binade():
    ks = list(range(-126, 128))
    last = {k: _last_j_rounding_to_k(k) for k in ks}
    # spot values by hand: half the fp32 spacing next to k is 2**p, and J = floor((2**(2**p) - 1) * 2**23):
    # k = 1: p = -24, 0.35 -> 0; k = -9: spacing 2**-20 below 9, p = -21, 2.77 -> 2; k = -16: below a power of
    # two the spacing halves (2**-20), p = -21 -> 2; k = -17: p = -20, 5.55 -> 5; k = 127: p = -18, 22.2 -> 22
    assert (last[1], last[-9], last[-16], last[-17], last[127], last[0]) == (0, 2, 2, 5, 22, 0)
    s, want = [], []
    for k in ks:
        for j in (0, 1, last[k], last[k] + 1, 0x7FFFFF):
            s.append(_f32(k, j))
            want.append(k if j == 0 or (k != 0 and j <= last[k]) else k + 1)
    x = torch.tensor(s, dtype=torch.float32)
    out = torch.empty(len(s), dtype=torch.int32)
    _ceil_log2[(triton.cdiv(len(s), 256),)](x, out, len(s), BLOCK=256)
    assert out.tolist() == want


def _record(fmt: str, row: torch.Tensor) -> list[int]:
    f = get_format(fmt)
    got = quant.quantize(row[None], f)
    assert torch.equal(got, R.quantize_ref(row[None], f))  # the torch reference takes its own route
    return got[0].tolist()


def test_v32_indexer_one_ulp_above_a_power_of_two():
    # amax = 0.875 + 2**-24, one fp32 ulp above 448 * 2**-9; the other 127 values are 0.001.
    # scale = div_rn(amax, 448) = 2**-9 * (1 + 2**-24 / 0.875) = 2**-9 * (1 + 0.571 * 2**-23): rounds to j = 1.
    # Exact rule: amax > 448 * 2**-9, so e = -8: scale fp32 2**-8 = 0x3B800000, amax * 2**8 -> e4m3 224 = 0x76,
    # 0.001 * 2**8 = 0.256 -> 0.25 = 0x28.  fp32 log2: log2(scale) = -9 + 0.82 * 2**-23 rounds to -9 (half the
    # spacing below 9 is 2**-21), so e = -9: 2**-9 = 0x3B000000, amax * 2**9 = 448.0000x -> 448 = 0x7E,
    # 0.512 -> 0.5 = 0x30.
    row = torch.full((128,), 0.001, dtype=torch.float32)
    row[5] = 0.875 + 2.0**-24
    exact = _record("fp8_indexer_v32", row)
    fp32 = _record("fp8_indexer_v32_fp32log2", row)
    assert exact[5] == 0x76 and exact[0] == 0x28 and exact[128:132] == [0x00, 0x00, 0x80, 0x3B]
    assert fp32[5] == 0x7E and fp32[0] == 0x30 and fp32[128:132] == [0x00, 0x00, 0x00, 0x3B]
    # SM100 layout: the same exponent as four equal UE8M0 bytes, 127 - 9 = 118
    assert _record("fp8_indexer_v32_mx_fp32log2", row)[128:132] == [118] * 4
    # five ulps above: scale mantissa 5 x 0.571 = 2.86 -> 3 > 2, both rules give -8
    row[5] = 0.875 + 5 * 2.0**-24
    assert _record("fp8_indexer_v32_fp32log2", row)[128:132] == [0x00, 0x00, 0x80, 0x3B]


def test_v32_latent_by_the_rounded_reciprocal():
    # fp32(1/448) = 9,586,981 * 2**-32 (1/448 * 2**32 = 9,586,980.57 rounds up). amax = 0.875 + 2**-24 =
    # 14,680,065 * 2**-24; the product is 14,680,065 * 9,586,981 * 2**-56 = 2**-9 * P / 2**47 with
    # P = 140,737,504,233,765 = 2**47 + 15,878,437 = 2**47 + 0.946 * 2**24: mantissa offset j = 1, and 1 <= 2
    # keeps log2 at -9 in fp32. The exact rule gives -8. Block 0 of a V3.2 fp8_ds_mla entry; scales at byte 512.
    p = 14_680_065 * 9_586_981
    assert p == 140_737_504_233_765 and p - 2**47 == 15_878_437 and round((p - 2**47) / 2**24) == 1
    row = torch.full((576,), 0.001, dtype=torch.float32)
    row[7] = 0.875 + 2.0**-24
    exact = _record("fp8_ds_mla", row)
    fp32 = _record("fp8_ds_mla_fp32log2", row)
    assert exact[512:516] == [0x00, 0x00, 0x80, 0x3B] and exact[7] == 0x76
    assert fp32[512:516] == [0x00, 0x00, 0x00, 0x3B] and fp32[7] == 0x7E
    # block 1 holds 0.001s: scale 0.001 * fp32(1/448) = 2.2e-6 is under the floor, so the scale is fp32(1e-4)
    # = 2**-14 * 1.6384, log2 -13.29, ceil -13 in both rules: fp32 2**-13 = 0x39000000; a block of zeros too
    assert fp32[516:520] == exact[516:520] == [0x00, 0x00, 0x00, 0x39]
    row[128:256] = 0.0
    assert _record("fp8_ds_mla_fp32log2", row)[516:520] == [0x00, 0x00, 0x00, 0x39]


@pytest.mark.parametrize("fmt", ["fp8_indexer_v32_fp32log2", "fp8_ds_mla_fp32log2", "fp8_indexer_v32_mx_fp32log2"])
def test_random_rows_with_planted_edges_match_the_reference(fmt):
    f = get_format(fmt)
    g = torch.Generator().manual_seed(7)
    x = torch.randn(48, f.dim, generator=g, dtype=torch.float32)
    for r in range(48):  # amax 0..5 ulps above 448 * 2**k for k = -9 .. -20
        k, j = -9 - r % 12, r // 12
        x[r, : f.quant_block] *= 0.01 * 2.0**k
        x[r, 3] = _f32(k + 8, 0x600000 + j)  # 448 * 2**k = 1.75 * 2**(k + 8): mantissa 0x600000
    assert torch.equal(quant.quantize(x, f), R.quantize_ref(x, f))


def test_v4_cutedsl_fp32_division_is_the_exact_rule():
    # vLLM's CuTeDSL compressor (V4 c4a / c128a entries) takes scale = max(absmax / 448, 1e-4) in fp32 and
    # rounds its exponent up by its bits ((bits + 0x7FFFFF) >> 23): exact on the rounded quotient. The
    # quotient never rounds onto a power of two it should pass: 448 * 2**k has mantissa 1.75, so one ulp of
    # amax there is 1 / 1.75 = 0.571 ulps of the quotient (1.14 of the finer ones below 2**k), more than the
    # half ulp rounding can take back. So the exact rule fp8_ds_mla_v4_cutedsl uses is vLLM's. Checked for
    # every positive finite bf16 (the kernel's absmax is a bf16 value) and every fp32 within 3 ulps of
    # 448 * 2**k.
    codes = torch.arange(1, 0x7F80, dtype=torch.int32).to(torch.int16)
    near = [_f32(k + 8, 0x600000 + d) for k in range(-20, 100) for d in range(-3, 4)]
    amax = torch.cat([codes.view(torch.bfloat16).float(), torch.tensor(near, dtype=torch.float32)])
    s = torch.maximum(amax / torch.tensor(448.0), torch.tensor(1e-4, dtype=torch.float32))
    bits = s.view(torch.int32)
    by_bits = ((bits >> 23) & 0xFF) - 127 + ((bits & 0x7FFFFF) != 0).to(torch.int32)
    assert torch.equal(by_bits.long(), R.scale_exponent(amax, 448.0, -13))
    # the same quotient, log2 taken in fp32 instead (the V3.2 indexer's way), does differ just above 448 * 2**k
    fp32_log2 = torch.ceil(torch.log2(s.double()).float()).long()
    assert not torch.equal(fp32_log2, R.scale_exponent(amax, 448.0, -13))
