"""Engine profiles: how a serving engine pages the caches of a model (see :mod:`kvcalc.engines.base`).

The registry maps each engine's name to its profile; ``--engine NAME`` (and ``engine=`` in the API) is
resolved here and nowhere else. A new engine is one folder under ``kvcalc/engines/`` plus one line in
``_REGISTRY`` (or :func:`register` from outside the package, as the tests' toy engine does).
"""

from __future__ import annotations

import importlib

from ..errors import KvcalcError
from .base import Engine

#: engine name -> the module whose ``ENGINE`` is its profile (imported on first use)
_REGISTRY: dict[str, str] = {
    "exact": "kvcalc.engines.exact",
    "vllm": "kvcalc.engines.vllm",
    "sglang": "kvcalc.engines.sglang",
}
_LOADED: dict[str, Engine] = {}


def register(engine: Engine) -> None:
    """Add (or replace) an engine profile at run time."""
    _LOADED[engine.name] = engine
    _REGISTRY.setdefault(engine.name, "")


def unregister(name: str) -> None:
    _LOADED.pop(name, None)
    if _REGISTRY.get(name) == "":
        del _REGISTRY[name]


def engine_names() -> list[str]:
    return list(_REGISTRY)


def get_engine(name: "str | Engine", param: str = "engine") -> Engine:
    """The engine named ``name`` (an :class:`Engine` passes through); unknown names are refused."""
    if isinstance(name, Engine):
        return name
    if not isinstance(name, str) or name not in _REGISTRY:
        raise KvcalcError(f"{param}: unknown engine {name!r}; choose one of: {', '.join(_REGISTRY)}"[:300],
                          param=param)
    if name not in _LOADED:
        _LOADED[name] = importlib.import_module(_REGISTRY[name]).ENGINE
    return _LOADED[name]


def engines() -> list[Engine]:
    return [get_engine(n) for n in _REGISTRY]
