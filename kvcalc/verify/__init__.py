"""`kvcalc verify`: allocate the caches a plan lays out on a real device, fill them as a prefill would, and
measure.

The plan (``kvcalc.plan.PoolPlan``, the single description of the layout) gives the pool: ``num_blocks``
blocks of ``bytes_per_block`` for ``batch`` requests at the context, plus the engine's null block (block 0).
verify allocates that one ``uint8`` buffer, as vLLM does, fills it with a sentinel byte so every page is
touched, carves the plan's tensor views out of it, hands each request's groups their blocks, and measures:

* allocation: the storage bytes of the buffer, the allocator's and the device's view on CUDA, the
  resident-memory growth on CPU;
* with ``fill='full'`` or ``'sample'``: the prefill (:mod:`kvcalc.verify.fill`) writes every cache through
  the writers, in chunks of the engine's prefill step (``PoolPlan.fill_chunk``); ``written_bytes`` is
  *counted* in memory, per group, as the bytes that no longer hold the sentinel. A written byte may equal
  the sentinel, so the fill runs twice: after the first pass the remaining sentinel bytes are turned into a
  second sentinel and the (deterministic) fill is repeated; the bytes the second pass turned back into the
  first sentinel are the written ones the first count missed.
  Page padding, the null block, the tail of each block a smaller group leaves unused and any unused slot
  must still hold a sentinel; a byte written outside every group's pages is reported as stray;
* a read-back of sampled entries of every page tensor against the torch reference (named tolerances).

The verdict compares each measured figure with its prediction. :func:`verify` runs the steps in turn:
checking the inputs (and the device's free memory), allocating and measuring the pool, the fill passes and
their counts, the groups and checks, and the result: a :class:`~kvcalc.verify.result.VerifyResult`, whose
``to_json()`` is the report. :func:`run` plans and verifies one rank, or ``tp`` ranks in their own processes
(:mod:`kvcalc.verify.parallel`) combined into one result. An engine that sizes token pools instead of one
block pool (``Capability.BUFFERS``: SGLang, the exact engine) is verified by :mod:`kvcalc.verify.tokenpools`, one
shared block pool (vLLM) by :mod:`kvcalc.verify.blockpool`; the helpers both paths share are in
:mod:`kvcalc.verify.measure`. This is the only part of kvcalc that imports torch,
lazily.
"""

from __future__ import annotations

from dataclasses import replace

from ..engines import DEFAULT_ENGINE
from ..errors import KvcalcError, quote
from .measure import _torch
from .result import VerifyResult, combine


def verify(pool_plan, batch: int = 1, device: str = "cpu", fill: str = "none", writer: str | None = None,
           model=None, progress: bool = False) -> VerifyResult:
    """Allocate ``pool_plan``'s pool for ``batch`` requests on ``device``, fill it (``fill``: none, sample,
    full) through ``writer`` (triton or torch; default triton on CUDA, torch on CPU) and compare the
    measurements with the plan: one shared block pool (:mod:`kvcalc.verify.blockpool`), or the engine's own
    buffers (``Capability.BUFFERS``: SGLang, the exact engine: :mod:`kvcalc.verify.tokenpools`), for exactly
    ``batch`` requests. The tests plant faults the check must catch through :func:`kvcalc.verify.faults.planted`."""
    if _token_pools(pool_plan.engine):
        from .tokenpools import verify_tokens

        return verify_tokens(pool_plan, batch=batch, device=device, fill=fill, writer=writer, model=model,
                             progress=progress)
    from .blockpool import verify_blocks

    return verify_blocks(pool_plan, batch=batch, device=device, fill=fill, writer=writer, model=model, progress=progress)


def _token_pools(engine) -> bool:
    """Whether ``engine`` allocates its own buffers (verify's :mod:`.tokenpools` path) rather than one block pool."""
    from ..engines import get_engine
    from ..engines.base import Capability

    return Capability.BUFFERS in get_engine(engine).capabilities


def run_one(model, context: int, *, precision=None, engine=DEFAULT_ENGINE, settings=None, batch=1, device="cpu",
            fill="none", writer=None, tp=1, rank=0, progress=False) -> VerifyResult:
    """Plan one rank's shard of ``model`` at ``context`` and verify it."""
    from ..plan import plan

    p = plan(model, context, precision=precision, engine=engine, settings=settings, tp=tp)
    out = verify(p, batch=batch, device=device, fill=fill, writer=writer, model=model, progress=progress)
    return replace(out, tp=tp, rank=rank)


def on_arch(engine: str, settings, arch: str | None):
    """``settings`` (None: the engine's defaults) planned for a device of architecture ``arch``, where the engine's
    settings carry one and it was left unset."""
    from ..engines import get_engine

    eng = get_engine(engine)
    return eng.resolve(settings, arch=arch)


def run(model, context: int, *, tp: int = 1, **kw) -> VerifyResult:
    """`kvcalc verify`: one rank in this process, or ``tp`` ranks in their own processes (gathered on rank 0);
    the combined result sums bytes over ranks and passes only when every rank passes."""
    if isinstance(tp, bool) or not isinstance(tp, int) or tp < 1:
        raise KvcalcError(f"tp: must be a positive integer, got {quote(tp)}", param="tp")
    if kw.get("device") in ("auto", "cuda"):  # auto: CUDA when torch sees a GPU, else the CPU (the CLI prints the
        from .measure import resolve_device  # note); cuda without one is refused in one line

        kw = dict(kw, device=resolve_device(kw["device"])[0])
    if kw.get("device") == "cuda":  # the engine's kernels, and so its layout, are the device's
        from .measure import device_arch

        kw = dict(kw, settings=on_arch(kw.get("engine", DEFAULT_ENGINE), kw.get("settings"), device_arch("cuda")))
    if tp == 1:
        return run_one(model, context, **kw)
    if _token_pools(kw.get("engine", DEFAULT_ENGINE)):
        raise KvcalcError(f"tp: verify allocates one rank's token pools; {tp} ranks are not built for the "
                          f"{kw.get('engine')} engine yet (use {{{{tp}}}} 1)", param="tp")
    from ..plan import check_tp

    check_tp(model, tp)
    _torch()
    from .parallel import run_ranks

    kw = dict(kw, progress=False)
    ranks = run_ranks(tp, dict(kw, model=model, context=context, tp=tp), run_one)
    return combine([VerifyResult.from_json(r) for r in ranks], tp)
