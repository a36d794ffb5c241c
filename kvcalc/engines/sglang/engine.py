"""The SGLang 0.5.23 engine profile (see the package docstring): settings, plans, the budget, the count."""

from __future__ import annotations

import struct
from dataclasses import dataclass, replace

from ...errors import KvcalcError, NoRoom
from ...specs import (ChunkedAttention, CompressedMLA, CompressorState, FullAttention, GatedDeltaNetState,
                     IndexerCache, KDAState, Mamba2State, MLALatent, SlidingWindowAttention, SlidingWindowMLA)
from ...units import GIB
from ..base import Budget, BudgetStep, Capability, Engine, Fit, even_stages
from . import logs as _logs
from .figures import SglangFigures
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
                raise NoRoom(
                    f"{{{{engine}}}} sglang: the weights, {weights / GIB:.2f} GiB a GPU, leave no GPU memory for the KV "
                    f"cache at any {{{{mem_fraction_static}}}} (the device reports {self.device_bytes / GIB:.2f} GiB); "
                    f"more GPUs are needed: a larger {{{{tp}}}} (or {{{{pp}}}}) splits the weights. (SGLang {VERSION} "
                    "refuses to start here too.)", "weights")
            raise NoRoom(
                f"{{{{engine}}}} sglang: Loaded weights leave no GPU memory for the KV cache under {{{{mem_fraction_static}}}}="
                f"{self.mem_fraction_static}. Raise {{{{mem_fraction_static}}}} above {-(-minimum * 1000 // 1) / 1000:.3f} "
                f"(minimum viable = 1 - available/pre = {minimum:.4f}). (SGLang {VERSION} refuses to start here too.)",
                "weights")
        return int(rest * GIB)


class SglangEngine(Engine):
    name = NAME
    version = VERSION
    title = f"SGLang {VERSION}"
    summary = SUMMARY
    Settings = Settings
    options = OPTIONS
    logs = _logs.READER
    # no shared block pool: verify allocates its token pools (verify/tokenpools.py)
    capabilities = frozenset({Capability.BUFFERS, Capability.TRANSFER})
    budget_keys = ("mem_fraction_static",)
    Figures = SglangFigures
    #: the kinds SGLang's pools hold, by exact type: the default pools' (MHA / GQA with windows and chunks, MLA, DSA's
    #: indexer, Mamba-2 and gated-delta-net state) and DeepSeek V4's (configurators.py)
    cache_kinds = frozenset({FullAttention, SlidingWindowAttention, ChunkedAttention, MLALatent, IndexerCache,
                             Mamba2State, GatedDeltaNetState, SlidingWindowMLA, CompressedMLA, CompressorState})
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
        f = cap.fit.figures
        cell = f.cell_size_bytes
        cell_text = f"{cell:,.1f}" if isinstance(cell, float) else f"{cell:,}"
        state = f"; Mamba state first ({f.max_mamba_cache_size:,} slots)" if f.max_mamba_cache_size else ""
        return (f"token pools: {cell_text} B per token ({f.kv_cache_dtype}, page {f.page_size}){state}; "
                f"max_running_requests {f.max_running_requests:,}; limited by the {f.requests_limited_by}")

    def _with_pp(self, settings, pp: int):
        return replace(settings, pp=pp) if settings.pp != pp else settings

    def _with_parallel(self, settings, parallel):
        return replace(settings, pp=parallel.pp, dp=parallel.dp)

    def _at_context(self, settings, context: int):
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
        """The pools' configurator SGLang's factory would pick for the model (configurators.py, as
        pool_configurator.py create_memory_pool_configurator), and the plan it lays out."""
        from .configurators import create_pool_configurator

        if job.mtp:
            raise S.refuse(f"speculative decoding (the MTP draft layers, {{{{mtp}}}}) is not modelled for SGLang "
                           f"{VERSION}: it adds draft weights and draft KV to every pool")
        stages = self.pp_stages(len(job.model.layers), job.settings.pp) if job.settings.pp > 1 else None
        return create_pool_configurator(job, stages).plan(job)

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
        """The pools' configurator sizes them and counts (configurators.py)."""
        return plans[0].pools.fit(plans, pool, settings)

    def max_context(self, plans, pool, concurrency, limit, settings, parallel) -> int:
        """Requests of L tokens that fit never grow with L (the pools do not depend on it): a binary search on
        the engine's own count."""
        from ...pool import longest_context
        from .report import requests_at

        return longest_context(lambda ctx: requests_at(plans, pool, settings, ctx) >= concurrency, limit)

    def workload_room(self, p, pool: int, fit) -> int:
        return fit.figures.max_total_num_tokens

    def workload_cost(self, p, pool: int, settings, fit, tokens: int, shared: int):
        """A request of ``tokens`` holds ceil_page(T) slots of the token pool; the radix cache keeps a shared
        prefix once, page by page (its whole pages); the SWA pool and max_running_requests cap as before."""
        from ...workload import Cost

        page = fit.figures.page_size
        # --disable-radix-cache: mem_cache/registry.py default_radix_cache_factory builds the cache disabled, and "a
        # disabled cache publishes nothing": no prefix is shared
        sh = shared // page * page if p.pools.radix else 0
        own = S.ceil_page(tokens, page) - sh
        limits = {"max_running_requests": fit.figures.max_running_requests}
        swa = p.pools.swa_requests(fit.figures.swa_max_total_num_tokens, tokens)
        if swa is not None:
            limits["SWA pool"] = swa
        return Cost("tokens", max(own, 1), sh, limits)

    def transfer_groups(self, p, spec, tokens: int):
        return p.pools.transfer(p, spec, tokens)

    def host_tiers(self, cap) -> tuple:
        """HiCache's host pools (--enable-hierarchical-cache; tiers.py), checked against the host's memory where
        it is given."""
        from .tiers import host_tiers

        return host_tiers(cap)

    def batch_pools(self, plan, batch: int, model):
        return plan.pools.buffers(plan, batch, model)


def _aiter(settings, model) -> bool:
    """ROCm's default attention backend for an MHA model is aiter (model_override_base.py
    get_default_attn_backend); MLA and DSA are refused there, DeepSeek V4 runs its own dsv4 backend."""
    return settings.sm_major is None and model is not None and not any(
        isinstance(c, (MLALatent, CompressedMLA)) for c in model.components.values())


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


ENGINE = SglangEngine()
