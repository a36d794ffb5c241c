"""DeepSeek V4 compressor: Triton vs the torch references, chunked vs one-shot, state ring contents."""

import pytest
import torch

from kvcalc_kernels import compressor as K
from kvcalc_kernels import formats as F
from kvcalc_kernels import paged as P
from kvcalc_kernels import quant as Q
from kvcalc_kernels import reference as R
from kernel_tolerances import COMPRESS_BF16, COMPRESS_F32, REF_VS_REF

# (head_dim, ratio): c4a main (overlap), c128a main, the indexer's 128-wide c4 compressor
KINDS = [(512, 4), (512, 128), (128, 4)]
ROPE = 64


def make(head_dim, ratio, L, gen, dtype=torch.bfloat16):
    coff = 2 if ratio == 4 else 1
    kv = torch.randn(L, coff * head_dim, generator=gen).to(dtype)
    # scores spread enough that the softmax is far from uniform
    score = (3 * torch.randn(L, coff * head_dim, generator=gen)).to(dtype)
    ape = torch.randn(ratio, coff * head_dim, generator=gen)
    w = torch.rand(head_dim, generator=gen) + 0.5
    cs = torch.randn(L + ratio, ROPE, generator=gen)
    return kv, score, ape, w, cs


def run_chunks(kv, score, ape, head_dim, ratio, chunks, device, **kw):
    st = K.CompressorState.allocate(head_dim, ratio, device=device)
    outs, start = [], 0
    for n in chunks:
        outs.append(K.compress(kv[start : start + n].to(device), score[start : start + n].to(device),
                               ape.to(device), st, **kw).cpu())
        start += n
    return torch.cat(outs), st


