"""Quantisers / dequantisers: Triton records byte-identical to the torch reference, round trips within the
format's error bound, fused paged writes identical to reference placement."""

import pytest
import torch

from kvcalc_kernels import formats as F
from kvcalc_kernels import quant as Q
from kvcalc_kernels import reference as R
from kernel_inputs import rows

FORMATS = ["fp8_ds_mla_v4", "fp8_ds_mla", "fp8_indexer", "fp4_indexer", "bf16"]
DIMS = {"bf16": 512}
SIZES = [1, 3, 4, 7, 129]


def fmt_of(name):
    return F.get_format(name, DIMS.get(name))


@pytest.mark.parametrize("name", FORMATS)
@pytest.mark.parametrize("n", SIZES)
def test_records_byte_exact_and_round_trip(name, n, gen, device):
    f = fmt_of(name)
    x = rows(n, f.dim, gen)
    rec = Q.quantize(x.to(device), name).cpu()
    ref = R.quantize_ref(x, name)
    assert rec.shape == (n, f.entry_bytes)
    assert torch.equal(rec, ref)
    back = Q.dequantize(rec.to(device), name, dim=f.dim).cpu()
    assert torch.equal(back, R.dequantize_ref(ref, name, f.dim))
    err = (back.double() - x.double()).abs()
    bound = R.error_bound(x, name)
    assert (err <= bound).all()
    if n >= 7 and f.quant_dim:  # the bound is not vacuous: some values come close to it
        assert (err / bound.clamp(min=1e-300)).max() > 0.25


@pytest.mark.parametrize("name", FORMATS)
def test_fp32_input_rounds_like_torch(name, gen, device):
    f = fmt_of(name)
    x = rows(7, f.dim, gen, dtype=torch.float32) * (1 + 1e-3 * torch.rand(7, f.dim, generator=gen))
    rec = Q.quantize(x.to(device), name).cpu()
    assert torch.equal(rec, R.quantize_ref(x, name))


def test_v4_record_byte_positions(device):
    """448 fp8, then 64 bf16 RoPE values (128 B), then 7 ue8m0 scales and one zero pad byte."""
    x = torch.zeros(1, 512)
    x[0, :448] = torch.arange(448) % 64 + 1.0  # block amax 64 -> scale 2**-2 (64 <= 448 * 2**-2 = 112)
    x[0, 64:128] *= 4.0  # block 1: amax 256 -> 2**0
    x[0, 448:] = torch.arange(64) - 31.5
    rec = Q.quantize(x.to(device), "fp8_ds_mla_v4").cpu()[0]
    assert rec[576:584].tolist() == [125, 127, 125, 125, 125, 125, 125, 0]
    assert torch.equal(rec[:448], R.fp8_e4m3_bytes(x[0, :448] * torch.tensor([4.0, 1, 4, 4, 4, 4, 4]).repeat_interleave(64)))
    assert torch.equal(rec[448:576].view(torch.bfloat16).float(), x[0, 448:])


def test_v32_record_byte_positions(device):
    """512 fp8, then 4 fp32 scales (power of two), then 64 bf16 RoPE values."""
    x = torch.zeros(1, 576)
    x[0, :512] = 1.0
    x[0, 128:256] = 448.0
    x[0, 512:] = 2.5
    rec = Q.quantize(x.to(device), "fp8_ds_mla").cpu()[0]
    scales = rec[512:528].view(torch.float32).tolist()
    assert scales == [2.0**-8, 1.0, 2.0**-8, 2.0**-8]
    assert (rec[528:656].view(torch.bfloat16).float() == 2.5).all()
    assert (rec[128:256] == 0x7E).all()  # 448 / 1.0 is the largest e4m3 value


def test_fp4_nibble_order_and_scales(device):
    """Element 2k in the low nibble, 2k+1 in the high nibble; one ue8m0 byte per 32 values after 64 B."""
    x = torch.zeros(1, 128)
    x[0, 0], x[0, 1] = 1.0, -6.0  # block 0 amax 6 -> scale 2**0
    x[0, 32:64] = 0.5  # block 1 amax 0.5 -> scale 2**-3 (0.5 <= 6/8), 0.5 * 8 = 4 -> code 6
    rec = Q.quantize(x.to(device), "fp4_indexer").cpu()[0]
    assert rec[0].item() == 0x2 | (0xF << 4)  # low: +1.0 (code 2); high: -6 (sign 8 | code 7)
    assert rec[16].item() == 0x66
    assert rec[64:68].tolist() == [127, 124, 1, 1]  # blocks 2, 3 are zero -> floor 2**-126


def test_indexer_fp8_scale_is_fp32_power_of_two(device):
    x = torch.full((1, 128), 3.0)
    rec = Q.quantize(x.to(device), "fp8_indexer").cpu()[0]
    assert rec[128:132].view(torch.float32).item() == 2.0**-7  # 3 <= 448 * 2**-7 = 3.5


