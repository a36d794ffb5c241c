"""`kvcalc verify` for an engine that sizes token pools (SGLang 0.5.23) instead of one shared block pool.

The engine's ``batch_pools`` (SGLang's: ``kvcalc/engines/sglang/buffers.py``, torch-free) says which buffers the engine
allocates on one rank to hold exactly ``batch`` requests of the plan's context: each buffer's per-layer shape,
dtypes, how its layers are allocated (one tensor per layer, K and V as the halves of one tensor per layer, or
one tensor for every layer), its padding page and where each request's rows go. Here they are allocated on the
device the same way, every byte set to a sentinel (so every page is touched), and measured:

* allocation: the storage bytes of every tensor, compared exactly with the engine's figure for each pool; the
  resident-memory growth on CPU; on CUDA the allocator's delta, which may exceed the storage only by each
  tensor's rounding to the allocator's 512 B;
* with ``fill='sample'`` (the first and last layer of each pool) or ``'full'`` (every layer): each request's
  rows are written (every token of a full pool; the last ``window`` tokens of a sliding-window pool; one slot
  of a state pool) from deterministic synthetic values: a cast for plain bf16 / fp8 rows, the torch reference
  quantiser of kvcalc_kernels for the formats the vLLM path shares (DeepSeek V3.2's 656 B FlashMLA row and
  its fp8 indexer keys, whose pages hold all their keys and then all their scales). ``written_bytes`` is
  counted in memory, per pool, as the bytes that no longer hold the sentinel, in two passes with two
  sentinels (a written byte may equal the first); the padding page must still hold the sentinel;
* a read-back of sampled rows against the reference bytes.

Torch is imported lazily (:func:`kvcalc.verify.measure._torch`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from fractions import Fraction

from ..errors import KvcalcError, quote
from .fill import _V32_WRITERS, SENTINEL, SENTINEL2, TOLERANCES, _salt, gather, scatter, synth
from .faults import ACTIVE as FAULTS
from .measure import (FILLS, MemorySnapshot, _check_room, _copy_bandwidth, _counter, _memory, _Progress, _torch,
                      measured_from)
from .result import Check, FillInfo, Measured, Readback, Seconds, VerifyGroup, VerifyResult

CHUNK = 4096  # tokens synthesised per write

#: a token pool's record format -> the reference quantiser's writer: V3.2's rows as vLLM's V3.2 writers make them
#: (SGLang's DSA pool keeps the same 656 B FlashMLA row and 132 B indexer key); DeepSeek V4's 584 B FlashMLA
#: record in pages of all data then all scales (KVLayout.V4, the layout vLLM's V4 pages share) and its fp8
#: indexer key, with the V4 writers' bf16 input rounding. SGLang's own writer kernels are not run: the bytes are
#: kvcalc's reference records placed where SGLang's pools keep them.
WRITERS = {**_V32_WRITERS, "fp8_ds_mla_v4": "fp8_ds_mla_v4", "fp8_indexer_v4": "fp8_indexer",
           "fp8_ds_mla_exact": "fp8_ds_mla", "fp4_indexer": "fp4_indexer"}
SLICE = 64 << 20  # bytes per slice of a whole-tensor pass (no full-size temporary)
CACHE = 256 << 20  # bytes of records the first fill pass keeps for the second


@dataclass
class _Run:
    """One allocation of the pools and what it measured (an interrupt keeps what was reached)."""

    plan: object
    pools: object  # the engine's BatchPools
    device: str
    fill: str
    views: dict = field(default_factory=dict)  # buffer index -> one tensor per layer
    tensors: list = field(default_factory=list)  # every allocated tensor, once
    pool_bytes: dict = field(default_factory=dict)  # buffer index -> storage bytes of its layers' tensors
    storage: int = 0
    rounded: int = 0  # the tensors' bytes each rounded up to 512 B (the CUDA caching allocator's unit)
    before: MemorySnapshot | None = None
    after: MemorySnapshot | None = None
    end: MemorySnapshot | None = None
    seconds: dict = field(default_factory=dict)
    complete: bool = True
    counts: dict | None = None  # buffer index -> [written in its rows, written in its padding page]
    readback: list = field(default_factory=list)
    fill_info: FillInfo | None = None


def _check_inputs(batch, device: str, fill: str, writer) -> None:
    if fill not in FILLS:
        raise KvcalcError(f"fill: choose one of {', '.join(FILLS)}, got {quote(fill)}", param="fill")
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise KvcalcError(f"batch: must be a positive integer, got {quote(batch)}", param="batch")
    if device not in ("cpu", "cuda"):
        raise KvcalcError(f"device: choose cuda or cpu, got {quote(device)}", param="device")
    if writer not in (None, "torch"):
        raise KvcalcError(f"writer: token pools are filled through the torch reference writers; use {{{{writer}}}} "
                          f"torch, got {quote(writer)}", param="writer")


def _batch_pools(p, batch: int, model):
    """The engine's buffers for ``batch`` requests (``Engine.batch_pools``)."""
    from ..engines import get_engine

    return get_engine(p.engine).batch_pools(p, batch, model)


