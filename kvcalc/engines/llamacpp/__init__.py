"""The llama.cpp engine: llama.cpp 0c1e57098 as bundled in llama-cpp-python 0.3.36, and the front ends that run it
(llama-server, llama-cpp-python, the C API, ollama).

llama.cpp has no pages: a context holds ``n_ctx`` cells (one token each) in every attention layer, split into
``n_seq_max`` streams unless the cache is unified, a smaller sliding-window cache where the architecture keeps one,
and a fixed number of recurrent-state rows. ``layout`` computes every tensor llama.cpp creates, from its sources
(each rule cites its file and function); ``ggml`` holds the cache types and the buffer padding; ``launch`` the front
ends' defaults; ``engine`` plans and fits it like the other engines. Checked against llama.cpp itself on a grid of
synthetic GGUFs (``scripts/audit/llamacpp_reference.py``, ``tests/fixtures/engine-ref/llamacpp-0.3.36.json``)."""

from __future__ import annotations

import importlib

_WHERE = {"ENGINE": "engine", "LlamaCppEngine": "engine", "Settings": "engine"}
__all__ = sorted(_WHERE)


def __getattr__(name: str):
    if name in _WHERE:
        return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
