"""Quantisers / dequantisers: Triton records byte-identical to the torch reference, round trips within the
format's error bound, fused paged writes identical to reference placement."""

import dataclasses
import os

import pytest
import torch

from kvcalc_kernels import formats as F
from kvcalc_kernels import paged as P
from kvcalc_kernels import addressing as A
from kvcalc_kernels import quant as Q
from kvcalc_kernels import reference as R
from kernel_inputs import rows

FORMATS = ["fp8_ds_mla_v4", "fp8_ds_mla", "fp8_indexer", "fp4_indexer", "bf16"]
DIMS = {"bf16": 512}
ON_GPU = os.environ.get("KVCALC_KERNEL_TEST_DEVICE", "cpu") == "cuda"  # as conftest.py picks the device
# The rows are independent programs (grid (n,)): 129 already spans every special row and ~4,000 random scale
# blocks. The 300-row case (bytes only) runs on a GPU; under the interpreter (~13 ms per row) it cost 19 s of
# the CPU suite for more of the same random rows.
SIZES = [1, 3, 4, 7, 129] + ([300] if ON_GPU else [])
ROUND_TRIP_MAX = 129  # the interpreter runs ~10 ms per row: a 300-row case checks quantize's bytes only


def fmt_of(name):
    return F.get_format(name, DIMS.get(name))


@pytest.mark.parametrize("name", FORMATS)
@pytest.mark.parametrize("n", SIZES)
def test_records_byte_exact_and_round_trip(name, n, gen, device, request):
    if n > 7:
        request.getfixturevalue("no_overflow_checks")  # sizes 1..7 keep them (see conftest.py)
    f = fmt_of(name)
    x = rows(n, f.dim, gen)
    rec = Q.quantize(x.to(device), name).cpu()
    ref = R.quantize_ref(x, name)
    assert rec.shape == (n, f.entry_bytes)
    assert torch.equal(rec, ref)
    if n > ROUND_TRIP_MAX:
        return
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
    cache = torch.zeros(2, lay.page_bytes, dtype=torch.uint8, device=device)
    Q.quantize(x.to(device), "fp8_ds_mla_v4", cache=cache, slot_mapping=torch.tensor([bs + 5], device=device),
               block_size=bs)
    cache = cache.cpu()  # the cache the kernel wrote, brought back from the device
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


def _edge_rows(f, n, gen):
    """fp32 rows that bf16 rounding changes; row 0, block 0 has an fp32 amax just above a scale edge
    (448 * 2**-3 = 56 for fp8, 6 * 2**2 = 24 for fp4) that rounds onto the edge in bf16."""
    x = rows(n, f.dim, gen, dtype=torch.float32) * (1 + 1e-3 * torch.rand(n, f.dim, generator=gen))
    if f.quant_dim:
        edge = 56.0 if f.elem == "fp8" else 24.0
        x[0, : f.quant_block] = 1.0
        x[0, 0] = edge * (1 + 2.0**-12)  # bf16 keeps 8 significant bits: rounds to edge exactly
    return x


