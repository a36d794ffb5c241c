"""The accelerator catalogue (kvcalc/data/gpus.yaml): the memory each device reports, with its source."""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

from .errors import KvcalcError, quote
from .paths import gpus_file
from .yamlio import load_yaml

#: short names people type -> the card they are read as, and the others the short name could mean (said each
#: time an alias is used: a short name is a choice kvcalc made, not the user)
ALIASES = {"h100": ("h100-sxm", ("h100-pcie", "h100-nvl")), "a100": ("a100-80gb", ("a100-40gb",))}


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



_ARCH = re.compile(r"^(?:sm(\d{2,3})[a-z]?|gfx[0-9a-f]{3,4})$")


def arch_major(arch: str | None) -> int | None:
    """A GPU architecture's CUDA compute capability major: 9 for sm90 (and for None: Hopper, where no GPU is
    named), 10 for sm100; None for an AMD gfx target. Anything else is refused."""
    if arch is None:
        return 9
    m = _ARCH.match(arch) if isinstance(arch, str) else None
    if m is None:
        raise KvcalcError(f"arch: expected a GPU architecture such as sm90 or gfx942, got {quote(arch)}"[:200], param="arch")
    return int(m.group(1)) // 10 if m.group(1) else None


_CATALOGUE: dict[str, GPU] | None = None


def catalogue() -> dict[str, GPU]:
    global _CATALOGUE
    if _CATALOGUE is None:
        data = load_yaml(gpus_file())
        _CATALOGUE = {key: GPU(key=key, **entry) for key, entry in data["gpus"].items()}
    return _CATALOGUE


def alias_note(name: str) -> str | None:
    """What a short name was read as, and how to name the others ('a100 is read as a100-80gb ...'); None for
    a full name."""
    key = str(name).strip().lower()
    if key not in ALIASES:
        return None
    full, others = ALIASES[key]
    gpus = catalogue()
    return (f"{{{{gpu}}}} {key} is read as {full} ({gpus[full].name}); {' and '.join(others)} "
            f"name{'s' if len(others) == 1 else ''} the other{'' if len(others) == 1 else 's'}")


def resolve_gpu(gpu) -> "GPU | None":
    """A catalogue GPU from its name, a GPU as given, None for none named; anything else is refused."""
    if gpu is None or isinstance(gpu, GPU):
        return gpu
    if not isinstance(gpu, str):
        raise KvcalcError(f"gpu: expected a GPU name from the catalogue, got {quote(gpu)}"[:200], param="gpu")
    return get_gpu(gpu)


def get_gpu(name: str) -> GPU:
    gpus = catalogue()
    key = str(name).strip().lower()
    key = ALIASES[key][0] if key in ALIASES else key
    if key not in gpus:
        close = difflib.get_close_matches(key, list(gpus), n=3, cutoff=0.4)
        hint = f"; closest: {', '.join(close)}" if close else ""
        raise KvcalcError(f"gpu: unknown accelerator {quote(str(name))}{hint} (`kvcalc gpus` lists all)", param="gpu")
    return gpus[key]
