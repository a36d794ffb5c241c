"""kvcalc: exact KV-cache memory for LLMs.

    >>> import kvcalc
    >>> e = kvcalc.estimate("deepseek-v4-pro", 1 << 20, precision="bf16", basis="article")
    >>> int(e.per_sequence[0])
    10334371840

``kvcalc.capacity``, ``kvcalc.fit``, ``kvcalc.decode`` and ``kvcalc.transfer`` are the commands of the same name
(:mod:`kvcalc.api`; docs/api.md): results print as the command line prints them and ``to_json()`` is its
``--json``.

The analytic core imports yaml, and numpy only for many contexts at once (the API returns numpy arrays by
default; ``numpy=False`` gives exact Python ints); torch and triton live behind ``kvcalc.verify``.
"""

import sys as _sys
import types as _types

#: the commands' functions (kvcalc.api), loaded on first use: ``import kvcalc`` stays as light as the estimate
_API = ("capacity", "fit", "decode", "transfer")


class _CommandModule(_types.ModuleType):
    """``kvcalc.capacity`` (and fit, decode, transfer) is both the library module and, called, the command's API
    function (:mod:`kvcalc.api`): ``kvcalc.capacity("llama-3.1-8b", 8192, gpu="h100")`` returns its Result."""

    def __call__(self, *args, **kwargs):
        from . import api

        return getattr(api, self.__name__.rpartition(".")[2])(*args, **kwargs)


class _Package(_types.ModuleType):
    """The package: a command's submodule, when Python binds it here on import, becomes callable."""

    def __setattr__(self, name, value):
        if name in _API and type(value) is _types.ModuleType:
            value.__class__ = _CommandModule
        super().__setattr__(name, value)


_sys.modules[__name__].__class__ = _Package

from .config import ModelSpec, config_names, load_model  # noqa: E402
from .errors import KvcalcError  # noqa: E402
from .estimate import Estimate, estimate  # noqa: E402
from .formats import FORMATS, StorageFormat  # noqa: E402

__version__ = "0.1.0"
__all__ = [
    "FORMATS",
    "Estimate",
    "KvcalcError",
    "ModelSpec",
    "StorageFormat",
    "capacity",
    "config_names",
    "decode",
    "estimate",
    "fit",
    "load_model",
    "transfer",
]


def __getattr__(name: str):
    if name in _API:  # the submodule, imported now: bound here, it is callable (_Package.__setattr__)
        import importlib

        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'kvcalc' has no attribute {name!r}")
