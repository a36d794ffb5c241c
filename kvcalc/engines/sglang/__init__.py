"""SGLang 0.5.23's KV-cache sizing, as it runs on the GPU named (Hopper where none is; Blackwell's TensorRT-LLM
pages, ROCm's aiter fraction: ``Settings.arch``), cited file by file (paths under ``python/sglang/srt/`` of the
0.5.23 wheel; the facts are gathered in docs/engines/sglang-0.5.23.md).

SGLang sizes token pools, not a block pool: the budget is what is free after the weights less
``(1 - mem_fraction_static)`` of the memory free before they loaded
(``mem_cache/kv_cache_configurator.py::_profile_available_bytes``); Mamba-style state takes its share first
(``_handle_max_mamba_cache``); the rest divided by the bytes per token ("cell") of every pool, floored to the
page, is ``max_total_num_tokens``; ``max_running_requests`` follows from it (``resolve_max_num_reqs``). A split
sliding-window pool (``HybridSWAPoolConfigurator``) gets ``swa_full_tokens_ratio`` SWA tokens per full token;
Llama 4's chunked layers take it with the chunk as a sliding window (``sliding_window_size =
attention_chunk_size``), the layers split by index as ``get_hybrid_layer_ids`` does.
:mod:`.sizing` holds the steps (:mod:`.dsv4` DeepSeek V4's ``DSV4PoolConfigurator``). SGLang's own
per-architecture rules (split SWA pools, the Mamba cache strategy, multimodal archs) read the config's
``architecture``; its one rule on a model's path ("llama-2" caps the prefill graphs) reads the model's name and
Hugging Face repository.

HiCache's host pools (``--enable-hierarchical-cache``) are :mod:`.tiers`, the tier below the GPU pools (DSA's and
DeepSeek V4's refused).

Not modelled (refused with one line): speculative decoding, MLA and DSA on ROCm, post-capture resize, KV-cache
sharding, unified memory.
"""

from __future__ import annotations

import importlib

_WHERE = {"ENGINE": "engine", "SglangEngine": "engine", "NAME": "defaults", "VERSION": "defaults",
          "Settings": "defaults"}
__all__ = sorted(_WHERE)


def __getattr__(name: str):
    if name in _WHERE:
        return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
