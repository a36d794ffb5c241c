"""Plain PyTorch references: the oracle every Triton kernel in this package is tested against.

Written for clarity, not speed, and deliberately by a different route than the kernels: exponents via
``torch.frexp`` in float64, fp8 via ``torch.float8_e4m3fn`` casts, e2m1 by nearest-grid-point search,
bf16 via ``Tensor.to``, the compressor both as one vectorised pass over the whole sequence (the
DeepSeek-V4 ``overlap_transform`` formulation) and as a per-entry loop over chunks with an explicit state.
"""

from __future__ import annotations

import torch

from .formats import Format, PageLayout, get_format

# ---------------------------------------------------------------------------------------------------
# scalar formats
# ---------------------------------------------------------------------------------------------------

E2M1_GRID = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0], dtype=torch.float64)


def scale_exponent(amax: torch.Tensor, qmax: float, e_min: int) -> torch.Tensor:
    """Smallest integer e with ``amax <= qmax * 2**e``, at least e_min (int64)."""
    r = amax.double() / qmax
    m, ex = torch.frexp(r)  # r = m * 2**ex, m in [0.5, 1)
    e = torch.where(m == 0.5, ex - 1, ex).to(torch.int64)
    e = torch.where(r > 0, e, torch.full_like(e, e_min))
    return e.clamp(min=e_min)


def scale_exponent_fp32_log2(amax: torch.Tensor, f: Format) -> torch.Tensor:
    """vLLM's exponent by its own fp32 steps: the scale in fp32 (``f.scale_rule`` 'fp32_log2_div':
    ``max(amax, 1e-4) / qmax`` rounded once; 'fp32_log2_mul': ``amax * fp32(1 / qmax)`` rounded, floored at
    fp32(1e-4)), its log2 in float64 rounded to fp32 (a correctly rounded fp32 log2), then ceil (int64)."""
    a = amax.float()
    floor = torch.tensor(1e-4, dtype=torch.float32, device=a.device)
    if f.scale_rule == "fp32_log2_div":
        s = torch.maximum(a, floor) / torch.tensor(f.qmax, dtype=torch.float32, device=a.device)
    else:
        s = torch.maximum(a * torch.tensor(1.0 / f.qmax, dtype=torch.float32, device=a.device), floor)
    return torch.ceil(torch.log2(s.double()).float()).to(torch.int64)


def fp8_e4m3_bytes(y: torch.Tensor) -> torch.Tensor:
    """fp32 values (already within +-448) -> e4m3fn bytes, round to nearest even."""
    return y.float().to(torch.float8_e4m3fn).view(torch.uint8)


def fp8_e4m3_values(b: torch.Tensor) -> torch.Tensor:
    return b.view(torch.float8_e4m3fn).float()


def e2m1_codes(y: torch.Tensor) -> torch.Tensor:
    """fp32 -> e2m1 nibble codes (uint8), nearest grid point, ties to the even code, saturating at 6."""
    a = y.double().abs().clamp(max=6.0)
    d = (a.unsqueeze(-1) - E2M1_GRID.to(a.device)).abs()
    best = d.min(dim=-1, keepdim=True).values
    # among the nearest codes (one, or two on a tie) pick the even one
    idx = torch.arange(8, device=a.device)
    cand = torch.where(d == best, idx, torch.full_like(idx, 99))
    even = torch.where(cand % 2 == 0, cand, torch.full_like(cand, 99)).min(dim=-1).values
    only = cand.min(dim=-1).values
    tie = (d == best).sum(-1) > 1
    code = torch.where(tie, even, only)
    neg = torch.signbit(y.float())
    return (code + 8 * neg.to(code.dtype)).to(torch.uint8)


def e2m1_values(c: torch.Tensor) -> torch.Tensor:
    c = c.long()
    mag = E2M1_GRID.to(c.device)[c & 7].float()
    return torch.where((c & 8) != 0, -mag, mag)


def bf16_bytes(x: torch.Tensor) -> torch.Tensor:
    """[..., n] values -> [..., 2n] little-endian bf16 bytes (round to nearest even)."""
    return x.to(torch.bfloat16).contiguous().view(torch.uint8)


def bf16_from_bytes(b: torch.Tensor) -> torch.Tensor:
    return b.contiguous().view(torch.bfloat16).float()


def fp32_bytes(x: torch.Tensor) -> torch.Tensor:
    return x.float().contiguous().view(torch.uint8)


# ---------------------------------------------------------------------------------------------------
# records
# ---------------------------------------------------------------------------------------------------


def round_input(x: torch.Tensor, f: Format) -> torch.Tensor:
    """The values the quantiser of ``f`` actually sees, as fp32: fp32 input rounded to bf16 (nearest
    even, ``Tensor.to``) when ``f.rounds_to_bf16`` (vLLM quantises only bf16 values there), else unchanged."""
    if f.rounds_to_bf16 and x.dtype == torch.float32:
        x = x.to(torch.bfloat16)
    return x.float()


