"""vLLM's KV-cache planning, pinned to one version and cited file by file (paths under ``vllm/`` of the
0.33.0 wheel). Modelled as it runs on CUDA (or ROCm) on the GPU named: Hopper where none is. The GPU's
architecture (``Settings.arch``, from ``kvcalc/data/gpus.yaml``) picks the MLA backend and with it the block
(:func:`.specs.mla_backend`: FLASH_ATTN_MLA's 16 on Hopper in bf16, FlashMLA's 64 in fp8, FlashInfer's 32 on
Blackwell, Triton's 16 elsewhere; DSA's sparse backends and their rows), refuses DSA where no sparse backend
runs, and DeepSeek V4 where no V4 kernel does.

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

import importlib

#: the names this package offers, by the module that defines them (loaded on first use, PEP 562: importing the
#: package for its options costs nothing)
_WHERE = {
    **dict.fromkeys(("DEFAULT_ASYNC_SCHEDULING", "DEFAULT_GPU_MEMORY_UTILIZATION",
                     "DEFAULT_INDEXER_DTYPE", "DEFAULT_PREFIX_CACHING", "FLASH_ATTENTION_BLOCK",
                     "FLASHINFER_GDN_CHECKPOINT_ALIGNMENT", "FLASHMLA_BLOCK", "GDN_PREFILL_BACKENDS",
                     "INDEXER_DTYPES", "NAME", "V4_BLOCK", "V4_PAGE_ALIGNMENT", "V4_PLAIN_ALIGNMENT", "V4_SWA_BLOCK",
                     "VERSION", "Settings", "default_gdn_prefill_backend", "default_max_num_batched_tokens",
                     "format_gib", "max_in_flight_tokens"), "defaults"),
    "group_layers": "grouping",
    "align_hybrid": "hybrid", "state_blocks": "hybrid",
    "vllm_plan": "planner",
    **dict.fromkeys(("LayerSpec", "block_outermost", "cache_block_size", "layer_specs"), "specs"),
    **dict.fromkeys(("ENGINE", "VllmEngine", "pp_stages"), "engine"),
}
__all__ = sorted(_WHERE)


def __getattr__(name: str):
    if name in _WHERE:
        return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
