"""What both verify paths share: torch (lazily), the process's and the device's memory figures, the sentinel
byte counter, the device's copy bandwidth, the free-memory check and the progress bar."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from ..errors import KvcalcError, quote

FILLS = ("none", "sample", "full")


def _rss_bytes() -> int:
    """Resident set size of this process (Linux /proc; 0 where unavailable)."""
    try:
        with open(f"/proc/{os.getpid()}/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _torch():
    try:
        import torch
    except ImportError:
        raise KvcalcError("verify needs torch: pip install 'kvcalc[verify]' (a CPU build: see the README)") from None
    return torch


DEVICES = ("auto", "cuda", "cpu")


def resolve_device(device) -> tuple[str, str | None]:
    """'auto': CUDA when torch sees a GPU, otherwise the CPU, with a note saying so; 'cuda' and 'cpu' as asked."""
    if not isinstance(device, str) or device not in DEVICES:
        raise KvcalcError(f"device: choose {', '.join(DEVICES)}, got {quote(device)}"[:200], param="device")
    if device == "cpu":
        return device, None
    torch = _torch()
    if device == "cuda":
        if not torch.cuda.is_available():
            built = "has no CUDA device visible" if torch.backends.cuda.is_built() or getattr(torch.version, "hip", None) \
                else "is a CPU build (torch.version.cuda is None)"
            raise KvcalcError(f"device: cuda asked, but this torch {torch.__version__} {built}; use {{{{device}}}} cpu "
                              "or auto, or run where torch sees a GPU", param="device")
        return device, None
    if torch.cuda.is_available():
        return "cuda", None
    return "cpu", ("no CUDA device is visible to torch: verifying on the CPU (allocation and fill only; no GPU "
                   "figures); {{device}} cuda requires one")


def device_arch(device: str) -> str | None:
    """The architecture of the CUDA device as kvcalc/data/gpus.yaml names it (compute capability 9.0: sm90; on
    ROCm its gfx target), whose kernels the engine's layout follows; None on the CPU (Hopper's rules).
    Never run on a GPU here: see the README's verify section."""
    if device != "cuda":
        return None
    torch = _torch()
    if getattr(torch.version, "hip", None):
        name = str(getattr(torch.cuda.get_device_properties(torch.cuda.current_device()), "gcnArchName", ""))
        return name.split(":")[0] or None
    major, minor = torch.cuda.get_device_capability()
    return f"sm{major}{minor}"


def _counter(torch, sentinel: int, equal: bool):
    """Bytes of a tensor that differ from (``equal=False``) or equal (``equal=True``) ``sentinel``:
    count_nonzero of ``x ^ sentinel`` (one pass, several times faster than summing a bool mask)."""
    def count(x) -> int:
        if x.numel() == 0:
            return 0
        n = int(torch.count_nonzero(x ^ sentinel))
        return x.numel() - n if equal else n
    return count


@dataclass(frozen=True)
class MemorySnapshot:
    """The process's resident memory, and on CUDA the allocator's allocated and reserved bytes and the device's
    free bytes, at one moment."""

    rss: int
    alloc: int | None = None
    reserved: int | None = None
    free: int | None = None


def _memory(torch, device: str) -> MemorySnapshot:
    """Resident memory, and on CUDA the allocator's and the device's figures."""
    if device == "cuda":
        torch.cuda.synchronize()
        return MemorySnapshot(_rss_bytes(), torch.cuda.memory_allocated(), torch.cuda.memory_reserved(),
                              torch.cuda.mem_get_info()[0])
    return MemorySnapshot(_rss_bytes())


def measured_from(device: str, storage: int, before: MemorySnapshot, after: MemorySnapshot,
                  end: MemorySnapshot | None, planned: int):
    """What the allocation measured (:class:`kvcalc.verify.result.Measured`): on the CPU the resident growth; on
    CUDA the allocator's and the device's deltas, whether they came back, and the allocator's rounding."""
    from .result import Measured

    if device != "cuda":
        return Measured(storage_bytes=storage, resident_growth_bytes=after.rss - before.rss)
    return Measured(
        storage_bytes=storage,
        allocator_allocated_delta=after.alloc - before.alloc,
        allocator_reserved_delta=after.reserved - before.reserved,
        device_free_delta=before.free - after.free,
        allocator_back_to_start=end.alloc == before.alloc,
        device_free_back_to_start_bytes=before.free - end.free,
        allocator_rounding_bytes=after.alloc - before.alloc - planned,
    )


def _check_room(torch, device: str, planned: int) -> None:
    """Refuse a pool larger than the device's free memory."""
    if device == "cuda":
        if not torch.cuda.is_available():
            raise KvcalcError("device: no CUDA device here; use {{device}} cpu", param="device")
        free, _total = torch.cuda.mem_get_info()
        if planned > free:
            raise KvcalcError(f"device: the plan needs {planned:,} B, the GPU has {free:,} B free", param="device")
    else:
        avail = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else None
        if avail is not None and planned > avail:
            raise KvcalcError(f"device: the plan needs {planned:,} B, this machine has {avail:,} B free",
                              param="device")


def _copy_bandwidth(torch, device) -> float | None:
    """The device's measured copy bandwidth (bytes read + written per second), CUDA only: 4 copies of 256 MiB."""
    if device != "cuda":
        return None
    a = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
    b.copy_(a)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(4):
        b.copy_(a)
    torch.cuda.synchronize()
    bw = 4 * 2 * a.numel() / (time.perf_counter() - t0)
    del a, b
    torch.cuda.empty_cache()
    return bw


class _Progress:
    """A rich progress bar on stderr when it is a terminal (quiet otherwise)."""

    def __init__(self, enabled: bool, total: int, label: str):
        self.bar = None
        if enabled and total:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            self.bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                TextColumn("tokens"), TimeRemainingColumn(), transient=True)
            self.bar.start()
            self.task = self.bar.add_task(label, total=total)

    def advance(self, n: int) -> None:
        if self.bar is not None:
            self.bar.update(self.task, advance=n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()
