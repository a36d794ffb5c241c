"""verify on one shared block pool (vLLM's): the plan's ``num_blocks`` blocks of ``bytes_per_block`` in one
``uint8`` buffer, the plan's tensor views carved out of it, each request's groups handed their blocks, the prefill
written through the kernels and every byte counted (see :mod:`kvcalc.verify`). Torch, lazily."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from ..errors import KvcalcError, quote
from .faults import ACTIVE as FAULTS
from .fill import SENTINEL, SENTINEL2, TOLERANCES
from .measure import (FILLS, MemorySnapshot, _check_room, _copy_bandwidth, _counter, _memory, _Progress, _torch,
                      measured_from)
from .result import Check, FillInfo, Measured, Seconds, VerifyGroup, VerifyResult, VerifyView


@dataclass(frozen=True)
class Counts:
    """Bytes a count found: in the whole buffer, in the null block's pages, and per group (by index) in its
    requests' real page bytes and in its page padding."""

    total: int
    null: int
    data: dict
    padding: dict

    def __add__(self, other: "Counts") -> "Counts":
        return Counts(self.total + other.total, self.null + other.null,
                      {g: self.data[g] + other.data[g] for g in self.data},
                      {g: self.padding[g] + other.padding[g] for g in self.padding})

    @property
    def in_pages(self) -> int:
        """Written bytes found inside some view's pages (real bytes, padding, the null block)."""
        return sum(self.data.values()) + sum(self.padding.values()) + self.null


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


