"""vLLM's KV-cache planning, pinned to one version and cited file by file (paths under ``vllm/`` of the
0.33.0 wheel). Modelled as it runs on CUDA.

What vLLM does, in the order the modules of this package follow it:

1. Every attention layer registers one *layer spec* per cache it keeps (``v1/kv_cache_interface.py``;
   :mod:`.specs`): full attention / MLA (``FullAttentionSpec``, ``MLAAttentionSpec``), sliding window
   (``SlidingWindowSpec``, ``SlidingWindowMLASpec``). Each has a block size in tokens and a page: the bytes
   one block of that layer takes (``AttentionSpec.real_page_size_bytes``, padded up to ``alignment`` for the
   DeepSeek V4 specs, ``_apply_alignment_padding``).
2. The planner groups the layer specs (``v1/core/kv_cache_planning.py::get_kv_cache_groups``; :mod:`.grouping`):
   one group if every spec is equal or of one uniform type; the *packed* grouping when the layout is
   block-outermost and pages differ (DeepSeek V4, ``_get_packed_kv_cache_groups``); otherwise equal-page
   groups of equal layer count, padded (``_get_kv_cache_groups_uniform_page_size``).
3. All groups draw block ids from one shared pool (:mod:`.planner`); a block id costs ``bytes_per_block``, the
   widest group's sum of pages (``_get_kv_cache_bytes_per_block``), in every group at once (the groups alias
   one buffer). ``num_blocks = available // bytes_per_block``; block 0 is the null block
   (``v1/core/block_pool.py``).
4. A request at ``max_model_len`` needs, per group, ``cdiv(L, block)`` blocks (full attention) or
   ``cdiv(min(window - 1 + in_flight, L), block) + 1`` (sliding window, ``SlidingWindowSpec.
   max_admission_blocks_per_request``), ``in_flight = max_concurrent_batches * max_num_batched_tokens``
   (``config/vllm.py::VllmConfig.max_in_flight_tokens``: 2 batches with async scheduling, 1 without).
5. ``Maximum concurrency = num_blocks / blocks per request`` (null block included) and ``GPU KV cache size
   = int(concurrency * L)`` tokens (``v1/core/kv_cache_utils.py::get_max_concurrency_for_kv_cache_config``,
   ``update_kv_cache_capacity``). The start-up check needs ``bytes_per_block * blocks per request`` to fit in
   ``available - bytes_per_block`` (``kv_cache_planning.py::_check_enough_kv_cache_memory``).
6. Hybrids with Mamba-style state (``MambaSpec``; :mod:`.hybrid`): the attention block grows until one
   attention page holds a state page, and the state page is padded to it
   (``platforms/interface.py::_align_hybrid_block_size``); a request holds a fixed number of state blocks per
   group: 2 running blocks plus checkpoint blocks with prefix caching (``mamba_cache_mode`` align), 1 without
   (``MambaSpec.max_memory_usage_bytes``).
7. The memory budget (``v1/worker/gpu_worker.py::determine_available_memory``): ``ceil(total *
   gpu_memory_utilization)`` less what the model needs besides the cache.
8. The start-up log lines (:mod:`.logs`), read by ``kvcalc check-log``.

Nothing here branches on a model's name: each kvcalc cache kind maps to the layer specs vLLM builds for it.
"""

from __future__ import annotations

from ..base import Engine, Option, even_stages, fraction_budget
from .defaults import (BLACKWELL_GPUS, DEFAULT_ASYNC_SCHEDULING, DEFAULT_GPU_MEMORY_UTILIZATION,
                       DEFAULT_INDEXER_DTYPE, DEFAULT_PREFIX_CACHING, FLASH_ATTENTION_BLOCK,
                       FLASHINFER_GDN_CHECKPOINT_ALIGNMENT, FLASHMLA_BLOCK, GDN_PREFILL_BACKENDS, HOPPER_GPUS,
                       INDEXER_DTYPES, NAME, V4_BLOCK, V4_PAGE_ALIGNMENT, V4_PLAIN_ALIGNMENT, V4_SWA_BLOCK, VERSION,
                       Settings, default_gdn_prefill_backend, default_max_num_batched_tokens, format_gib,
                       max_in_flight_tokens)
from .grouping import group_layers
from .hybrid import align_hybrid, state_blocks
from .options import OPTIONS
from .planner import vllm_plan
from .specs import LayerSpec, block_outermost, cache_block_size, layer_specs
from . import logs as _logs

__all__ = [
    "BLACKWELL_GPUS", "DEFAULT_ASYNC_SCHEDULING", "DEFAULT_GPU_MEMORY_UTILIZATION", "DEFAULT_INDEXER_DTYPE",
    "DEFAULT_PREFIX_CACHING", "ENGINE", "FLASHINFER_GDN_CHECKPOINT_ALIGNMENT", "FLASHMLA_BLOCK",
    "FLASH_ATTENTION_BLOCK", "GDN_PREFILL_BACKENDS", "HOPPER_GPUS", "INDEXER_DTYPES", "LayerSpec", "NAME",
    "Settings", "V4_BLOCK", "V4_PAGE_ALIGNMENT", "V4_PLAIN_ALIGNMENT", "V4_SWA_BLOCK", "VERSION", "VllmEngine",
    "align_hybrid", "block_outermost", "cache_block_size", "default_gdn_prefill_backend",
    "default_max_num_batched_tokens", "format_gib", "group_layers", "layer_specs", "max_in_flight_tokens",
    "pp_stages", "state_blocks",
]

