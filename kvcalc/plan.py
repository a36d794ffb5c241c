"""The pool plan: how a serving engine lays a model's caches out in one shared block pool.

One :class:`PoolPlan` is the single answer that ``capacity``, ``verify`` and the reports consume: the cache
groups and the layers in each, block sizes in tokens, real and padded page bytes, the bytes one block of the
shared pool costs, blocks per request at a context, and the tensors the engine would allocate for a pool of
N blocks. Engines (``kvcalc.engines``) supply the layout; this module holds no engine facts itself.

Two engines:

* ``exact``: no paging. A "block" is one byte, so a request reserves exactly the bytes ``kvcalc estimate``
  counts (complete basis) and a pool of B bytes holds ``B // bytes_per_request`` requests.
* ``vllm``: vLLM's planner (``kvcalc.engines.vllm``), pinned to one version.

Torch-free, like the rest of the analytic core.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from .config import ModelSpec, as_model
from .engines import vllm as V
from .errors import KvcalcError
from .estimate import estimate
from .specs import FullAttention, GatedDeltaNetState, RecurrentState

ENGINES = {
    "exact": "exact bytes, no paging: every request reserves what `kvcalc estimate` counts",
    "vllm": f"vLLM {V.VERSION} on CUDA: paged blocks in one shared pool, groups, window admission",
}


@dataclass(frozen=True)
class PlanPage:
    """Pages of one shape inside a group: ``count`` layer caches of ``component``."""

    component: str
    spec: str
    format: str
    block_size: int
    entries_per_block: int
    entry_bytes: int
    real_page_bytes: int
    page_bytes: int
    count: int


@dataclass(frozen=True)
class PlanGroup:
    index: int
    kind: str  # "full" (every token), "window W" (sliding window of W tokens), "state" (fixed), "exact"
    layers: tuple[int, ...]  # model layer indices held by the group (each once)
    members: tuple[tuple[int, str], ...]  # (layer, component) of every cache in the group
    block_size: int
    pages: tuple[PlanPage, ...]
    blocks_per_request: int
    analytic_bytes: int  # exact bytes of the group's caches for one request (kvcalc estimate)

    @property
    def page_bytes(self) -> int:
        """Padded bytes of one block of this group (all its layers' pages)."""
        return sum(p.page_bytes * p.count for p in self.pages)

    @property
    def real_page_bytes(self) -> int:
        return sum(p.real_page_bytes * p.count for p in self.pages)

    @property
    def components(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(c for _, c in self.members))

    @property
    def label(self) -> str:
        return " + ".join(self.components)


@dataclass(frozen=True)
class PlanTensor:
    """One view of the shared buffer: ``layers`` caches of one page shape in group ``group``.

    Block ``b`` of the i-th layer starts at ``offset + i * layer_stride + b * block_stride`` bytes."""

    group: int
    component: str
    layers: tuple[int, ...]
    page_bytes: int
    real_page_bytes: int
    offset: int
    layer_stride: int
    block_stride: int
    num_blocks: int
    dtype: str = "uint8"

    @property
    def shape(self) -> tuple[int, int, int]:
        return (len(self.layers), self.num_blocks, self.page_bytes)


@dataclass(frozen=True)
class PoolPlan:
    engine: str
    engine_version: str
    model: str
    precision: str
    context: int  # max_model_len the plan answers for
    settings: dict
    layout: str  # "block-outermost", "layer-outermost" or "exact"
    grouping: str  # the rule that formed the groups
    padding_layers: int
    groups: tuple[PlanGroup, ...]
    bytes_per_block: int
    null_blocks: int  # blocks the engine keeps back (vLLM's null block)
    analytic_bytes: int  # exact bytes one request holds (kvcalc estimate, complete basis)
    notes: tuple[str, ...]
    _blocks_at: Callable[[int], tuple[int, ...]] = field(repr=False, compare=False)

    # ---- one request ------------------------------------------------------------------------------------
    @property
    def blocks_per_request(self) -> int:
        return sum(g.blocks_per_request for g in self.groups)

    @property
    def per_request_bytes(self) -> int:
        """Bytes one request at ``context`` reserves: its blocks, each costing a whole pool block."""
        return self.blocks_per_request * self.bytes_per_block

    def blocks_at(self, context: int) -> int:
        """Blocks per request at another max_model_len (same groups)."""
        return sum(self._blocks_at(context))

    # ---- a pool of a given size ---------------------------------------------------------------------------
    def num_blocks(self, pool_bytes: int) -> int:
        return pool_bytes // self.bytes_per_block

    def max_concurrency(self, num_blocks: int) -> float:
        """As the engine logs it (vLLM: num_blocks / blocks per request, null block included)."""
        return num_blocks / self.blocks_per_request

    def requests_that_fit(self, num_blocks: int) -> int:
        """Whole requests at ``context`` that the usable blocks hold."""
        return max(0, num_blocks - self.null_blocks) // self.blocks_per_request

    def cache_tokens(self, num_blocks: int) -> int:
        """vLLM's "GPU KV cache size: N tokens" = int(concurrency * max_model_len)."""
        return int(self.max_concurrency(num_blocks) * self.context)

    def fits_one(self, pool_bytes: int) -> bool:
        """vLLM's start-up check: one request's blocks fit in the pool less the null block."""
        return self.per_request_bytes <= pool_bytes - self.null_blocks * self.bytes_per_block

    def max_context(self, pool_bytes: int, concurrency: int = 1, limit: int | None = None) -> int:
        """Longest max_model_len (<= limit, default the plan's context) at which ``concurrency`` requests
        fit in the pool's usable blocks; 0 when not even one token does."""
        usable = pool_bytes // self.bytes_per_block - self.null_blocks
        hi = self.context if limit is None else limit
        lo, best = 1, 0
        while lo <= hi:  # blocks per request never shrink as the context grows
            mid = (lo + hi) // 2
            if concurrency * self.blocks_at(mid) <= usable:
                best, lo = mid, mid + 1
            else:
                hi = mid - 1
        return best

    def tensors(self, num_blocks: int) -> tuple[PlanTensor, ...]:
        """The views of one shared ``uint8[num_blocks * bytes_per_block]`` buffer, as the engine lays them
        (vLLM kv_cache_planning.py get_kv_cache_config_from_groups: every group aliases the buffer from
        byte 0; block-outermost: each block holds every layer's page side by side; layer-outermost: each
        layer owns a slab of num_blocks pages)."""
        if self.layout == "exact":
            raise KvcalcError("engine: the exact engine has no block pool to lay out; use the vllm engine",
                              param="engine")
        out = []
        for g in self.groups:
            offset = 0
            for p in g.pages:
                layers = tuple(layer for layer, c in g.members if c == p.component)
                if self.layout == "block-outermost":
                    t = PlanTensor(g.index, p.component, layers, p.page_bytes, p.real_page_bytes, offset,
                                   p.page_bytes, self.bytes_per_block, num_blocks)
                    offset += p.count * p.page_bytes
                else:
                    t = PlanTensor(g.index, p.component, layers, p.page_bytes, p.real_page_bytes, offset,
                                   p.page_bytes * num_blocks, p.page_bytes, num_blocks)
                    offset += p.count * p.page_bytes * num_blocks
                out.append(t)
        return tuple(out)

    def pages_json(self) -> list[dict]:
        return [
            {
                "group": g.index,
                "kind": g.kind,
                "components": list(g.components),
                "layers": list(g.layers),
                "block_size": g.block_size,
                "page_bytes": g.page_bytes,
                "real_page_bytes": g.real_page_bytes,
                "blocks_per_request": g.blocks_per_request,
                "reserved_bytes_per_request": g.blocks_per_request * self.bytes_per_block,
                "analytic_bytes_per_request": g.analytic_bytes,
                "layer_pages": [
                    {"component": p.component, "spec": p.spec, "format": p.format, "count": p.count,
                     "block_size": p.block_size, "entries_per_block": p.entries_per_block,
                     "entry_bytes": p.entry_bytes, "page_bytes": p.page_bytes, "real_page_bytes": p.real_page_bytes}
                    for p in g.pages
                ],
            }
            for g in self.groups
        ]


# ---- building a plan ----------------------------------------------------------------------------------------
def check_tp(model: ModelSpec, tp: int) -> None:
    """vLLM shards KV heads over TP ranks: the heads must divide by tp, or tp by the heads (then each rank
    holds a replica of one head; model_executor/layers/linear.py QKVParallelLinear). Latent caches are
    replicated whole on every rank."""
    for comp in model.components.values():
        if isinstance(comp, FullAttention):
            h = comp.kv_heads
            if (h >= tp and h % tp) or (h < tp and tp % h):
                raise KvcalcError(
                    f"tp: {tp} ranks cannot split the {h} KV heads of component {comp.name} (the heads must "
                    f"divide by tp, or tp by the heads)", param="tp"
                )


def _analytic_by_member(model: ModelSpec, context: int, precision: str, mtp: bool, tp: int) -> dict:
    est = estimate(model, context, precision=precision, basis="complete", mtp=mtp, numpy=False)
    out = {}
    for layer in est.layers:
        for c in layer.components:
            b = int(c.bytes[0])
            spec = model.components[c.name]
            if isinstance(spec, FullAttention) and tp > 1:  # heads per rank, replicated when tp > heads
                b = b // spec.kv_heads * max(1, spec.kv_heads // tp)
            elif isinstance(spec, RecurrentState) and tp > 1:  # channels and heads split evenly
                b = spec.fixed_bytes_on_rank(model.precisions[precision].formats.get(spec.storage), tp)
            out[(layer.index, c.name)] = b
    return out


def plan(
    model: ModelSpec | str,
    context: int,
    *,
    precision: str | None = None,
    engine: str = "vllm",
    settings: V.Settings | None = None,
    mtp: bool = False,
    tp: int = 1,
    stage: int | None = None,
) -> PoolPlan:
    """The pool plan of ``model`` at max_model_len ``context`` on one rank: tensor parallelism ``tp``
    splits full-attention heads; ``stage`` (with ``settings.pp`` stages) keeps one pipeline stage's layers."""
    spec = as_model(model)
    if engine not in ENGINES:
        raise KvcalcError(f"engine: unknown engine {engine!r}; choose one of: {', '.join(ENGINES)}", param="engine")
    if isinstance(context, bool) or not isinstance(context, int) or context < 1:
        raise KvcalcError(f"context: must be a positive integer, got {context!r}", param="context")
    settings = settings or V.Settings()
    prec = spec.precision(precision)
    check_tp(spec, tp)
    n_layers = len(spec.layers) + (len(spec.mtp_layers) if mtp else 0)
    stage_layers = set(range(n_layers))
    if stage is not None:
        stages = V.pp_stages(len(spec.layers), settings.pp)
        stage_layers = set(stages[stage])
        if mtp and stage == len(stages) - 1:  # the MTP layers sit after the last main layer
            stage_layers |= set(range(len(spec.layers), n_layers))

    def analytic_at(ctx: int) -> dict:
        """Exact bytes of each (layer, component) this rank holds at ``ctx`` tokens."""
        by_member = _analytic_by_member(spec, ctx, prec.name, mtp, tp)
        return {k: v for k, v in by_member.items() if k[0] in stage_layers}

    analytic = analytic_at(context)
    total = sum(analytic.values())
    if engine == "exact":
        return _exact_plan(spec, prec.name, context, analytic, total,
                           lambda ctx: (sum(analytic_at(ctx).values()),))
    return _vllm_plan(spec, prec, context, settings, mtp, tp, stage_layers, analytic, total)


def _exact_plan(spec, precision, context, analytic, total, blocks_at) -> PoolPlan:
    by_comp: dict[str, list] = {}
    for (layer, comp), b in analytic.items():
        by_comp.setdefault(comp, []).append((layer, b))
    groups = tuple(
        PlanGroup(i, "exact", tuple(layer for layer, _ in rows), tuple((layer, comp) for layer, _ in rows), 1,
                  (PlanPage(comp, "exact", "", 1, 1, 1, 1, 1, len(rows)),), sum(b for _, b in rows),
                  sum(b for _, b in rows))
        for i, (comp, rows) in enumerate(by_comp.items())
    )

    return PoolPlan("exact", "", spec.name, precision, context, {}, "exact", "one byte per block, no paging", 0,
                    groups, 1, 0, total, (), blocks_at)


def _vllm_plan(spec, prec, context, settings, mtp, tp, stage_layers, analytic, total) -> PoolPlan:
    specs, block = V.layer_specs(spec, prec, settings, mtp=mtp, kv_heads_divisor=tp)
    grouped, rule, padding = V.group_layers(specs)
    kept = [g for g in ([s for s in g if s.layer in stage_layers] for g in grouped) if g]
    in_flight = settings.in_flight
    groups = []
    for i, members in enumerate(kept):
        pages: dict[tuple, list] = {}
        for s in members:
            pages.setdefault((s.component, s.page_bytes, s.real_page_bytes, s.block_size), []).append(s)
        plan_pages = tuple(
            PlanPage(s.component, s.spec, s.format, s.block_size, s.entries_per_block, s.state_bytes,
                     s.real_page_bytes, s.page_bytes, len(rows))
            for rows in pages.values()
            for s in rows[:1]
        )
        window = members[0].window
        groups.append(PlanGroup(
            index=i,
            kind="state" if members[0].state_blocks is not None else "full" if window is None else f"window {window}",
            layers=tuple(dict.fromkeys(s.layer for s in members)),
            members=tuple((s.layer, s.component) for s in members),
            block_size=members[0].block_size,
            pages=plan_pages,
            # UniformTypeKVCacheSpecs: the most blocks any of its layers needs
            blocks_per_request=max(s.blocks_per_request(context, in_flight) for s in members),
            analytic_bytes=sum(analytic.get((s.layer, s.component), 0) for s in members),
        ))
    if not groups:
        raise KvcalcError(f"{spec.name}: no cache layers in this pipeline stage")
    bytes_per_block = max(g.page_bytes for g in groups)

    def blocks_at(ctx: int) -> tuple[int, ...]:
        return tuple(max(s.blocks_per_request(ctx, in_flight) for s in g) for g in kept)

    notes = []
    engine_fmts = {(s.component, s.format) for s in specs}
    for comp, fmt in sorted(engine_fmts):
        c = spec.components[comp]
        if c.per_token and prec.formats[c.storage].name != fmt:
            notes.append(
                f"vLLM {V.VERSION} stores {comp} as {fmt} ({c.entry_bytes(V.FORMATS[fmt]):,} B), not the "
                f"precision's {prec.formats[c.storage].name} ({c.entry_bytes(prec.formats[c.storage]):,} B)"
                + (" (--indexer-dtype mxfp4 selects 68 B)" if fmt == "fp8_indexer" else "")
            )
    if any(s.spec == "SlidingWindowMLASpec" for s in specs) and prec.formats.get("kv") is not None \
            and prec.formats["kv"].name != "fp8_ds_mla_v4":
        notes.append(
            f"vLLM {V.VERSION}'s default FlashMLA backend stores DeepSeek V4 caches as fp8_ds_mla only; this "
            f"{prec.name} layout is its FlashInfer sparse backend's (--attention-backend FLASHINFER_MLA_SPARSE_DSV4, "
            "SM100), pages aligned to 512 B"
        )
    if padding:
        notes.append(f"vLLM pads the groups with {padding} empty layer(s) so that every group has as many layers")
    layout = "block-outermost" if V.block_outermost(specs) else "layer-outermost"
    used = {
        "block_size": block,
        "max_num_batched_tokens": settings.max_num_batched_tokens,
        "async_scheduling": settings.async_scheduling,
        "max_in_flight_tokens": in_flight,
        "indexer_dtype": settings.indexer_dtype,
    }
    state = [s for s in specs if s.state_blocks is not None]
    if state:
        used["prefix_caching"] = settings.prefix_caching
        used["mamba_cache_mode"] = "align" if settings.prefix_caching else "none"
        if any(type(spec.components[s.component]) is GatedDeltaNetState for s in state):
            used["gdn_prefill_backend"] = settings.gdn_prefill_backend
        if state[0].padded_page is not None:
            notes.append(
                f"vLLM {V.VERSION} grows the attention block to {block} tokens so that one attention page holds a "
                f"state page ({state[0].state_bytes:,} B), then pads the state page to {state[0].padded_page:,} B "
                "(platforms/interface.py _align_hybrid_block_size)")
        notes.append(
            "fixed state reserves " + ", ".join(sorted({f"{s.state_blocks} blocks per request in each "
                                                        f"{spec.components[s.component].kind} group" for s in state}))
            + (" (prefix caching on: mamba_cache_mode align, 2 running + checkpoint blocks)" if settings.prefix_caching
               else " (prefix caching off)"))
    return PoolPlan("vllm", V.VERSION, spec.name, prec.name, context, used, layout, rule, padding,
                    tuple(groups), bytes_per_block, 1, total, tuple(notes), blocks_at)