def quantize_ref(x: torch.Tensor, fmt: "str | Format") -> torch.Tensor:
    """Rows ``x[N, dim]`` -> records ``uint8[N, entry_bytes]`` in the canonical byte order.

    fp32 rows are rounded to bf16 first for formats with ``rounds_to_bf16`` (see :func:`round_input`)."""
    f = get_format(fmt, x.shape[1])
    n = x.shape[0]
    xf = round_input(x, f)
    rec = torch.zeros((n, f.entry_bytes), dtype=torch.uint8, device=x.device)
    if f.quant_dim:
        nb = f.num_scales
        blocks = xf[:, : f.quant_dim].reshape(n, nb, f.quant_block)
        amax = blocks.abs().amax(dim=-1)
        if f.scale_rule == "exact":
            e = scale_exponent(amax, f.qmax, f.e_min)
        else:
            e = scale_exponent_fp32_log2(amax, f)
        inv = torch.ldexp(torch.ones_like(amax, dtype=torch.float32), -e.to(torch.int32))
        y = blocks * inv.unsqueeze(-1)
        if f.elem == "fp8":
            q = fp8_e4m3_bytes(y.clamp(-f.qmax, f.qmax)).reshape(n, f.quant_dim)
        else:
            c = e2m1_codes(y).reshape(n, f.quant_dim)
            q = (c[:, 0::2] | (c[:, 1::2] << 4)).to(torch.uint8)
        rec[:, f.quant_offset : f.quant_offset + f.quant_bytes] = q
        if f.scale_kind == "ue8m0":
            s = (e + 127).clamp(0, 255).to(torch.uint8)
        elif f.scale_mx4:  # four equal UE8M0 bytes per scale slot
            s = (e + 127).clamp(0, 255).to(torch.uint8).repeat_interleave(4, dim=1)
        else:
            s = fp32_bytes(torch.ldexp(torch.ones_like(amax, dtype=torch.float32), e.to(torch.int32)))
        rec[:, f.scale_offset : f.scale_offset + s.shape[1]] = s
    if f.rope_dim:
        rec[:, f.rope_offset : f.rope_offset + f.rope_bytes] = bf16_bytes(xf[:, f.quant_dim :])
    return rec


def dequantize_ref(rec: torch.Tensor, fmt: "str | Format", dim: int | None = None) -> torch.Tensor:
    """Records -> fp32 rows.  A ue8m0 byte ``b`` means ``ldexp(1.0, b - 127)``: byte 0 is 2**-127 (fp32
    subnormal), byte 255 is inf (as vLLM's ``exp2(b - 127)``)."""
    f = get_format(fmt, dim)
    n = rec.shape[0]
    out = torch.zeros((n, f.dim), dtype=torch.float32, device=rec.device)
    if f.quant_dim:
        nb = f.num_scales
        sraw = rec[:, f.scale_offset : f.scale_offset + nb * f.scale_item_bytes]
        if f.scale_kind == "ue8m0":
            scale = torch.ldexp(torch.ones(n, nb, device=rec.device), sraw.long() - 127)
        elif f.scale_mx4:
            scale = torch.ldexp(torch.ones(n, nb, device=rec.device), sraw[:, ::4].long() - 127)
        else:
            scale = sraw.contiguous().view(torch.float32)
        q = rec[:, f.quant_offset : f.quant_offset + f.quant_bytes]
        if f.elem == "fp8":
            v = fp8_e4m3_values(q.contiguous())
        else:
            v = torch.stack([e2m1_values(q & 0xF), e2m1_values(q >> 4)], dim=-1).reshape(n, f.quant_dim)
        out[:, : f.quant_dim] = (v.reshape(n, nb, f.quant_block) * scale.unsqueeze(-1)).reshape(n, f.quant_dim)
    if f.rope_dim:
        out[:, f.quant_dim :] = bf16_from_bytes(rec[:, f.rope_offset : f.rope_offset + f.rope_bytes])
    return out


