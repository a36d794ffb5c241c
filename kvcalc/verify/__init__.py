"""`kvcalc verify`: allocate the caches a plan lays out on a real device and measure them.

Built so far (issue 7, first part): allocation. The plan (``kvcalc.plan.PoolPlan``, the single description
of the layout) gives the pool: ``num_blocks`` blocks of ``bytes_per_block`` for ``batch`` requests at the
context (plus the engine's null block). verify allocates that one ``uint8`` buffer, as vLLM does, fills it
with a sentinel byte so every page is touched, carves the plan's tensor views out of it, and measures: the
storage bytes of the buffer, the allocator's and the device's view on CUDA, the resident-memory growth on
CPU, and the bytes no longer holding the sentinel (``written_bytes``: 0 until a fill writes them). The
verdict compares each measured figure with its prediction.

Not built yet: the fill through the Triton kernels (compressor, quantisers, paged writes), the read-back
check, several GPUs, and ``check-log``. This is the only part of kvcalc that imports torch, lazily.
"""

from __future__ import annotations

import os
import time

from ..errors import KvcalcError

SENTINEL = 0xA5


def _rss_bytes() -> int:
    """Resident set size of this process (Linux /proc; 0 where unavailable)."""
    try:
        with open(f"/proc/{os.getpid()}/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _torch():
    try:
        import torch
    except ImportError:
        raise KvcalcError("verify needs torch: pip install 'kvcalc[verify]' (a CPU build: see the README)") from None
    return torch


def verify(pool_plan, batch: int = 1, device: str = "cpu", fill: str = "none", plant_extra_pages: int = 0) -> dict:
    """Allocate ``pool_plan``'s pool for ``batch`` requests on ``device`` and compare the measurements with
    the plan. ``plant_extra_pages`` allocates that many blocks more than planned: a wrong allocation the
    check must catch (used by the tests)."""
    if fill != "none":
        raise KvcalcError(f"fill: only 'none' is built (the kernel fill is not yet), got {fill!r}", param="fill")
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise KvcalcError(f"batch: must be a positive integer, got {batch!r}", param="batch")
    p = pool_plan
    if p.engine == "exact":
        raise KvcalcError("engine: verify allocates an engine's block pool; use the vllm engine", param="engine")
    torch = _torch()
    num_blocks = p.blocks_per_request * batch + p.null_blocks
    planned = num_blocks * p.bytes_per_block
    if device == "cuda":
        if not torch.cuda.is_available():
            raise KvcalcError("device: no CUDA device here; use --device cpu", param="device")
        free, _total = torch.cuda.mem_get_info()
        if planned > free:
            raise KvcalcError(f"device: the plan needs {planned:,} B, the GPU has {free:,} B free", param="device")
    elif device != "cpu":
        raise KvcalcError(f"device: choose cuda or cpu, got {device!r}", param="device")
    else:
        avail = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else None
        if avail is not None and planned > avail:
            raise KvcalcError(f"device: the plan needs {planned:,} B, this machine has {avail:,} B free",
                              param="device")

    dev = torch.device(device)
    before = {"rss": _rss_bytes()}
    if device == "cuda":
        torch.cuda.synchronize()
        before.update(alloc=torch.cuda.memory_allocated(), reserved=torch.cuda.memory_reserved(),
                      free=torch.cuda.mem_get_info()[0])
    t0 = time.perf_counter()
    buf = torch.empty(num_blocks + plant_extra_pages, p.bytes_per_block, dtype=torch.uint8, device=dev)
    buf.fill_(SENTINEL)  # touches every page, so resident memory is real
    if device == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    after = {"rss": _rss_bytes()}
    if device == "cuda":
        after.update(alloc=torch.cuda.memory_allocated(), reserved=torch.cuda.memory_reserved(),
                     free=torch.cuda.mem_get_info()[0])

    storage = buf.untyped_storage().nbytes()
    flat = buf.view(-1)
    groups = []
    for t in p.tensors(num_blocks):
        extent = t.offset + (len(t.layers) - 1) * t.layer_stride + (num_blocks - 1) * t.block_stride + t.page_bytes
        if extent > storage:
            raise KvcalcError(f"plan: group {t.group} ({t.component}) reaches byte {extent:,} of a {storage:,} B pool")
        # the view the engine would use: [layers, blocks, page] with the plan's strides (no copy)
        view = torch.as_strided(flat, (len(t.layers), num_blocks, t.page_bytes), (t.layer_stride, t.block_stride, 1),
                                t.offset)
        groups.append({"group": t.group, "component": t.component, "layers": len(t.layers),
                       "page_bytes": t.page_bytes, "real_page_bytes": t.real_page_bytes, "view_bytes": view.numel()})
    written = 0
    step = max(1, (64 << 20) // p.bytes_per_block)  # count in 64 MiB slices: no full-size temporary
    for start in range(0, buf.shape[0], step):
        written += int((buf[start:start + step] != SENTINEL).sum())
    measured = {
        "storage_bytes": storage,
        "resident_growth_bytes": after["rss"] - before["rss"] if device == "cpu" else None,
        "allocator_allocated_delta": after["alloc"] - before["alloc"] if device == "cuda" else None,
        "allocator_reserved_delta": after["reserved"] - before["reserved"] if device == "cuda" else None,
        "device_free_delta": before["free"] - after["free"] if device == "cuda" else None,
    }
    checks = [
        ("allocated_bytes == planned_bytes", storage == planned),
        ("every group's views fit in one block", all(
            sum(g["layers"] * g["page_bytes"] for g in groups if g["group"] == grp.index) == grp.page_bytes
            <= p.bytes_per_block for grp in p.groups)),
        ("written_bytes == 0 with --fill none", written == 0),
    ]
    del buf, flat
    if device == "cuda":
        torch.cuda.empty_cache()
    return {
        "model": p.model,
        "context_tokens": p.context,
        "precision": p.precision,
        "engine": p.engine,
        "engine_version": p.engine_version,
        "device": device,
        "fill": fill,
        "batch": batch,
        "predicted_bytes": p.analytic_bytes * batch,
        "planned_bytes": planned,
        "planned_blocks": num_blocks,
        "bytes_per_block": p.bytes_per_block,
        "allocated_bytes": storage,
        "written_bytes": written,
        "measured": measured,
        "allocate_seconds": seconds,
        "groups": groups,
        "checks": [{"check": name, "pass": ok} for name, ok in checks],
        "verdict": "pass" if all(ok for _, ok in checks) else "fail",
        "not_built": "kernel fill (compressor, quantisers, paged writes), read-back check, several GPUs, check-log",
    }
