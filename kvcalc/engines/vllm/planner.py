"""vLLM 0.33's pool plan for one rank: layer specs -> groups -> the shared block pool (``kv_cache_planning.py``),
with the notes kvcalc prints about the engine's choices."""

from __future__ import annotations

from ...pool import BlockPoolPlan, GroupKind, Layout, PlanGroup, PlanPage
from ...errors import KvcalcError
from ...specs import GatedDeltaNetState
from .defaults import LMCACHE_SETTINGS, VERSION, Settings
from .grouping import group_layers, promote_local
from .specs import LayerSpec, block_outermost, layer_specs


def _group(i: int, members: list[LayerSpec], context: int, in_flight: int, analytic: dict) -> PlanGroup:
    pages: dict[tuple, list] = {}
    for s in members:
        pages.setdefault((s.component, s.page_bytes, s.real_page_bytes, s.block_size), []).append(s)
    plan_pages = tuple(
        PlanPage(s.component, s.spec, s.format, s.block_size, s.entries_per_block, s.state_bytes,
                 s.real_page_bytes, s.page_bytes, len(rows))
        for rows in pages.values()
        for s in rows[:1]
    )
    first = members[0]
    kind = GroupKind.STATE if first.state_blocks is not None else GroupKind.CHUNK if first.chunk is not None else \
        GroupKind.FULL if first.window is None else GroupKind.WINDOW
    return PlanGroup(
        index=i,
        kind=kind,
        layers=tuple(dict.fromkeys(s.layer for s in members)),
        members=tuple((s.layer, s.component) for s in members),
        block_size=members[0].block_size,
        pages=plan_pages,
        # UniformTypeKVCacheSpecs: the most blocks any of its layers needs
        blocks_per_request=max(s.blocks_per_request(context, in_flight) for s in members),
        analytic_bytes=sum(analytic.get((s.layer, s.component), 0) for s in members),
        window={GroupKind.WINDOW: first.window, GroupKind.CHUNK: first.chunk}.get(kind),
    )


def _empty_group(i: int, whole: list[LayerSpec], context: int, in_flight: int) -> PlanGroup:
    """A group with no layers in this pipeline stage: no pages here, its global spec's blocks per request."""
    g = _group(i, whole, context, in_flight, {})
    return PlanGroup(index=i, kind=g.kind, layers=(), members=(), block_size=g.block_size, pages=(),
                     blocks_per_request=g.blocks_per_request, analytic_bytes=0, window=g.window)


def _format_notes(spec, prec, specs: list[LayerSpec]) -> list[str]:
    """The V4 layout's backend where it is not the default one (kvcalc.plan notes every cache vLLM stores in
    another format than the precision names, :meth:`VllmEngine.stored_formats`)."""
    notes = []
    if any(s.spec == "SlidingWindowMLASpec" for s in specs) and prec.formats.get("kv") is not None \
            and prec.formats["kv"].name != "fp8_ds_mla_v4":
        notes.append(
            f"vLLM {VERSION}'s default FlashMLA backend stores DeepSeek V4 caches as fp8_ds_mla only; this "
            f"{prec.name} layout is its FlashInfer sparse backend's (--attention-backend FLASHINFER_MLA_SPARSE_DSV4, "
            "SM100), pages aligned to 512 B"
        )
    return notes


def _state_notes(spec, settings: Settings, specs: list[LayerSpec], block: int, used: dict) -> list[str]:
    """Hybrids: the settings that shaped the state groups, and how the block grew to hold a state page."""
    state = [s for s in specs if s.state_blocks is not None]
    if not state:
        return []
    notes = []
    used["prefix_caching"] = settings.prefix_caching
    used["mamba_cache_mode"] = "align" if settings.prefix_caching else "none"
    if any(type(spec.components[s.component]) is GatedDeltaNetState for s in state):
        used["gdn_prefill_backend"] = settings.gdn_prefill_backend
    if state[0].padded_page is not None:
        notes.append(
            f"vLLM {VERSION} grows the attention block to {block} tokens so that one attention page holds a "
            f"state page ({state[0].state_bytes:,} B), then pads the state page to {state[0].padded_page:,} B "
            "(platforms/interface.py _align_hybrid_block_size)")
    notes.append(
        "fixed state reserves " + ", ".join(sorted({f"{s.state_blocks} blocks per request in each "
                                                    f"{spec.components[s.component].kind} group" for s in state}))
        + (" (prefix caching on: mamba_cache_mode align, 2 running + checkpoint blocks)" if settings.prefix_caching
           else " (prefix caching off)"))
    return notes


