"""DeepSeek V4 compressor: Triton vs the torch references, chunked vs one-shot, state ring contents."""

import pytest
import torch

from kvcalc_kernels import compressor as K
from kvcalc_kernels import formats as F
from kvcalc_kernels import paged as P
from kvcalc_kernels import addressing as A
from kvcalc_kernels import quant as Q
from kvcalc_kernels import reference as R
from kernel_tolerances import COMPRESS_BF16, COMPRESS_F32, REF_VS_REF

# (head_dim, ratio): c4a main (overlap), c128a main, the indexer's 128-wide c4 compressor
KINDS = [(512, 4), (512, 128), (128, 4)]
ROPE = 64

# Entries a sequence of L tokens from position 0 completes (entry i closes at (i + 1) * ratio - 1), written
# out so that a test of L < ratio visibly compares empty outputs on purpose.
ENTRIES = {(4, 1): 0, (4, 3): 0, (4, 4): 1, (4, 7): 1, (4, 129): 32, (4, 300): 75,
           (128, 1): 0, (128, 3): 0, (128, 4): 0, (128, 7): 0, (128, 129): 1, (128, 300): 2}


def make(head_dim, ratio, L, gen, dtype=torch.bfloat16):
    coff = 2 if ratio == 4 else 1
    kv = torch.randn(L, coff * head_dim, generator=gen).to(dtype)
    # scores spread enough that the softmax is far from uniform
    score = (3 * torch.randn(L, coff * head_dim, generator=gen)).to(dtype)
    ape = torch.randn(ratio, coff * head_dim, generator=gen)
    w = torch.rand(head_dim, generator=gen) + 0.5
    cs = torch.randn(L + ratio, ROPE, generator=gen)
    return kv, score, ape, w, cs


def _chunk_outputs(kv, score, ape, head_dim, ratio, chunks, device, **kw):
    """Compress the inputs chunk by chunk through one fresh state: the per-chunk outputs and the state."""
    st = K.CompressorState.allocate(head_dim, ratio, device=device)
    outs, start = [], 0
    for n in chunks:
        outs.append(K.compress(kv[start : start + n].to(device), score[start : start + n].to(device),
                               ape.to(device), st, **kw).cpu())
        start += n
    return outs, st


def run_chunks(kv, score, ape, head_dim, ratio, chunks, device, **kw):
    outs, st = _chunk_outputs(kv, score, ape, head_dim, ratio, chunks, device, **kw)
    return torch.cat(outs), st


@pytest.fixture(scope="module")
def shared_runs():
    """run_chunks, remembered for the module: several tests compress the very same 300-token inputs (make() from
    the same seed) with the same arguments, and under the interpreter each run costs seconds. A run is reused
    only when its inputs are equal (torch.equal) and its arguments the same; returns the per-chunk outputs
    and the state ring after the last chunk."""
    memo = []

    def run(kv, score, ape, head_dim, ratio, chunks, device, **kw):
        tensors = {"kv": kv, "score": score, "ape": ape}
        tensors.update({k: v.cpu() for k, v in kw.items() if isinstance(v, torch.Tensor)})
        plain = {k: v for k, v in kw.items() if not isinstance(v, torch.Tensor)}
        key = (head_dim, ratio, tuple(chunks), str(device), sorted(plain.items(), key=str))
        for k, t, result in memo:
            if k == key and t.keys() == tensors.keys() and all(torch.equal(t[n], tensors[n]) for n in t):
                return result
        outs, st = _chunk_outputs(kv, score, ape, head_dim, ratio, chunks, device, **kw)
        result = (outs, st.ring().cpu())
        memo.append((key, tensors, result))
        return result

    return run


@pytest.mark.parametrize("head_dim,ratio", KINDS)
@pytest.mark.parametrize("L", [1, 3, 4, 7, 129, 300])
def test_one_shot_matches_reference(head_dim, ratio, L, gen, device):
    kv, score, ape, w, cs = make(head_dim, ratio, L, gen)
    out, st = run_chunks(kv, score, ape, head_dim, ratio, [L], device, out_dtype=torch.float32)
    ref = R.compress_oneshot_ref(kv, score, ape, ratio, ratio == 4)
    assert out.shape == (ENTRIES[ratio, L], head_dim) and ref.shape == out.shape
    torch.testing.assert_close(out, ref, **COMPRESS_F32)
    assert st.next_pos == L