def error_bound(x: torch.Tensor, fmt: "str | Format") -> torch.Tensor:
    """Per-value bound (float64) on |x - dequantize(quantize(x))| implied by the format (round to nearest).

    fp8 e4m3: half an ulp, 2**-4 relative for normal numbers, plus 2**-10 * scale for the subnormal
    range.  e2m1 (grid spacing 0.5 below 2, 1 below 4, 2 up to 6): ``scale * max(1/4, |x/scale| / 4)``.
    bf16 (RoPE part and plain bf16): half an ulp, at most 2**-8 relative (bf16 keeps 8 significant bits, so half an ulp is
    2**-8 of the value just above a power of two).  When the format rounds fp32 input to
    bf16 first, the bound is taken around the rounded values and the rounding error ``|x - bf16(x)|`` added.
    """
    f = get_format(fmt, x.shape[1])
    n = x.shape[0]
    xf = round_input(x, f)
    b = torch.zeros(xf.shape, dtype=torch.float64, device=x.device)
    if f.quant_dim:
        blocks = xf[:, : f.quant_dim].reshape(n, f.num_scales, f.quant_block)
        e = scale_exponent(blocks.abs().amax(-1), f.qmax, f.e_min)
        s = torch.ldexp(torch.ones_like(e, dtype=torch.float64), e).unsqueeze(-1)
        a = blocks.double().abs()
        if f.elem == "fp8":
            bq = a * 2.0**-4 + s * 2.0**-10
        else:
            bq = s * torch.maximum(torch.full_like(a, 0.25), a / s / 4)
        b[:, : f.quant_dim] = bq.reshape(n, f.quant_dim)
    if f.rope_dim:
        b[:, f.quant_dim :] = xf[:, f.quant_dim :].double().abs() * 2.0**-8
    return b + (x.double() - xf.double()).abs()


# ---------------------------------------------------------------------------------------------------
# paged placement
# ---------------------------------------------------------------------------------------------------


def write_records_ref(records: torch.Tensor, cache: torch.Tensor, slots: torch.Tensor, lay: PageLayout) -> None:
    """Copy records[i] into ``cache`` at slot ``slots[i]`` (-1 skips), following the page layout."""
    for i, s in enumerate(slots.tolist()):
        if s < 0:
            continue
        page, pos = divmod(s, lay.block_size)
        for rstart, pstart, length in lay.record_spans(pos):
            cache[page, pstart : pstart + length] = records[i, rstart : rstart + length]


def read_records_ref(cache: torch.Tensor, slots: torch.Tensor, lay: PageLayout) -> torch.Tensor:
    out = torch.zeros((slots.shape[0], lay.fmt.entry_bytes), dtype=torch.uint8, device=cache.device)
    for i, s in enumerate(slots.tolist()):
        if s < 0:
            continue
        page, pos = divmod(s, lay.block_size)
        for rstart, pstart, length in lay.record_spans(pos):
            out[i, rstart : rstart + length] = cache[page, pstart : pstart + length]
    return out


def write_rows_ref(rows: torch.Tensor, cache: torch.Tensor, slots: torch.Tensor, block_size: int) -> None:
    """Raw rows (any dtype) into an interleaved page layout: row bytes at ``pos * row_bytes`` in the page."""
    rb = rows.contiguous().view(torch.uint8).reshape(rows.shape[0], -1)
    width = rb.shape[1]
    for i, s in enumerate(slots.tolist()):
        if s < 0:
            continue
        page, pos = divmod(s, block_size)
        cache[page, pos * width : (pos + 1) * width] = rb[i]


# ---------------------------------------------------------------------------------------------------
# slot mappings
# ---------------------------------------------------------------------------------------------------


