"""`kvcalc verify --headline`: the comparison the project started from, shown by allocation.

The vLLM write-up (its appendix; kvcalc/data/claims.yaml cites each quote) prices a 61-layer DeepSeek V3.2-style
stack at about 83.9 GiB of bf16 cache per 1M-token sequence, DeepSeek V4-Pro at about 9.62 GiB: 8.7x less,
320 MiB per c4a layer and 8 MiB per c128a layer, on its own basis (the window, compressed entries and indexer
keys of the main layers; no compressor state: kvcalc's ``article`` basis). Here each stack is allocated on the
device in the exact layout (``verify --engine exact --basis article``: one tensor per component and layer,
entries x bytes per entry), filled through the writers, counted and read back, one after the other (each freed
before the next), V3.2 bf16, V4-Pro bf16 and V4-Pro fp8; the figures the write-up states are printed next to the
measured ones with their quotes and sources.

At another context the write-up's figures do not apply, but the same arithmetic does: the table gives kvcalc's
estimate there and the measurement, and the ratio, which approaches 1408 x 61 / (30 x 320 + 31 x 8) = 8.72x as
the context grows past the 128-token window (a constant term in every V4 layer).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace

from ..errors import KvcalcError
from ..units import GIB, MIB

MILLION = 1 << 20

#: the runs: (label, model, precision)
RUNS = (("V3.2-style bf16", "deepseek-v3.2", "bf16"), ("V4-Pro bf16", "deepseek-v4-pro", "bf16"),
        ("V4-Pro fp8", "deepseek-v4-pro", "fp8"))


@dataclass(frozen=True)
class Row:
    figure: str
    published: str | None  # the write-up's figure as it states it (None: it states none)
    quote: str | None
    source: str | None
    estimate: float  # kvcalc's estimate, in ``unit``
    measured: float | None  # from the allocation, in ``unit``
    unit: str
    tolerance: float | None  # the published figure's half unit of its last digit
    agrees: bool | None  # measured within the tolerance of the published figure (None: nothing published here)

    def to_json(self) -> dict:
        return dict(self.__dict__)


@dataclass(frozen=True)
class Headline:
    context_tokens: int
    device: str
    fill: str
    runs: tuple  # (label, VerifyResult)
    rows: tuple[Row, ...]
    verdict: str  # pass: every run passes and every published figure agrees

    def to_json(self) -> dict:
        return {"headline": True, "context_tokens": self.context_tokens, "device": self.device, "fill": self.fill,
                "verdict": self.verdict, "rows": [r.to_json() for r in self.rows],
                "runs": {label: r.to_json() for label, r in self.runs},
                "basis": "article basis (the vLLM write-up's: window + compressed entries + indexer keys of the main "
                         "layers, no compressor state); exact layout, one tensor per component and layer; binary "
                         "units; runs one after the other, each freed before the next"}


def _plan(model: str, precision: str, context: int):
    from ..engines import get_engine
    from ..plan import plan

    settings = replace(get_engine("exact").settings({}), basis="article")
    return plan(model, context, precision=precision, engine="exact", settings=settings)


def needed_bytes(context: int) -> int:
    """The largest of the three allocations (they run one at a time)."""
    return max(_plan(m, p, context).analytic_bytes for _, m, p in RUNS)


def _available(device: str) -> int | None:
    from .measure import _torch

    if device == "cuda":
        return _torch().cuda.mem_get_info()[0]
    if hasattr(os, "sysconf"):
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    return None


def fitting_context(free: int, context: int) -> int:
    """The longest power-of-two context (from 4k) at or below ``context`` whose largest run takes at most 80% of
    ``free``; 0 if none."""
    best, c = 0, 4096
    while c <= context:
        if needed_bytes(c) <= free * 0.8:
            best = c
        c *= 2
    return best


def _claims() -> dict:
    from ..claims import check

    return {c.id: c for c in check()}


def _layer_bytes(result, kind_components: tuple[str, ...]) -> int:
    """One layer's bytes of a kind: the sum over its components' tensors of a tensor's measured size."""
    return sum(g.planned_bytes // g.layers for g in result.groups if g.pool["name"] in kind_components)


def rows(context: int, results: dict) -> tuple[Row, ...]:
    """The write-up's figures (at 1M) and kvcalc's next to what the allocations measured."""
    from ..estimate import estimate

    claims = _claims() if context == MILLION else {}
    v32, v4 = results.get("V3.2-style bf16"), results.get("V4-Pro bf16")

    def est_seq(model, prec) -> int:
        return int(estimate(model, context, precision=prec, basis="article").per_sequence[0])

    def est_layer(kind: str) -> int:
        e = estimate("deepseek-v4-pro", context, precision="bf16", basis="article")
        return int(next(layer.bytes[0] for layer in e.layers if layer.kind == kind))

    def claim(cid):
        c = claims.get(cid)
        if c is None:
            return None, None, None, None
        return f"{c.published:g} {c.unit}", c.quote, c.source, c.tolerance.get("abs")

    out = []
    specs = [("V3.2-style stack per sequence, bf16", "v32-sequence-1m-bf16", est_seq("deepseek-v3.2", "bf16") / GIB,
              v32.allocated_bytes / GIB if v32 else None, "GiB"),
             ("V4-Pro per sequence, bf16", "v4-pro-sequence-1m-bf16", est_seq("deepseek-v4-pro", "bf16") / GIB,
              v4.allocated_bytes / GIB if v4 else None, "GiB"),
             ("V3.2-style / V4-Pro, bf16", "v4-vs-v32-bf16",
              est_seq("deepseek-v3.2", "bf16") / est_seq("deepseek-v4-pro", "bf16"),
              v32.allocated_bytes / v4.allocated_bytes if v32 and v4 else None, "x"),
             ("one c4a layer, bf16", "v4-c4a-layer-1m-bf16", est_layer("c4a") / MIB,
              _layer_bytes(v4, ("window", "c4_entries", "c4_indexer")) / MIB if v4 else None, "MiB"),
             ("one c128a layer, bf16", "v4-c128a-layer-1m-bf16", est_layer("c128a") / MIB,
              _layer_bytes(v4, ("window", "c128_entries")) / MIB if v4 else None, "MiB")]
    fp8 = results.get("V4-Pro fp8")
    specs.append(("V4-Pro per sequence, fp8", None, est_seq("deepseek-v4-pro", "fp8") / GIB,
                  fp8.allocated_bytes / GIB if fp8 else None, "GiB"))
    for figure, cid, est, measured, unit in specs:
        published, quote, source, tol = claim(cid) if cid else (None, None, None, None)
        agrees = None
        if published is not None and measured is not None:
            agrees = abs(measured - float(published.split()[0])) <= tol
        out.append(Row(figure, published, quote, source, est, measured, unit, tol, agrees))
    return tuple(out)


def headline(context: int = MILLION, device: str = "cpu", fill: str = "sample", progress: bool = False) -> Headline:
    """Allocate, fill and measure the three stacks at ``context`` on ``device``, one after the other."""
    from . import verify

    need = needed_bytes(context)
    free = _available(device)
    if free is not None and need > free:
        fits = fitting_context(free, context)
        offer = (f"; {{{{context}}}} {fits // 1024}k fits (the write-up's figures are at 1M; the ratio approaches 8.72x "
                 "past the 128-token window)" if fits else "")
        raise KvcalcError(f"headline: at {context:,} tokens the largest run (V3.2-style bf16) needs {need / GIB:.2f} GiB; "
                          f"this {device} has {free / GIB:.2f} GiB free{offer}", param="context")
    results = {}
    for label, model, prec in RUNS:
        results[label] = verify(_plan(model, prec, context), device=device, fill=fill, progress=progress)
    rs = rows(context, results)
    ok = all(r.verdict == "pass" for r in results.values()) and all(x.agrees is not False for x in rs)
    return Headline(context, device, fill, tuple(results.items()), rs, "pass" if ok else "fail")
