"""The SGLang 0.5.23 engine profile (see the package docstring): settings, plans, the budget, the count."""

from __future__ import annotations

import struct
from dataclasses import dataclass, replace

from ...errors import KvcalcError
from ...pool import GroupKind, Layout as PoolLayout, PlanGroup, PlanPage, PoolPlan
from ...specs import CompressedMLA, IndexerCache, KDAState, MLALatent
from ...units import GIB
from ..base import Budget, BudgetStep, Engine, Fit, even_stages
from . import logs as _logs
from . import sizing as S
from .defaults import (AITER_CONTEXT, AITER_MEM_FACTOR, NAME, VERSION, VLM_CACHE_MIB, Settings,
                       default_mem_fraction_static, is_llama2_path, is_multimodal, vlm_mem_fraction)
from .options import OPTIONS, SUMMARY


def _free_gib(free_bytes: int, world: int) -> float:
    """utils/common.py get_available_gpu_memory: bytes / 2^30; with distributed=True (a world of more than one
    rank) the bytes first pass through a float32 tensor for the all-reduce MIN (equal GPUs: rounding only)."""
    if world > 1:
        free_bytes = struct.unpack("f", struct.pack("f", free_bytes))[0]
    return free_bytes / GIB


@dataclass(frozen=True)
class SglangBudget(Budget):
    """SGLang's budget: ``free after weights - pre x (1 - mem_fraction_static)``, in GiB floats as SGLang holds
    it, with the memory free before the load taken as the device's reported memory."""

    device_bytes: int = 0
    mem_fraction_static: float = 0.0
    world: int = 1  # ranks of one replica (tp x pp): with more than one, free memory is all-reduced in float32
    multimodal_gib: float = 0.0  # a multimodal model's post-sizing allocations, reserved out of the KV budget

    def pool(self, weights: int, reserve: int) -> int:
        pre = _free_gib(self.device_bytes, self.world)
        free = _free_gib(self.device_bytes - weights - reserve, self.world)
        rest = free - pre * (1 - self.mem_fraction_static) - self.multimodal_gib
        if rest <= 0:
            minimum = 1 - free / pre
            if -(-minimum * 1000 // 1) / 1000 >= 1:  # no fraction can: SGLang's advice would ask for more than all
                raise KvcalcError(
                    f"{{{{engine}}}} sglang: the weights, {weights / GIB:.2f} GiB a GPU, leave no GPU memory for the KV "
                    f"cache at any {{{{mem_fraction_static}}}} (the device reports {self.device_bytes / GIB:.2f} GiB); "
                    f"more GPUs are needed: a larger {{{{tp}}}} (or {{{{pp}}}}) splits the weights. (SGLang {VERSION} "
                    "refuses to start here too.)")
            raise KvcalcError(
                f"{{{{engine}}}} sglang: Loaded weights leave no GPU memory for the KV cache under {{{{mem_fraction_static}}}}="
                f"{self.mem_fraction_static}. Raise {{{{mem_fraction_static}}}} above {-(-minimum * 1000 // 1) / 1000:.3f} "
                f"(minimum viable = 1 - available/pre = {minimum:.4f}). (SGLang {VERSION} refuses to start here too.)")
        return int(rest * GIB)


class SglangEngine(Engine):
    name = NAME
    version = VERSION
    title = f"SGLang {VERSION}"
    summary = SUMMARY
    Settings = Settings
    options = OPTIONS
    logs = _logs.READER
    paged, pools = False, "tokens"  # no shared block pool: verify allocates its token pools (verify/tokenpools.py)
    budget_keys = ("mem_fraction_static",)
    default_reserve_bytes = 0
    reserve_note = "in use besides the weights (graphs: SGLang's slack)"

    long_context = "planned as SGLang sizes it with SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1"

    def context_limit(self, spec) -> int | None:
        from .defaults import derived_context_len

        return derived_context_len(spec)

    context_override = "allow_overwrite_longer_context_len"
    #: managers/tp_worker.py: max_req_input_len = min(context_len - 1, kv_capacity - 1) - 5, and
    #: managers/utils.py validate_input_length refuses a prompt of max_req_input_len tokens or more
    prompt_room = 7
    prompt_rule = "a prompt must be shorter than max_req_input_len = context_len - 1 - 5 (and than the KV pool less 6)"

    def context_refusal(self, spec, context: int, derived: int) -> str:
        """configs/model_config.py _derive_context_length: refused unless SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN."""
        return (f"{{{{engine}}}} sglang: User-specified context_length ({context}) is greater than the derived "
                f"context_length ({derived}). This may lead to incorrect model outputs or CUDA errors. To allow "
                f"overriding this maximum, set the env var SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1 "
                f"({{{{allow_overwrite_longer_context_len}}}} here).")

    def summary_line(self, cap) -> str:
        j = cap.fit.json
        lay = cap.plan.detail
        cell = j["cell_size_bytes"]
        cell_text = f"{cell:,.1f}" if isinstance(cell, float) else f"{cell:,}"
        state = f"; Mamba state first ({j['max_mamba_cache_size']:,} slots)" if j["max_mamba_cache_size"] else ""
        return (f"token pools: {cell_text} B per token ({lay.kv_dtype}, page {lay.page}){state}; "
                f"max_running_requests {j['max_running_requests']:,}; limited by the {j['requests_limited_by']}")

    def with_pp(self, settings, pp: int):
        return replace(settings, pp=pp) if settings.pp != pp else settings

    def with_parallel(self, settings, parallel):
        return replace(settings, pp=parallel.pp, dp=parallel.dp)

    def at_context(self, settings, context: int):
        """context_len is the context asked (--context-length): ROCm's aiter fraction reads it."""
        return replace(settings, context_length=context) if settings.context_length != context else settings

    def default_precision(self, spec, settings=None) -> str | None:
        """fp8 where SGLang's kv-cache dtype auto resolves to it whatever the config's default: DeepSeek V4
        (overrides.py _deepseek_v4_kv_cache_dtype, the only layout kvcalc models for it) and DeepSeek DSA from
        compute capability 10 (_dsa_kv_cache_dtype_default: "fp8_e4m3" if major >= 10, else bfloat16)."""
        if "fp8" not in spec.precisions:
            return None
        comps = spec.components.values()
        if any(isinstance(c, CompressedMLA) for c in comps):
            return "fp8"
        sm = getattr(settings, "sm_major", None)
        if sm is not None and sm >= 10 and any(isinstance(c, IndexerCache) for c in comps):
            return "fp8"
        return None

    def pp_stages(self, num_layers: int, pp: int) -> list[range]:
        """distributed/utils.py get_pp_indices (SGLANG_PP_LAYER_PARTITION unset): num_layers // pp per stage,
        the remainder one layer each to the last stages (vLLM gives it to the stages before the last)."""
        return even_stages(num_layers, pp, extra_to_last=True)

    def gpus(self, parallel, settings) -> int:
        """arg_groups/parallel_hook.py: with DP attention the dp ranks are the tp GPUs."""
        return parallel.tp * parallel.pp if settings.enable_dp_attention else parallel.gpus

    # ---- the plan ---------------------------------------------------------------------------------------
    def plan(self, job):
        s = job.settings
        if job.mtp:
            raise S.refuse(f"speculative decoding (the MTP draft layers, {{{{mtp}}}}) is not modelled for SGLang "
                           f"{VERSION}: it adds draft weights and draft KV to every pool")
        if any(isinstance(c, CompressedMLA) for c in job.model.components.values()):
            from .dsv4 import v4_layout

            lay = v4_layout(job.model, job.precision_asked, s, job.stage_layers, s.attn_dp)
            # handle_mamba_radix_cache runs for every model: an extra_buffer strategy is refused here too
            lay = replace(lay, radix=S.mamba_cache(job.model.architecture, s, False, s.page_size, False).radix)
            _check_chunk(s, lay.page)
            return _v4_plan(job, lay)
        # --kv-cache-dtype auto is the model dtype (the config's default precision; DSA on Hopper: bf16 too)
        stages = self.pp_stages(len(job.model.layers), s.pp) if s.pp > 1 else None
        lay = S.layout(job.model, job.precision.name, s, job.tp, job.stage_layers, stages)
        _check_chunk(s, lay.page)
        if lay.chunk_window and s.sm_major == 9:
            lay = replace(lay, notes=lay.notes + (S.fa3_local_graph_note(lay, job.context),))
        return _pool_plan(job, lay)

    def stored_formats(self, spec, precision, settings) -> dict[str, str]:
        """The precision's formats where SGLang keeps them; its own for the KV dtype, DSA rows and indexer keys and
        Mamba state (sizing.py stored_formats)."""
        return {**super().stored_formats(spec, precision, settings),
                **S.stored_formats(spec, precision.name, settings)}

    # ---- the budget -------------------------------------------------------------------------------------
    def budget(self, settings, gpu, model=None, parallel=None):
        mfs = settings.mem_fraction_static
        if mfs is None:
            mfs = self.memory_defaults(settings, gpu, model, parallel).mem_fraction_static
        if _aiter(settings, model) and (settings.context_length or 0) > AITER_CONTEXT:
            mfs *= AITER_MEM_FACTOR  # attention_hook.py: not re-rounded, a given fraction too
        requested = int(gpu.memory_bytes * mfs)
        mm_mib, mm_what = _multimodal_reserve(settings, gpu, model)
        mm_gib = mm_mib / 1024
        steps = (BudgetStep(f"x {mfs:g} mem_fraction_static", requested, "mem_fraction_static"),)
        if mm_gib:  # kv_cache_configurator.py mm_runtime_reservation_gb, taken off the rest below
            steps += (BudgetStep(f"- {mm_mib} MB {mm_what}", requested - int(mm_gib * GIB)),)
        return SglangBudget(requested, steps, f"{mfs:g} x {gpu.memory_bytes / GIB:.2f} GiB",
                            {"mem_fraction_static": mfs}, device_bytes=gpu.memory_bytes, mem_fraction_static=mfs,
                            world=parallel.tp * parallel.pp if parallel is not None else settings.pp,
                            multimodal_gib=mm_gib)

    def memory_defaults(self, settings, gpu, model, parallel):
        """arg_groups/memory_hook.py handle_gpu_memory_settings for this GPU and layout."""
        mla = model is not None and any(isinstance(c, MLALatent) for c in model.components.values())
        tp = parallel.tp if parallel is not None else 1
        pp = parallel.pp if parallel is not None else settings.pp
        md = default_mem_fraction_static(gpu.memory_bytes >> 20, tp=tp, pp=pp, attn_dp=settings.attn_dp, mla=mla,
                                         prefill_graphs=_prefill_graphs(model, pp) and settings.sm_major is not None,
                                         max_running_requests=settings.max_running_requests,
                                         max_total_tokens=settings.max_total_tokens,
                                         chunked_prefill_size=settings.chunked_prefill_size,
                                         llama2=model is not None and is_llama2_path(model))
        if model is None or not is_multimodal(model):
            return md
        if model.multimodal is None:
            raise S.refuse(f"SGLang {VERSION} treats {model.architecture} as multimodal and lowers its memory fraction "
                           f"by the vision tower (adjust_mem_fraction_for_vlm), but {model.name}'s config states no "
                           "'multimodal' (kvcalc import-hf writes it from vision_config); give "
                           "{{mem_fraction_static}}")
        return replace(md, mem_fraction_static=vlm_mem_fraction(md.mem_fraction_static, model.multimodal))

    def defaults(self, given, *, gpu=None, model=None) -> dict:
        """Where a GPU is named: chunked_prefill_size from its memory (handle_gpu_memory_settings) and its
        architecture (the kernels SGLang picks on it)."""
        if gpu is None:
            return {}
        from .defaults import capacity_defaults

        out = {} if "arch" in given or not gpu.arch else {"arch": gpu.arch}
        if "chunked_prefill_size" not in given:
            out["chunked_prefill_size"] = capacity_defaults(gpu.memory_bytes >> 20, 1)[0]
        return out

    # ---- requests in a pool -----------------------------------------------------------------------------
    def fit(self, plans, pool: int, settings, parallel) -> Fit:
        from .report import fit

        return fit(self, plans, pool, settings, parallel)

    def max_context(self, plans, pool, concurrency, limit, settings, parallel) -> int:
        """Requests of L tokens that fit never grow with L (the pools do not depend on it): a binary search on
        the engine's own count."""
        from .report import requests_at

        lo, hi, best = 1, limit, 0
        while lo <= hi:
            mid = (lo + hi) // 2
            if requests_at(plans, pool, settings, mid) >= concurrency:
                best, lo = mid, mid + 1
            else:
                hi = mid - 1
        return best

    def workload_room(self, p, pool: int, fit) -> int:
        return fit.json["max_total_num_tokens"]

    def workload_cost(self, p, pool: int, settings, fit, tokens: int, shared: int):
        """A request of ``tokens`` holds ceil_page(T) slots of the token pool; the radix cache keeps a shared
        prefix once, page by page (its whole pages); the SWA pool and max_running_requests cap as before."""
        from ...workload import Cost
        from .defaults import SWA_EVICTION_INTERVAL
        from .dsv4 import V4Layout

        page = fit.json["page_size"]
        # --disable-radix-cache: mem_cache/registry.py default_radix_cache_factory builds the cache disabled, and "a
        # disabled cache publishes nothing": no prefix is shared
        sh = shared // page * page if getattr(p.detail, "radix", True) else 0
        own = S.ceil_page(tokens, page) - sh
        limits = {"max_running_requests": fit.json["max_running_requests"]}
        lay = p.detail
        swa = fit.json.get("swa_max_total_num_tokens")
        if isinstance(lay, V4Layout):  # compute_swa_request_cap's per-request share, as report._v4_limits
            limits["SWA pool"] = swa // min(tokens, lay.window + SWA_EVICTION_INTERVAL + 2 * lay.page)
        elif swa is not None:
            limits["SWA pool"] = swa // S.swa_tokens_per_request(lay, tokens)
        return Cost("tokens", max(own, 1), sh, limits)

    def transfer_groups(self, p, spec, tokens: int):
        from .transfer import sglang_transfer

        return sglang_transfer(p, spec, tokens)

    def batch_pools(self, plan, batch: int, model):
        from .buffers import batch_pools

        return batch_pools(plan, batch, model)


def _aiter(settings, model) -> bool:
    """ROCm's default attention backend for an MHA model is aiter (model_override_base.py
    get_default_attn_backend); MLA and DSA are refused there, DeepSeek V4 runs its own dsv4 backend."""
    return settings.sm_major is None and model is not None and not any(
        isinstance(c, (MLALatent, CompressedMLA)) for c in model.components.values())


def _check_chunk(settings, page: int) -> None:
    """arg_groups/validation_hook.py check_server_args: "chunked_prefill_size must be divisible by page_size"
    (the chunk as divided over the attention-DP ranks, the page after the model's overrides)."""
    chunk = settings.prefill_chunk
    if chunk > 0 and chunk % page:
        raise KvcalcError(f"page_size: SGLang {VERSION} refuses to start: chunked_prefill_size must be divisible by "
                          f"page_size ({chunk} is not a multiple of {page})", param="page_size")


def _multimodal_reserve(settings, gpu, model) -> tuple[int, str]:
    """MB mm_runtime_reservation_gb keeps back from a multimodal model's KV budget, and what for: the embedding
    cache (SGLANG_VLM_CACHE_SIZE_MB), or for Qwen3-VL on a large Hopper GPU the cuda_ipc transport pool."""
    from .defaults import QWEN3_VL_BUSY_MIB, QWEN3_VL_BUSY_REQUESTS, QWEN3_VL_HOPPER_ARCHS, QWEN3_VL_HOPPER_MIB

    if model is None or not is_multimodal(model):
        return 0, ""
    if model.architecture in QWEN3_VL_HOPPER_ARCHS and settings.sm_major == 9 \
            and (gpu.memory_bytes >> 20) >= 60 * 1024:
        busy = (settings.max_running_requests or 0) >= QWEN3_VL_BUSY_REQUESTS
        return (QWEN3_VL_BUSY_MIB if busy else QWEN3_VL_HOPPER_MIB), "Qwen3-VL cuda_ipc feature pool"
    return VLM_CACHE_MIB, "multimodal cache"


def _prefill_graphs(model, pp: int) -> bool:
    """arg_groups/cuda_graph_hook.py apply_cuda_graph_compatibility: no prefill CUDA graphs with pp > 1, for
    DeepSeek V4, or for KDA hybrids (nor off CUDA: model_executor/cuda_graph_config.py default_prefill_backend
    is DISABLED there, which memory_defaults applies)."""
    if pp > 1 or model is None:
        return pp == 1
    return not any(isinstance(c, (CompressedMLA, KDAState)) for c in model.components.values())


@dataclass(frozen=True)
class V4PoolPlan(PoolPlan):
    """DeepSeek V4's plan: one group priced per full token as DSV4PoolConfigurator sizes the pool, but a request's
    reserve is the pages it takes in each of DeepSeekV4TokenToKVPool's pools (:meth:`.dsv4.V4Layout.request_bytes`:
    full pages, SWA pages with the c4 rings, a c128 state slot), never less than what it holds."""

    @property
    def per_request_bytes(self) -> int:
        return self.detail.request_bytes(self.context)

    def pages_json(self) -> list[dict]:
        out = super().pages_json()
        out[0]["reserved_bytes_per_request"] = self.per_request_bytes
        return out


def _v4_plan(job, lay) -> PoolPlan:
    """DeepSeek V4: the plan's view is one group of pages (the sizing is DSV4PoolConfigurator's, in .dsv4)."""
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
    return V4PoolPlan(NAME, VERSION, job.model.name, job.precision.name, L,
                      job.settings, used, PoolLayout.BLOCK_OUTERMOST, "DSV4PoolConfigurator (ratio mode)", 0, (group,),
                      group.page_bytes, 1, job.total, lay.notes, lambda ctx: (-(-ctx // page),), detail=lay)


@dataclass(frozen=True)
class TokenPoolPlan(PoolPlan):
    """SGLang's pools are separate tensors (mem_cache/memory_pool.py), not one shared block pool: a request's page
    in a pool costs that pool's page (Llama 4: 12 full layers' 6 KiB at tp 8, 36 SWA layers' 18 KiB), not the
    widest pool's."""

    @property
    def per_request_bytes(self) -> int:
        return sum(g.blocks_per_request * g.page_bytes for g in self.groups)

    def pages_json(self) -> list[dict]:
        out = super().pages_json()
        for entry, g in zip(out, self.groups):
            entry["reserved_bytes_per_request"] = g.blocks_per_request * g.page_bytes
        return out


def _pool_plan(job, lay: S.Layout) -> PoolPlan:
    """The plan's view of SGLang's pools: one group per pool, a "block" being one page of tokens."""
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
    return TokenPoolPlan(NAME, VERSION, job.model.name, job.precision.name, L, job.settings, used,
                         PoolLayout.LAYER_OUTERMOST, "one token pool per cache family (SGLang's pool configurators)",
                         0, tuple(groups), max(g.page_bytes for g in groups), 1, job.total, lay.notes,
                         lambda ctx: tuple(-(-ctx // page) if g.kind is GroupKind.FULL else g.blocks_per_request
                                           for g in groups),
                         detail=lay)


ENGINE = SglangEngine()