def _step(p) -> int:
    """Blocks per 64 MiB slice: every whole-pool pass works slice by slice, with no full-size temporary."""
    return max(1, (64 << 20) // p.bytes_per_block)


def _slices(buf, p):
    step = _step(p)
    return (buf[i:i + step] for i in range(0, buf.shape[0], step))


def _count(torch, buf, tensors, ranges, p, count) -> Counts:
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
    return Counts(total, null, data, pad)


@dataclass
class _Run:
    """One allocation and what it measured, filled in step by step (an interrupt keeps what was reached)."""

    plan: object
    device: str
    batch: int
    fill: str
    num_blocks: int
    storage: int = 0
    tensors: tuple = ()
    before: MemorySnapshot | None = None
    after: MemorySnapshot | None = None
    end: MemorySnapshot | None = None
    seconds: dict = field(default_factory=dict)  # step -> seconds (result.Seconds' fields)
    complete: bool = True
    counts: Counts | None = None
    expected: dict | None = None
    readback: list = field(default_factory=list)
    fill_info: FillInfo | None = None


def _check_inputs(p, batch, device: str, fill: str) -> None:
    """Refuse what verify cannot run (before torch is imported)."""
    from ..engines import get_engine

    if fill not in FILLS:
        raise KvcalcError(f"fill: choose one of {', '.join(FILLS)}, got {quote(fill)}", param="fill")
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise KvcalcError(f"batch: must be a positive integer, got {quote(batch)}", param="batch")
    from ..engines.base import Capability

    if Capability.BLOCK_POOL not in get_engine(p.engine).capabilities:
        raise KvcalcError(f"engine: the {p.engine} engine has no block pool for verify to allocate", param="engine")
    if device not in ("cpu", "cuda"):
        raise KvcalcError(f"device: choose cuda or cpu, got {quote(device)}", param="device")


def _fill_backend(p, fill: str, writer, device: str, model):
    """The writer's name and ``(fill module, kernels, reference, writer, model spec, chunk)``; (None, None)
    with ``fill='none'``. The chunk is the engine's prefill step (``PoolPlan.fill_chunk``)."""
    if fill == "none":
        return None, None
    from . import fill as F
    from ..config import load_model

    writer = writer or ("triton" if device == "cuda" else "torch")
    _, K, R, w = F.load_backend(writer, device)
    spec = model if model is not None else load_model(p.model)
    chunk = int(p.fill_chunk if p.fill_chunk is not None else 8192)
    return writer, (F, K, R, w, spec, chunk)


def _allocate(torch, run: _Run, rows: int):
    """The pool's one ``uint8`` buffer, every byte set to the sentinel (so every page is touched), with the
    memory figures before and after and the time it took."""
    p = run.plan
    run.before = _memory(torch, run.device)
    t0 = time.perf_counter()
    buf = torch.empty(rows, p.bytes_per_block, dtype=torch.uint8, device=torch.device(run.device))
    buf.fill_(SENTINEL)  # touches every page, so resident memory is real
    if run.device == "cuda":
        torch.cuda.synchronize()
    run.seconds["allocate"] = time.perf_counter() - t0
    run.after = _memory(torch, run.device)
    run.storage = buf.untyped_storage().nbytes()
    run.tensors = p.tensors(run.num_blocks)
    for t in run.tensors:
        extent = (t.offset + (len(t.layers) - 1) * t.layer_stride + (run.num_blocks - 1) * t.block_stride
                  + t.page_bytes)
        if extent > run.storage:
            raise KvcalcError(f"plan: group {t.group} ({t.component}) reaches byte {extent:,} of a "
                              f"{run.storage:,} B pool")
    return buf


def _count_unfilled(torch, run: _Run, buf) -> Counts:
    """Nothing was written: the whole-buffer count says so (per-group counts would all be 0)."""
    p = run.plan
    count = _counter(torch, SENTINEL, equal=False)
    total = sum(count(sl) for sl in _slices(buf, p))
    return Counts(total, 0, {g.index: 0 for g in p.groups}, {g.index: 0 for g in p.groups})


def _fill(torch, run: _Run, backend, buf, tables, ranges, progress: bool) -> None:
    """The two fill passes and their counts (see the module docstring), the read-back after the first."""
    F, K, R, w, spec, chunk = backend
    p = run.plan
    job = F.Fill(torch, K, R, w, p, spec, buf.view(-1), run.num_blocks, tables, run.batch, chunk, run.fill)
    try:
        run.expected = job.expected_written()
        bar = _Progress(progress, 2 * job.total_tokens, f"fill ({w.name}, 2 passes)")
        try:
            t1 = time.perf_counter()
            job.run(bar.advance)
            run.seconds["fill_pass1"] = time.perf_counter() - t1
            if FAULTS.stray_write:  # a planted fault: one byte into the null block
                buf[0, 0] = 0
            run.counts = _count(torch, buf, run.tensors, ranges, p, _counter(torch, SENTINEL, equal=False))
            run.readback = job.readback()
            t2 = time.perf_counter()
            for sl in _slices(buf, p):
                sl.masked_fill_(sl == SENTINEL, SENTINEL2)
            job.run(bar.advance)
            run.seconds["fill_pass2"] = time.perf_counter() - t2
        finally:
            bar.close()
        second = _count(torch, buf, run.tensors, ranges, p, _counter(torch, SENTINEL, equal=True))
        run.counts = run.counts + second
        run.fill_info = FillInfo(
            writer=w.name, chunk_tokens=chunk, jobs=len(job.jobs),
            formats={j.component: j.fmt for j in job.jobs},  # the vLLM writer rule each used
            layers="every layer" if run.fill == "full" else "first and last layer of each page tensor",
            tokens_per_pass=job.total_tokens)
    finally:
        del job  # drops the views and tables


def _measure(torch, run: _Run, backend, progress: bool) -> None:
    """Allocate, fill (or not) and count; the pool is freed afterwards, also when interrupted. A planted fault
    (:mod:`.faults`) allocates pages more than planned."""
    buf = _allocate(torch, run, run.num_blocks + FAULTS.extra_pages)
    tables, ranges = _block_tables(torch, run.plan, run.batch, torch.device(run.device))
    try:
        if backend is not None:
            _fill(torch, run, backend, buf, tables, ranges, progress)
        else:
            run.counts = _count_unfilled(torch, run, buf)
    except KeyboardInterrupt:
        run.complete = False
    finally:
        del buf
        tables = None
        if run.device == "cuda":
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
    if run.device == "cuda":
        run.end = MemorySnapshot(rss=0, alloc=torch.cuda.memory_allocated(), free=torch.cuda.mem_get_info()[0])


def _measured(run: _Run, planned: int) -> Measured:
    return measured_from(run.device, run.storage, run.before, run.after, run.end, planned)


def _groups(run: _Run) -> tuple[VerifyGroup, ...]:
    """Per group: blocks and bytes for the batch, its views of the pool, and what was expected and written."""
    p, counts = run.plan, run.counts
    out = []
    for g in p.groups:
        n_blocks = g.blocks_per_request * run.batch
        views = tuple(VerifyView(t.component, len(t.layers), t.page_bytes, t.real_page_bytes, t.offset,
                                 t.layer_stride, t.block_stride) for t in run.tensors if t.group == g.index)
        out.append(VerifyGroup(
            group=g.index, kind=g.kind_name, components=tuple(g.components), layers=len(g.layers), blocks=n_blocks,
            predicted_bytes=g.analytic_bytes * run.batch, planned_bytes=n_blocks * p.bytes_per_block,
            page_bytes=g.page_bytes, real_page_bytes=g.real_page_bytes, views=views,
            expected_written_bytes=(run.expected or {}).get(g.index, 0),
            written_bytes=counts.data[g.index] if counts else None,
            padding_written_bytes=counts.padding[g.index] if counts else None,
        ))
    return tuple(out)


def _checks(run: _Run, planned: int, measured: Measured, groups) -> tuple[Check, ...]:
    """Each measured figure against its prediction."""
    p, counts = run.plan, run.counts
    checks = [
        Check("allocated_bytes == planned_bytes", run.storage == planned),
        Check("every group's pages fit in one block", all(g.page_bytes <= p.bytes_per_block for g in p.groups)),
    ]
    if run.device == "cuda":
        checks.append(Check("allocator delta == planned_bytes rounded up to the allocator's 512 B",
                            0 <= measured.allocator_rounding_bytes < 512))
        checks.append(Check("allocator back to its starting level afterwards", bool(measured.allocator_back_to_start)))
    if counts is None:
        return tuple(checks)
    if run.fill == "none":
        checks.append(Check("written_bytes == 0 with fill none", counts.total == 0))
        return tuple(checks)
    for g in groups:
        checks.append(Check(f"group {g.group}: written == expected ({g.expected_written_bytes:,} B)",
                            g.written_bytes == g.expected_written_bytes))
    checks.append(Check("page padding still holds the sentinel", sum(counts.padding.values()) == 0))
    checks.append(Check("null block still holds the sentinel", counts.null == 0))
    checks.append(Check("no byte written outside the pages", counts.total == counts.in_pages))
    checks.append(Check(f"read-back of {len(run.readback)} sampled page tensors within tolerance",
                        bool(run.readback) and all(c.passed for c in run.readback)))
    return tuple(checks)


def _result(run: _Run, planned: int, writer, copy_bw) -> VerifyResult:
    p, counts, batch = run.plan, run.counts, run.batch
    measured = _measured(run, planned)
    groups = _groups(run)
    checks = _checks(run, planned, measured, groups)
    verdict = "incomplete" if not run.complete else ("pass" if all(c.passed for c in checks) else "fail")
    written = counts.total if counts else None
    fill_seconds = run.seconds.get("fill_pass1")
    return VerifyResult(
        model=p.model, context_tokens=p.context, precision=p.precision, engine=p.engine,
        engine_version=p.engine_version, device=run.device, arch=getattr(p.settings, "arch", None), fill=run.fill,
        writer=writer, batch=batch,
        complete=run.complete, predicted_bytes=p.analytic_bytes * batch, planned_bytes=planned,
        planned_blocks=run.num_blocks, bytes_per_block=p.bytes_per_block, allocated_bytes=run.storage,
        expected_written_bytes=sum(run.expected.values()) if run.expected else 0,
        written_bytes=written,
        stray_written_bytes=(written - counts.in_pages) if counts else None,
        measured=measured,
        seconds=Seconds(**run.seconds),
        fill_bytes_per_second=(counts.total / fill_seconds) if (counts and fill_seconds) else None,
        device_copy_bytes_per_second=copy_bw,
        fill_info=run.fill_info,
        groups=groups,
        readback=tuple(run.readback),
        tolerances=TOLERANCES if run.fill != "none" else {},
        checks=checks,
        verdict=verdict,
    )




def verify_blocks(p, batch: int = 1, device: str = "cpu", fill: str = "none", writer: str | None = None, model=None,
                  progress: bool = False) -> VerifyResult:
    """:func:`kvcalc.verify.verify` on one shared block pool: the steps in turn (module docstring)."""
    _check_inputs(p, batch, device, fill)
    torch = _torch()
    num_blocks = p.blocks_per_request * batch + p.null_blocks
    planned = num_blocks * p.bytes_per_block
    _check_room(torch, device, planned)
    writer, backend = _fill_backend(p, fill, writer, device, model)
    copy_bw = _copy_bandwidth(torch, device)
    run = _Run(plan=p, device=device, batch=batch, fill=fill, num_blocks=num_blocks)
    _measure(torch, run, backend, progress)
    return _result(run, planned, writer, copy_bw)
