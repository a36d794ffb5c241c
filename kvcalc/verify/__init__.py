"""`kvcalc verify`: allocate the caches a plan lays out on a real device, fill them as a prefill would, and
measure.

The plan (``kvcalc.plan.PoolPlan``, the single description of the layout) gives the pool: ``num_blocks``
blocks of ``bytes_per_block`` for ``batch`` requests at the context, plus the engine's null block (block 0).
verify allocates that one ``uint8`` buffer, as vLLM does, fills it with a sentinel byte so every page is
touched, carves the plan's tensor views out of it, hands each request's groups their blocks, and measures:

* allocation: the storage bytes of the buffer, the allocator's and the device's view on CUDA, the
  resident-memory growth on CPU;
* with ``fill='full'`` or ``'sample'``: the prefill (:mod:`kvcalc.verify.fill`) writes every cache through
  the writers; ``written_bytes`` is *counted* in memory, per group, as the bytes that no longer hold the
  sentinel. A written byte may equal the sentinel, so the fill runs twice: after the first pass the
  remaining sentinel bytes are turned into a second sentinel and the (deterministic) fill is repeated; the
  bytes the second pass turned back into the first sentinel are the written ones the first count missed.
  Page padding, the null block, the tail of each block a smaller group leaves unused and any unused slot
  must still hold a sentinel; a byte written outside every group's pages is reported as stray;
* a read-back of sampled entries of every page tensor against the torch reference (named tolerances).

The verdict compares each measured figure with its prediction. This is the only part of kvcalc that imports
torch, lazily.
"""

from __future__ import annotations

import os
import time

from ..errors import KvcalcError
from .fill import SENTINEL, SENTINEL2, TOLERANCES

FILLS = ("none", "sample", "full")


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


def _block_tables(torch, p, batch, device):
    """Each request's blocks per group: a contiguous range of block ids after the null block (a fresh
    engine hands blocks out in order), used through the table in reverse, so that logical block 0 is the
    range's last block and the addressing is exercised."""
    tables, ranges = {}, {}
    nxt = p.null_blocks
    for r in range(batch):
        for g in p.groups:
            n = g.blocks_per_request
            ranges[(r, g.index)] = (nxt, n)
            tables[(r, g.index)] = torch.arange(nxt + n - 1, nxt - 1, -1, dtype=torch.int64, device=device)
            nxt += n
    return tables, ranges


def _counter(torch, sentinel: int, equal: bool):
    """Bytes of a tensor that differ from (``equal=False``) or equal (``equal=True``) ``sentinel``:
    count_nonzero of ``x ^ sentinel`` (one pass, several times faster than summing a bool mask)."""
    def count(x) -> int:
        if x.numel() == 0:
            return 0
        n = int(torch.count_nonzero(x ^ sentinel))
        return x.numel() - n if equal else n
    return count


