"""The exact engine: no paging (see the package docstring)."""


from __future__ import annotations

from dataclasses import dataclass

from ...errors import KvcalcError
from ...pool import GroupKind, Layout, PlanGroup, PlanPage, PoolPlan
from ..base import Engine, fraction_budget
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
            raise KvcalcError(f"basis: choose {' or '.join(BASES)}, got {self.basis!r}"[:200], param="basis")


class ExactEngine(Engine):
    name = "exact"
    version = ""
    title = "exact (no paging)"
    summary = SUMMARY
    Settings = Settings
    budget_keys = ("gpu_memory_utilization",)
    paged, pools = False, "tokens"  # verify allocates the analytic layout (buffers.py), one tensor per component
    options = OPTIONS

    def batch_pools(self, plan, batch: int, model):
        from .buffers import batch_pools

        return batch_pools(plan, batch, model)

    def plan(self, job):
        by_comp: dict[str, list] = {}
        for (layer, comp), b in job.analytic.items():
            by_comp.setdefault(comp, []).append((layer, b))
        groups = tuple(
            PlanGroup(i, GroupKind.EXACT, tuple(layer for layer, _ in rows), tuple((layer, comp) for layer, _ in rows),
                      1, (PlanPage(comp, "exact", "", 1, 1, 1, 1, 1, len(rows)),), sum(b for _, b in rows),
                      sum(b for _, b in rows))
            for i, (comp, rows) in enumerate(by_comp.items())
        )
        return PoolPlan("exact", "", job.model.name, job.precision.name, job.context, job.settings, {}, Layout.EXACT,
                        "one byte per block, no paging", 0, groups, 1, 0, job.total, (),
                        lambda ctx: (sum(job.analytic_at(ctx).values()),))

    def summary_line(self, cap) -> str:
        return f"exact bytes: a request holds {cap.plan.analytic_bytes:,} B, no page or block rounding"

    def budget(self, settings, gpu, model=None, parallel=None):
        return fraction_budget(gpu, settings.gpu_memory_utilization, "gpu_memory_utilization")


ENGINE = ExactEngine()
