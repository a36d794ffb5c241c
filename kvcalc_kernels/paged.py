"""Paged caches: allocation with aligned page strides, record scatter / gather kernels, and the sliding-window
ring writer.

Addressing (slot -> page bytes) and the slot mappings live in :mod:`kvcalc_kernels.addressing`; this module
holds writers only.

* :func:`kvcalc_kernels.quant.quantize` with ``cache=`` quantises and writes in one pass (vLLM's
  ``quantize_and_insert_k_cache`` / fused compressor store); :func:`write_swa` uses it for the window ring.
* :func:`scatter_records` copies already-built records into pages; :func:`gather_records` reads them back.
* :func:`kvcalc_kernels.compressor.save_states` writes compressor-state slots.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from . import _checks as C
from .addressing import record_ptrs, ring_slots
from .formats import Format, PageLayout, get_format, page_layout
from .quant import quantize


@triton.jit
def _records_kernel(
    rec_ptr, rec_stride, cache_ptr, slot_ptr,
    page_stride, data_stride, scale_base, scale_stride, block_size,
    DB: tl.constexpr, DB_P2: tl.constexpr, SB: tl.constexpr, SB_P2: tl.constexpr, GATHER: tl.constexpr,
):
    i = tl.program_id(0).to(tl.int64)
    valid, data, sc = record_ptrs(slot_ptr, i, cache_ptr, page_stride, data_stride, scale_base, scale_stride,
                                  block_size, True)
    rec = rec_ptr + i * rec_stride
    b = tl.arange(0, DB_P2)
    dm = b < DB
    dst = data + b
    s = tl.arange(0, SB_P2)
    smask = s < SB
    sdst = sc + s
    if GATHER:
        # slot -1: read slot 0 (always in bounds) and return zeros
        v = tl.load(dst, mask=dm, other=0)
        tl.store(rec + b, tl.where(valid, v, 0), mask=dm)
        if SB > 0:
            v2 = tl.load(sdst, mask=smask, other=0)
            tl.store(rec + DB + s, tl.where(valid, v2, 0), mask=smask)
    elif valid:
        v = tl.load(rec + b, mask=dm)
        tl.store(dst, v, mask=dm)
        if SB > 0:
            v2 = tl.load(rec + DB + s, mask=smask)
            tl.store(sdst, v2, mask=smask)


def _split(lay: PageLayout) -> tuple[int, int]:
    f = lay.fmt
    if f.split_pages and f.scale_part_bytes:
        return f.data_bytes, f.scale_part_bytes
    return f.entry_bytes, 0


def page_bytes(fmt: "str | Format", block_size: int, alignment: int = 1, dim: int | None = None) -> int:
    """Bytes of one page: ``block_size * entry_bytes`` rounded up to ``alignment``."""
    return page_layout(fmt, block_size, alignment, dim).page_bytes


def allocate_cache(fmt: "str | Format", num_pages: int, block_size: int, *, alignment: int = 1,
                   dim: int | None = None, device: "torch.device | str" = "cpu",
                   page_bytes: int | None = None) -> torch.Tensor:
    """A zeroed ``uint8[num_pages, page_bytes]`` cache for ``fmt`` (pages padded to ``alignment``)."""
    C.check_int("num_pages", num_pages, minimum=1)
    lay = page_layout(fmt, block_size, alignment, dim, page_bytes=page_bytes)
    return torch.zeros((num_pages, lay.page_bytes), dtype=torch.uint8, device=device)


def _prep(fmt, cache, slot_mapping, block_size, dim, check_bounds):
    f = get_format(fmt, dim)
    C.check_pages("cache", cache)
    dev = cache.device
    C.check_int("block_size", block_size, minimum=1)
    lay = page_layout(f, block_size, 1, page_bytes=cache.shape[1])
    slots = C.check_index("slot_mapping", slot_mapping, None, dev)
    if check_bounds:
        C.check_slots_in_range("slot_mapping", slots, cache.shape[0] * block_size)
    return f, lay, slots


def _launch(records, cache, slots, lay, gather):
    db, sb = _split(lay)
    _records_kernel[(slots.shape[0],)](
        records, records.stride(0), cache, slots,
        C.page_stride(cache), lay.data_stride, lay.scale_base, lay.scale_stride, lay.block_size,
        DB=db, DB_P2=triton.next_power_of_2(db), SB=sb, SB_P2=triton.next_power_of_2(max(sb, 1)),
        GATHER=gather,
    )


def scatter_records(records: torch.Tensor, fmt: "str | Format", cache: torch.Tensor, slot_mapping: torch.Tensor,
                    block_size: int, *, dim: int | None = None, check_bounds: bool = True) -> torch.Tensor:
    """Copy ``records[N, entry_bytes]`` (uint8) into ``cache`` at ``slot_mapping[N]`` (-1 skips)."""
    f, lay, slots = _prep(fmt, cache, slot_mapping, block_size, dim, check_bounds)
    C.check_tensor("records", records, ndim=2, dtypes=(torch.uint8,), shape=[slots.shape[0], f.entry_bytes],
                   device=cache.device)
    if slots.shape[0]:
        _launch(records, cache, slots, lay, gather=False)
    return cache


def gather_records(cache: torch.Tensor, fmt: "str | Format", slot_mapping: torch.Tensor, block_size: int, *,
                   dim: int | None = None, check_bounds: bool = True) -> torch.Tensor:
    """Read the records at ``slot_mapping[N]`` back as ``uint8[N, entry_bytes]`` (slot -1: zeros)."""
    f, lay, slots = _prep(fmt, cache, slot_mapping, block_size, dim, check_bounds)
    out = torch.empty((slots.shape[0], f.entry_bytes), dtype=torch.uint8, device=cache.device)
    if slots.shape[0]:
        _launch(out, cache, slots, lay, gather=True)
    return out


def write_swa(x: torch.Tensor, fmt: "str | Format", cache: torch.Tensor, start_pos: int, pages: torch.Tensor,
              block_size: int, **kw) -> torch.Tensor:
    """Quantise a chunk's token rows ``x[T, dim]`` into a sliding-window ring cache (the last
    ``len(pages) * block_size`` tokens survive; V4: 128 tokens = 2 pages of 64).  The ring pages must be
    distinct."""
    C.check_tensor("x", x, ndim=2, dtypes=(torch.bfloat16, torch.float32))
    C.check_tensor("pages", pages, ndim=1, dtypes=(torch.int32, torch.int64), last_contiguous=False)
    if torch.unique(pages).numel() != pages.numel():
        raise ValueError(f"pages: ring page ids must be distinct, got {pages.tolist()}")
    slots = ring_slots(start_pos, x.shape[0], pages, block_size)
    return quantize(x, fmt, cache=cache, slot_mapping=slots, block_size=block_size, **kw)