def vllm_plan(job) -> BlockPoolPlan:
    """The plan of one rank (``job``: :class:`kvcalc.engines.base.PlanJob`)."""
    spec, prec, context = job.model, job.precision, job.context
    settings = job.settings.at_context(context)
    specs, block = layer_specs(spec, prec, settings, mtp=job.mtp, kv_heads_divisor=job.tp)
    promoted = False
    if not settings.hybrid_kv_cache_manager:
        specs, promoted = promote_local(specs)
    grouped, rule, padding = group_layers(specs)
    in_flight = settings.in_flight
    here = [[s for s in g if s.layer in job.stage_layers] for g in grouped]
    if not any(here):
        raise KvcalcError(f"{spec.name}: no cache layers in this pipeline stage")
    # kv_cache_planning.py _project_kv_cache_groups_to_worker keeps every group on every stage, one without layers
    # here with its global spec: the scheduler (worker 0's config) still counts its blocks for each request
    counted = [members or whole for members, whole in zip(here, grouped)]
    groups = [_group(i, members, context, in_flight, job.analytic) if members else
              _empty_group(i, whole, context, in_flight) for i, (members, whole) in enumerate(zip(here, grouped))]
    bytes_per_block = max(g.page_bytes for g in groups)

    def blocks_at(ctx: int) -> tuple[int, ...]:
        return tuple(max(s.blocks_per_request(ctx, in_flight) for s in g) for g in counted)

    notes = _format_notes(spec, prec, specs)
    if promoted:
        notes.append("the hybrid KV-cache manager is off (vLLM's --disable-hybrid-kv-cache-manager): vLLM plans the "
                     "sliding-window and chunked layers as full attention, every token keeping its blocks, and logs "
                     "\"Hybrid KV cache manager is disabled for this hybrid model\" (kv_cache_planning.py "
                     "unify_hybrid_kv_cache_specs)")
    for comp, real, padded in sorted({(s.component, s.real_page_bytes, s.padded_page) for g in grouped for s in g
                                      if s.padded_page is not None and s.state_blocks is None}):
        notes.append(f"vLLM pads each {comp} page from {real:,} to {padded:,} B, the largest page, which it does not "
                     "divide (kv_cache_planning.py unify_kv_cache_spec_page_size, page_size_padded)")
    for g in groups:
        if not g.layers:
            notes.append(f"group {g.index} ({g.kind_name}) has no layers in this pipeline stage; vLLM's scheduler "
                         f"still counts its {g.blocks_per_request:,} blocks for each request "
                         "(kv_cache_planning.py _project_kv_cache_groups_to_worker)")
    if padding:
        notes.append(f"vLLM pads the groups with {padding} empty layer(s) so that every group has as many layers")
    layout = Layout.BLOCK_OUTERMOST if block_outermost(specs) else Layout.LAYER_OUTERMOST
    used = {
        "block_size": block,
        "max_num_batched_tokens": settings.max_num_batched_tokens,
        "async_scheduling": settings.async_scheduling,
        "max_in_flight_tokens": in_flight,
        "indexer_dtype": settings.indexer_dtype,
    }
    if not settings.hybrid_kv_cache_manager:
        used["hybrid_kv_cache_manager"] = False
    for k in ("kv_offloading_size", "kv_offloading_backend", "lmcache_mode", *LMCACHE_SETTINGS):  # tiers.py's
        if getattr(settings, k) not in (None, False):
            used[k] = getattr(settings, k)
    notes += _state_notes(spec, settings, specs, block, used)
    return BlockPoolPlan(engine="vllm", engine_version=VERSION, model=spec.name, precision=prec.name, context=context,
                         settings=settings, settings_json=used, groups=tuple(groups), analytic_bytes=job.total,
                         notes=tuple(notes), fill_chunk=settings.max_num_batched_tokens, layout=layout, grouping=rule,
                         padding_layers=padding, bytes_per_block=bytes_per_block, null_blocks=1,
                         blocks_at_context=blocks_at)
