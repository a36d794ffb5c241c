"""Paged writes: record scatter / gather, slot mappings, the sliding-window ring, compressor-state slots."""

import pytest
import torch

from kvcalc_kernels import compressor as K
from kvcalc_kernels import formats as F
from kvcalc_kernels import paged as P
from kvcalc_kernels import addressing as A
from kvcalc_kernels import quant as Q
from kvcalc_kernels import reference as R
from kernel_inputs import rows

FORMATS = ["fp8_ds_mla_v4", "fp8_ds_mla", "fp8_indexer", "fp4_indexer", "bf16"]


@pytest.mark.parametrize("name", FORMATS)
@pytest.mark.parametrize("block_size,alignment", [(1, 1), (3, 576), (64, 576)])
def test_scatter_and_gather_records(name, block_size, alignment, gen, device):
    f = F.get_format(name, 512)
    n = 4
    rec = torch.randint(0, 256, (n, f.entry_bytes), generator=gen, dtype=torch.int32).to(torch.uint8)
    lay = F.page_layout(f, block_size, alignment)
    num_pages = 2 + n // block_size
    slots = torch.randperm(num_pages * block_size, generator=gen)[:n]
    slots[1] = -1
    cache = torch.full((num_pages, lay.page_bytes), 0x5A, dtype=torch.uint8)
    want = cache.clone()
    R.write_records_ref(rec, want, slots, lay)
    got = P.scatter_records(rec.to(device), name, cache.to(device), slots.to(device), block_size, dim=512).cpu()
    assert torch.equal(got, want)
    back = P.gather_records(got.to(device), name, slots.to(device), block_size, dim=512).cpu()
    assert torch.equal(back, R.read_records_ref(want, slots, lay))
    assert (back[1] == 0).all()


@pytest.mark.parametrize("name", ["fp8_ds_mla_v4", "fp4_indexer"])
def test_fused_write_equals_quantise_then_scatter(name, gen, device):
    f = F.get_format(name)
    x = rows(5, f.dim, gen).to(device)
    bs = 4
    slots = torch.tensor([7, 0, 5, -1, 2], device=device)
    fused = P.allocate_cache(name, 3, bs, alignment=576, device=device)
    Q.quantize(x, name, cache=fused, slot_mapping=slots, block_size=bs)
    two = P.allocate_cache(name, 3, bs, alignment=576, device=device)
    P.scatter_records(Q.quantize(x, name), name, two, slots, bs)
    assert torch.equal(fused.cpu(), two.cpu())


def test_page_sizes_match_vllm_buckets():
    # facts section 5: 1,728 B (c128a main, 2 entries), 8,640 B (indexer, 64 entries), 37,440 B (c4a main)
    assert P.page_bytes("fp8_ds_mla_v4", 2, 576) == 1728
    assert P.page_bytes("fp8_indexer", 64, 576) == 8640
    assert P.page_bytes("fp8_ds_mla_v4", 64, 576) == 37440
    assert P.page_bytes("bf16", 64, 1, dim=512) == 65536


def test_slot_helpers_against_loops(gen):
    table = torch.randperm(10, generator=gen)
    pos = torch.tensor([0, 1, 3, 4, 7, 8, 29, 39])
    got = A.slots_from_block_table(pos, table, 4)
    assert got.tolist() == R.slots_from_block_table_ref(pos.tolist(), table.tolist(), 4)
    # entries completed by positions 3..10 at ratio 4: entry 0 (pos 3) and 1 (pos 7); entry 2 closes at 11
    got = A.compressed_slots(3, 8, 4, table, 2)
    assert got.tolist() == R.slots_from_block_table_ref([0, 1], table.tolist(), 2)
    assert A.compressed_slots(0, 3, 4, table, 2).numel() == 0
    assert A.compressed_slots(0, 300, 128, table, 2).tolist() == R.slots_from_block_table_ref(
        [0, 1], table.tolist(), 2)
    with pytest.raises(ValueError, match="positions"):
        A.slots_from_block_table(torch.tensor([40]), table, 4)