@pytest.mark.parametrize("head_dim,ratio", KINDS)
@pytest.mark.parametrize("L", [1, 3, 4, 7, 129, 300])
def test_one_shot_matches_reference(head_dim, ratio, L, gen, device):
    kv, score, ape, w, cs = make(head_dim, ratio, L, gen)
    out, st = run_chunks(kv, score, ape, head_dim, ratio, [L], device, out_dtype=torch.float32)
    ref = R.compress_oneshot_ref(kv, score, ape, ratio, ratio == 4)
    assert out.shape == (L // ratio, head_dim)
    torch.testing.assert_close(out, ref, **COMPRESS_F32)
    assert st.next_pos == L


@pytest.mark.parametrize("head_dim,ratio", KINDS)
@pytest.mark.parametrize("L", [7, 300])
def test_norm_and_rope_match_reference(head_dim, ratio, L, gen, device):
    kv, score, ape, w, cs = make(head_dim, ratio, L, gen)
    ref = R.compress_oneshot_ref(kv, score, ape, ratio, ratio == 4, w, 1e-6, cs, ROPE)
    for dtype, tol in ((torch.float32, COMPRESS_F32), (torch.bfloat16, COMPRESS_BF16)):
        out, _ = run_chunks(kv, score, ape, head_dim, ratio, [L], device, norm_weight=w.to(device), eps=1e-6,
                            cos_sin=cs.to(device), rope_dim=ROPE, out_dtype=dtype)
        assert out.dtype == dtype
        torch.testing.assert_close(out.float(), ref.to(dtype).float(), **tol)


# chunk boundaries inside windows: c4 windows split 1/3, 3/1, 2/2; c128 windows split at 1, 100, 129
SPLITS = {4: [[1, 3, 3, 122, 171], [2, 5, 1, 292], [299, 1], [150, 150]],
          128: [[1, 99, 29, 171], [128, 1, 171], [200, 7, 93]]}


@pytest.mark.parametrize("head_dim,ratio", KINDS)
def test_chunked_equals_one_shot_bit_for_bit(head_dim, ratio, gen, device):
    L = 300
    kv, score, ape, w, cs = make(head_dim, ratio, L, gen)
    kw = dict(norm_weight=w.to(device), cos_sin=cs.to(device), rope_dim=ROPE, out_dtype=torch.float32)
    whole, st_whole = run_chunks(kv, score, ape, head_dim, ratio, [L], device, **kw)
    ring_whole = st_whole.ring().cpu()
    for chunks in SPLITS[ratio]:
        got, st = run_chunks(kv, score, ape, head_dim, ratio, chunks, device, **kw)
        assert torch.equal(got, whole), chunks
        win = st.window
        live = torch.arange(L - win, L) % win
        assert torch.equal(st.ring().cpu()[live], ring_whole[live])


@pytest.mark.parametrize("head_dim,ratio", KINDS)
def test_reference_chunked_equals_reference_one_shot_and_state_matches(head_dim, ratio, gen, device):
    L = 300
    kv, score, ape, w, cs = make(head_dim, ratio, L, gen)
    one = R.compress_oneshot_ref(kv, score, ape, ratio, ratio == 4, w, 1e-6, cs, ROPE)
    chunks = SPLITS[ratio][0]
    ref_state = R.RefCompressorState(head_dim, ratio, ratio == 4)
    st = K.CompressorState.allocate(head_dim, ratio, device=device)
    start, outs = 0, []
    for n in chunks:
        outs.append(R.compress_chunk_ref(kv[start : start + n], score[start : start + n], ape, ref_state,
                                         w, 1e-6, cs, ROPE))
        got = K.compress(kv[start : start + n].to(device), score[start : start + n].to(device), ape.to(device),
                         st, norm_weight=w.to(device), cos_sin=cs.to(device), rope_dim=ROPE,
                         out_dtype=torch.float32).cpu()
        torch.testing.assert_close(got, outs[-1], **COMPRESS_F32)
        start += n
        ring, valid = ref_state.ring()
        assert torch.equal(st.ring().cpu()[valid], ring[valid])  # fp32 state rows, exact
    torch.testing.assert_close(torch.cat(outs), one, **REF_VS_REF)


def test_first_c4_entry_uses_only_its_own_window(gen, device):
    """Window -1 does not exist: entry 0 = softmax over tokens 0..3, second half of each row."""
    hd = 128
    kv, score, ape, _, _ = make(hd, 4, 4, gen, dtype=torch.float32)
    out, _ = run_chunks(kv, score, ape, hd, 4, [4], device, out_dtype=torch.float32)
    s = score[:, hd:] + ape[:, hd:]
    want = (kv[:, hd:] * torch.softmax(s, dim=0)).sum(0)
    torch.testing.assert_close(out[0], want, **COMPRESS_F32)


def test_paged_state_with_vllm_block_sizes_and_alignment(gen, device):
    """State ring in scattered 4-row pages padded to 576 B, as vLLM lays compressor state out."""
    hd, ratio, L = 512, 4, 37
    kv, score, ape, _, _ = make(hd, ratio, L, gen)
    row_bytes = 4 * K.state_row_values(hd, ratio)
    cache = torch.zeros(5, -(-4 * row_bytes // 576) * 576, dtype=torch.uint8, device=device)
    st = K.CompressorState(cache, torch.tensor([4, 1], dtype=torch.int32, device=device), 4, hd, ratio)
    outs = []
    for a, b in ((0, 5), (5, 6), (6, 37)):
        outs.append(K.compress(kv[a:b].to(device), score[a:b].to(device), ape.to(device), st,
                               out_dtype=torch.float32).cpu())
    ref = R.compress_oneshot_ref(kv, score, ape, ratio, True)
    torch.testing.assert_close(torch.cat(outs), ref, **COMPRESS_F32)
    assert (cache.cpu()[[0, 2, 3]] == 0).all()  # only the ring pages were touched


@pytest.mark.parametrize("name,head_dim,ratio", [("fp8_ds_mla_v4", 512, 4), ("fp8_ds_mla_v4", 512, 128),
                                                  ("fp4_indexer", 128, 4), ("fp8_indexer", 128, 4)])
def test_compress_then_store_into_paged_compressed_cache(name, head_dim, ratio, gen, device):
    """Chunked compression + quantised paged writes fill the compressed cache with the same bytes as
    quantising the entries of a one-shot pass (256-token logical blocks: 256 // ratio entries per page)."""
    L = 300
    kv, score, ape, w, cs = make(head_dim, ratio, L, gen)
    bs = 256 // ratio
    table = torch.tensor([2, 0, 1, 3, 4], device=device)
    cache = P.allocate_cache(name, 5, bs, alignment=F.V4_PAGE_ALIGNMENT, device=device)
    st = K.CompressorState.allocate(head_dim, ratio, device=device)
    kw = dict(norm_weight=w.to(device), cos_sin=cs.to(device), rope_dim=ROPE)
    start, all_entries = 0, []
    for n in (129, 7, 164):
        e = K.compress(kv[start : start + n].to(device), score[start : start + n].to(device), ape.to(device), st, **kw)
        slots = P.compressed_slots(start, n, ratio, table, bs)
        assert slots.shape[0] == e.shape[0]
        Q.quantize(e, name, cache=cache, slot_mapping=slots, block_size=bs)
        all_entries.append(e.cpu())
        start += n
    entries = torch.cat(all_entries)
    st2 = K.CompressorState.allocate(head_dim, ratio, device=device)
    assert torch.equal(entries, K.compress(kv.to(device), score.to(device), ape.to(device), st2, **kw).cpu())
    n_entries = L // ratio
    slots = P.compressed_slots(0, L, ratio, table, bs)
    got = P.gather_records(cache, name, slots, bs).cpu()
    assert torch.equal(got, R.quantize_ref(entries, name))
    assert got.shape[0] == n_entries