def _bytes(torch, t):
    """A tensor's bytes as a (rows, row bytes) uint8 view."""
    return t.view(torch.uint8).reshape(t.shape[0], -1)


def _slices(b2):
    step = max(1, SLICE // max(1, b2.shape[1]))
    return (b2[i:i + step] for i in range(0, b2.shape[0], step))


# ---- allocation -----------------------------------------------------------------------------------------------
def _allocate(torch, run: _Run, plant_extra_rows: int) -> None:
    """Every buffer as the engine allocates it, set to the sentinel, with the memory figures around it.
    ``plant_extra_rows`` gives the first buffer (and its K/V partner) that many rows more than planned."""
    dev = torch.device(run.device)
    run.before = _memory(torch, run.device)
    t0 = time.perf_counter()
    for b in run.pools.buffers:
        if b.index in run.views:
            continue  # the second half of a K/V pair
        extra = plant_extra_rows if b.index in (0, run.pools.buffers[0].partner) else 0
        shape = (b.shape[0] + extra, *b.shape[1:])
        store = getattr(torch, b.store)
        if b.tensor == "kv_pair":  # K and V: the halves of one (2, rows, heads, dim) tensor per layer
            new = [torch.empty((2, *shape), dtype=store, device=dev) for _ in b.layers]
            run.views[b.index] = [t[0] for t in new]
            run.views[b.partner] = [t[1] for t in new]
        elif b.tensor == "stacked":  # one (layers, rows, ...) tensor
            new = [torch.empty((len(b.layers), *shape), dtype=store, device=dev)]
            run.views[b.index] = list(new[0])
        else:
            new = [torch.empty(shape, dtype=store, device=dev) for _ in b.layers]
            run.views[b.index] = new
        for t in new:
            t.view(torch.uint8).fill_(SENTINEL)  # touches every page, so resident memory is real
        run.tensors += new
    if run.device == "cuda":
        torch.cuda.synchronize()
    run.seconds["allocate"] = time.perf_counter() - t0
    run.after = _memory(torch, run.device)
    sizes = [t.untyped_storage().nbytes() for t in run.tensors]
    run.storage, run.rounded = sum(sizes), sum(-(-n // 512) * 512 for n in sizes)
    run.pool_bytes = {i: sum(v.numel() * v.element_size() for v in vs) for i, vs in run.views.items()}


# ---- the fill -------------------------------------------------------------------------------------------------
def _picks(b, fill: str) -> list[int]:
    """Positions in ``b.layers`` the fill writes."""
    return list(range(len(b.layers))) if fill == "full" else sorted({0, len(b.layers) - 1})


def _records(torch, R, b, x):
    """Synthetic values ``x`` (rows, width) as the pool stores them: uint8 (rows, row bytes)."""
    if b.format == "plain":
        rec = x.to(getattr(torch, b.dtype)).contiguous().view(torch.uint8)
    else:
        rec = R.quantize_ref(x, WRITERS[b.format])
    if rec.shape[1] != b.row_bytes:
        raise KvcalcError(f"plan: pool {b.name} keeps {b.row_bytes:,} B per token, its {b.format} row has "
                          f"{rec.shape[1]:,}")
    return rec


def _rows(torch, b, request: int, s: int, e: int, device):
    """(positions, slots) of rows ``s .. e - 1`` of ``request`` in ``b``."""
    j = torch.arange(s, e, device=device)
    return b.first_position + j, b.first_slot(request) + j


def _write(torch, K, R, b, view, layer_pos: int, request: int, s: int, e: int, cache: dict) -> None:
    """Rows ``s .. e - 1`` of ``request`` into one layer's tensor; the records are kept in ``cache`` (up to
    CACHE bytes) for the second pass, which writes the same bytes."""
    pos, slots = _rows(torch, b, request, s, e, view.device)
    key = (b.index, layer_pos, request, s)
    rec = cache.get(key)
    if rec is None:
        rec = _records(torch, R, b, synth(torch, _salt(request, b.layers[layer_pos], b.index), pos, b.width))
        if cache.get("bytes", 0) + rec.numel() <= CACHE:
            cache[key], cache["bytes"] = rec, cache.get("bytes", 0) + rec.numel()
    if b.paged_records:  # pages of all keys then all scales (the indexer)
        fmt = WRITERS[b.format]
        scatter(torch, rec, _bytes(torch, view), slots, b.page, K.get_format(fmt, b.width))
    else:
        first = b.first_slot(request) + s  # a request's rows are consecutive
        _bytes(torch, view)[first:first + (e - s)] = rec


def _pass(torch, K, R, run: _Run, advance, cache: dict) -> int:
    """One fill pass over every request's rows in the chosen layers; the rows written."""
    rows = 0
    for b in run.pools.buffers:
        for i in _picks(b, run.fill):
            view = run.views[b.index][i]
            for r in range(run.pools.batch):
                for s in range(0, b.rows_per_request, CHUNK):
                    e = min(b.rows_per_request, s + CHUNK)
                    _write(torch, K, R, b, view, i, r, s, e, cache)
                    rows += e - s
                    advance(e - s)
    if run.device == "cuda":
        torch.cuda.synchronize()
    return rows


def _count(torch, run: _Run, count) -> dict:
    """Per buffer: [bytes ``count`` finds in its rows, in its padding page], over every layer."""
    out = {}
    for b in run.pools.buffers:
        data = pad = 0
        for view in run.views[b.index]:
            b2 = _bytes(torch, view)
            pad += count(b2[:b.padding_rows])
            data += sum(count(sl) for sl in _slices(b2[b.padding_rows:]))
        out[b.index] = [data, pad]
    return out


def _readback(torch, K, R, run: _Run) -> list[Readback]:
    """Sampled rows (first, middle, last) of the first layer of each pool, for the first and last request, read
    back and compared with the records regenerated from the same inputs."""
    out = []
    for b in run.pools.buffers:
        view = run.views[b.index][0]
        for r in sorted({0, run.pools.batch - 1}):
            idx = sorted({0, (b.rows_per_request - 1) // 2, b.rows_per_request - 1})
            j = torch.tensor(idx, device=view.device)
            pos, slots = b.first_position + j, b.first_slot(r) + j
            want = _records(torch, R, b, synth(torch, _salt(r, b.layers[0], b.index), pos, b.width))
            if b.paged_records:
                got = gather(torch, _bytes(torch, view), slots, b.page,
                             K.get_format(WRITERS[b.format], b.width))
            else:
                got = _bytes(torch, view)[slots]
            out.append(Readback(request=r, group=b.index, component=b.name, layer=b.layers[0],
                                indices=tuple(int(i) for i in pos), tolerance="record_bytes",
                                passed=bool(torch.equal(got, want))))
    return out


def _fill(torch, run: _Run, backend, progress: bool) -> None:
    """The two fill passes and their counts, the read-back after the first."""
    K, R = backend
    total = sum(len(_picks(b, run.fill)) * run.pools.batch * b.rows_per_request for b in run.pools.buffers)
    bar = _Progress(progress, 2 * total, "fill (torch, 2 passes)")
    try:
        t1 = time.perf_counter()
        cache: dict = {}
        _pass(torch, K, R, run, bar.advance, cache)
        run.seconds["fill_pass1"] = time.perf_counter() - t1
        if FAULTS.stray_write:  # a planted fault: one byte into the padding page
            _bytes(torch, run.views[0][0])[0, 0] = 0  # a byte in the first pool's padding page
        run.counts = _count(torch, run, _counter(torch, SENTINEL, equal=False))
        run.readback = _readback(torch, K, R, run)
        t2 = time.perf_counter()
        for t in run.tensors:  # what still holds the first sentinel now holds the second
            flat = t.view(torch.uint8).view(-1)
            for i in range(0, flat.numel(), SLICE):
                sl = flat[i:i + SLICE]
                sl.masked_fill_(sl == SENTINEL, SENTINEL2)
        _pass(torch, K, R, run, bar.advance, cache)
        cache.clear()
        run.seconds["fill_pass2"] = time.perf_counter() - t2
    finally:
        bar.close()
    second = _count(torch, run, _counter(torch, SENTINEL, equal=True))
    run.counts = {i: [a + b for a, b in zip(run.counts[i], second[i])] for i in run.counts}
    run.fill_info = FillInfo(
        writer="torch", chunk_tokens=CHUNK,
        jobs=sum(len(_picks(b, run.fill)) * run.pools.batch for b in run.pools.buffers),
        formats={b.name: WRITERS.get(b.format, b.dtype) for b in run.pools.buffers},
        layers="every layer" if run.fill == "full" else "first and last layer of each pool",
        tokens_per_pass=total)


def _measure(torch, run: _Run, backend, progress: bool) -> None:
    """Allocate, fill (or not) and count; the tensors are freed afterwards, also when interrupted."""
    _allocate(torch, run, FAULTS.extra_pages)
    try:
        if backend is not None:
            _fill(torch, run, backend, progress)
        else:
            run.counts = _count(torch, run, _counter(torch, SENTINEL, equal=False))
    except KeyboardInterrupt:
        run.complete = False
    finally:
        run.views.clear()
        run.tensors.clear()
        if run.device == "cuda":
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
    if run.device == "cuda":
        run.end = MemorySnapshot(rss=0, alloc=torch.cuda.memory_allocated(), free=torch.cuda.mem_get_info()[0])


# ---- the result -----------------------------------------------------------------------------------------------
def _predicted(p, pools, model) -> dict[int, int]:
    """Each buffer's share of the batch's exact bytes: its plan group's (``analytic_bytes x batch``) split by
    component as kvcalc's estimate splits them, then over the buffers of the same components (K and V, conv and
    ssm state) by their sizes; integer shares that sum to the group's bytes."""
    from ..estimate import estimate

    est = estimate(model, p.context, precision=p.precision, basis=pools.estimate_basis, numpy=False,
                   formats=p.stored_formats or None)
    exact = {(layer.index, c.name): int(c.bytes[0]) for layer in est.layers for c in layer.components}
    out = {}
    for g in p.groups:
        bufs = [b for b in pools.buffers if b.group == g.index]
        comp: dict = {}
        for layer, c in g.members:
            comp[c] = comp.get(c, 0) + exact.get((layer, c), 0)
        weights = []
        for b in bufs:
            same = sum(x.bytes for x in bufs if x.components == b.components)
            weights.append(Fraction(sum(comp.get(c, 0) for c in b.components), sum(comp.values()) or 1)
                           * Fraction(b.bytes, same))
        total, norm, acc, prev = g.analytic_bytes * pools.batch, sum(weights) or 1, Fraction(0), 0
        for b, w in zip(bufs, weights):
            acc += w
            cur = int(total * acc / norm)
            out[b.index], prev = cur - prev, cur
    return out


def _expected(run: _Run, b) -> int:
    return len(_picks(b, run.fill)) * run.pools.batch * b.expected_per_layer if run.fill != "none" else 0


def _groups(run: _Run, predicted: dict) -> tuple[VerifyGroup, ...]:
    """One group per buffer: ``blocks`` are its token rows (state: slots), the padding page apart."""
    out = []
    for b in run.pools.buffers:
        data, pad = run.counts[b.index] if run.counts else (None, None)
        out.append(VerifyGroup(
            group=b.index, kind=b.kind, components=b.components, layers=len(b.layers), blocks=b.tokens,
            predicted_bytes=predicted.get(b.index, 0), planned_bytes=b.bytes, page_bytes=b.page * b.row_bytes,
            real_page_bytes=b.page * b.row_bytes, views=(), expected_written_bytes=_expected(run, b),
            written_bytes=data, padding_written_bytes=0 if run.counts else None,  # token rows have no page padding
            pool={"name": b.name, "dtype": b.dtype, "store_dtype": b.store, "shape": list(b.shape),
                  "tensors": b.tensor, "padding_page_bytes": b.padding_bytes, "padding_page_written_bytes": pad},
        ))
    return tuple(out)


def _measured(run: _Run, planned: int) -> Measured:
    return measured_from(run.device, run.storage, run.before, run.after, run.end, planned)


def _checks(run: _Run, planned: int, measured: Measured, groups) -> tuple[Check, ...]:
    """Each measured figure against its prediction."""
    pools = run.pools
    checks = [
        Check("allocated_bytes == planned_bytes", run.storage == planned),
        Check("every pool's tensors hold its planned bytes",
              all(run.pool_bytes.get(b.index) == b.bytes for b in pools.buffers)),
        *(Check(name, ok) for name, ok in pools.checks()),
    ]
    if run.device == "cuda":
        checks.append(Check("allocator delta == planned_bytes, each tensor rounded up to the allocator's 512 B",
                            0 <= measured.allocator_rounding_bytes <= run.rounded - run.storage))
        checks.append(Check("allocator back to its starting level afterwards", bool(measured.allocator_back_to_start)))
    if run.counts is None:
        return tuple(checks)
    if run.fill == "none":
        checks.append(Check("written_bytes == 0 with fill none", sum(map(sum, run.counts.values())) == 0))
        return tuple(checks)
    for g in groups:
        checks.append(Check(f"pool {g.group} {g.pool['name']}: written == expected ({g.expected_written_bytes:,} B)",
                            g.written_bytes == g.expected_written_bytes))
    if any(b.padding_rows for b in pools.buffers):  # the exact layout has none: nothing to check there
        checks.append(Check("the padding page still holds the sentinel", all(c[1] == 0 for c in run.counts.values())))
    checks.append(Check(f"read-back of {len(run.readback)} sampled rows", bool(run.readback)
                        and all(c.passed for c in run.readback)))
    return tuple(checks)


def _result(run: _Run, planned: int, predicted: dict, copy_bw) -> VerifyResult:
    p, counts = run.plan, run.counts
    measured = _measured(run, planned)
    groups = _groups(run, predicted)
    checks = _checks(run, planned, measured, groups)
    verdict = "incomplete" if not run.complete else ("pass" if all(c.passed for c in checks) else "fail")
    written = sum(map(sum, counts.values())) if counts else None
    fill_seconds = run.seconds.get("fill_pass1")
    return VerifyResult(
        model=p.model, context_tokens=p.context, precision=p.precision, engine=p.engine,
        engine_version=p.engine_version, device=run.device, fill=run.fill,
        writer="torch" if run.fill != "none" else None, batch=run.pools.batch, complete=run.complete,
        predicted_bytes=sum(predicted.values()), planned_bytes=planned, planned_blocks=None,
        bytes_per_block=None, allocated_bytes=run.storage,
        expected_written_bytes=sum(g.expected_written_bytes for g in groups), written_bytes=written,
        stray_written_bytes=sum(c[1] for c in counts.values()) if counts else None,  # in the padding pages
        measured=measured, seconds=Seconds(**run.seconds),
        fill_bytes_per_second=(written / fill_seconds) if (counts and fill_seconds) else None,
        device_copy_bytes_per_second=copy_bw, fill_info=run.fill_info, groups=groups,
        readback=tuple(run.readback),
        tolerances={"record_bytes": TOLERANCES["record_bytes"]} if run.fill != "none" else {},
        checks=checks, verdict=verdict, basis=run.pools.basis, token_pools=run.pools.to_json())


def verify_tokens(p, batch: int = 1, device: str = "cpu", fill: str = "none", writer: str | None = None,
                  model=None, progress: bool = False) -> VerifyResult:
    """Allocate the token pools the engine would allocate for exactly ``batch`` requests of ``p``'s context on
    ``device``, fill them (``fill``: none, sample, full) and compare the measurements with the engine's figures.
    Planted faults (:mod:`.faults`, the tests'): the first pool gets rows more per layer; one byte goes into its
    padding page after the fill."""
    from ..config import as_model

    _check_inputs(batch, device, fill, writer)
    spec = as_model(model if model is not None else p.model)
    pools = _batch_pools(p, batch, spec)
    torch = _torch()
    planned = sum(b.bytes for b in pools.buffers)
    _check_room(torch, device, planned)
    backend = None
    if fill != "none":
        K = R = None
        if any(b.format != "plain" for b in pools.buffers):  # the shared formats: kvcalc_kernels' reference
            from .fill import load_backend

            _, K, R, _ = load_backend("torch", device)
        backend = (K, R)
    predicted = _predicted(p, pools, spec)
    copy_bw = _copy_bandwidth(torch, device)
    run = _Run(plan=p, pools=pools, device=device, fill=fill)
    _measure(torch, run, backend, progress)
    return _result(run, planned, predicted, copy_bw)
