"""The accelerator catalogue (kvcalc/data/gpus.yaml): the memory each device reports, with its source."""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from .errors import KvcalcError
from .paths import gpus_file
from .yamlio import load_yaml

#: short names people type
ALIASES = {"h100": "h100-sxm", "a100": "a100-80gb", "gh200": "h200"}


@dataclass(frozen=True)
class GPU:
    key: str
    name: str
    vendor: str
    memory_bytes: int
    marketing: str
    basis: str  # "reported" (seen in nvidia-smi / rocm-smi output) or "spec sheet"
    source: str
    bandwidth_bytes_per_s: int | None = None  # peak memory bandwidth, the vendor's decimal figure
    bandwidth_source: str = ""
    arch: str = ""  # NVIDIA "sm90" (compute capability 9.0), AMD "gfx942": engines choose kernels by it
    arch_source: str = ""

    @property
    def sm_major(self) -> int | None:
        """The CUDA compute capability's major (9 for sm90, 10 for sm100); None for a non-NVIDIA device."""
        return int(self.arch[2:]) // 10 if self.arch.startswith("sm") else None


_CATALOGUE: dict[str, GPU] | None = None


def catalogue() -> dict[str, GPU]:
    global _CATALOGUE
    if _CATALOGUE is None:
        data = load_yaml(gpus_file())
        _CATALOGUE = {key: GPU(key=key, **entry) for key, entry in data["gpus"].items()}
    return _CATALOGUE


def get_gpu(name: str) -> GPU:
    gpus = catalogue()
    key = str(name).strip().lower()
    key = ALIASES.get(key, key)
    if key not in gpus:
        close = difflib.get_close_matches(key, list(gpus), n=3, cutoff=0.4)
        hint = f"; closest: {', '.join(close)}" if close else ""
        raise KvcalcError(f"gpu: unknown accelerator {str(name)[:80]!r}{hint} (`kvcalc gpus` lists all)", param="gpu")
    return gpus[key]
