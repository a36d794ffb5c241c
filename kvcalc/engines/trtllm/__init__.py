"""The TensorRT-LLM engine: TensorRT-LLM 1.1's PyTorch backend (its default in 1.x).

One paged pool per rank, blocks of ``tokens_per_block`` tokens of every attention layer, sized after a profiling run:
``int((total - peak + temporary cache) x free_gpu_memory_fraction)`` bytes, ``max_tokens`` of them at the kv size per
token, primary blocks rounded up; ``max_seq_len`` shortened to the pool where it is longer; a host (secondary) pool
from ``host_cache_size``. ``sizing`` holds the arithmetic with its sources, ``plan`` the pool and the count,
``engine`` the profile."""

from __future__ import annotations

import importlib

_WHERE = {"ENGINE": "engine", "TrtllmEngine": "engine", "Settings": "engine"}
__all__ = sorted(_WHERE)


def __getattr__(name: str):
    if name in _WHERE:
        return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