@pytest.mark.parametrize("head_dim,ratio", KINDS)
@pytest.mark.parametrize("L", [7, 300])
def test_norm_and_rope_match_reference(head_dim, ratio, L, gen, device, shared_runs):
    kv, score, ape, w, cs = make(head_dim, ratio, L, gen)
    ref = R.compress_oneshot_ref(kv, score, ape, ratio, ratio == 4, w, 1e-6, cs, ROPE)
    assert ref.shape == (ENTRIES[ratio, L], head_dim)  # c128a at L = 7: none, on purpose
    for dtype, tol in ((torch.float32, COMPRESS_F32), (torch.bfloat16, COMPRESS_BF16)):
        (out,), _ = shared_runs(kv, score, ape, head_dim, ratio, [L], device, norm_weight=w.to(device), eps=1e-6,
                                cos_sin=cs.to(device), rope_dim=ROPE, out_dtype=dtype)
        assert out.dtype == dtype and out.shape == ref.shape
        torch.testing.assert_close(out.float(), ref.to(dtype).float(), **tol)


# chunk boundaries inside windows: c4 windows split 1/3, 3/1, 2/2; c128 windows split at 1, 100, 129
SPLITS = {4: [[1, 3, 3, 122, 171], [2, 5, 1, 292], [299, 1], [150, 150]],
          128: [[1, 99, 29, 171], [128, 1, 171], [200, 7, 93]]}


@pytest.mark.parametrize("head_dim,ratio", KINDS)
def test_chunked_equals_one_shot_bit_for_bit(head_dim, ratio, gen, device, shared_runs):
    L = 300
    kv, score, ape, w, cs = make(head_dim, ratio, L, gen)
    kw = dict(norm_weight=w.to(device), eps=1e-6, cos_sin=cs.to(device), rope_dim=ROPE, out_dtype=torch.float32)
    (whole,), ring_whole = shared_runs(kv, score, ape, head_dim, ratio, [L], device, **kw)
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
    assert one.shape == (ENTRIES[ratio, L], head_dim)
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
def test_compress_then_store_into_paged_compressed_cache(name, head_dim, ratio, gen, device, shared_runs):
    """Chunked compression + quantised paged writes fill the compressed cache with the same bytes as
    quantising the entries of a one-shot pass (256-token logical blocks: 256 // ratio entries per page).
    The two 128-wide indexer formats compress the same inputs: their compressor runs are shared."""
    L = 300
    kv, score, ape, w, cs = make(head_dim, ratio, L, gen)
    bs = 256 // ratio
    table = torch.tensor([2, 0, 1, 3, 4], device=device)
    cache = P.allocate_cache(name, 5, bs, alignment=F.V4_PAGE_ALIGNMENT, device=device)
    kw = dict(norm_weight=w.to(device), cos_sin=cs.to(device), rope_dim=ROPE)
    chunks = (129, 7, 164)
    per_chunk, _ = shared_runs(kv, score, ape, head_dim, ratio, chunks, device, **kw)
    start = 0
    for n, e in zip(chunks, per_chunk):
        slots = A.compressed_slots(start, n, ratio, table, bs)
        assert slots.shape[0] == e.shape[0]
        Q.quantize(e.to(device), name, cache=cache, slot_mapping=slots, block_size=bs)
        start += n
    entries = torch.cat(per_chunk)
    (one,), _ = shared_runs(kv, score, ape, head_dim, ratio, [L], device, **kw)
    assert torch.equal(entries, one)
    n_entries = L // ratio
    slots = A.compressed_slots(0, L, ratio, table, bs)
    got = P.gather_records(cache, name, slots, bs).cpu()
    assert torch.equal(got, R.quantize_ref(entries, name))
    assert got.shape[0] == n_entries


