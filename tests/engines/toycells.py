"""A toy engine with a pool shape neither vLLM's block pool nor SGLang's token pools: a cell cache, as llama.cpp
keeps one. Each stream holds ``n_ctx`` cells (one a token) in every layer, keys and values in two formats of their
own (``k_format`` / ``v_format``: q8_0 keys, q4_0 values). A request is one stream; a pool of P bytes holds
``P // (n_ctx x bytes per cell)`` streams.

This module is the whole engine, as an engine's folder would be: its settings, its plan type, its figures with their
schema, its fit, its workload cost, its budget and its connector's transfer. Registering it is one line
(``kvcalc.engines.register(ENGINE)``); nothing else in kvcalc is edited for it (tests/engines/test_one_module_engine.py
drives capacity, transfer, the JSON schema and engines side by side through it). Not part of kvcalc."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from kvcalc.engines.base import Capability, Engine, EngineFigures, Fit, fraction_budget
from kvcalc.errors import KvcalcError
from kvcalc.handoff import TransferGroup, TransferPlan
from kvcalc.pool import GroupKind, PlanGroup, PlanPage, PoolFigures, PoolPlan
from kvcalc.specs import FullAttention

NAME, VERSION = "cells", "0.1"


@dataclass(frozen=True)
class Settings:
    k_format: str = "q8_0"
    v_format: str = "q4_0"
    gpu_memory_utilization: float = 0.9


@dataclass(frozen=True, kw_only=True)
class CellPlan(PoolPlan):
    """One stream of ``context`` cells; a cell is one token's K and V in every layer of the rank."""

    k_bytes: int  # one cell's keys, all layers
    v_bytes: int  # one cell's values, all layers
    cells_at: Callable[[int], int] = field(repr=False, compare=False)

    @property
    def cell_bytes(self) -> int:
        return self.k_bytes + self.v_bytes

    @property
    def per_request_bytes(self) -> int:
        return self.context * self.cell_bytes

    @property
    def units_per_request(self) -> int:
        return self.context

    @property
    def unit_bytes(self) -> int:
        return self.cell_bytes

    def units_at_context(self, context: int) -> int:
        return self.cells_at(context)

    def group_reserve(self, g: PlanGroup) -> int:
        return self.context * g.page_bytes

    def figures(self) -> PoolFigures:
        return PoolFigures("cells", "one row per token per stream", 0, self.cell_bytes, 0, self.context)


@dataclass(frozen=True)
class CellFigures(EngineFigures):
    n_ctx: int
    n_seq_max: int
    k_bytes_per_cell: int
    v_bytes_per_cell: int

    def to_json(self) -> dict:
        return {"n_ctx": self.n_ctx, "n_seq_max": self.n_seq_max, "k_bytes_per_cell": self.k_bytes_per_cell,
                "v_bytes_per_cell": self.v_bytes_per_cell}

    @classmethod
    def schema(cls) -> dict:
        from kvcalc.jsonschema import COUNT, POS

        props = {"n_ctx": POS, "n_seq_max": COUNT, "k_bytes_per_cell": POS, "v_bytes_per_cell": POS}
        return {"properties": props, "required": list(props)}


class CellEngine(Engine):
    name = NAME
    version = VERSION
    title = f"Cells {VERSION}"
    summary = "a toy cell cache: n_ctx rows per stream, K and V in their own formats"
    Settings = Settings
    Figures = CellFigures
    budget_keys = ("gpu_memory_utilization",)
    capabilities = frozenset({Capability.TRANSFER})
    cache_kinds = frozenset({FullAttention})  # any other kind is refused
    plan_names = {"layouts": ("cells",), "units": ("cell",)}

    def stored_formats(self, spec, precision, settings) -> dict[str, str]:
        return {c: f"{settings.k_format}/{settings.v_format}" for c in spec.components}

    def plan(self, job):
        from kvcalc.formats import get_format

        fmt = get_format(f"{job.settings.k_format}/{job.settings.v_format}")
        groups, k_total, v_total = [], 0, 0
        for i, (name, comp) in enumerate(job.model.components.items()):
            layers = tuple(sorted({layer for layer, c in job.analytic if c == name}))
            heads = comp.kv_heads_on_rank(job.tp)
            k, v = heads * comp.k_bytes(fmt), heads * comp.v_bytes(fmt)
            k_total, v_total = k_total + k * len(layers), v_total + v * len(layers)
            page = PlanPage(name, "cell", fmt.name, 1, 1, k + v, k + v, k + v, len(layers))
            groups.append(PlanGroup(i, GroupKind.FULL, layers, tuple((layer, name) for layer in layers), 1, (page,),
                                    job.context, sum(b for (_, c), b in job.analytic.items() if c == name)))
        return CellPlan(engine=NAME, engine_version=VERSION, model=job.model.name, precision=job.precision.name,
                        context=job.context, settings=job.settings, settings_json={"k_format": job.settings.k_format,
                                                                                  "v_format": job.settings.v_format},
                        groups=tuple(groups), analytic_bytes=job.total, k_bytes=k_total, v_bytes=v_total,
                        cells_at=lambda ctx: ctx)

    def fit(self, plans, pool, settings, parallel) -> Fit:
        p = plans[0]
        streams = pool // p.per_request_bytes
        if streams < 1:
            raise KvcalcError(self.refusal(p, pool))
        return Fit(pool // p.cell_bytes, streams, pool / p.per_request_bytes, streams * p.context,
                   (f"Cells would log: {streams} streams of {p.context} cells, K {p.k_bytes} B and V {p.v_bytes} B a "
                    "cell",), figures=CellFigures(p.context, streams, p.k_bytes, p.v_bytes))

    def max_context(self, plans, pool, concurrency, limit, settings, parallel) -> int:
        return min(limit, pool // (concurrency * plans[0].cell_bytes))

    def workload_room(self, p, pool, fit) -> int:
        return pool

    def workload_cost(self, p, pool, settings, fit, tokens, shared):
        from kvcalc.workload import Cost

        return Cost("bytes", p.per_request_bytes, 0, {})  # a stream's cells are held whatever the request holds

    def transfer_groups(self, p, spec, tokens: int):
        return TransferPlan(tuple(TransferGroup(g.index, g.kind_name, g.label, len(g.layers), "cell", 1, tokens,
                                                g.page_bytes, f"{tokens:,} cells") for g in p.groups),
                            tokens, 0, ("cells: the prompt's cells, K and V",))

    def budget(self, settings, gpu, model=None, parallel=None):
        return fraction_budget(gpu, settings.gpu_memory_utilization, "gpu_memory_utilization")


ENGINE = CellEngine()
