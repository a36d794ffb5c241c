"""Engine profiles: how a serving engine pages the caches of a model (see :mod:`kvcalc.engines.base`).

The registry maps each engine's name to its package; ``--engine NAME`` (and ``engine=`` in the API) is
resolved here and nowhere else. A new engine is one folder under ``kvcalc/engines/`` plus one line in
``_REGISTRY`` (or :func:`register` from outside the package, as the tests' toy engine does). Each folder has a
small ``options`` module (its name, version, summary and the settings a user may set) that the command line
reads without importing the engine itself; the engine loads on first use.
"""

from __future__ import annotations

import importlib

from ..errors import KvcalcError, quote

#: engine name -> its package (``PKG.ENGINE`` is the profile, ``PKG.options`` its declarations)
_REGISTRY: dict[str, str] = {
    "exact": "kvcalc.engines.exact",
    "vllm": "kvcalc.engines.vllm",
    "sglang": "kvcalc.engines.sglang",
    "llama.cpp": "kvcalc.engines.llamacpp",
    "trtllm": "kvcalc.engines.trtllm",
}
_LOADED: dict = {}

#: the engine a command plans on when none is named (``--engine``'s default; ``engine=`` in the API)
DEFAULT_ENGINE = "vllm"


def register(engine) -> None:
    """Add (or replace) an engine profile at run time."""
    _LOADED[engine.name] = engine
    _REGISTRY.setdefault(engine.name, "")


def unregister(name: str) -> None:
    _LOADED.pop(name, None)
    if _REGISTRY.get(name) == "":
        del _REGISTRY[name]


def engine_names() -> list[str]:
    return list(_REGISTRY)


def get_engine(name, param: str = "engine"):
    """The engine named ``name`` (an engine object passes through); unknown names are refused."""
    if not isinstance(name, str):
        if hasattr(name, "plan") and hasattr(name, "name"):
            return name
        raise KvcalcError(f"{param}: an engine is named by a string, got {type(name).__name__}", param=param)
    if name not in _REGISTRY:
        raise KvcalcError(f"{param}: unknown engine {quote(name)}; choose one of: {', '.join(_REGISTRY)}"[:300],
                          param=param)
    if name not in _LOADED:
        _LOADED[name] = importlib.import_module(_REGISTRY[name]).ENGINE
    return _LOADED[name]


def engines() -> list:
    return [get_engine(n) for n in _REGISTRY]


def _declarations(name: str):
    if name in _LOADED or not _REGISTRY[name]:
        return get_engine(name)
    return importlib.import_module(_REGISTRY[name] + ".options")


def engine_options(name: str) -> tuple:
    """The settings a user may set on engine ``name`` (its ``Option`` declarations), without loading it."""
    d = _declarations(name)
    return tuple(getattr(d, "OPTIONS", None) or getattr(d, "options", ()))


def engine_summary(name: str) -> str:
    d = _declarations(name)
    return getattr(d, "SUMMARY", None) or getattr(d, "summary", "")


def engine_title(name: str) -> str:
    """How the command line's help names engine ``name`` ('vLLM 0.33.0'), without loading it."""
    d = _declarations(name)
    return getattr(d, "TITLE", None) or getattr(d, "title", name)
