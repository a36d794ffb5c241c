"""SGLang's pool families, one configurator each, chosen by a factory, as SGLang 0.5.23 itself is organised
(mem_cache/pool_configurator.py: a small MemoryPoolConfigurator base, one subclass per pool family,
``create_memory_pool_configurator`` choosing among them):

* :class:`DefaultPools`: one token pool of full attention layers (MHA's K and V, an MLA latent, DSA's latent and
  indexer keys), with a Mamba-style state pool for hybrids (DefaultPoolConfigurator, the Mamba ratio mode);
* :class:`HybridSWAPools`: a full pool and a sliding-window pool beside it (HybridSWAPoolConfigurator);
* :class:`DSV4Pools`: DeepSeek V4's compressed, window and compressor-state pools (DSV4PoolConfigurator).

Each answers the same questions through :class:`PoolConfigurator` (the plan, the sizes and limits of a budget,
the request's reserve, its pages moved in a transfer, the buffers verify allocates, the log lines checked), so
nothing else in the engine asks which family a model's pools are. Torch-free.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field, replace
from typing import Callable

from ...errors import KvcalcError
from ...pool import GroupKind, PlanGroup, PlanPage, PoolFigures, PoolPlan
from ...specs import CompressedMLA
from . import sizing as S
from .defaults import NAME, VERSION
from .dsv4 import V4Layout


class PoolConfigurator(ABC):
    """One pool family's answers (see the module docstring). ``layout`` is the family's own resolved layout."""

    #: SGLang's configurator class, and how the plan's JSON names the family's grouping
    sglang_class: str = ""
    grouping: str = ""
    layout_name: str = "layer-outermost"  # how capacity's JSON names the pool layout

    layout: object  # the family's resolved layout (sizing.Layout, dsv4.V4Layout): its page, dtype and radix

    @property
    def page(self) -> int:
        """Tokens per page after the model's overrides."""
        return self.layout.page

    @property
    def kv_dtype(self) -> str:
        """SGLang's --kv-cache-dtype as resolved."""
        return self.layout.kv_dtype

    @property
    def radix(self) -> bool:
        """The radix cache is on (a shared prefix is held once)."""
        return self.layout.radix

    @abstractmethod
    def plan(self, job) -> "SglangPlan":
        """The plan's view of the pools: a group per pool."""

    @abstractmethod
    def fit(self, plans: list, pool: int, settings):
        """The pools sized from ``pool`` bytes, as SGLang logs them, and the requests of the context they hold."""

    @abstractmethod
    def requests_at(self, plan, pool: int, settings, context: int) -> int:
        """Requests of ``context`` tokens the pools sized from ``pool`` hold on this plan's stage."""

    @abstractmethod
    def request_bytes(self, plan) -> int:
        """Bytes one request at the plan's context takes in the pools (its pages in each, its state slot)."""

    def group_reserve(self, plan, g: PlanGroup) -> int:
        return g.blocks_per_request * g.page_bytes

    @abstractmethod
    def swa_requests(self, swa_tokens: int | None, tokens: int) -> int | None:
        """Requests of ``tokens`` the SWA pool of ``swa_tokens`` admits (None: no SWA pool)."""

    @abstractmethod
    def transfer(self, plan, spec, tokens: int):
        """What SGLang's disaggregation moves for one request (:class:`kvcalc.transfer.TransferPlan`)."""

    @abstractmethod
    def buffers(self, plan, batch: int, model):
        """The buffers a rank allocates to hold exactly ``batch`` requests (verify)."""

    @abstractmethod
    def log_rows(self, facts, plan) -> list:
        """The start-up log's figures beside the plan's (check-log)."""


@dataclass(frozen=True, kw_only=True)
class SglangPlan(PoolPlan):
    """SGLang's plan of one rank: its pools (separate tensors, mem_cache/memory_pool.py, not one shared block pool),
    each a group whose "block" is one page of tokens, laid out and counted by the pools' configurator."""

    pools: PoolConfigurator
    units_at: Callable[[int], tuple[int, ...]] = field(repr=False, compare=False)  # pages of each pool at L

    @property
    def per_request_bytes(self) -> int:
        return self.pools.request_bytes(self)

    def group_reserve(self, g: PlanGroup) -> int:
        return self.pools.group_reserve(self, g)

    def units_at_context(self, context: int) -> int:
        return sum(self.units_at(context))

    def figures(self) -> PoolFigures:
        return PoolFigures(self.pools.layout_name, self.pools.grouping, 0, self.unit_bytes, 1, self.units_per_request)


