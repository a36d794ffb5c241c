"""The command line's names for the library's parameters (the library never names a flag; errors and the
renderers map a parameter to its flag here). Engine settings come with their own flags, declared once by
each engine (``Engine.options``)."""

from __future__ import annotations

from ..engines import engine_names, engine_options

#: kvcalc's own parameters -> flags
BASE_FLAGS = {
    "model": "MODEL", "context": "--context", "precision": "--precision", "basis": "--basis", "batch": "--batch",
    "mtp": "--mtp", "tp": "--tp", "pp": "--pp", "dp": "--dp", "gpu": "--gpu", "kv_memory": "--kv-memory",
    "weights": "--weights-gib", "reserve": "--reserve-gib", "engine": "--engine", "concurrency": "--concurrency",
    "device": "--device", "fill": "--fill", "writer": "--writer", "file": "FILE", "points": "--points",
    "output": "--output", "model_option": "--model", "out": "--out", "report": "--report", "link": "--link",
    "bandwidth": "--bandwidth", "request_tokens": "--request-tokens", "shared_prefix_tokens": "--shared-prefix-tokens",
}


def _all_flags() -> dict[str, str]:
    out = dict(BASE_FLAGS)
    for name in engine_names():
        for opt in engine_options(name):
            out.setdefault(opt.name, opt.flag)
    return out


FLAGS = _all_flags()
