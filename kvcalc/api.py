"""kvcalc's Python API beyond :func:`kvcalc.estimate`: :func:`capacity`, :func:`fit`, :func:`decode` and
:func:`transfer`, each the command of the same name. Each returns a :class:`Result`: the library's answer (its
fields and properties read through the result), printed as the command line prints it (``print(result)``), an
HTML table in a notebook (``_repr_html_``), and ``result.to_json()`` equal to the command's ``--json``. Every
argument is checked; bad ones raise :class:`kvcalc.KvcalcError` with one line.

    >>> import kvcalc
    >>> cap = kvcalc.capacity("llama-3.1-8b", 8192, gpu="h100-sxm")
    >>> cap.total_requests
    54
    >>> cap.to_json()["total_requests"]
    54
"""

from __future__ import annotations

from typing import Any

from .errors import KvcalcError


class Result:
    """One answer: ``value`` is the library's object (a Capacity, FitResult, Decode or Transfer); its attributes
    read through; ``str()`` is the command's text, ``_repr_html_()`` its HTML, ``to_json()`` its ``--json``."""

    def __init__(self, value: Any, render, to_json) -> None:
        self.value = value
        self._render, self._to_json = render, to_json

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.value, name)

    def to_json(self) -> dict:
        return self._to_json()

    def _shown(self):
        from .present.api import shown

        return shown(self._render)

    def __str__(self) -> str:
        return self._shown().text()

    def _repr_html_(self) -> str:
        return self._shown().html()

    def __rich__(self) -> str:
        return str(self)

    def __repr__(self) -> str:
        return f"<kvcalc {type(self.value).__name__}: {self._short()}>"

    def _short(self) -> str:
        v = self.value
        for attr in ("total_requests", "transfer_bytes", "read_bytes_per_token", "deployments"):
            if hasattr(v, attr):
                x = getattr(v, attr)
                return f"{attr} {len(x) if isinstance(x, tuple) else x:,}"
        return ""


def capacity(model, context: int, *, gpu=None, engine: str = "vllm", precision: str | None = None, tp: int = 1,
             pp: int = 1, dp: int = 1, ep: bool = False, settings: dict | None = None, kv_memory: int | None = None,
             weights_bytes: int | None = None, reserve_bytes: int | None = None, mtp: bool = False,
             request_tokens=None, shared_prefix_tokens: int = 0) -> Result:
    """How many requests of ``context`` tokens fit on ``gpu`` (a `kvcalc gpus` name) with the layout tp x pp x dp
    (``ep``: experts over tp x dp), as ``engine`` plans its pool; ``settings``: the engine's options by name
    (``{"block_size": 32}``), ``kv_memory`` the pool per GPU in bytes instead of a GPU.

    >>> r = capacity("llama-3.1-70b", 32768, gpu="h100-sxm", tp=8)
    >>> (r.total_requests, r.parallel.tp)
    (42, 8)
    """
    from .capacity import Parallel, capacity as _capacity
    from .engines import get_engine
    from .present.capacity import capacity_json, render_capacity

    from . import args

    args.flag(ep, "ep")
    eng = get_engine(engine)
    if settings is not None and not isinstance(settings, dict):
        raise KvcalcError("settings: a mapping of the engine's options by name", param="settings")
    s = eng.settings(settings) if settings else None
    cap = _capacity(model, context, precision=precision, engine=eng.name, settings=s,
                    parallel=Parallel(tp, pp, dp, ep), gpu=gpu, kv_memory=kv_memory, weights_bytes=weights_bytes,
                    reserve_bytes=reserve_bytes, mtp=mtp, request_tokens=request_tokens,
                    shared_prefix_tokens=shared_prefix_tokens)
    return Result(cap, lambda con: render_capacity(con, cap), lambda: capacity_json(cap))