# ---- the default family (MHA / MLA / DSA, and Mamba state) and the split SWA family --------------------------------
@dataclass(frozen=True)
class DefaultPools(PoolConfigurator):
    """One token pool per cache family: DefaultPoolConfigurator's full pool (and a Mamba state pool)."""

    layout: S.Layout
    sglang_class = "DefaultPoolConfigurator"
    grouping = "one token pool per cache family (SGLang's pool configurators)"

    def plan(self, job) -> SglangPlan:
        return _token_pool_plan(job, self)

    def fit(self, plans, pool, settings):
        from .report import fit_token_pools

        return fit_token_pools(plans, pool, settings)

    def requests_at(self, plan, pool, settings, context) -> int:
        from .report import token_pool_requests

        return token_pool_requests(self.layout, pool, settings, context)

    def request_bytes(self, plan) -> int:
        """SGLang's pools are separate tensors: a request's page in a pool costs that pool's page (Llama 4: 12 full
        layers' 6 KiB at tp 8, 36 SWA layers' 18 KiB), not the widest pool's."""
        return sum(g.blocks_per_request * g.page_bytes for g in plan.groups)

    def swa_requests(self, swa_tokens, tokens) -> int | None:
        return None if swa_tokens is None else swa_tokens // S.swa_tokens_per_request(self.layout, tokens)

    def transfer(self, plan, spec, tokens):
        from .transfer import token_pool_transfer

        return token_pool_transfer(plan, tokens)

    def buffers(self, plan, batch, model):
        from .buffers import token_pool_buffers

        return token_pool_buffers(plan, self.layout, batch, model)

    def log_rows(self, facts, plan) -> list:
        from .logs import token_pool_rows

        return token_pool_rows(facts, plan, self.layout)


@dataclass(frozen=True)
class HybridSWAPools(DefaultPools):
    """A full pool and a sliding-window pool beside it, the window's sized from the full one
    (HybridSWAPoolConfigurator: swa_full_tokens_ratio, or from the request cap without the radix cache)."""

    sglang_class = "HybridSWAPoolConfigurator"


# ---- DeepSeek V4 ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class DSV4Pools(PoolConfigurator):
    """DeepSeek V4's pools (DSV4PoolConfigurator, ratio mode; :mod:`.dsv4`)."""

    layout: V4Layout
    sglang_class = "DSV4PoolConfigurator"
    grouping = "DSV4PoolConfigurator (ratio mode)"
    layout_name = "block-outermost"

    def plan(self, job) -> SglangPlan:
        return _v4_plan(job, self)

    def fit(self, plans, pool, settings):
        from .report import fit_v4

        return fit_v4(plans, pool, settings)

    def requests_at(self, plan, pool, settings, context) -> int:
        from .report import v4_requests

        return v4_requests(self.layout, pool, settings, context)

    def request_bytes(self, plan) -> int:
        """One group priced per full token as DSV4PoolConfigurator sizes the pool, but a request's reserve is the
        pages it takes in each of DeepSeekV4TokenToKVPool's pools (:meth:`.dsv4.V4Layout.request_bytes`: full
        pages, SWA pages with the c4 rings, a c128 state slot), never less than what it holds."""
        return self.layout.request_bytes(plan.context)

    def group_reserve(self, plan, g: PlanGroup) -> int:
        return self.request_bytes(plan)  # one group: the request's reserve in all the pools

    def swa_requests(self, swa_tokens, tokens) -> int | None:
        """compute_swa_request_cap's per-request share."""
        from .defaults import SWA_EVICTION_INTERVAL

        lay = self.layout
        return swa_tokens // min(tokens, lay.window + SWA_EVICTION_INTERVAL + 2 * lay.page)

    def transfer(self, plan, spec, tokens):
        from .transfer import v4_transfer

        return v4_transfer(self.layout, tokens)

    def buffers(self, plan, batch, model):
        from .buffers import v4_buffers

        return v4_buffers(plan, self.layout, batch, model)

    def log_rows(self, facts, plan) -> list:
        from .logs import v4_rows

        return v4_rows(facts, plan, self.layout)


