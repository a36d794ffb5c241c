"""Addressing in paged caches: where a slot's bytes sit (a Triton helper the writers share) and the slot
mappings that place tokens and compressed entries into pages.

A paged cache is ``uint8[num_pages, page_bytes]``; ``slot = page * block_size + pos`` addresses entry
``pos`` of page ``page`` (vLLM's slot mapping).  Where the bytes of one entry go inside a page is given by
:class:`kvcalc_kernels.formats.PageLayout`.  Nothing here writes a cache: the writers live in
:mod:`kvcalc_kernels.quant` (quantise and insert), :mod:`kvcalc_kernels.paged` (record copies) and
:mod:`kvcalc_kernels.compressor` (state slots); all of them import this module, and it imports none of them.

Slot mappings (plain torch, no kernels): :func:`slots_from_block_table` (token positions through a block
table), :func:`compressed_slots` (entry ``i = pos // ratio`` of a compressed cache, vLLM
``compressor_utils.py::CompressedSlotMappingKernel``), :func:`ring_slots` (sliding-window ring of the last
``len(pages) * block_size`` tokens, e.g. the 128-token SWA window in two 64-token pages).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from . import _checks as C


@triton.jit
def record_ptrs(slot_ptr, row, cache_ptr, page_stride, data_stride, scale_base, scale_stride, block_size,
                 HAS_SLOTS: tl.constexpr):
    """Where record ``row`` lives: (valid, data pointer, scale pointer). Slot -1 marks a row to skip; its
    pointers are those of slot 0 and must not be used unmasked."""
    if HAS_SLOTS:
        slot = tl.load(slot_ptr + row).to(tl.int64)
    else:
        slot = row
    valid = slot >= 0
    slot = tl.maximum(slot, 0)
    page_base = cache_ptr + (slot // block_size) * page_stride
    pos = slot % block_size
    return valid, page_base + pos * data_stride, page_base + scale_base + pos * scale_stride


def slots_from_block_table(positions: torch.Tensor, block_table: torch.Tensor, block_size: int) -> torch.Tensor:
    """``block_table[pos // block_size] * block_size + pos % block_size`` (int64)."""
    C.check_int("block_size", block_size, minimum=1)
    C.check_tensor("positions", positions, ndim=1, dtypes=(torch.int32, torch.int64), last_contiguous=False)
    C.check_tensor("block_table", block_table, ndim=1, dtypes=(torch.int32, torch.int64), last_contiguous=False)
    p = positions.long()
    if p.numel() and (int(p.min()) < 0 or int(p.max()) >= block_table.shape[0] * block_size):
        raise ValueError(
            f"positions: must lie in [0, {block_table.shape[0] * block_size}) for a block table of "
            f"{block_table.shape[0]} blocks of {block_size}"
        )
    return block_table.long()[p // block_size] * block_size + p % block_size


def compressed_slots(start_pos: int, n_tokens: int, ratio: int, block_table: torch.Tensor,
                     block_size: int) -> torch.Tensor:
    """Slots of the compressed entries a chunk of positions ``start_pos .. start_pos + n_tokens - 1``
    completes (entry ``i`` closes at position ``(i + 1) * ratio - 1``); ``block_size`` counts entries."""
    C.check_int("start_pos", start_pos, minimum=0)
    C.check_int("n_tokens", n_tokens, minimum=0)
    C.check_int("ratio", ratio, minimum=1)
    C.check_tensor("block_table", block_table, ndim=1, dtypes=(torch.int32, torch.int64), last_contiguous=False)
    C.check_int("block_size", block_size, minimum=1)
    first = start_pos // ratio
    n = (start_pos + n_tokens) // ratio - first
    if n and first + n > block_table.shape[0] * block_size:
        raise ValueError(
            f"block_table: {block_table.shape[0]} blocks of {block_size} entries hold entries [0, "
            f"{block_table.shape[0] * block_size}), the chunk completes entries up to {first + n - 1}"
        )
    idx = torch.arange(first, first + n, dtype=torch.int64, device=block_table.device)
    return slots_from_block_table(idx, block_table, block_size)


def ring_slots(start_pos: int, n_tokens: int, pages: torch.Tensor, block_size: int) -> torch.Tensor:
    """Slots of positions ``start_pos ..`` in a ring of ``len(pages) * block_size`` token slots (position
    ``p`` in ring row ``p % ring``).  Positions the same chunk overwrites get -1, so a parallel write never
    hits one slot twice and the ring ends up holding the last ``ring`` tokens."""
    C.check_int("start_pos", start_pos, minimum=0)
    C.check_int("n_tokens", n_tokens, minimum=0)
    C.check_int("block_size", block_size, minimum=1)
    C.check_tensor("pages", pages, ndim=1, dtypes=(torch.int32, torch.int64), last_contiguous=False)
    if pages.shape[0] == 0:
        raise ValueError("pages: the ring needs at least one page")
    ring = pages.shape[0] * block_size
    pos = torch.arange(start_pos, start_pos + n_tokens, device=pages.device, dtype=torch.int64)
    r = pos % ring
    slots = pages.long()[r // block_size] * block_size + r % block_size
    return torch.where(pos >= start_pos + n_tokens - ring, slots, torch.full_like(slots, -1))