def pp_stages(num_layers: int, pp: int) -> list[range]:
    """distributed/utils.py get_pp_indices: num_layers // pp per stage, the remainder added one layer each
    to the stages before the last (partitions[-2], partitions[-3], ...)."""
    return even_stages(num_layers, pp)


class VllmEngine(Engine):
    name = NAME
    version = VERSION
    title = f"vLLM {VERSION}"
    summary = f"vLLM {VERSION} on CUDA: paged blocks in one shared pool, groups, window admission"
    Settings = Settings
    budget_keys = ("gpu_memory_utilization",)
    logs = _logs.READER
    options = OPTIONS

    def defaults(self, given, *, gpu=None, model=None) -> dict:
        out = {}
        if "max_num_batched_tokens" not in given:
            out["max_num_batched_tokens"] = default_max_num_batched_tokens(gpu.memory_bytes if gpu else None,
                                                                          gpu.name if gpu else "")
        if "gdn_prefill_backend" not in given:
            out["gdn_prefill_backend"] = default_gdn_prefill_backend(gpu.key if gpu else None, model)
        return out

    def pp_stages(self, num_layers: int, pp: int) -> list[range]:
        return pp_stages(num_layers, pp)

    def plan(self, job):
        return vllm_plan(job)

    def budget(self, settings, gpu, model=None, parallel=None):
        return fraction_budget(gpu, settings.gpu_memory_utilization, "gpu_memory_utilization")

    def refusal(self, p, pool: int) -> str:
        """kv_cache_planning.py _check_enough_kv_cache_memory, with kvcalc's reasons."""
        usable = pool - p.null_blocks * p.bytes_per_block
        best = p.max_context(pool)
        est = f" Based on the available memory, the estimated maximum model length is {best}." if best > 0 else ""
        return (
            f"{p.model}: to serve one request at max_model_len {p.context:,}, {format_gib(p.per_request_bytes)} GiB "
            f"({p.per_request_bytes:,} B = {p.blocks_per_request:,} blocks x {p.bytes_per_block:,} B) of KV cache is "
            f"needed, more than the {format_gib(max(usable, 0))} GiB available ({usable:,} B after the null block)."
            f"{est} vLLM {p.engine_version} refuses to start here too."
        )

    def log_line(self, p, num_blocks: int) -> str:
        """v1/core/kv_cache_utils.py update_kv_cache_capacity."""
        return (f"GPU KV cache size: {p.cache_tokens(num_blocks):,} tokens, Maximum concurrency for {p.context:,} "
                f"tokens per request: {p.max_concurrency(num_blocks):.2f}x")

    long_context = "vLLM refuses it unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1"

    def summary_line(self, cap) -> str:
        p = cap.plan
        s = p.settings
        from ...pool import GroupKind

        wins = any(g.kind is GroupKind.WINDOW for g in p.groups)
        return (f"{s.gpu_memory_utilization:g} of the device's total memory less weights; one shared pool of "
                f"{p.bytes_per_block:,} B blocks; a request reserves {p.blocks_per_request:,} blocks"
                + (f" (window groups admit window - 1 + {p.settings_json['max_in_flight_tokens']:,} in-flight tokens)"
                   if wins else "") + "; block 0 is null")

    def explain(self, p, num_blocks: int) -> list[str]:
        from ...pool import GroupKind
        from ...units import format_bytes

        out = []
        s = p.settings_json
        wins = [g for g in p.groups if g.kind is GroupKind.WINDOW]
        fixed = [g for g in p.groups if g.kind is GroupKind.STATE]
        if fixed:
            out.append(f"Fixed-state groups reserve {format_bytes(sum(g.blocks_per_request for g in fixed) * p.bytes_per_block)}"
                       f" of it: {'/'.join(sorted({str(g.blocks_per_request) for g in fixed}))} blocks per request in "
                       f"each of {len(fixed)} group(s), whatever the context (mamba_cache_mode "
                       f"{s.get('mamba_cache_mode', 'none')}).")
        if wins:
            w_res = sum(g.blocks_per_request for g in wins) * p.bytes_per_block
            out.append(f"Window and state groups reserve {format_bytes(w_res)} of it: they admit window - 1 + "
                       f"{s['max_in_flight_tokens']:,} in-flight tokens (max_num_batched_tokens "
                       f"{s['max_num_batched_tokens']:,} x {s['max_in_flight_tokens'] // s['max_num_batched_tokens']}"
                       f"{', async scheduling' if s['async_scheduling'] else ''}), whatever the context.")
        out.append(f"Pool: {num_blocks:,} blocks of {p.bytes_per_block:,} B (block 0 is vLLM's null block); "
                   f"layout {p.layout.value}; {p.grouping}.")
        out.append(f"vLLM would log: {self.log_line(p, num_blocks)}")
        return out


ENGINE = VllmEngine()
