"""The exact engine: no paging (see the package docstring)."""


from __future__ import annotations

from dataclasses import dataclass

from ...errors import KvcalcError, NoRoom, quote
from ...pool import PlanPage
from ..base import Capability, Engine, Fit, fraction_budget
from .plan import ExactGroup, ExactPlan, _kind
from .options import OPTIONS, SUMMARY

DEFAULT_MEMORY_FRACTION = 0.92


@dataclass(frozen=True)
class Settings:
    pp: int = 1
    gpu_memory_utilization: float = DEFAULT_MEMORY_FRACTION
    basis: str = "complete"  # the estimate basis verify allocates (complete, article)

    def __post_init__(self) -> None:
        from .buffers import BASES

        if self.basis not in BASES:
            raise KvcalcError(f"basis: choose {' or '.join(BASES)}, got {quote(self.basis)}"[:200], param="basis")


class ExactEngine(Engine):
    name = "exact"
    version = ""
    title = "exact (no paging)"
    summary = SUMMARY
    Settings = Settings
    budget_keys = ("gpu_memory_utilization",)
    # verify allocates the analytic layout (buffers.py), one tensor per component
    capabilities = frozenset({Capability.BUFFERS, Capability.TRANSFER})
    options = OPTIONS
    plan_names = {"layouts": ("exact",), "kinds": ("exact",)}  # plan.py: ExactPlan, ExactGroup
    cache_kinds = None  # every kind: a request holds what kvcalc.estimate counts

    def transfer_groups(self, p, spec, tokens: int):
        """A transfer of exactly the bytes the request's caches hold: no pages, no padding, no metadata."""
        from ...handoff import TransferGroup, TransferPlan

        groups = tuple(TransferGroup(g.index, g.kind_name, g.label, len(g.layers), "bytes", 0, 1, g.analytic_bytes,
                                     "the exact bytes held") for g in p.groups)
        return TransferPlan(groups, tokens, 0, ("exact: every cached byte once, nothing else",))

    def batch_pools(self, plan, batch: int, model):
        from .buffers import batch_pools

        return batch_pools(plan, batch, model)

    def plan(self, job):
        by_comp: dict[str, list] = {}
        for (layer, comp), b in job.analytic.items():
            by_comp.setdefault(comp, []).append((layer, b))
        groups = tuple(
            ExactGroup(i, _kind(job.model.components[comp]), tuple(layer for layer, _ in rows),
                       tuple((layer, comp) for layer, _ in rows), 1,
                       (PlanPage(comp, "exact", "", 1, 1, 1, 1, 1, len(rows)),), sum(b for _, b in rows),
                       sum(b for _, b in rows), window=getattr(job.model.components[comp], "window", None))
            for i, (comp, rows) in enumerate(by_comp.items())
        )
        comps = job.model.components

        def shareable(ctx: int) -> int:
            """Bytes of ``ctx`` tokens in the caches a shared prefix can be held once in: per-token caches that keep
            every position they saw (not a sliding window, not a chunk), so the first ctx entries are the same."""
            return sum(b for (_, c), b in job.analytic_at(ctx).items()
                       if comps[c].per_token and getattr(comps[c], "window", None) is None
                       and getattr(comps[c], "chunk", None) is None)

        return ExactPlan(engine="exact", engine_version="", model=job.model.name, precision=job.precision.name,
                         context=job.context, settings=job.settings, settings_json={}, groups=groups,
                         analytic_bytes=job.total, bytes_at=lambda ctx: sum(job.analytic_at(ctx).values()),
                         shareable=shareable)

    def fit(self, plans: list, pool: int, settings, parallel):
        """Requests whose exact bytes fit in ``pool``: the pool's bytes // a request's, on the fullest stage. Its
        table is the caches a request holds (no blocks, pages or padding: there are none)."""
        from ...units import format_bytes

        p = max(plans, key=lambda q: q.analytic_bytes)
        for q in plans:
            if q.analytic_bytes > pool:
                raise NoRoom(self.refusal(q, pool), "kv")
        n = pool // max(p.analytic_bytes, 1)
        heads = ("cache", "layers", "one layer", "a request holds")
        rows = tuple((g.label, f"{len(g.layers)}", format_bytes(g.analytic_bytes // max(len(g.layers), 1)),
                      format_bytes(g.analytic_bytes)) for g in p.groups)
        rows += (("total", "", "", format_bytes(p.analytic_bytes)),)
        line = (f"One request at {p.context:,} tokens holds {format_bytes(p.analytic_bytes)} ({p.analytic_bytes:,} B) "
                f"exactly: no blocks, pages or padding; {pool:,} B of pool // {p.analytic_bytes:,} B = "
                f"{n:,} request(s).")
        concurrency = pool / p.analytic_bytes
        return Fit(pool, n, concurrency, int(concurrency * p.context), (line,), table=(heads, rows))

    def max_context(self, plans: list, pool: int, concurrency: int, limit: int, settings, parallel) -> int:
        return min(p.max_context(pool, concurrency, limit) for p in plans)

    def workload_room(self, p, pool: int, fit) -> int:
        return pool

    def workload_cost(self, p, pool: int, settings, fit, tokens: int, shared: int):
        """A request of ``tokens`` in exact bytes; the ``shared`` prefix's bytes in the caches that keep every
        position (full attention, latents, compressed entries, indexer keys) held once."""
        from ...workload import Cost

        sh = p.shareable(shared) if shared else 0
        return Cost("bytes", max(p.bytes_at(tokens) - sh, 1), sh, {})

    def summary_line(self, cap) -> str:
        return f"exact bytes: a request holds {cap.plan.analytic_bytes:,} B, no page or block rounding"

    def budget(self, settings, gpu, model=None, parallel=None):
        return fraction_budget(gpu, settings.gpu_memory_utilization, "gpu_memory_utilization")


ENGINE = ExactEngine()