@pytest.mark.parametrize("name", FORMATS)
def test_fp32_input_gives_the_bytes_of_its_bf16_rounding(name, gen, device):
    """vLLM rounds V4 / indexer entries to bf16 before quantising, so fp32 input must give the bytes of its
    bf16 rounding.  V3.2 fp8_ds_mla is the documented exception (its fused writer quantises the fp32
    RMSNorm output; formats.FP8_DS_MLA_V32): fp32 input is quantised as is."""
    f = fmt_of(name)
    x32 = _edge_rows(f, 4, gen)
    x16 = x32.to(torch.bfloat16)
    assert not torch.equal(x16.float(), x32)  # the rounding changes values
    rec32 = Q.quantize(x32.to(device), name).cpu()
    rec16 = Q.quantize(x16.to(device), name).cpu()
    assert torch.equal(rec16, R.quantize_ref(x16, name))
    assert torch.equal(rec32, R.quantize_ref(x32, name))
    # what a quantiser that skipped the rounding would write (pure torch, no rounding)
    direct = R.quantize_ref(x32, dataclasses.replace(f, rounds_to_bf16=False))
    if f.rounds_to_bf16:
        assert torch.equal(rec32, rec16)
        if f.quant_dim:
            assert not torch.equal(direct, rec16)  # so the assertion above has teeth
            # the edge block: amax 56 (fp4: 24) after rounding -> scale 2**-3 (fp4: 2**2), not the next one
            want = 127 - 3 if f.elem == "fp8" else 127 + 2
            got = rec32[0, f.scale_offset : f.scale_offset + f.scale_item_bytes]
            if f.scale_kind == "ue8m0":
                assert got.tolist() == [want]
            else:
                assert got.view(torch.float32).item() == 2.0 ** (want - 127)
    else:
        assert f.name == "fp8_ds_mla"
        assert torch.equal(rec32, direct) and not torch.equal(rec32, rec16)
        assert rec32[0, 512:516].view(torch.float32).item() == 2.0**-2  # fp32 amax 56.01 > 56
        # the same bf16 values given as fp32 still give the same bytes
        assert torch.equal(Q.quantize(x16.float().to(device), name).cpu(), rec16)


# (format, a tiny entry's values, the scale bytes of an all-zero and of that tiny entry), derived by hand
# from vLLM 0.33 (see test_scale_floors_are_vllms)
FLOORS = [
    ("fp8_ds_mla_v4", 3e-5, [105] * 7 + [0]),  # ue8m0 byte 127 + (-22), then the pad byte
    ("fp8_ds_mla", 0.01, [0x00, 0x00, 0x00, 0x39] * 4),  # fp32 2**-13 = 0x39000000, little-endian
    ("fp8_indexer", 3e-5, [0x00, 0x00, 0x80, 0x34]),  # fp32 2**-22 = 0x34800000, little-endian
]


@pytest.mark.parametrize("name,tiny,scale_bytes", FLOORS)
def test_scale_floors_are_vllms(name, tiny, scale_bytes, device):
    """All-zero and tiny-amax entries get the floor scale.  Constants derived by hand from vLLM 0.33:

    * V4 fp8_ds_mla (ops/cache_utils.py quantize_and_insert_k_kernel; ops/fused_compress_quant_cache.py):
      ``block_max = max(amax, 1e-4)``, exponent ``ceil(log2(block_max / 448))`` = ceil(log2(2.23e-7)) =
      ceil(-22.095) = -22, stored as the ue8m0 byte 127 + (-22) = 105.
    * V3.2 fp8_ds_mla (deepseek_v32/common/kernels.py, MLA_CACHE_DS_MLA): ``scale = max(amax / 448,
      1e-4)``, then ``exp2(ceil(log2(scale)))`` = 2**ceil(-13.29) = 2**-13, stored as fp32: bits
      (127 - 13) << 23 = 0x39000000, little-endian bytes 00 00 00 39.  Any amax below 448 * 2**-13
      (0.0547) gets it, e.g. 0.01 (a 1e-4 amax floor would give 2**-15).
    * fp8 indexer (fused_compress_quant_cache.py indexer kernel): ``absmax = max(absmax, 1e-4)``, then
      ``exp2(ceil(log2(absmax / 448)))`` = 2**-22, fp32 bits (127 - 22) << 23 = 0x34800000, bytes 00 00 80 34.
    * fp4 indexer: pinned by test_fp4_nibble_order_and_scales (byte 1 = 2**-126).
    """
    f = F.get_format(name)
    x = torch.zeros(2, f.dim)
    x[1, : f.quant_dim] = tiny * torch.linspace(-1, 1, f.quant_dim)  # every block's amax <= tiny
    rec = Q.quantize(x.to(device), name).cpu()
    assert rec[:, f.scale_offset : f.scale_offset + f.scale_part_bytes].tolist() == [scale_bytes] * 2
    assert (rec[0, : f.scale_offset] == 0).all() and (rec[0, f.scale_offset + f.scale_part_bytes :] == 0).all()
    assert torch.equal(rec, R.quantize_ref(x, name))


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")  # the interpreter's numpy: x * inf
@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")  # 0 * inf
@pytest.mark.parametrize("name", ["fp8_ds_mla_v4", "fp4_indexer"])
def test_ue8m0_scale_bytes_decode_over_the_whole_byte_range(name, gen, device):
    """Byte b means 2**(b - 127) for every b, in the kernel and the reference alike: byte 0 is 2**-127 (an
    fp32 subnormal, not clamped to 2**-126) and byte 255 is inf (vLLM's exp2(128.0)); 0 * inf is NaN."""
    f = F.get_format(name)
    rec = R.quantize_ref(rows(2, f.dim, gen), name)
    bytes_ = [0, 255, 1, 254, 127, 126, 128][: f.num_scales]
    rec[:, f.scale_offset : f.scale_offset + len(bytes_)] = torch.tensor(bytes_, dtype=torch.uint8)
    one = 0x38 if f.elem == "fp8" else 0x22  # e4m3 1.0; e2m1 pair (1.0 low, 1.0 high)
    rec[:, 0] = one
    got = Q.dequantize(rec.to(device), name).cpu()
    torch.testing.assert_close(got, R.dequantize_ref(rec, name), rtol=0, atol=0, equal_nan=True)
    assert got[0, 0].item() == 2.0**-127 and got[0, 0].item() != 2.0**-126
    blk1 = got[0, f.quant_block : 2 * f.quant_block]
    assert torch.isinf(blk1).any() or torch.isnan(blk1).all()