@pytest.mark.parametrize("head_dim,ratio", KINDS)
def test_bf16_output_is_the_rne_rounding_of_fp32_output(head_dim, ratio, gen, device):
    """out_dtype=bf16 must give exactly compress(..., out_dtype=fp32).to(bf16), round to nearest even."""
    L = ratio if ratio == 128 else 24
    kv, score, ape, w, cs = make(head_dim, ratio, L, gen)
    kw = dict(norm_weight=w.to(device), cos_sin=cs.to(device), rope_dim=ROPE)
    f32, _ = run_chunks(kv, score, ape, head_dim, ratio, [L], device, out_dtype=torch.float32, **kw)
    b16, _ = run_chunks(kv, score, ape, head_dim, ratio, [L], device, out_dtype=torch.bfloat16, **kw)
    assert b16.dtype == torch.bfloat16 and b16.shape == (L // ratio, head_dim)
    assert torch.equal(b16.view(torch.int16), f32.to(torch.bfloat16).view(torch.int16))


@pytest.mark.parametrize("head_dim,ratio", KINDS)
def test_bf16_output_rounds_ties_to_even(head_dim, ratio, gen, device):
    """One token per window takes the whole softmax (scores +80 vs -80: exp(-160) is 0 in fp32), so each
    entry is exactly that token's kv row, planted with values halfway between two bf16 neighbours."""
    coff = 2 if ratio == 4 else 1
    n = 2 if ratio == 4 else 1
    L = n * ratio
    W = coff * head_dim
    kv = torch.randn(L, W, generator=gen)
    score = torch.full((L, W), -80.0)
    ape = torch.zeros(ratio, W)
    k = torch.arange(head_dim)
    # (1 + odd / 256) * 2**j: exactly between 1 + (odd - 1) / 256 and 1 + (odd + 1) / 256 (bf16 step 2 / 256)
    ties = (1 + (2 * (k % 64) + 1) * 2.0**-8) * torch.ldexp(torch.ones(head_dim), k % 7 - 3) * (1 - 2 * (k // 64 % 2))
    top = torch.arange(n) * ratio + ratio - 1  # the last token of each window wins
    kv[top, W - head_dim :] = ties * torch.tensor([[1.0], [-0.5]])[:n]
    score[top, W - head_dim :] = 80.0
    f32, _ = run_chunks(kv, score, ape, head_dim, ratio, [L], device, out_dtype=torch.float32)
    assert torch.equal(f32, kv[top, W - head_dim :])  # exact, so the bf16 inputs below are ties
    b16, _ = run_chunks(kv, score, ape, head_dim, ratio, [L], device, out_dtype=torch.bfloat16)
    want = f32.to(torch.bfloat16)  # torch rounds to nearest even
    assert torch.equal(b16.view(torch.int16), want.view(torch.int16))
    bits = f32.view(torch.int32)
    trunc = (bits >> 16).to(torch.int16)  # what truncation would give
    away = ((bits + 0x8000) >> 16).to(torch.int16)  # round half away from zero
    assert not torch.equal(b16.view(torch.int16), trunc) and not torch.equal(b16.view(torch.int16), away)


@pytest.mark.parametrize("head_dim,ratio", KINDS)
@pytest.mark.parametrize("scale,eps", [(1e-3, 1e-6), (1e-2, 1e-4)])
def test_rmsnorm_eps_is_applied(head_dim, ratio, scale, eps, gen, device):
    """Entries of magnitude ~scale have a mean square of the order of eps: dropping eps changes them a lot."""
    L = ratio if ratio == 128 else 12
    kv, score, ape, w, _ = make(head_dim, ratio, L, gen, dtype=torch.float32)
    kv = kv * scale
    ref = R.compress_oneshot_ref(kv, score, ape, ratio, ratio == 4, w, eps)
    no_eps = R.compress_oneshot_ref(kv, score, ape, ratio, ratio == 4, w, 0.0)
    assert ((ref - no_eps).abs() / no_eps.abs()).max() > 0.1  # the eps matters here
    out, _ = run_chunks(kv, score, ape, head_dim, ratio, [L], device, norm_weight=w.to(device), eps=eps,
                        out_dtype=torch.float32)
    assert out.shape == (L // ratio, head_dim)
    torch.testing.assert_close(out, ref, **COMPRESS_F32)


@pytest.mark.parametrize("head_dim,ratio,rows_tile,chunks", [
    (512, 4, 2, [40]),  # entry 0: tiles 0 and 1 (positions -4..-1) fully masked
    (512, 4, 4, [5, 35]),  # entry 0: tile 0 fully masked; entry 1 reads rows of chunk 0 from the state
    (128, 4, 2, [3, 37]),
    (128, 4, 4, [40]),
    (512, 128, 32, [1, 99, 29, 171]),  # 4 tiles per window, chunk boundaries at 1, 100, 129
])
def test_non_default_row_tiles_match_reference(head_dim, ratio, rows_tile, chunks, gen, device):
    """The online softmax across several row tiles (and its guard for tiles that are all -inf)."""
    L = sum(chunks)
    kv, score, ape, w, cs = make(head_dim, ratio, L, gen)
    out, _ = run_chunks(kv, score, ape, head_dim, ratio, chunks, device, rows_tile=rows_tile,
                        norm_weight=w.to(device), cos_sin=cs.to(device), rope_dim=ROPE, out_dtype=torch.float32)
    ref = R.compress_oneshot_ref(kv, score, ape, ratio, ratio == 4, w, 1e-6, cs, ROPE)
    assert out.shape == (L // ratio, head_dim) and L // ratio >= 2
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out, ref, **COMPRESS_F32)


def test_c128a_norm_and_rope_across_chunks_match_reference(gen, device):
    """c128a with RMSNorm + RoPE, chunk boundaries at 1, 100 and 129 (inside both windows): non-empty."""
    hd, ratio, L, chunks = 512, 128, 300, [1, 99, 29, 171]
    kv, score, ape, w, cs = make(hd, ratio, L, gen)
    ref = R.compress_oneshot_ref(kv, score, ape, ratio, False, w, 1e-6, cs, ROPE)
    assert ref.shape == (2, hd)
    st = K.CompressorState.allocate(hd, ratio, device=device)
    start, got = 0, []
    for n, entries in zip(chunks, [0, 0, 1, 1]):
        e = K.compress(kv[start : start + n].to(device), score[start : start + n].to(device), ape.to(device), st,
                       norm_weight=w.to(device), cos_sin=cs.to(device), rope_dim=ROPE, out_dtype=torch.float32)
        assert e.shape == (entries, hd)
        got.append(e.cpu())
        start += n
    torch.testing.assert_close(torch.cat(got), ref, **COMPRESS_F32)


@pytest.mark.parametrize("head_dim,ratio", [(128, 4), (512, 128)])
def test_strided_kv_and_score_views(head_dim, ratio, gen, device):
    """kv and score as the two halves of one projection output (row stride 2 * width), as a model has them."""
    coff = 2 if ratio == 4 else 1
    W = coff * head_dim
    L = 2 * ratio + 3 if ratio == 4 else ratio + 2
    kv_score = torch.randn(L, 2 * W, generator=gen).to(torch.bfloat16).to(device)
    kv, score = kv_score.split(W, dim=1)
    assert kv.stride() == (2 * W, 1) and not kv.is_contiguous()
    ape = torch.randn(ratio, W, generator=gen).to(device)
    w = (torch.rand(head_dim, generator=gen) + 0.5).to(device)
    kw = dict(norm_weight=w, out_dtype=torch.float32)
    outs, rings = [], []
    for a, b in ((kv, score), (kv.contiguous(), score.contiguous())):
        st = K.CompressorState.allocate(head_dim, ratio, device=device)
        outs.append(torch.cat([K.compress(a[:ratio + 1], b[:ratio + 1], ape, st, **kw),
                               K.compress(a[ratio + 1 :], b[ratio + 1 :], ape, st, **kw)]).cpu())
        rings.append(st.ring().cpu())
    assert outs[0].shape == (L // ratio, head_dim) and L // ratio >= 1
    assert torch.equal(outs[0], outs[1]) and torch.equal(rings[0], rings[1])