def _step(p) -> int:
    """Blocks per 64 MiB slice: every whole-pool pass works slice by slice, with no full-size temporary."""
    return max(1, (64 << 20) // p.bytes_per_block)


def _slices(buf, p):
    step = _step(p)
    return (buf[i:i + step] for i in range(0, buf.shape[0], step))


def _count(torch, buf, tensors, ranges, p, count) -> dict:
    """Bytes ``count`` finds in: the whole buffer, each group's real page bytes over its requests'
    blocks, each group's page padding, and every view's null-block page(s). Scans in slices, no full-size
    temporary. Bytes outside every view's pages show as ``total`` minus the rest."""
    flat = buf.view(-1)
    nb = buf.shape[0]
    step = _step(p)
    total = sum(count(sl) for sl in _slices(buf, p))
    null = 0
    data = {g.index: 0 for g in p.groups}
    pad = {g.index: 0 for g in p.groups}
    for t in tensors:
        for i in range(len(t.layers)):
            view = torch.as_strided(flat, (nb, t.page_bytes), (t.block_stride, 1), t.offset + i * t.layer_stride)
            null += count(view[:p.null_blocks])
            for (r, g), (b0, n) in ranges.items():
                if g != t.group:
                    continue
                for a in range(b0, b0 + n, step):
                    rows = view[a:min(b0 + n, a + step)]
                    data[g] += count(rows[:, :t.real_page_bytes])
                    if t.page_bytes > t.real_page_bytes:
                        pad[g] += count(rows[:, t.real_page_bytes:])
    return {"total": total, "null": null, "data": data, "padding": pad}


def _add(a: dict, b: dict) -> dict:
    return {k: ({g: a[k][g] + b[k][g] for g in a[k]} if isinstance(a[k], dict) else a[k] + b[k]) for k in a}


def _copy_bandwidth(torch, device) -> float | None:
    """The device's measured copy bandwidth (bytes read + written per second), CUDA only: 4 copies of 256 MiB."""
    if device != "cuda":
        return None
    a = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
    b.copy_(a)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(4):
        b.copy_(a)
    torch.cuda.synchronize()
    bw = 4 * 2 * a.numel() / (time.perf_counter() - t0)
    del a, b
    torch.cuda.empty_cache()
    return bw


class _Progress:
    """A rich progress bar on stderr when it is a terminal (quiet otherwise)."""

    def __init__(self, enabled: bool, total: int, label: str):
        self.bar = None
        if enabled and total:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            self.bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                TextColumn("tokens"), TimeRemainingColumn(), transient=True)
            self.bar.start()
            self.task = self.bar.add_task(label, total=total)

    def advance(self, n: int) -> None:
        if self.bar is not None:
            self.bar.update(self.task, advance=n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


def verify(pool_plan, batch: int = 1, device: str = "cpu", fill: str = "none", writer: str | None = None,
           model=None, progress: bool = False, plant_extra_pages: int = 0, plant_stray_write: bool = False) -> dict:
    """Allocate ``pool_plan``'s pool for ``batch`` requests on ``device``, fill it (``fill``: none, sample,
    full) through ``writer`` (triton or torch; default triton on CUDA, torch on CPU) and compare the
    measurements with the plan.

    Planted faults the check must catch (used by the tests): ``plant_extra_pages`` allocates that many
    blocks more than planned; ``plant_stray_write`` writes one byte into the null block after the fill."""
    if fill not in FILLS:
        raise KvcalcError(f"fill: choose one of {', '.join(FILLS)}, got {fill!r}", param="fill")
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise KvcalcError(f"batch: must be a positive integer, got {batch!r}", param="batch")
    p = pool_plan
    if p.engine == "exact":
        raise KvcalcError("engine: verify allocates an engine's block pool; use the vllm engine", param="engine")
    if device not in ("cpu", "cuda"):
        raise KvcalcError(f"device: choose cuda or cpu, got {device!r}", param="device")
    torch = _torch()
    num_blocks = p.blocks_per_request * batch + p.null_blocks
    planned = num_blocks * p.bytes_per_block
    if device == "cuda":
        if not torch.cuda.is_available():
            raise KvcalcError("device: no CUDA device here; use --device cpu", param="device")
        free, _total = torch.cuda.mem_get_info()
        if planned > free:
            raise KvcalcError(f"device: the plan needs {planned:,} B, the GPU has {free:,} B free", param="device")
    else:
        avail = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else None
        if avail is not None and planned > avail:
            raise KvcalcError(f"device: the plan needs {planned:,} B, this machine has {avail:,} B free",
                              param="device")
    fill_state = None
    if fill != "none":
        from . import fill as F
        from ..config import load_model

        writer = writer or ("triton" if device == "cuda" else "torch")
        torch, K, R, w = F.load_backend(writer, device)
        spec = model if model is not None else load_model(p.model)
        chunk = int(p.settings.get("max_num_batched_tokens", 8192))
        fill_state = (F, K, R, w, spec, chunk)
    else:
        writer = None

    dev = torch.device(device)
    copy_bw = _copy_bandwidth(torch, device)
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
    seconds = {"allocate": time.perf_counter() - t0}
    after = {"rss": _rss_bytes()}
    if device == "cuda":
        after.update(alloc=torch.cuda.memory_allocated(), reserved=torch.cuda.memory_reserved(),
                     free=torch.cuda.mem_get_info()[0])

    storage = buf.untyped_storage().nbytes()
    flat = buf.view(-1)
    tensors = p.tensors(num_blocks)
    tables, ranges = _block_tables(torch, p, batch, dev)
    for t in tensors:
        extent = t.offset + (len(t.layers) - 1) * t.layer_stride + (num_blocks - 1) * t.block_stride + t.page_bytes
        if extent > storage:
            raise KvcalcError(f"plan: group {t.group} ({t.component}) reaches byte {extent:,} of a {storage:,} B pool")

    complete, readback, expected, fill_info = True, [], None, None
    counts = None
    try:
        if fill_state is not None:
            F, K, R, w, spec, chunk = fill_state
            job = F.Fill(torch, K, R, w, p, spec, flat, num_blocks, tables, batch, chunk, fill)
            expected = job.expected_written()
            bar = _Progress(progress, 2 * job.total_tokens, f"fill ({w.name}, 2 passes)")
            try:
                t1 = time.perf_counter()
                job.run(bar.advance)
                seconds["fill_pass1"] = time.perf_counter() - t1
                if plant_stray_write:
                    buf[0, 0] = 0
                counts = _count(torch, buf, tensors, ranges, p, _counter(torch, SENTINEL, equal=False))
                readback = job.readback()
                t2 = time.perf_counter()
                for sl in _slices(buf, p):
                    sl.masked_fill_(sl == SENTINEL, SENTINEL2)
                job.run(bar.advance)
                seconds["fill_pass2"] = time.perf_counter() - t2
            finally:
                bar.close()
            counts = _add(counts, _count(torch, buf, tensors, ranges, p, _counter(torch, SENTINEL, equal=True)))
            fill_info = {"writer": w.name, "chunk_tokens": chunk, "jobs": len(job.jobs),
                         "formats": {j.component: j.fmt for j in job.jobs},  # the vLLM writer rule each used
                         "layers": "every layer" if fill == "full" else "first and last layer of each page tensor",
                         "tokens_per_pass": job.total_tokens}
        else:  # nothing was written: the whole-buffer count says so (per-group counts would all be 0)
            count = _counter(torch, SENTINEL, equal=False)
            total = sum(count(sl) for sl in _slices(buf, p))
            counts = {"total": total, "null": 0, "data": {g.index: 0 for g in p.groups},
                      "padding": {g.index: 0 for g in p.groups}}
    except KeyboardInterrupt:
        complete = False
    finally:
        del buf, flat
        if fill_state is not None:
            job = None  # noqa: F841  (drops the views and tables)
        tables = None
        if device == "cuda":
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
    end = {}
    if device == "cuda":
        end = {"allocated": torch.cuda.memory_allocated(), "free": torch.cuda.mem_get_info()[0]}

    measured = {
        "storage_bytes": storage,
        "resident_growth_bytes": after["rss"] - before["rss"] if device == "cpu" else None,
        "allocator_allocated_delta": after["alloc"] - before["alloc"] if device == "cuda" else None,
        "allocator_reserved_delta": after["reserved"] - before["reserved"] if device == "cuda" else None,
        "device_free_delta": before["free"] - after["free"] if device == "cuda" else None,
        "allocator_back_to_start": (end["allocated"] == before["alloc"]) if device == "cuda" else None,
        "device_free_back_to_start_bytes": (before["free"] - end["free"]) if device == "cuda" else None,
    }
    groups = []
    for g in p.groups:
        gt = [t for t in tensors if t.group == g.index]
        n_blocks = g.blocks_per_request * batch
        groups.append({
            "group": g.index, "kind": g.kind, "components": list(g.components), "layers": len(g.layers),
            "blocks": n_blocks,
            "predicted_bytes": g.analytic_bytes * batch,
            "planned_bytes": n_blocks * p.bytes_per_block,
            "page_bytes": g.page_bytes, "real_page_bytes": g.real_page_bytes,
            "views": [{"component": t.component, "layers": len(t.layers), "page_bytes": t.page_bytes,
                       "real_page_bytes": t.real_page_bytes, "offset": t.offset, "layer_stride": t.layer_stride,
                       "block_stride": t.block_stride} for t in gt],
            "expected_written_bytes": (expected or {}).get(g.index, 0),
            "written_bytes": counts["data"][g.index] if counts else None,
            "padding_written_bytes": counts["padding"][g.index] if counts else None,
        })
    written = counts["total"] if counts else None
    in_pages = (sum(counts["data"].values()) + sum(counts["padding"].values()) + counts["null"]) if counts else 0
    checks = [
        ("allocated_bytes == planned_bytes", storage == planned),
        ("every group's pages fit in one block", all(g.page_bytes <= p.bytes_per_block for g in p.groups)),
    ]
    if device == "cuda":
        rounding = measured["allocator_allocated_delta"] - planned
        measured["allocator_rounding_bytes"] = rounding
        checks.append(("allocator delta == planned_bytes rounded up to the allocator's 512 B", 0 <= rounding < 512))
        checks.append(("allocator back to its starting level afterwards", bool(measured["allocator_back_to_start"])))
    if counts is not None:
        if fill == "none":
            checks.append(("written_bytes == 0 with --fill none", written == 0))
        else:
            for g in groups:
                checks.append((f"group {g['group']}: written == expected ({g['expected_written_bytes']:,} B)",
                               g["written_bytes"] == g["expected_written_bytes"]))
            checks.append(("page padding still holds the sentinel", sum(counts["padding"].values()) == 0))
            checks.append(("null block still holds the sentinel", counts["null"] == 0))
            checks.append(("no byte written outside the pages", written == in_pages))
            checks.append((f"read-back of {len(readback)} sampled page tensors within tolerance",
                           bool(readback) and all(c["pass"] for c in readback)))
    verdict = "incomplete" if not complete else ("pass" if all(ok for _, ok in checks) else "fail")
    fill_seconds = seconds.get("fill_pass1")
    return {
        "model": p.model,
        "context_tokens": p.context,
        "precision": p.precision,
        "engine": p.engine,
        "engine_version": p.engine_version,
        "device": device,
        "fill": fill,
        "writer": writer,
        "batch": batch,
        "complete": complete,
        "predicted_bytes": p.analytic_bytes * batch,
        "planned_bytes": planned,
        "planned_blocks": num_blocks,
        "bytes_per_block": p.bytes_per_block,
        "allocated_bytes": storage,
        "expected_written_bytes": sum(expected.values()) if expected else 0,
        "written_bytes": written,
        "stray_written_bytes": (written - in_pages) if counts else None,
        "measured": measured,
        "seconds": seconds,
        "fill_bytes_per_second": (counts["total"] / fill_seconds) if (counts and fill_seconds) else None,
        "device_copy_bytes_per_second": copy_bw,
        "fill_info": fill_info,
        "groups": groups,
        "readback": readback,
        "tolerances": TOLERANCES if fill != "none" else {},
        "checks": [{"check": name, "pass": ok} for name, ok in checks],
        "verdict": verdict,
        "basis": ("predicted: exact analytic bytes (kvcalc estimate, complete basis); planned: the engine's "
                  "paged pool (blocks x bytes per block, null block included); allocated: storage bytes on "
                  "CPU, allocator delta on CUDA; written: bytes counted in memory after the fill"),
    }


def run_one(model, context: int, *, precision=None, engine="vllm", settings=None, batch=1, device="cpu",
            fill="none", writer=None, tp=1, rank=0, progress=False) -> dict:
    """Plan one rank's shard of ``model`` at ``context`` and verify it."""
    from ..plan import plan

    p = plan(model, context, precision=precision, engine=engine, settings=settings, tp=tp)
    out = verify(p, batch=batch, device=device, fill=fill, writer=writer, model=model, progress=progress)
    out["tp"], out["rank"] = tp, rank
    return out


def run(model, context: int, *, tp: int = 1, **kw) -> dict:
    """`kvcalc verify`: one rank in this process, or ``tp`` ranks in their own processes (gathered on rank 0);
    the combined report sums bytes over ranks and passes only when every rank passes."""
    if isinstance(tp, bool) or not isinstance(tp, int) or tp < 1:
        raise KvcalcError(f"tp: must be a positive integer, got {tp!r}", param="tp")
    if tp == 1:
        return run_one(model, context, **kw)
    from ..plan import check_tp

    check_tp(model, tp)
    _torch()
    from .parallel import run_ranks

    kw = dict(kw, progress=False)
    ranks = run_ranks(tp, dict(kw, model=model, context=context, tp=tp))
    first = ranks[0]
    out = {k: first[k] for k in ("model", "context_tokens", "precision", "engine", "engine_version", "device", "fill",
                                 "writer", "batch", "basis", "tolerances")}
    for k in ("predicted_bytes", "planned_bytes", "allocated_bytes", "expected_written_bytes", "written_bytes"):
        out[k] = sum(r[k] or 0 for r in ranks)
    out["groups"] = [
        dict(g, **{k: sum(r["groups"][i][k] or 0 for r in ranks)
                   for k in ("blocks", "predicted_bytes", "planned_bytes", "expected_written_bytes", "written_bytes")})
        for i, g in enumerate(first["groups"])
    ]
    out["planned_blocks"] = sum(r["planned_blocks"] for r in ranks)
    out["measured"] = {"per_rank": [r["measured"] for r in ranks]}
    out["complete"] = all(r["complete"] for r in ranks)
    out["checks"] = [dict(c, check=f"rank {r['rank']}: {c['check']}") for r in ranks for c in r["checks"]]
    out["verdict"] = ("incomplete" if not out["complete"] else
                      "pass" if all(r["verdict"] == "pass" for r in ranks) else "fail")
    out["tp"] = tp
    out["ranks"] = ranks
    out["seconds"] = first["seconds"]
    out["fill_bytes_per_second"] = None
    return out