def slots_from_block_table_ref(positions: list[int], block_table: list[int], block_size: int) -> list[int]:
    return [block_table[p // block_size] * block_size + p % block_size for p in positions]


def ring_slots_ref(start_pos: int, n: int, ring_pages: list[int], block_size: int) -> list[int]:
    ring = len(ring_pages) * block_size
    end = start_pos + n
    out = []
    for p in range(start_pos, end):
        if p < end - ring:
            out.append(-1)
        else:
            r = p % ring
            out.append(ring_pages[r // block_size] * block_size + r % block_size)
    return out


# ---------------------------------------------------------------------------------------------------
# compressor
# ---------------------------------------------------------------------------------------------------


def rms_norm_ref(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    x = x.float()
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight.float()


def rope_ref(x: torch.Tensor, positions: torch.Tensor, cos_sin: torch.Tensor, rope_dim: int) -> torch.Tensor:
    """GPT-J (interleaved pairs) rotation of the last ``rope_dim`` values; cos_sin[pos] = [cos | sin]."""
    x = x.float().clone()
    nope = x.shape[-1] - rope_dim
    half = rope_dim // 2
    cs = cos_sin.float()[positions.long()]
    cos, sin = cs[:, :half], cs[:, half:rope_dim]
    ev = x[:, nope::2].clone()
    od = x[:, nope + 1 :: 2].clone()
    x[:, nope::2] = ev * cos - od * sin
    x[:, nope + 1 :: 2] = od * cos + ev * sin
    return x


def _finish(entries, first_pos, ratio, norm_weight, eps, cos_sin, rope_dim):
    if norm_weight is not None:
        entries = rms_norm_ref(entries, norm_weight, eps)
    if cos_sin is not None and rope_dim:
        entries = rope_ref(entries, first_pos, cos_sin, rope_dim)
    return entries


def compress_oneshot_ref(
    kv: torch.Tensor, score: torch.Tensor, ape: torch.Tensor, ratio: int, overlap: bool,
    norm_weight: torch.Tensor | None = None, eps: float = 1e-6,
    cos_sin: torch.Tensor | None = None, rope_dim: int = 0,
) -> torch.Tensor:
    """All complete windows of a sequence that starts at position 0, in one vectorised pass.

    kv, score: ``[L, coff * hd]`` (coff = 2 with overlap); ape: ``[ratio, coff * hd]``.  Entry i is
    ``sum_t softmax_t(score_t + ape[t % ratio]) * kv_t`` per channel over the tokens of window i (second
    half of each row) and, with overlap, of window i - 1 (first half of each row); window -1 is empty.
    """
    coff = 2 if overlap else 1
    L, w = kv.shape
    hd = w // coff
    n = L // ratio
    kvw = kv[: n * ratio].float().reshape(n, ratio, w)
    sw = (score[: n * ratio].float().reshape(n, ratio, w) + ape.float().unsqueeze(0))
    if overlap:
        k2 = torch.zeros(n, 2 * ratio, hd, device=kv.device)
        s2 = torch.full((n, 2 * ratio, hd), float("-inf"), device=kv.device)
        k2[:, ratio:] = kvw[:, :, hd:]
        s2[:, ratio:] = sw[:, :, hd:]
        k2[1:, :ratio] = kvw[:-1, :, :hd]
        s2[1:, :ratio] = sw[:-1, :, :hd]
        kvw, sw = k2, s2
    entries = (kvw * torch.softmax(sw, dim=1)).sum(dim=1)
    first_pos = torch.arange(n, device=kv.device) * ratio
    return _finish(entries, first_pos, ratio, norm_weight, eps, cos_sin, rope_dim)


class RefCompressorState:
    """Reference compressor state: the last ``coff * ratio`` rows ``[kv | score + ape]`` (fp32) by position."""

    def __init__(self, head_dim: int, ratio: int, overlap: bool):
        self.hd, self.ratio, self.overlap = head_dim, ratio, overlap
        self.coff = 2 if overlap else 1
        self.rows: dict[int, torch.Tensor] = {}
        self.next_pos = 0

    def ring(self, device=None) -> tuple[torch.Tensor, torch.Tensor]:
        """(ring[coff*ratio, 2*coff*hd], valid[coff*ratio]) indexed by position % (coff*ratio)."""
        win = self.coff * self.ratio
        w = 2 * self.coff * self.hd
        ring = torch.zeros(win, w, device=device)
        valid = torch.zeros(win, dtype=torch.bool, device=device)
        for p, r in self.rows.items():
            ring[p % win] = r
            valid[p % win] = True
        return ring, valid


def compress_chunk_ref(
    kv: torch.Tensor, score: torch.Tensor, ape: torch.Tensor, state: RefCompressorState,
    norm_weight: torch.Tensor | None = None, eps: float = 1e-6,
    cos_sin: torch.Tensor | None = None, rope_dim: int = 0,
) -> torch.Tensor:
    """One prefill chunk (positions ``state.next_pos ...``), entry by entry, finishing windows from state."""
    ratio, coff, hd = state.ratio, state.coff, state.hd
    start = state.next_pos
    T = kv.shape[0]
    rows = dict(state.rows)
    for t in range(T):
        p = start + t
        rows[p] = torch.cat([kv[t].float(), score[t].float() + ape[p % ratio].float()])
    out = []
    first = []
    for i in range(start // ratio, (start + T) // ratio):
        p_end = (i + 1) * ratio - 1
        ks, ss = [], []
        for q in range(p_end - coff * ratio + 1, p_end + 1):
            if q < 0:
                continue
            half = 1 if (coff == 2 and q > p_end - ratio) else 0
            r = rows[q]
            ks.append(r[half * hd : (half + 1) * hd])
            ss.append(r[coff * hd + half * hd : coff * hd + (half + 1) * hd])
        k = torch.stack(ks)
        s = torch.stack(ss)
        out.append((k * torch.softmax(s, dim=0)).sum(0))
        first.append(i * ratio)
    end = start + T
    state.rows = {p: r for p, r in rows.items() if p >= end - coff * ratio}
    state.next_pos = end
    if not out:
        return torch.zeros(0, hd, device=kv.device)
    entries = torch.stack(out)
    return _finish(entries, torch.tensor(first, device=kv.device), ratio, norm_weight, eps, cos_sin, rope_dim)


def save_state_rows_ref(kv, score, ape, positions, ratio) -> torch.Tensor:
    """The state rows vLLM's save_partial_states writes: ``[kv | score + ape[pos % ratio]]`` in fp32."""
    a = ape.float()[positions.long() % ratio]
    return torch.cat([kv.float(), score.float() + a], dim=1)