# ---- the plans' groups ---------------------------------------------------------------------------------------------
def _v4_plan(job, pools: DSV4Pools) -> SglangPlan:
    """DeepSeek V4: the plan's view is one group of pages (the sizing is DSV4PoolConfigurator's, in .dsv4)."""
    lay = pools.layout
    L, page = job.context, lay.page
    comps = tuple(dict.fromkeys(c for (_, c) in job.analytic))
    members = tuple(job.analytic)
    layers = tuple(sorted({layer for layer, _ in members}))
    per = lay.bytes_per_full_token
    group = PlanGroup(0, GroupKind.FULL, layers, members, page,
                      (PlanPage("+".join(comps), "DeepSeekV4TokenToKVPool", "fp8_e4m3", page, page, int(per),
                                int(per * page), int(per * page), 1),),
                      -(-L // page), job.total)
    used = {"kv_cache_dtype": lay.kv_dtype, "page_size": page, "swa_full_tokens_ratio": lay.swa_ratio,
            "max_running_requests": lay.mrr_per_worker, "attn_dp_size": job.settings.attn_dp}
    return SglangPlan(engine=NAME, engine_version=VERSION, model=job.model.name, precision=job.precision.name,
                      context=L, settings=job.settings, settings_json=used, groups=(group,), analytic_bytes=job.total,
                      notes=lay.notes, pools=pools, units_at=lambda ctx: (-(-ctx // page),))


def _token_pool_plan(job, pools: DefaultPools) -> SglangPlan:
    """The plan's view of SGLang's pools: one group per pool, a "block" being one page of tokens."""
    lay = pools.layout
    L, page = job.context, lay.page
    groups = []
    analytic = job.analytic

    def exact(layers) -> int:
        return sum(b for (layer, _), b in analytic.items() if layer in layers)

    if lay.full_layers:
        per = lay.full_per_token + lay.indexer_row
        comps = tuple(dict.fromkeys(c for (layer, c) in analytic if layer in lay.full_layers
                                    and job.model.components[c].per_token and layer not in lay.swa_layers))
        pages = (PlanPage("+".join(comps), "TokenToKVPool", lay.kv_dtype, page, page, per, page * per, page * per,
                          len(lay.full_layers)),)
        groups.append(PlanGroup(len(groups), GroupKind.FULL, lay.full_layers,
                                tuple((layer, c) for layer in lay.full_layers for c in comps
                                      if c in job.model.layer_kinds[job.model.layers[layer]]),
                                page, pages, -(-L // page), exact(set(lay.full_layers))))
    if lay.swa_layers:
        per = lay.swa_per_token
        need = S.swa_tokens_per_request(lay, L)
        comps = tuple(dict.fromkeys(c for (layer, c) in analytic if layer in lay.swa_layers))
        groups.append(PlanGroup(len(groups), GroupKind.WINDOW, lay.swa_layers,
                                tuple((layer, c) for layer in lay.swa_layers for c in comps
                                      if c in job.model.layer_kinds[job.model.layers[layer]]),
                                page, (PlanPage("+".join(comps), "SWAKVPool", lay.kv_dtype, page, page, per, page * per,
                                                page * per, len(lay.swa_layers)),),
                                -(-need // page), exact(set(lay.swa_layers)), window=lay.window))
    if lay.state_layers:
        comps = tuple(dict.fromkeys(c for (layer, c) in analytic if layer in lay.state_layers
                                    and not job.model.components[c].per_token))
        groups.append(PlanGroup(len(groups), GroupKind.STATE, lay.state_layers,
                                tuple((layer, c) for layer in lay.state_layers for c in comps
                                      if c in job.model.layer_kinds[job.model.layers[layer]]),
                                1, (PlanPage("+".join(comps), "MambaPool", "bfloat16+float32", 1, 1,
                                             lay.state_per_request, lay.state_per_request, lay.state_per_request, 1),),
                                lay.slots_per_request, exact(set(lay.state_layers))))
    if not groups:
        raise KvcalcError(f"{job.model.name}: no cache layers in this pipeline stage")
    used = {"kv_cache_dtype": lay.kv_dtype, "page_size": page, "attn_tp_size": job.tp // job.settings.attn_dp,
            "attn_dp_size": job.settings.attn_dp}
    if lay.swa_layers:
        used["swa_full_tokens_ratio"] = lay.swa_ratio
    if lay.state_layers:
        used["mamba_full_memory_ratio"] = job.settings.mamba_full_memory_ratio
        used["mamba_state_slots_per_request"] = lay.slots_per_request
        if lay.radix:
            used["mamba_radix_cache_strategy"] = lay.mamba_strategy
        if job.settings.max_mamba_cache_size is not None:
            used["max_mamba_cache_size"] = job.settings.max_mamba_cache_size
    if not lay.overlap:
        used["disable_overlap_schedule"] = True
    if not lay.radix:
        used["disable_radix_cache"] = True
    for k in ("max_running_requests", "max_total_tokens"):
        if getattr(job.settings, k) is not None:
            used[k] = getattr(job.settings, k)
    if job.settings.enable_hierarchical_cache:  # HiCache's host pools (tiers.py): the settings that size them
        used.update({k: getattr(job.settings, k) for k in ("enable_hierarchical_cache", "hicache_ratio", "hicache_size",
                                                           "hicache_mem_layout", "host_memory_gib")
                     if getattr(job.settings, k) is not None})
    return SglangPlan(engine=NAME, engine_version=VERSION, model=job.model.name, precision=job.precision.name,
                      context=L, settings=job.settings, settings_json=used, groups=tuple(groups),
                      analytic_bytes=job.total, notes=lay.notes, pools=pools,
                      units_at=lambda ctx: tuple(-(-ctx // page) if g.kind is GroupKind.FULL else g.blocks_per_request
                                                 for g in groups))


# ---- the factory ---------------------------------------------------------------------------------------------------
def create_pool_configurator(job, stages=None) -> PoolConfigurator:
    """pool_configurator.py create_memory_pool_configurator: DeepSeek V4's own pools; a split SWA pool where the
    model mixes sliding-window and full layers; the default pools otherwise. The layout is resolved here (the
    model's overrides, the page, the dtype, the state strategy) and checked as SGLang checks it at start-up."""
    s = job.settings
    if any(isinstance(c, CompressedMLA) for c in job.model.components.values()):
        from .dsv4 import v4_layout

        lay = v4_layout(job.model, job.precision_asked, s, job.stage_layers, s.attn_dp)
        # handle_mamba_radix_cache runs for every model: an extra_buffer strategy is refused here too
        lay = replace(lay, radix=S.mamba_cache(job.model.architecture, s, False, s.page_size, False).radix)
        _check_chunk(s, lay.page)
        return DSV4Pools(lay)
    # --kv-cache-dtype auto is the model dtype (the config's default precision; DSA on Hopper: bf16 too)
    lay = S.layout(job.model, job.precision.name, s, job.tp, job.stage_layers, stages)
    _check_chunk(s, lay.page)
    if lay.chunk_window and s.sm_major == 9:
        lay = replace(lay, notes=lay.notes + (S.fa3_local_graph_note(lay, job.context),))
    if lay.swa_layers and not lay.full_layers:
        # pool_configurator.py HybridSWAPoolConfigurator's all-SWA branch (no full pool, max_total_num_tokens is the
        # SWA pool, pure_swa_radix_cache.py admits requests): its admission is not modelled here
        raise KvcalcError(f"{job.model.name}: every layer is sliding-window in SGLang {VERSION}'s split SWA pool "
                          f"({job.model.architecture}); kvcalc does not plan SGLang's all-SWA pool (no full-attention "
                          "layer); plan it on vllm or exact", param="engine")
    return HybridSWAPools(lay) if lay.swa_layers else DefaultPools(lay)


def _check_chunk(settings, page: int) -> None:
    """arg_groups/validation_hook.py check_server_args: "chunked_prefill_size must be divisible by page_size"
    (the chunk as divided over the attention-DP ranks, the page after the model's overrides)."""
    chunk = settings.prefill_chunk
    if chunk > 0 and chunk % page:
        raise KvcalcError(f"page_size: SGLang {VERSION} refuses to start: chunked_prefill_size must be divisible by "
                          f"page_size ({chunk} is not a multiple of {page})", param="page_size")