@pytest.mark.parametrize("start,n", [(0, 1), (0, 3), (5, 7), (100, 129), (0, 300), (127, 1)])
def test_ring_slots(start, n, gen):
    pages = torch.tensor([6, 2])
    got = A.ring_slots(start, n, pages, 64)
    assert got.tolist() == R.ring_slots_ref(start, n, pages.tolist(), 64)
    live = got[got >= 0]
    assert live.unique().numel() == live.numel() == min(n, 128)


def test_swa_ring_holds_last_128_tokens_across_chunks(gen, device):
    """V4 SWA: 128-token window in two 64-token pages of fp8_ds_mla_v4; chunks of 129, 7 and 164 tokens."""
    x = rows(300, 512, gen)
    bs = 64
    pages = torch.tensor([3, 1], device=device)
    cache = P.allocate_cache("fp8_ds_mla_v4", 4, bs, alignment=576, device=device)
    start = 0
    for n in (129, 7, 164):
        P.write_swa(x[start : start + n].to(device), "fp8_ds_mla_v4", cache, start, pages, bs)
        start += n
    last = torch.arange(300 - 128, 300)
    slots = pages.cpu().long()[(last % 128) // bs] * bs + last % bs
    got = P.gather_records(cache, "fp8_ds_mla_v4", slots.to(device), bs).cpu()
    assert torch.equal(got, R.quantize_ref(x[last], "fp8_ds_mla_v4"))
    assert (cache.cpu()[[0, 2]] == 0).all()


@pytest.mark.parametrize("head_dim,ratio", [(512, 4), (512, 128), (128, 4)])
def test_save_states_writes_vllm_state_rows(head_dim, ratio, gen, device):
    coff = 2 if ratio == 4 else 1
    T = 7
    kv = torch.randn(T, coff * head_dim, generator=gen).bfloat16()
    score = torch.randn(T, coff * head_dim, generator=gen)
    ape = torch.randn(ratio, coff * head_dim, generator=gen)
    pos = torch.tensor([0, 3, 4, 9, 130, 131, 255])
    bs = 4 if ratio == 4 else 8
    row_bytes = 4 * K.state_row_values(head_dim, ratio)
    assert row_bytes == {(512, 4): 8192, (512, 128): 4096, (128, 4): 2048}[(head_dim, ratio)]
    page = -(-bs * row_bytes // 576) * 576
    cache = torch.full((3, page), 0x11, dtype=torch.uint8)
    slots = torch.tensor([0, 5, -1, 11, 2, 7, 8])
    want = cache.clone()
    R.write_rows_ref(R.save_state_rows_ref(kv, score, ape, pos, ratio), want, slots, bs)
    got = cache.to(device)
    K.save_states(kv.to(device), score.to(device), ape.to(device), pos.to(device), got, slots.to(device), bs, ratio)
    assert torch.equal(got.cpu(), want)


def vllm_slots(n, block_size, num_pages, gen, start=0):
    """Slots as vLLM assigns them: consecutive positions inside a page, pages in shuffled block-table order."""
    table = torch.randperm(num_pages, generator=gen)
    return A.slots_from_block_table(torch.arange(start, start + n), table, block_size)


@pytest.mark.parametrize("n", [1, 7, 129, 300])
@pytest.mark.parametrize("name,block_size,alignment", [("fp8_ds_mla_v4", 64, 576), ("fp8_ds_mla", 16, 1)])
def test_scatter_and_gather_records_at_awkward_sizes(name, block_size, alignment, n, gen, device):
    f = F.get_format(name)
    rec = torch.randint(0, 256, (n, f.entry_bytes), generator=gen, dtype=torch.int32).to(torch.uint8)
    lay = F.page_layout(f, block_size, alignment)
    num_pages = 2 + -(-n // block_size)
    slots = vllm_slots(n, block_size, num_pages, gen, start=3)
    slots[n // 3] = -1
    cache = torch.full((num_pages, lay.page_bytes), 0x5A, dtype=torch.uint8)
    want = cache.clone()
    R.write_records_ref(rec, want, slots, lay)
    got = P.scatter_records(rec.to(device), name, cache.to(device), slots.to(device), block_size).cpu()
    assert torch.equal(got, want)
    back = P.gather_records(got.to(device), name, slots.to(device), block_size).cpu()
    rec[n // 3] = 0
    assert torch.equal(back, rec)


@pytest.mark.parametrize("T", [1, 7, 129, 300])
@pytest.mark.parametrize("head_dim,ratio", [(512, 4), (512, 128)])  # (128, 4): same kernel, narrower rows
def test_save_states_at_awkward_sizes(head_dim, ratio, T, gen, device):
    coff = 2 if ratio == 4 else 1
    W = coff * head_dim
    kv = torch.randn(T, W, generator=gen).bfloat16()
    score = torch.randn(T, W, generator=gen)
    ape = torch.randn(ratio, W, generator=gen)
    pos = torch.arange(T) + 5
    bs = 4 if ratio == 4 else 8
    num_pages = 1 + -(-(T + 5) // bs)
    slots = vllm_slots(T, bs, num_pages, gen, start=5)
    slots[T // 2] = -1
    cache = torch.full((num_pages, bs * 8 * W), 0x11, dtype=torch.uint8)
    want = cache.clone()
    R.write_rows_ref(R.save_state_rows_ref(kv, score, ape, pos, ratio), want, slots, bs)
    got = cache.to(device)
    K.save_states(kv.to(device), score.to(device), ape.to(device), pos.to(device), got, slots.to(device), bs, ratio)
    assert torch.equal(got.cpu(), want)


def test_save_states_reads_strided_kv_and_score(gen, device):
    """kv and score as views of one [T, 2W] projection output (row stride 2W)."""
    T, W, ratio, bs = 9, 256, 4, 4
    kv_score = torch.randn(T, 2 * W, generator=gen).bfloat16()
    kv, score = kv_score.split(W, dim=1)
    ape = torch.randn(ratio, W, generator=gen)
    pos = torch.arange(T)
    slots = torch.arange(T)
    cache = torch.zeros(3, bs * 8 * W, dtype=torch.uint8)
    want = cache.clone()
    R.write_rows_ref(R.save_state_rows_ref(kv, score, ape, pos, ratio), want, slots, bs)
    d = kv_score.to(device)
    got = cache.to(device)
    K.save_states(d[:, :W], d[:, W:], ape.to(device), pos.to(device), got, slots.to(device), bs, ratio)
    assert torch.equal(got.cpu(), want)


def test_writers_address_a_view_of_a_shared_pool(gen, device):
    """An engine carves each layer's pages out of one buffer: pages ``stride`` bytes apart, wider than a page.
    Writing through such a view must land where a private cache of the same pages puts the bytes, touch
    nothing else, and read back the same."""
    fmt, bs = "fp8_ds_mla_v4", 4
    page = 2880  # 4 entries x 584 B = 2,336 B, rounded up to the 576 B alignment: 5 x 576
    stride, offset, nblk = 3 * page + 64, page + 8, 5
    pool = torch.full((offset + (nblk - 1) * stride + page,), 0xA5, dtype=torch.uint8, device=device)
    view = torch.as_strided(pool, (nblk, page), (stride, 1), offset)
    alone = torch.full((nblk, page), 0xA5, dtype=torch.uint8, device=device)
    x = rows(7, 512, gen).to(device)
    slots = torch.tensor([0, 5, 6, 19, 3, 10, 11], device=device)
    Q.quantize(x, fmt, cache=view, slot_mapping=slots, block_size=bs)
    Q.quantize(x, fmt, cache=alone, slot_mapping=slots, block_size=bs)
    assert torch.equal(view, alone)
    # 7 records of 584 B written (the pad scale byte is written as 0), nothing between the pages
    assert int((pool != 0xA5).sum()) == int((alone != 0xA5).sum()) <= 7 * 584
    for b in range(nblk):
        gap = pool[offset + b * stride + page: offset + (b + 1) * stride]
        assert bool((gap == 0xA5).all())
    got = Q.dequantize(view, fmt, slot_mapping=slots, block_size=bs)
    assert torch.equal(got, Q.dequantize(alone, fmt, slot_mapping=slots, block_size=bs))
    # state rows (fp32) through a strided view: page stride and start multiples of 4
    w, ratio = 256, 4
    st_page = bs * 8 * w
    st_pool = torch.zeros(4 + 3 * (st_page + 16) + st_page, dtype=torch.uint8, device=device)
    st_view = torch.as_strided(st_pool, (4, st_page), (st_page + 16, 1), 4)
    kv, score = rows(6, w, gen).to(device), rows(6, w, gen).to(device)
    ape = rows(ratio, w, gen).to(device)
    pos = torch.arange(6, device=device)
    sl = torch.tensor([1, 2, 3, 4, 9, 14], device=device)
    K.save_states(kv, score, ape, pos, st_view, sl, bs, ratio)
    want = R.save_state_rows_ref(kv, score, ape, pos, ratio).view(torch.uint8)
    for i, s in enumerate(sl.tolist()):
        start = 4 + (s // bs) * (st_page + 16) + (s % bs) * 8 * w
        assert torch.equal(st_pool[start:start + 8 * w], want[i])


@pytest.mark.parametrize("fmt, dim, page, data_bytes, scales_at, scale_bytes", [
    # fp8_ds_mla_v4, 64 entries: 64 x 584 = 37,376 B, padded to a multiple of 576 = 37,440 B; entry p keeps
    # its 576 data bytes at p x 576 and its 8 scale bytes (7 ue8m0 + 1 pad) at 64 x 576 + p x 8 = 36,864 + 8p
    ("fp8_ds_mla_v4", 512, 37_440, 576, 36_864, 8),
    # fp8_indexer, 64 entries: data 128 B at p x 128, the fp32 scale at 64 x 128 + 4p = 8,192 + 4p
    ("fp8_indexer", 128, 8_448, 128, 8_192, 4),
])
def test_page_placement_by_hand(fmt, dim, page, data_bytes, scales_at, scale_bytes, gen, device):
    """Offsets written out by hand from vLLM's page descriptions (cache_utils.py "[0, 64*576): token data
    ... [64*576, 64*576 + 64*8): scales"; the indexer: "[0, bs*128): FP8 data, [bs*128, +bs*4): scales"),
    not from the kernels' own page_layout."""
    cache = torch.full((3, page), 0xA5, dtype=torch.uint8, device=device)
    x = rows(1, dim, gen).to(device)
    pos = 5
    Q.quantize(x, fmt, cache=cache, slot_mapping=torch.tensor([64 + pos], device=device), block_size=64)
    rec = R.quantize_ref(x, fmt)[0].to(device)  # canonical record: data part, then scale part
    p1 = cache[1]
    assert torch.equal(p1[pos * data_bytes:(pos + 1) * data_bytes], rec[:data_bytes])
    assert torch.equal(p1[scales_at + pos * scale_bytes:scales_at + (pos + 1) * scale_bytes], rec[data_bytes:])
    untouched = p1.clone()
    untouched[pos * data_bytes:(pos + 1) * data_bytes] = 0xA5
    untouched[scales_at + pos * scale_bytes:scales_at + (pos + 1) * scale_bytes] = 0xA5
    assert bool((untouched == 0xA5).all()) and bool((cache[0] == 0xA5).all()) and bool((cache[2] == 0xA5).all())