@pytest.mark.parametrize("name,n,block_size,alignment", [
    *[(nm, 1, 64, 576) for nm in FORMATS],  # n = 7: test_fused_paged_write_matches_reference_placement
    ("fp8_ds_mla_v4", 129, 64, 576),  # split pages
    ("bf16", 300, 16, 1),  # whole records; the cheapest format for the interpreter at this size
])
def test_fused_paged_write_at_awkward_sizes(name, n, block_size, alignment, gen, device, request):
    """Fused quantise-and-insert over several pages, vLLM-like slots: pages in shuffled block-table order,
    consecutive slots inside a page, one padded (-1) token."""
    if n > 7:
        request.getfixturevalue("no_overflow_checks")
    f = fmt_of(name)
    x = rows(n, f.dim, gen)
    lay = F.page_layout(f, block_size, alignment)
    num_pages = 2 + -(-n // block_size)
    table = torch.randperm(num_pages, generator=gen)
    slots = A.slots_from_block_table(torch.arange(n) + 1, table, block_size)  # start mid-page
    slots[n // 2] = -1
    cache = torch.full((num_pages, lay.page_bytes), 0xAB, dtype=torch.uint8)
    want = cache.clone()
    recs = R.quantize_ref(x, name)
    R.write_records_ref(recs, want, slots, lay)
    got = Q.quantize(x.to(device), name, cache=cache.to(device), slot_mapping=slots.to(device),
                     block_size=block_size).cpu()
    assert torch.equal(got, want)
    back = P.gather_records(got.to(device), name, slots.to(device), block_size, dim=f.dim).cpu()
    recs[n // 2] = 0
    assert torch.equal(back, recs)


def test_error_bound_covers_bf16_rounding_just_above_a_power_of_two():
    """V3.2 fp8_ds_mla keeps fp32 input and stores the RoPE part in bf16. 8.53 lies between the bf16 values
    8.5 and 8.5625 (ulp 2**-4 in [8, 16)) and rounds to 8.5: an error of 0.03, more than 2**-9 of the value
    (0.0167) but within half an ulp, 2**-8 of it (0.0333)."""
    x = torch.zeros(1, 576)
    x[0, 575] = 8.53
    got = R.dequantize_ref(R.quantize_ref(x, "fp8_ds_mla"), "fp8_ds_mla")[0, 575].item()
    assert got == 8.5
    bound = R.error_bound(x, "fp8_ds_mla")[0, 575].item()
    assert abs(8.53 - got) <= bound and bound == pytest.approx(8.53 * 2.0**-8, rel=1e-6)


@pytest.mark.parametrize("fmt, scale_byte, value_byte", [
    # Triton writers (window, indexer): amax floored at 1e-4 -> e = ceil(log2(0.01 / 448)) =
    # ceil(-15.45) = -15, scale byte 127 - 15 = 112; 0.01 * 2**15 = 327.68 -> e4m3 320 (1.25 * 2**8):
    # sign 0, exponent 8 + 7 = 15 (1111), mantissa 010 -> 0x7A
    ("fp8_ds_mla_v4", 112, 0x7A),
    # CuTeDSL compressor (512-wide V4 compressed entries on NVIDIA): scale = max(1e-4, 0.01 / 448) = 1e-4
    # -> e = ceil(log2(1e-4)) = -13, scale byte 114; 0.01 * 2**13 = 81.92 -> e4m3 80 (1.25 * 2**6):
    # exponent 6 + 7 = 13 (1101), mantissa 010 -> 0x6A
    ("fp8_ds_mla_v4_cutedsl", 114, 0x6A),
])
def test_v4_scale_rule_per_writer_path_by_hand(fmt, scale_byte, value_byte, device):
    x = torch.zeros(1, 512)
    x[0, :448] = 0.01  # every NoPE block has amax 0.01 (0.01 rounds to bf16 0.010009765625 first)
    # bf16(0.01) = 0.010009765625: x 2**15 = 328.0 -> 320 (0x7A); x 2**13 = 82.0 -> 80 (0x6A): the same bytes
    rec_ref = R.quantize_ref(x, fmt)
    rec = Q.quantize(x.to(device), fmt).cpu()
    assert torch.equal(rec, rec_ref)
    assert rec[0, 576:583].tolist() == [scale_byte] * 7 and rec[0, 583] == 0
    assert rec[0, :448].unique().tolist() == [value_byte]
    # the smallest scale byte each path can write: a block of zeros
    z = Q.quantize(torch.zeros(1, 512, device=device), fmt).cpu()
    assert z[0, 576] == (105 if fmt == "fp8_ds_mla_v4" else 114)


@pytest.mark.parametrize("fmt, scale_bytes, value_byte", [
    # V4 / default indexer path: fp32 input rounded to bf16 first: 1.75 x (1 + 2**-20) -> 1.75 = 448 x 2**-8:
    # e = -8, fp32 scale 2**-8 = 0x3B800000 (little-endian 00 00 80 3B); 1.75 x 2**8 = 448 -> e4m3 0x7E
    ("fp8_indexer", [0x00, 0x00, 0x80, 0x3B], 0x7E),
    # V3.2 path: the fp32 key as is: amax just above 448 x 2**-8 -> e = -7, scale 2**-7 = 0x3C000000;
    # 1.75 x (1 + 2**-20) x 2**7 = 224.0002 -> e4m3 224 (1.75 x 2**7: exponent 14 = 1110, mantissa 110) = 0x76
    ("fp8_indexer_v32", [0x00, 0x00, 0x00, 0x3C], 0x76),
    # V3.2 on SM100: the same scale as four equal UE8M0 bytes, 127 - 7 = 120
    ("fp8_indexer_v32_mx", [120, 120, 120, 120], 0x76),
])
def test_v32_indexer_variants_by_hand(fmt, scale_bytes, value_byte, device):
    x = torch.zeros(1, 128, dtype=torch.float32)
    x[0, 0] = 1.75 * (1 + 2.0 ** -20)
    rec = Q.quantize(x.to(device), fmt).cpu()
    assert torch.equal(rec, R.quantize_ref(x, fmt))
    assert rec[0, 128:132].tolist() == scale_bytes and rec[0, 0] == value_byte
    back = Q.dequantize(rec.to(device), fmt).cpu()
    assert torch.equal(back, R.dequantize_ref(rec, fmt))
    assert back[0, 0].item() == (448 * 2.0 ** -8 if fmt == "fp8_indexer" else 224 * 2.0 ** -7)
