"""The bit-level encoders in kvcalc_kernels._bits, run as Triton kernels, against torch's own casts."""

import os

import torch
import triton
import triton.language as tl

from kvcalc_kernels import _bits as B
from kvcalc_kernels import reference as R


@triton.jit
def _apply(x_ptr, o_ptr, n, OP: tl.constexpr, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < n
    if OP == 0:
        x = tl.load(x_ptr + i, mask=m, other=0.0)
        tl.store(o_ptr + i, B.f32_to_e4m3(x), mask=m)
    elif OP == 1:
        c = tl.load(x_ptr + i, mask=m, other=0)
        tl.store(o_ptr + i, B.e4m3_to_f32(c), mask=m)
    elif OP == 2:
        x = tl.load(x_ptr + i, mask=m, other=0.0)
        tl.store(o_ptr + i, B.f32_to_e2m1(x), mask=m)
    elif OP == 3:
        c = tl.load(x_ptr + i, mask=m, other=0)
        tl.store(o_ptr + i, B.e2m1_to_f32(c), mask=m)
    elif OP == 4:
        x = tl.load(x_ptr + i, mask=m, other=0.0)
        tl.store(o_ptr + i, B.f32_to_bf16_bits(x), mask=m)
    elif OP == 5:
        a = tl.load(x_ptr + i, mask=m, other=0.0)
        tl.store(o_ptr + i, B.ceil_log2_ratio(a, 0x600000, 8, -126), mask=m)
    elif OP == 6:
        a = tl.load(x_ptr + i, mask=m, other=0.0)
        tl.store(o_ptr + i, B.ceil_log2_ratio(a, 0x400000, 2, -126), mask=m)


DEV = torch.device(os.environ.get("KVCALC_KERNEL_TEST_DEVICE", "cpu"))  # see conftest.py


def run(op, x, out_dtype):
    x = x.contiguous().to(DEV)
    out = torch.empty(x.shape, dtype=out_dtype, device=DEV)
    block = 4096
    _apply[(triton.cdiv(x.numel(), block),)](x, out, x.numel(), OP=op, BLOCK=block)
    return out.cpu()


def all_bf16_values_within(limit):
    v = torch.arange(0, 1 << 16, dtype=torch.int32).to(torch.int16).view(torch.bfloat16).float()
    return v[torch.isfinite(v) & (v.abs() <= limit)]


def test_e4m3_encoder_matches_torch_on_every_bf16_value_and_random_fp32(gen):
    xs = [all_bf16_values_within(448.0)]
    # fp32 values with full mantissas, spread over the normal and subnormal e4m3 ranges, plus exact ties
    xs.append(torch.ldexp(torch.rand(20000, generator=gen) + 1.0, torch.randint(-14, 9, (20000,), generator=gen))
              * torch.where(torch.rand(20000, generator=gen) < 0.5, -1.0, 1.0))
    grid = R.fp8_e4m3_values(torch.arange(256, dtype=torch.uint8))
    grid = grid[torch.isfinite(grid)].sort().values
    xs.append((grid[1:] + grid[:-1]) / 2)  # midpoints: round half to even
    xs.append(torch.tensor([0.0, -0.0, 448.0, -448.0, 2.0**-6, 2.0**-9, 2.0**-10, 2.0**-10 * 3, 1e-30]))
    x = torch.cat(xs).float()
    got = run(0, x, torch.int32)
    want = R.fp8_e4m3_bytes(x).to(torch.int32)
    assert torch.equal(got, want)


def test_e4m3_decoder_exact_on_all_codes():
    c = torch.arange(256, dtype=torch.int32)
    got = run(1, c, torch.float32)
    want = R.fp8_e4m3_values(c.to(torch.uint8))
    fin = torch.isfinite(want)
    assert torch.equal(got[fin], want[fin])
    assert torch.isnan(got[~fin]).all() and (~fin).sum() == 2  # 0x7F and 0xFF


def test_e2m1_encoder_rounds_half_to_even_and_saturates(gen):
    grid = R.E2M1_GRID.float()
    mids = (grid[1:] + grid[:-1]) / 2
    x = torch.cat([grid, mids, mids + 1e-6, mids - 1e-6, torch.tensor([6.5, 100.0, 1e-9]),
                   torch.rand(5000, generator=gen) * 8 - 4])
    x = torch.cat([x, -x])
    got = run(2, x, torch.int32)
    want = R.e2m1_codes(x).to(torch.int32)
    assert torch.equal(got, want)
    # the ties themselves: 0.25->0, 0.75->1.0, 1.25->1.0, 1.75->2, 2.5->2, 3.5->4, 5->4
    ties = run(2, torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0]), torch.int32)
    assert ties.tolist() == [0, 2, 2, 4, 4, 6, 6]


def test_e2m1_decoder_exact_on_all_codes():
    c = torch.arange(16, dtype=torch.int32)
    got = run(3, c, torch.float32)
    assert got.tolist() == [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]


def test_bf16_rounding_matches_torch(gen):
    bits = torch.randint(-(2**31), 2**31 - 1, (50000,), generator=gen, dtype=torch.int64).to(torch.int32)
    x = bits.view(torch.float32)
    x = x[torch.isfinite(x) & (x.abs() < 3e38)]
    ties = torch.tensor([1.0 + 2.0**-8, 1.0 + 3 * 2.0**-8, -(1.0 + 2.0**-8)])  # exact half-ulp cases
    x = torch.cat([x, ties, torch.randn(1000, generator=gen)])
    got = run(4, x, torch.int32)
    want = x.to(torch.bfloat16).view(torch.int16).to(torch.int32) & 0xFFFF
    assert torch.equal(got, want)


def test_scale_exponent_is_exact_at_power_of_two_boundaries(gen):
    ks = torch.arange(-30, 30)
    for qmax, op in ((448.0, 5), (6.0, 6)):
        edge = qmax * torch.ldexp(torch.ones(ks.shape, dtype=torch.float64), ks)
        a = torch.cat([edge.float(), torch.nextafter(edge.float(), torch.tensor(float("inf"))),
                       torch.nextafter(edge.float(), torch.tensor(0.0)),
                       torch.rand(5000, generator=gen) * 1000, torch.tensor([0.0, 1e-4, 1e-38])])
        got = run(op, a, torch.int32)
        want = R.scale_exponent(a, qmax, -126)
        assert torch.equal(got.long(), want)