def fit(model, context: int, concurrency: int | None = None, *, gpus=None, engines=("vllm", "sglang"),
        precisions=None, max_gpus: int = 8, count: int | None = None, settings: dict | None = None,
        weights_bytes: int | None = None, reserve_bytes: int | None = None, request_tokens=None,
        shared_prefix_tokens: int = 0) -> Result:
    """Every deployment of ``model`` that holds ``concurrency`` requests of ``context`` tokens: for each GPU
    (``gpus``: names; None: every one), engine and precision the smallest fleet (layouts up to ``max_gpus``),
    ranked, with why smaller ones fail (:mod:`kvcalc.fit`). ``r.deployments`` are the rows, each re-run by
    :func:`capacity` with its gpu, layout, engine and precision. ``settings``: engine options by name (vLLM's
    ``max_num_seqs``, SGLang's ``mem_fraction_static``), each applied to the engines that take it;
    ``weights_bytes`` (all ranks), ``reserve_bytes`` (per GPU) and a workload as :func:`capacity` takes them.

    >>> r = fit("gpt-oss-120b", 131072, 16, gpus=["h100-sxm"], engines=["vllm"], precisions=["fp8"])
    >>> d = r.deployments[0]
    >>> (d.layout.gpus, d.layout.tp, d.total_requests >= 16)
    (2, 2, True)
    """
    from .fit import best_per, fit as _fit
    from .present.fit import fit_json, render_fit, rerun_flags
    from .units import GIB

    out = _fit(model, context, concurrency, gpus=gpus, engines=engines, precisions=precisions, max_gpus=max_gpus,
               count=count, settings=settings, weights_bytes=weights_bytes, reserve_bytes=reserve_bytes,
               request_tokens=request_tokens, shared_prefix_tokens=shared_prefix_tokens)
    extra, flags = rerun_flags(engines, settings, *(None if b is None else b / GIB
                                                   for b in (weights_bytes, reserve_bytes)),
                               request_tokens=request_tokens, shared_prefix_tokens=shared_prefix_tokens)
    return Result(out, lambda con: render_fit(con, out, best_per(out), extra, flags),
                  lambda: fit_json(out, extra, flags))


def decode(model, context: int, *, precision: str | None = None, batch: int = 1, tp: int = 1) -> Result:
    """The cache bytes one decode step reads per sequence at ``context`` tokens (``batch`` sequences, one of ``tp``
    ranks), by layer kind (:mod:`kvcalc.decode`).

    Llama-3.1-8B reads every cached token's K and V: 8,192 tokens x 32 layers x 2 x 1,024 values x 2 B.

    >>> r = decode("llama-3.1-8b", 8192)
    >>> r.read_bytes_per_token == 8192 * 32 * 2 * 1024 * 2
    True
    """
    from .config import as_model
    from .decode import decode as _decode
    from .present.decode import precision_basis, render_decode

    spec = as_model(model)
    d = _decode(spec, context, precision=precision, batch=batch, tp=tp)
    why = precision_basis(spec, d.precision, asked=precision is not None)

    def show(con):
        render_decode(con, d)
        if precision is None:
            con.print(f"Precision: {why}.")

    return Result(d, show, lambda: d.to_json() | {"precision_basis": why})


def transfer(model, prompt_tokens: int, *, engine: str = "vllm", precision: str | None = None, tp: int = 1,
             link: str | None = None, bandwidth: float | None = None, gpu=None, settings: dict | None = None) -> Result:
    """The bytes one request of ``prompt_tokens`` moves from prefill to decode (llama.cpp: its slot file) on
    ``engine``, and the time over ``link`` or ``bandwidth`` GB/s (:mod:`kvcalc.transfer`).

    >>> r = transfer("llama-3.1-8b", 8192, engine="exact")
    >>> r.cache_bytes == 8192 * 32 * 2 * 1024 * 2
    True
    """
    from .engines import get_engine
    from .present.transfer import render_transfer
    from .transfer import transfer as _transfer

    s = get_engine(engine).settings(settings) if settings else None
    t = _transfer(model, prompt_tokens, engine=engine, precision=precision, tp=tp, link=link, bandwidth=bandwidth,
                  settings=s, gpu=gpu)
    return Result(t, lambda con: render_transfer(con, t), t.to_json)
