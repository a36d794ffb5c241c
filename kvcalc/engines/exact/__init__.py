"""The exact engine: no paging. A "block" is one byte, so a request reserves exactly the bytes ``kvcalc
estimate`` counts (complete basis) and a pool of B bytes holds ``B // bytes_per_request`` requests. Its
memory budget is a fraction of the device's total memory, as the paged engines take it, so the two can be
set side by side."""

from __future__ import annotations

import importlib

_WHERE = {"ENGINE": "engine", "ExactEngine": "engine", "Settings": "engine"}
__all__ = sorted(_WHERE)


def __getattr__(name: str):
    if name in _WHERE:
        return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
