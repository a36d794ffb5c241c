"""DeepSeek V4 token compressor (c4a / c128a / indexer) in Triton, with chunked fp32 state.

Maths (DeepSeek-V4 technical report section 2.3; vLLM 0.33 ``models/deepseek_v4/compressor.py``,
``common/ops/save_partial_states.py``, ``common/ops/fused_compress_quant_cache.py``):

* The projection gives, per token, ``kv`` and gate ``score`` rows of ``coff * hd`` values (coff = 2 for
  ratio 4, which overlaps windows; 1 for ratio 128).  The learned position bias ``ape[ratio, coff*hd]`` is
  added to the score: ``score + ape[pos % ratio]``.
* Entry ``i`` closes at position ``p = (i + 1) * ratio - 1``.  It reads the ``coff * ratio`` tokens
  ``p - coff*ratio + 1 .. p``: the ``ratio`` tokens of its own window use the *second* half of their rows
  (channels ``[hd, 2hd)``), the ``ratio`` tokens of the previous window the *first* half (``[0, hd)``);
  positions below 0 are left out.  Without overlap the window is ``ratio`` tokens and the whole row.
* Per channel: softmax over those tokens of the biased scores, weighted sum of kv (fp32).
* Optionally RMSNorm (``weight``, ``eps``) and GPT-J (interleaved-pair) RoPE on the last ``rope_dim``
  channels at position ``i * ratio`` (vLLM: ``(position // ratio) * ratio``), ``cos_sin[pos] = [cos|sin]``.
* State: the rows ``[kv | score + ape]`` (fp32) of the last ``coff * ratio`` positions, kept in a ring of
  pages (ring row ``pos % (coff*ratio)``), exactly the per-token slot content vLLM's
  ``CompressorStateCache`` holds (``2 * coff * hd`` fp32 per token).  A chunk reads rows older than its
  first position from the ring, so a window split across chunks is finished by the next chunk and chunked
  compression gives bit-identical entries to one-shot compression.

Deviations from vLLM: one request per call (vLLM batches requests through block tables); the state ring is
a fixed set of pages instead of vLLM's sliding-window block table (same bytes per slot); RoPE is optional
and RMSNorm/RoPE/quantisation are not fused with the cache write (quantise the returned entries with
:func:`kvcalc_kernels.quant.quantize`; vLLM rounds compressed entries to bf16 before quantising them, and
bf16 output here, or quantize's own rounding of fp32 input, gives the same values).
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from . import _checks as C
from ._bits import f32_to_bf16_bits
from .addressing import ring_slots


@triton.jit
def _compress_kernel(
    kv_ptr, kv_stride, sc_ptr, sc_stride, ape_ptr, ape_stride,
    st_ptr, st_page_stride, st_table_ptr, st_block_size,
    w_ptr, eps, cs_ptr, cs_stride,
    out_ptr, out_stride,
    start_pos, first_entry,
    HD: tl.constexpr, RATIO: tl.constexpr, OVERLAP: tl.constexpr, ROWS: tl.constexpr,
    HAS_NORM: tl.constexpr, ROPE: tl.constexpr, OUT_BF16: tl.constexpr,
):
    WIN: tl.constexpr = (1 + OVERLAP) * RATIO
    W: tl.constexpr = (1 + OVERLAP) * HD
    pid = tl.program_id(0).to(tl.int64)
    entry = first_entry + pid
    p_end = (entry + 1) * RATIO - 1
    d = tl.arange(0, HD)
    m = tl.full([HD], float("-inf"), tl.float32)
    lsum = tl.zeros([HD], dtype=tl.float32)
    acc = tl.zeros([HD], dtype=tl.float32)
    for r0 in range(0, WIN, ROWS):
        j = r0 + tl.arange(0, ROWS)
        q = p_end - WIN + 1 + j
        if OVERLAP:
            col = (j >= RATIO).to(tl.int64) * HD
        else:
            col = (j * 0).to(tl.int64)
        in_chunk = q >= start_pos
        in_state = (q >= 0) & (q < start_pos)
        q0 = tl.where(q >= 0, q, 0)
        # rows delivered by this chunk: kv, score + ape
        t = tl.where(in_chunk, q - start_pos, 0)
        cm = in_chunk[:, None]
        kv_c = tl.load(kv_ptr + (t * kv_stride + col)[:, None] + d[None, :], mask=cm, other=0.0)
        s_c = tl.load(sc_ptr + (t * sc_stride + col)[:, None] + d[None, :], mask=cm, other=0.0)
        a = tl.load(ape_ptr + ((q0 % RATIO) * ape_stride + col)[:, None] + d[None, :], mask=cm, other=0.0)
        s_c = s_c.to(tl.float32) + a.to(tl.float32)
        # rows of earlier chunks: from the state ring
        rr = q0 % WIN
        pg = tl.load(st_table_ptr + rr // st_block_size, mask=in_state, other=0).to(tl.int64)
        srow = pg * st_page_stride + (rr % st_block_size) * (2 * W) + col
        sm = in_state[:, None]
        kv_s = tl.load(st_ptr + srow[:, None] + d[None, :], mask=sm, other=0.0)
        s_s = tl.load(st_ptr + (srow + W)[:, None] + d[None, :], mask=sm, other=0.0)
        kvv = tl.where(cm, kv_c.to(tl.float32), kv_s)
        s = tl.where(cm, s_c, tl.where(sm, s_s, float("-inf")))
        # online softmax over the window, per channel
        m_new = tl.maximum(m, tl.max(s, axis=0))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        alpha = tl.exp(m - m_safe)
        pe = tl.exp(s - m_safe[None, :])
        lsum = lsum * alpha + tl.sum(pe, axis=0)
        acc = acc * alpha + tl.sum(pe * kvv, axis=0)
        m = m_new
    out = acc / lsum

    if HAS_NORM:
        w = tl.load(w_ptr + d).to(tl.float32)
        var = tl.sum(out * out, axis=0) / HD
        out = out * tl.rsqrt(var + eps) * w

    if ROPE > 0:
        NOPE_PAIRS: tl.constexpr = (HD - ROPE) // 2
        HALF: tl.constexpr = ROPE // 2
        ev, od = tl.split(tl.reshape(out, (HD // 2, 2)))
        k = tl.arange(0, HD // 2) - NOPE_PAIRS
        is_rope = k >= 0
        kk = tl.maximum(k, 0)
        cbase = cs_ptr + (entry * RATIO) * cs_stride
        cos = tl.load(cbase + kk, mask=is_rope, other=1.0).to(tl.float32)
        sin = tl.load(cbase + HALF + kk, mask=is_rope, other=0.0).to(tl.float32)
        out = tl.interleave(ev * cos - od * sin, od * cos + ev * sin)

    orow = out_ptr + pid * out_stride
    if OUT_BF16:
        tl.store(orow + d, f32_to_bf16_bits(out).to(tl.int16))
    else:
        tl.store(orow + d, out)


@triton.jit
def _save_state_kernel(
    kv_ptr, kv_stride, sc_ptr, sc_stride, ape_ptr, ape_stride, pos_ptr, slot_ptr,
    st_ptr, st_page_stride, st_block_size,
    W: tl.constexpr, W_P2: tl.constexpr, RATIO: tl.constexpr,
):
    t = tl.program_id(0).to(tl.int64)
    slot = tl.load(slot_ptr + t).to(tl.int64)
    if slot >= 0:
        pos = tl.load(pos_ptr + t).to(tl.int64)
        base = st_ptr + (slot // st_block_size) * st_page_stride + (slot % st_block_size) * (2 * W)
        c = tl.arange(0, W_P2)
        cm = c < W
        kv = tl.load(kv_ptr + t * kv_stride + c, mask=cm, other=0.0).to(tl.float32)
        s = tl.load(sc_ptr + t * sc_stride + c, mask=cm, other=0.0).to(tl.float32)
        a = tl.load(ape_ptr + (pos % RATIO) * ape_stride + c, mask=cm, other=0.0).to(tl.float32)
        tl.store(base + c, kv, mask=cm)
        tl.store(base + W + c, s + a, mask=cm)


_FLOATS = (torch.float32, torch.bfloat16)


def _is_pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def state_row_values(head_dim: int, ratio: int, overlap: bool | None = None) -> int:
    """fp32 values per state slot: ``2 * coff * head_dim`` ([kv | score + ape])."""
    coff = 2 if (ratio == 4 if overlap is None else overlap) else 1
    return 2 * coff * head_dim


class CompressorState:
    """The fp32 ring of the last ``coff * ratio`` token rows, kept in pages of a ``uint8`` paged cache.

    ``cache``: ``uint8[num_pages, page_bytes]`` (page_bytes a multiple of 4, at least
    ``block_size * row_bytes``); ``pages``: the ``coff * ratio / block_size`` page ids forming the ring;
    rows sit back to back in a page (``row_bytes = 4 * 2 * coff * head_dim``).
    """

    def __init__(self, cache: torch.Tensor, pages: torch.Tensor, block_size: int, head_dim: int, ratio: int,
                 overlap: bool | None = None):
        C.check_int("head_dim", head_dim, minimum=1)
        C.check_int("ratio", ratio, minimum=1)
        C.check_int("block_size", block_size, minimum=1)
        if not _is_pow2(head_dim) or head_dim < 2:
            raise ValueError(f"head_dim: must be a power of two >= 2, got {head_dim}")
        if not _is_pow2(ratio):
            raise ValueError(f"ratio: must be a power of two, got {ratio}")
        self.overlap = (ratio == 4) if overlap is None else bool(overlap)
        self.coff = 2 if self.overlap else 1
        self.head_dim, self.ratio, self.block_size = head_dim, ratio, block_size
        self.window = self.coff * ratio
        self.row_values = 2 * self.coff * head_dim
        self.row_bytes = 4 * self.row_values
        C.check_pages("cache", cache, multiple_of=4)
        if self.window % block_size:
            raise ValueError(f"block_size: must divide the state window {self.window}, got {block_size}")
        if cache.shape[1] % 4 or cache.shape[1] < block_size * self.row_bytes:
            raise ValueError(
                f"cache: page_bytes {cache.shape[1]} must be a multiple of 4 and hold {block_size} rows of "
                f"{self.row_bytes} B"
            )
        C.check_index("pages", pages, self.window // block_size, cache.device)
        if int(pages.min()) < 0 or int(pages.max()) >= cache.shape[0]:
            raise ValueError(f"pages: page ids must lie in [0, {cache.shape[0]})")
        if torch.unique(pages).numel() != pages.numel():
            raise ValueError(f"pages: page ids must be distinct (each ring row needs its own slot), got "
                             f"{pages.tolist()}")
        self.cache, self.pages = cache, pages.to(torch.int32)
        self.next_pos = 0

    @classmethod
    def allocate(cls, head_dim: int, ratio: int, *, device: "torch.device | str", overlap: bool | None = None,
                 block_size: int | None = None, alignment: int = 1, page_bytes: int | None = None,
                 ) -> "CompressorState":
        """A fresh state in its own cache; block_size defaults to vLLM's (4 for ratio 4, 8 otherwise)."""
        ov = (ratio == 4) if overlap is None else overlap
        window = (2 if ov else 1) * ratio
        bs = block_size if block_size is not None else min(window, 4 if ratio == 4 else 8)
        row_bytes = 4 * state_row_values(head_dim, ratio, ov)
        need = -(-bs * row_bytes // alignment) * alignment
        pb = need if page_bytes is None else page_bytes
        npages = max(window // bs, 1)
        cache = torch.zeros((npages, pb), dtype=torch.uint8, device=device)
        pages = torch.arange(npages, dtype=torch.int32, device=device)
        return cls(cache, pages, bs, head_dim, ratio, ov)

    def fp32(self) -> torch.Tensor:
        return self.cache.view(torch.float32)

    def ring(self) -> torch.Tensor:
        """The ring as ``fp32[coff * ratio, row_values]``, row r holding the position ``p`` with
        ``p % (coff * ratio) == r`` (only the last ``coff * ratio`` positions before ``next_pos`` are live)."""
        f = self.fp32()
        rows = [f[int(pg), : self.block_size * self.row_values].reshape(self.block_size, self.row_values)
                for pg in self.pages.tolist()]
        return torch.cat(rows, dim=0)

    def reset(self) -> None:
        self.next_pos = 0


def _check_rows(name: str, t: object, n: int | None, width: int, dev: torch.device) -> torch.Tensor:
    C.check_tensor(name, t, ndim=2, dtypes=_FLOATS, shape=[n, width], device=dev)
    assert isinstance(t, torch.Tensor)
    return t


def save_states(
    kv: torch.Tensor, score: torch.Tensor, ape: torch.Tensor, positions: torch.Tensor,
    state_cache: torch.Tensor, slot_mapping: torch.Tensor, block_size: int, ratio: int,
    check_bounds: bool = True,
) -> None:
    """Write compressor-state slots: row ``[kv_t | score_t + ape[pos_t % ratio]]`` (fp32) to slot
    ``slot_mapping[t]`` of a paged state cache (``uint8[num_pages, page_bytes]``, rows back to back;
    slot -1 skips), as vLLM's ``save_partial_states`` kernel does."""
    C.check_tensor("kv", kv, ndim=2, dtypes=_FLOATS)
    dev = kv.device
    T, W = kv.shape
    _check_rows("score", score, T, W, dev)
    C.check_int("ratio", ratio, minimum=1)
    C.check_int("block_size", block_size, minimum=1)
    _check_rows("ape", ape, ratio, W, dev)
    C.check_index("positions", positions, T, dev)
    C.check_index("slot_mapping", slot_mapping, T, dev)
    C.check_pages("state_cache", state_cache, device=dev, multiple_of=4)
    row_bytes = 8 * W
    if state_cache.shape[1] % 4 or state_cache.shape[1] < block_size * row_bytes:
        raise ValueError(
            f"state_cache: page_bytes {state_cache.shape[1]} must be a multiple of 4 and hold {block_size} rows "
            f"of {row_bytes} B"
        )
    if check_bounds:
        C.check_slots_in_range("slot_mapping", slot_mapping, state_cache.shape[0] * block_size)
    if T == 0:
        return
    _save_state_kernel[(T,)](
        kv, kv.stride(0), score, score.stride(0), ape, ape.stride(0), positions, slot_mapping,
        state_cache.view(torch.float32), C.page_stride(state_cache) // 4, block_size,
        W=W, W_P2=triton.next_power_of_2(W), RATIO=ratio,
    )


def compress(
    kv: torch.Tensor,
    score: torch.Tensor,
    ape: torch.Tensor,
    state: CompressorState,
    start_pos: int | None = None,
    *,
    norm_weight: torch.Tensor | None = None,
    eps: float = 1e-6,
    cos_sin: torch.Tensor | None = None,
    rope_dim: int = 0,
    out_dtype: torch.dtype = torch.bfloat16,
    rows_tile: int | None = None,
    update_state: bool = True,
    num_warps: int | None = None,
) -> torch.Tensor:
    """Compress one prefill chunk of one request; returns the entries it completes.

    kv, score: ``[T, coff * hd]`` (bf16 or fp32, row stride free) for positions ``start_pos ..
    start_pos + T - 1`` (``start_pos`` defaults to, and must equal, ``state.next_pos``); ape:
    ``[ratio, coff * hd]``.  Returns ``[n, hd]`` in ``out_dtype`` (fp32, or bf16 rounded to nearest even
    from the fp32 result: bit-identical to ``compress(..., out_dtype=torch.float32).to(torch.bfloat16)``) for entries
    ``start_pos // ratio .. (start_pos + T) // ratio - 1``, then (``update_state``) stores the chunk's
    last rows in the state ring.  ``norm_weight[hd]`` enables RMSNorm (``x * rsqrt(mean(x**2) + eps) * w``,
    ``eps`` a finite float >= 0); ``cos_sin[max_pos, rope_dim]``
    with ``rope_dim > 0`` enables RoPE on the last ``rope_dim`` channels.
    """
    if not isinstance(state, CompressorState):
        raise TypeError(f"state: expected a CompressorState, got {type(state).__name__}")
    hd, ratio, coff = state.head_dim, state.ratio, state.coff
    dev = state.cache.device
    W = coff * hd
    C.check_tensor("kv", kv, ndim=2, dtypes=_FLOATS, device=dev)
    T = kv.shape[0]
    if kv.shape[1] != W:
        raise ValueError(f"kv: expected [T, {W}] (coff {coff} x head_dim {hd}), got {list(kv.shape)}")
    _check_rows("score", score, T, W, dev)
    _check_rows("ape", ape, ratio, W, dev)
    if start_pos is None:
        start_pos = state.next_pos
    C.check_int("start_pos", start_pos, minimum=0)
    if start_pos != state.next_pos:
        raise ValueError(f"start_pos: chunks must be consecutive; state expects {state.next_pos}, got {start_pos}")
    if out_dtype not in (torch.bfloat16, torch.float32):
        raise TypeError(f"out_dtype: expected bfloat16 or float32, got {out_dtype}")
    if norm_weight is not None:
        C.check_tensor("norm_weight", norm_weight, ndim=1, dtypes=_FLOATS, shape=[hd], device=dev)
    if not isinstance(eps, (int, float)) or isinstance(eps, bool):
        raise TypeError(f"eps: expected a float, got {type(eps).__name__}")
    if not math.isfinite(eps) or eps < 0:
        raise ValueError(f"eps: must be a finite float >= 0, got {eps!r}")
    C.check_int("rope_dim", rope_dim, minimum=0)
    first = start_pos // ratio
    n = (start_pos + T) // ratio - first
    if rope_dim:
        if cos_sin is None:
            raise ValueError("cos_sin: required when rope_dim > 0")
        if rope_dim % 2 or rope_dim > hd:
            raise ValueError(f"rope_dim: must be even and <= head_dim {hd}, got {rope_dim}")
        C.check_tensor("cos_sin", cos_sin, ndim=2, dtypes=_FLOATS, device=dev)
        if cos_sin.shape[1] < rope_dim:
            raise ValueError(f"cos_sin: expected [max_pos, >= {rope_dim}], got {list(cos_sin.shape)}")
        if n and cos_sin.shape[0] <= (first + n - 1) * ratio:
            raise ValueError(
                f"cos_sin: has {cos_sin.shape[0]} positions, entry positions reach {(first + n - 1) * ratio}"
            )
    elif cos_sin is not None:
        raise ValueError("rope_dim: must be > 0 when cos_sin is given")
    if rows_tile is None:
        rows_tile = min(state.window, 8 if hd >= 512 else 16)
    C.check_int("rows_tile", rows_tile, minimum=1)
    if not _is_pow2(rows_tile) or state.window % rows_tile:
        raise ValueError(f"rows_tile: must be a power of two dividing {state.window}, got {rows_tile}")

    out = torch.empty((n, hd), dtype=out_dtype, device=dev)
    if n:
        st32 = state.fp32()  # also stands in for the absent optional tensors (never read then)
        _compress_kernel[(n,)](
            kv, kv.stride(0), score, score.stride(0), ape, ape.stride(0),
            st32, C.page_stride(state.cache) // 4, state.pages, state.block_size,
            norm_weight if norm_weight is not None else st32, float(eps),
            cos_sin if cos_sin is not None else st32, cos_sin.stride(0) if cos_sin is not None else 0,
            out.view(torch.int16) if out_dtype == torch.bfloat16 else out, out.stride(0),
            start_pos, first,
            HD=hd, RATIO=ratio, OVERLAP=state.overlap, ROWS=rows_tile,
            HAS_NORM=norm_weight is not None, ROPE=rope_dim, OUT_BF16=out_dtype == torch.bfloat16,
            **({} if num_warps is None else {"num_warps": num_warps}),
        )
    if update_state:
        if T:
            keep = min(T, state.window)
            pos = torch.arange(start_pos + T - keep, start_pos + T, device=dev, dtype=torch.int64)
            slots = ring_slots(start_pos + T - keep, keep, state.pages, state.block_size)
            save_states(kv[T - keep :], score[T - keep :], ape, pos, state.cache, slots, state.block_size, ratio,
                        check_bounds=False)
        state.next_pos = start_pos + T
    return out
