"""The exact engine's plan: no pool, no pages. A request holds what ``kvcalc estimate`` counts, byte for byte; a
group is one cache component over the layers that hold it. Torch-free."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from ...pool import GroupKind, PlanGroup, PoolFigures, PoolPlan, longest_context
from ...specs import ChunkedAttention, FixedState, RecurrentState


def _kind(comp) -> GroupKind:
    """What a component holds for a request: every token, its last tokens, its current chunk, or fixed state."""
    if isinstance(comp, (FixedState, RecurrentState)) or not comp.per_token:
        return GroupKind.STATE
    if isinstance(comp, ChunkedAttention):
        return GroupKind.CHUNK
    return GroupKind.WINDOW if getattr(comp, "window", None) is not None else GroupKind.FULL


@dataclass(frozen=True)
class ExactGroup(PlanGroup):
    """One component's caches, held exactly: the JSON and the transfer call it 'exact' whatever it holds."""

    @property
    def kind_name(self) -> str:
        return "exact"


@dataclass(frozen=True, kw_only=True)
class ExactPlan(PoolPlan):
    """A request reserves exactly what it holds; a pool holds ``pool // that`` requests. Its figures in capacity's
    JSON keep the shape every engine reports: a "block" is one byte, none kept back."""

    bytes_at: Callable[[int], int] = field(repr=False, compare=False)  # a request's exact bytes at L tokens
    shareable: Callable[[int], int] = field(repr=False, compare=False)  # of them, the bytes a shared prefix takes

    @property
    def per_request_bytes(self) -> int:
        return self.analytic_bytes

    @property
    def units_per_request(self) -> int:
        return self.analytic_bytes

    @property
    def unit_bytes(self) -> int:
        return 1

    def units_at_context(self, context: int) -> int:
        return self.bytes_at(context)

    def group_reserve(self, g: PlanGroup) -> int:
        return g.analytic_bytes

    def figures(self) -> PoolFigures:
        return PoolFigures("exact", "one byte per block, no paging", 0, 1, 0, self.analytic_bytes)

    def max_context(self, pool_bytes: int, concurrency: int = 1, limit: int | None = None) -> int:
        """Longest context (<= limit, default the plan's) at which ``concurrency`` requests' exact bytes fit."""
        return longest_context(lambda ctx: concurrency * self.bytes_at(ctx) <= pool_bytes,
                               self.context if limit is None else limit)
