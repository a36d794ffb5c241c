"""Triton quantisers and dequantisers for the cache formats in :mod:`kvcalc_kernels.formats`.

One generic kernel per direction, specialised at compile time by the format's constants:

* :func:`quantize` turns rows ``x[N, dim]`` (bf16 or fp32) into records, either a contiguous
  ``uint8[N, entry_bytes]`` array or written straight into a paged cache through a slot mapping
  (vLLM's fused "quantise and insert").  fp32 rows are first rounded to bf16 (nearest even) for every
  format with ``rounds_to_bf16`` (all but V3.2 ``fp8_ds_mla``), because vLLM only ever quantises bf16
  values there: fp32 input and its bf16 rounding then give identical bytes.
* :func:`dequantize` reads records back (from a record array, or gathered from a paged cache by slot) as
  fp32 rows.

Quantisation rules (vLLM 0.33; see ``formats.py`` for the byte layouts):

* fp8 formats: per block, ``amax = max|x|``; the scale is the smallest power of two ``2**e`` with
  ``amax <= 448 * 2**e``, with ``e >= fmt.e_min`` (vLLM floors amax at 1e-4 for V4 and the indexer, the
  scale at 1e-4 for V3.2); values become ``e4m3(clamp(x * 2**-e, -448, 448))``, round to nearest even.
  ue8m0 scales store ``e + 127``; fp32 scales store ``2.0**e``.
* V3.2's writers take that exponent as ``ceil(log2(scale))`` in fp32, which can fall one lower for a scale
  1 or 2 ulps above a power of two; the ``*_fp32log2`` formats follow that arithmetic
  (``Format.scale_rule``, ``_bits.ceil_log2_fp32``).
* fp4 indexer: per 32 values, smallest ``2**e`` with ``amax <= 6 * 2**e`` (``e >= -126``); values become
  ``e2m1(x * 2**-e)``, round to nearest even, saturating; element 2k in the low nibble.
* The RoPE tail (and plain bf16) is stored as bf16, round to nearest even from fp32 input.
* Dequantising a ue8m0 scale byte ``b`` gives ``2.0 ** (b - 127)`` exactly for every byte: 0 -> 2**-127
  (an fp32 subnormal), 255 -> inf, as vLLM's ``exp2(b - 127)`` and the torch reference.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from . import _checks as C
from ._bits import (
    bf16_bits_to_f32,
    ceil_log2_fp32,
    ceil_log2_ratio,
    e2m1_to_f32,
    e4m3_to_f32,
    f32_to_bf16_bits,
    f32_to_e2m1,
    f32_to_e4m3,
    pow2,
    ue8m0_to_f32,
)
from .formats import Format, PageLayout, get_format, page_layout, record_layout
from .addressing import record_ptrs

_QPARAMS = {"fp8": (0x600000, 8), "fp4": (0x400000, 2), "bf16": (0, 0)}
_SCALE_RULES = {"exact": 0, "fp32_log2_div": 1, "fp32_log2_mul": 2}


@triton.jit
def _quant_kernel(
    x_ptr, x_stride, cache_ptr, slot_ptr,
    page_stride, data_stride, scale_base, scale_stride, block_size,
    HAS_SLOTS: tl.constexpr,
    NQ: tl.constexpr, QB: tl.constexpr, NQB: tl.constexpr, NQB_P2: tl.constexpr,
    FP4: tl.constexpr, SCALE_FP32: tl.constexpr, SCALE_MX4: tl.constexpr, SCALE_SLOTS: tl.constexpr,
    QFRAC: tl.constexpr, QEXP: tl.constexpr, QMAX: tl.constexpr, E_MIN: tl.constexpr,
    NR: tl.constexpr, NR2_P2: tl.constexpr, ROPE_OFF: tl.constexpr,
    NATIVE_FP8: tl.constexpr, SCALE_RULE: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    valid, data, sc = record_ptrs(slot_ptr, row, cache_ptr, page_stride, data_stride, scale_base, scale_stride,
                                   block_size, HAS_SLOTS)
    if valid:
        xrow = x_ptr + row * x_stride

        if NQ > 0:
            blk = tl.arange(0, NQB_P2)
            bmask = (blk < NQB)[:, None]
            if FP4:
                k = tl.arange(0, QB // 2)[None, :]
                idx = blk[:, None] * QB + 2 * k
                xe = tl.load(xrow + idx, mask=bmask, other=0.0).to(tl.float32)
                xo = tl.load(xrow + idx + 1, mask=bmask, other=0.0).to(tl.float32)
                amax = tl.maximum(tl.max(tl.abs(xe), axis=1), tl.max(tl.abs(xo), axis=1))
                e = ceil_log2_ratio(amax, QFRAC, QEXP, E_MIN)
                inv = pow2(-tl.minimum(e, 126))[:, None]
                packed = f32_to_e2m1(xe * inv) | (f32_to_e2m1(xo * inv) << 4)
                tl.store(data + blk[:, None] * (QB // 2) + k, packed.to(tl.uint8), mask=bmask)
            else:
                k = tl.arange(0, QB)[None, :]
                x = tl.load(xrow + blk[:, None] * QB + k, mask=bmask, other=0.0).to(tl.float32)
                amax = tl.max(tl.abs(x), axis=1)
                if SCALE_RULE == 1:  # V3.2 indexer: fp32 scale by a rounded division, log2 in fp32
                    e = ceil_log2_fp32(tl.div_rn(tl.maximum(amax, 1e-4), QMAX))
                elif SCALE_RULE == 2:  # V3.2 latent: by the rounded reciprocal, the scale floored
                    e = ceil_log2_fp32(tl.maximum(amax * (1.0 / QMAX), 1e-4))
                else:
                    e = ceil_log2_ratio(amax, QFRAC, QEXP, E_MIN)
                inv = pow2(-tl.minimum(e, 126))[:, None]
                y = tl.minimum(tl.maximum(x * inv, -QMAX), QMAX)
                if NATIVE_FP8:
                    q = y.to(tl.float8e4nv).to(tl.uint8, bitcast=True)
                else:
                    q = f32_to_e4m3(y).to(tl.uint8)
                tl.store(data + blk[:, None] * QB + k, q, mask=bmask)
            if SCALE_FP32:
                j = tl.arange(0, 4)[None, :]
                if SCALE_MX4:  # four equal UE8M0 bytes (vLLM pack_ue8m0_x4)
                    code4 = tl.minimum(tl.maximum(e + 127, 0), 255)
                    sbytes = code4[:, None] + 0 * j
                else:
                    sbits = (tl.minimum(e, 127) + 127) << 23
                    sbytes = (sbits[:, None] >> (8 * j)) & 0xFF
                tl.store(sc + blk[:, None] * 4 + j, sbytes.to(tl.uint8), mask=bmask)
            else:
                code = tl.minimum(tl.maximum(e + 127, 0), 255)
                code = tl.where(blk < NQB, code, 0)
                tl.store(sc + blk, code.to(tl.uint8), mask=blk < SCALE_SLOTS)

        if NR > 0:
            jb = tl.arange(0, NR2_P2)
            rmask = jb < 2 * NR
            v = tl.load(xrow + NQ + jb // 2, mask=rmask, other=0.0).to(tl.float32)
            b = f32_to_bf16_bits(v)
            byte = (b >> ((jb % 2) * 8)) & 0xFF
            tl.store(data + ROPE_OFF + jb, byte.to(tl.uint8), mask=rmask)


@triton.jit
def _dequant_kernel(
    out_ptr, out_stride, cache_ptr, slot_ptr,
    page_stride, data_stride, scale_base, scale_stride, block_size,
    HAS_SLOTS: tl.constexpr,
    NQ: tl.constexpr, QB: tl.constexpr, NQB: tl.constexpr, NQB_P2: tl.constexpr,
    FP4: tl.constexpr, SCALE_FP32: tl.constexpr, SCALE_MX4: tl.constexpr,
    NR: tl.constexpr, NR_P2: tl.constexpr, ROPE_OFF: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    valid, data, sc = record_ptrs(slot_ptr, row, cache_ptr, page_stride, data_stride, scale_base, scale_stride,
                                   block_size, HAS_SLOTS)
    orow = out_ptr + row * out_stride

    if NQ > 0:
        blk = tl.arange(0, NQB_P2)
        bmask = (blk < NQB)[:, None]
        if SCALE_FP32 and SCALE_MX4:
            sb = tl.load(sc + blk * 4, mask=blk < NQB, other=127).to(tl.int32)
            scale = ue8m0_to_f32(sb)
        elif SCALE_FP32:
            j = tl.arange(0, 4)[None, :]
            sb = tl.load(sc + blk[:, None] * 4 + j, mask=bmask, other=0).to(tl.int32)
            sbits = tl.sum(sb << (8 * j), axis=1)
            scale = sbits.to(tl.float32, bitcast=True)
        else:
            sb = tl.load(sc + blk, mask=blk < NQB, other=127).to(tl.int32)
            scale = ue8m0_to_f32(sb)
        if FP4:
            k = tl.arange(0, QB // 2)[None, :]
            byte = tl.load(data + blk[:, None] * (QB // 2) + k, mask=bmask, other=0).to(tl.int32)
            lo = tl.where(valid, e2m1_to_f32(byte & 0xF) * scale[:, None], 0.0)
            hi = tl.where(valid, e2m1_to_f32(byte >> 4) * scale[:, None], 0.0)
            idx = blk[:, None] * QB + 2 * k
            tl.store(orow + idx, lo, mask=(blk < NQB)[:, None])
            tl.store(orow + idx + 1, hi, mask=(blk < NQB)[:, None])
        else:
            k = tl.arange(0, QB)[None, :]
            byte = tl.load(data + blk[:, None] * QB + k, mask=bmask, other=0).to(tl.int32)
            val = tl.where(valid, e4m3_to_f32(byte) * scale[:, None], 0.0)
            tl.store(orow + blk[:, None] * QB + k, val, mask=(blk < NQB)[:, None])

    if NR > 0:
        v = tl.arange(0, NR_P2)
        rmask = v < NR
        lo = tl.load(data + ROPE_OFF + 2 * v, mask=rmask, other=0).to(tl.int32)
        hi = tl.load(data + ROPE_OFF + 2 * v + 1, mask=rmask, other=0).to(tl.int32)
        rv = tl.where(valid, bf16_bits_to_f32(lo | (hi << 8)), 0.0)
        tl.store(orow + NQ + v, rv, mask=rmask)


def _p2(n: int) -> int:
    return triton.next_power_of_2(max(int(n), 1))


def _layout_for(fmt: Format, cache: torch.Tensor | None, block_size: int | None, alignment: int = 1) -> PageLayout:
    if cache is None:
        return record_layout(fmt)
    if block_size is None:
        raise ValueError("block_size: required when writing to or reading from a paged cache")
    C.check_int("block_size", block_size, minimum=1)
    return page_layout(fmt, block_size, alignment, page_bytes=cache.shape[1])


def _check_cache(name: str, cache: object, device: torch.device) -> torch.Tensor:
    return C.check_pages(name, cache, device=device)


def _kernel_args(fmt: Format, lay: PageLayout) -> tuple[dict, dict]:
    qfrac, qexp = _QPARAMS[fmt.elem]
    return dict(
        NQ=fmt.quant_dim, QB=max(fmt.quant_block, 1), NQB=fmt.num_scales, NQB_P2=_p2(fmt.num_scales),
        FP4=fmt.elem == "fp4", SCALE_FP32=fmt.scale_kind == "fp32", SCALE_MX4=fmt.scale_mx4,
        NR=fmt.rope_dim, ROPE_OFF=fmt.rope_offset,
    ), dict(QFRAC=qfrac, QEXP=qexp, QMAX=float(fmt.qmax), E_MIN=fmt.e_min, SCALE_SLOTS=fmt.scale_slots,
            SCALE_RULE=_SCALE_RULES[fmt.scale_rule])


def quantize(
    x: torch.Tensor,
    fmt: "str | Format",
    *,
    cache: torch.Tensor | None = None,
    slot_mapping: torch.Tensor | None = None,
    block_size: int | None = None,
    check_bounds: bool = True,
    native_fp8: bool | None = None,
    num_warps: int | None = None,
) -> torch.Tensor:
    """Quantise rows ``x[N, dim]`` into ``fmt`` records.

    ``x`` is bf16 or fp32.  For formats with ``fmt.rounds_to_bf16`` (V4, both indexers, bf16) an fp32
    ``x`` is rounded to bf16 (nearest even) here, before the kernel runs, as vLLM only quantises bf16
    values: ``quantize(x)`` and ``quantize(x.to(torch.bfloat16))`` give the same bytes (on a GPU the
    rounding costs one extra pass over ``x``; pass bf16 to avoid it).  V3.2 ``fp8_ds_mla`` quantises fp32
    input directly, as vLLM's fused V3.2 writer does.

    Without ``cache``: returns a new ``uint8[N, entry_bytes]`` record array.  With ``cache``
    (``uint8[num_pages, page_bytes]``, page layout from ``fmt`` and ``block_size``): writes row i to slot
    ``slot_mapping[i]`` (``-1`` skips the row) and returns ``cache``.  ``native_fp8`` (default: on a GPU)
    uses Triton's fp8 cast instead of the integer encoder; both round to nearest even.
    """
    C.check_tensor("x", x, ndim=2, dtypes=(torch.bfloat16, torch.float32))
    f = get_format(fmt, x.shape[1])
    if x.shape[1] != f.dim:
        raise ValueError(f"x: format {f.name} takes {f.dim} values per row, got shape {list(x.shape)}")
    dev = x.device
    n = x.shape[0]
    if f.rounds_to_bf16 and x.dtype == torch.float32:
        x = x.to(torch.bfloat16)  # the only values vLLM quantises (see the docstring)
    if cache is None:
        if slot_mapping is not None:
            raise ValueError("slot_mapping: only meaningful together with cache")
        lay = record_layout(f)
        out = torch.empty((n, f.entry_bytes), dtype=torch.uint8, device=dev)
        slots = None
    else:
        out = _check_cache("cache", cache, dev)
        if slot_mapping is None:
            raise ValueError("slot_mapping: required when writing into a paged cache")
        slots = C.check_index("slot_mapping", slot_mapping, n, dev)
        lay = _layout_for(f, out, block_size)
        if check_bounds:
            C.check_slots_in_range("slot_mapping", slots, out.shape[0] * lay.block_size)
    if n == 0:
        return out
    if native_fp8 is None:
        native_fp8 = C.use_native_fp8(dev)
    common, qargs = _kernel_args(f, lay)
    _quant_kernel[(n,)](
        x, x.stride(0), out, slots if slots is not None else out,
        C.page_stride(out), lay.data_stride, lay.scale_base, lay.scale_stride, lay.block_size,
        HAS_SLOTS=slots is not None, NR2_P2=_p2(2 * f.rope_dim), NATIVE_FP8=bool(native_fp8),
        **common, **qargs, **({} if num_warps is None else {"num_warps": num_warps}),
    )
    return out


def dequantize(
    src: torch.Tensor,
    fmt: "str | Format",
    *,
    slot_mapping: torch.Tensor | None = None,
    block_size: int | None = None,
    dim: int | None = None,
    check_bounds: bool = True,
) -> torch.Tensor:
    """Read ``fmt`` records back as fp32 rows ``[N, dim]``.

    ``src`` is a record array ``uint8[N, entry_bytes]`` (no ``slot_mapping``), or a paged cache
    ``uint8[num_pages, page_bytes]`` read at ``slot_mapping[N]`` with ``block_size`` entries per page
    (slot -1 gives a row of zeros).  ``dim`` is needed only for 'bf16'; for the other formats it may be
    given but must equal the format's own ``dim`` (a ValueError otherwise, never silently ignored).
    """
    if isinstance(fmt, str) and fmt == "bf16" and dim is None:
        raise ValueError("dim: required for the 'bf16' format")
    if dim is not None:
        C.check_int("dim", dim, minimum=1)
    f = get_format(fmt, dim)
    if dim is not None and dim != f.dim:
        raise ValueError(f"dim: {f.name} entries have {f.dim} values, got dim={dim}")
    C.check_pages("src", src)
    dev = src.device
    if slot_mapping is None:
        C.check_tensor("src", src, contiguous=True)
        if src.shape[1] != f.entry_bytes:
            raise ValueError(f"src: {f.name} records are {f.entry_bytes} B, got shape {list(src.shape)}")
        lay = record_layout(f)
        n = src.shape[0]
        slots = None
    else:
        slots = C.check_index("slot_mapping", slot_mapping, None, dev)
        n = slots.shape[0]
        lay = _layout_for(f, src, block_size)
        if check_bounds:
            C.check_slots_in_range("slot_mapping", slots, src.shape[0] * lay.block_size)
    out = torch.empty((n, f.dim), dtype=torch.float32, device=dev)
    if n == 0:
        return out
    common, _ = _kernel_args(f, lay)
    _dequant_kernel[(n,)](
        out, out.stride(0), src, slots if slots is not None else src,
        C.page_stride(src), lay.data_stride, lay.scale_base, lay.scale_stride, lay.block_size,
        HAS_SLOTS=slots is not None, NR_P2=_p2(f.rope_dim), **common,
    )
    return out