@pytest.mark.parametrize("name", FORMATS)
@pytest.mark.parametrize("block_size,alignment", [(1, 1), (3, 1), (4, 576), (64, 576)])
def test_fused_paged_write_matches_reference_placement(name, block_size, alignment, gen, device):
    f = fmt_of(name)
    n = 7
    x = rows(n, f.dim, gen)
    lay = F.page_layout(f, block_size, alignment)
    num_pages = 3 + n // block_size
    slots = torch.randperm(num_pages * block_size, generator=gen)[:n]
    slots[2] = -1  # padded token: skipped
    cache = torch.full((num_pages, lay.page_bytes), 0xAB, dtype=torch.uint8)
    want = cache.clone()
    R.write_records_ref(R.quantize_ref(x, name), want, slots, lay)
    got = Q.quantize(x.to(device), name, cache=cache.to(device), slot_mapping=slots.to(device),
                     block_size=block_size).cpu()
    assert torch.equal(got, want)  # also: bytes outside the written spans untouched
    back = Q.dequantize(got.to(device), name, slot_mapping=slots.to(device), block_size=block_size,
                        dim=f.dim).cpu()
    ref_back = R.dequantize_ref(R.quantize_ref(x, name), name, f.dim)
    ref_back[2] = 0.0
    assert torch.equal(back, ref_back)


def test_v4_page_puts_scales_after_all_token_data(device):
    """vLLM cache_utils.py: [0, bs*576) token data, [bs*576, +bs*8) scales, page padded to 576."""
    bs = 64
    lay = F.page_layout("fp8_ds_mla_v4", bs, F.V4_PAGE_ALIGNMENT)
    assert lay.page_bytes == 37440 and lay.scale_base == 64 * 576
    x = torch.ones(1, 512) * 3.0
    cache = torch.zeros(2, lay.page_bytes, dtype=torch.uint8)
    Q.quantize(x.to(device), "fp8_ds_mla_v4", cache=cache.to(device) if device.type != "cpu" else cache,
               slot_mapping=torch.tensor([bs + 5], device=device), block_size=bs)
    cache = cache.cpu()
    page = cache[1]
    assert (cache[0] == 0).all()
    assert (page[5 * 576 : 5 * 576 + 448] != 0).all()
    assert page[64 * 576 + 5 * 8 : 64 * 576 + 6 * 8].tolist() == [120] * 7 + [0]  # 3 <= 448 * 2**-7
    written = torch.zeros(lay.page_bytes, dtype=torch.bool)
    written[5 * 576 : 6 * 576] = True
    written[64 * 576 + 40 : 64 * 576 + 48] = True
    assert (page[~written] == 0).all()


def test_empty_input(device):
    x = torch.zeros(0, 512, device=device)
    assert Q.quantize(x, "fp8_ds_mla_v4").shape == (0, 584)


def test_dequantize_reads_arbitrary_fp32_scales(gen, device):
    """Older writers (vLLM's CUDA concat_and_cache_ds_mla_kernel, FlashMLA's quant.py) store the raw
    amax / 448 as the fp32 scale, not a power of two; the dequantiser must read any fp32 scale."""
    x = rows(3, 576, gen)
    rec = R.quantize_ref(x, "fp8_ds_mla")
    rec[:, 512:528] = torch.tensor([[0.37, 1.5e-3, 7.0, 1e-6]] * 3).view(torch.uint8)
    got = Q.dequantize(rec.to(device), "fp8_ds_mla").cpu()
    assert torch.equal(got, R.dequantize_ref(rec, "fp8_ds_mla"))
    assert torch.equal(got[:, :128], R.fp8_e4m3_values(rec[:, :128].contiguous()) * 0.37)


def test_fp4_indexer_in_fp8_sized_pages(gen, device):
    """vLLM 0.33 allocates the fp4 indexer cache with fp8-sized (132 B / entry) pages and uses the front:
    packed values at pos * 64, scales at block_size * 64 + pos * 4."""
    bs = 64
    pb = F.page_layout("fp8_indexer", bs, 576).page_bytes
    x = rows(3, 128, gen)
    cache = torch.zeros(2, pb, dtype=torch.uint8, device=device)
    slots = torch.tensor([1, 64, 127], device=device)
    Q.quantize(x.to(device), "fp4_indexer", cache=cache, slot_mapping=slots, block_size=bs)
    rec = R.quantize_ref(x, "fp4_indexer")
    c = cache.cpu()
    assert torch.equal(c[0, 64:128], rec[0, :64]) and torch.equal(c[0, bs * 64 + 4 : bs * 64 + 8], rec[0, 64:])
    assert torch.equal(c[1, 63 * 64 : 64 * 64], rec[2, :64])
    assert (c[:, bs * 68 :] == 0).all()  # the back part of each fp8-sized page stays unused
