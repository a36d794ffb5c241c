"""Argument checks for the Python entry points: one-line errors that name the argument."""

from __future__ import annotations

import os
from typing import Iterable, Sequence

import torch

_INT_DTYPES = (torch.int32, torch.int64)


def interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


# triton reads TRITON_INTERPRET when a kernel is decorated, i.e. when this package is imported (this module
# is imported before any kernel module): what counts is the value at that moment, not a later one.
KERNELS_INTERPRETED = interpreting()


def check_device(name: str, t: torch.Tensor, device: torch.device | None = None) -> None:
    if device is not None and t.device != device:
        raise ValueError(f"{name}: on {t.device}, expected {device} (all tensors must share one device)")
    if t.device.type == "cpu" and not (interpreting() and KERNELS_INTERPRETED):
        raise ValueError(
            f"{name}: CPU tensors need the Triton interpreter; set TRITON_INTERPRET=1 before kvcalc_kernels "
            "is imported (triton reads it when the kernels are decorated)"
        )


def check_tensor(
    name: str,
    t: object,
    *,
    ndim: int | None = None,
    dtypes: Iterable[torch.dtype] | None = None,
    shape: Sequence[int | None] | None = None,
    last_contiguous: bool = True,
    contiguous: bool = False,
    device: torch.device | None = None,
) -> torch.Tensor:
    """Validate one tensor argument; ``shape`` entries that are None are free."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
    if dtypes is not None:
        dtypes = tuple(dtypes)
        if t.dtype not in dtypes:
            names = ", ".join(str(d).replace("torch.", "") for d in dtypes)
            raise TypeError(f"{name}: dtype {str(t.dtype).replace('torch.', '')} not supported; expected {names}")
    if ndim is not None and t.dim() != ndim:
        raise ValueError(f"{name}: expected {ndim} dimensions, got shape {tuple(t.shape)}")
    if shape is not None:
        if t.dim() != len(shape) or any(s is not None and s != d for s, d in zip(shape, t.shape)):
            want = "[" + ", ".join("*" if s is None else str(s) for s in shape) + "]"
            raise ValueError(f"{name}: expected shape {want}, got {list(t.shape)}")
    if contiguous and not t.is_contiguous():
        raise ValueError(f"{name}: must be contiguous, got strides {t.stride()}")
    if last_contiguous and t.dim() >= 1 and t.shape[-1] > 1 and t.stride(-1) != 1:
        raise ValueError(f"{name}: last dimension must have stride 1, got strides {t.stride()}")
    check_device(name, t, device)
    return t


def check_pages(name: str, t: object, *, device: torch.device | None = None, multiple_of: int = 1) -> torch.Tensor:
    """A paged cache ``uint8[num_pages, page_bytes]``: bytes of a page contiguous, pages ``t.stride(0)`` bytes
    apart (>= page_bytes: a view of a larger pool, as an engine's shared buffer, is accepted). With
    ``multiple_of`` the page bytes, the page stride and the start must be multiples of it (fp32 rows)."""
    check_tensor(name, t, ndim=2, dtypes=(torch.uint8,), device=device)
    assert isinstance(t, torch.Tensor)
    if t.shape[1] > 1 and t.stride(1) != 1:
        raise ValueError(f"{name}: the bytes of a page must be contiguous, got strides {t.stride()}")
    if t.shape[0] > 1 and t.stride(0) < t.shape[1]:
        raise ValueError(f"{name}: pages overlap (page stride {t.stride(0)} < page bytes {t.shape[1]})")
    m = multiple_of
    if m > 1 and (t.shape[1] % m or (t.shape[0] > 1 and t.stride(0) % m) or t.data_ptr() % m):
        raise ValueError(f"{name}: page bytes {t.shape[1]}, page stride {t.stride(0)} and start must be "
                         f"multiples of {m}")
    return t


def page_stride(t: torch.Tensor) -> int:
    """Bytes from one page to the next (a one-page view reports its own size)."""
    return t.stride(0) if t.shape[0] > 1 else t.shape[1]


def check_index(name: str, t: object, n: int | None, device: torch.device) -> torch.Tensor:
    """An int32/int64 1-D index tensor (slot mapping, page list) of length n (None: any)."""
    check_tensor(name, t, ndim=1, dtypes=_INT_DTYPES, shape=None if n is None else [n],
                 last_contiguous=False, device=device)
    assert isinstance(t, torch.Tensor)
    return t


def check_slots_in_range(name: str, slots: torch.Tensor, num_slots: int) -> None:
    """Slots must be -1 (skip) or in [0, num_slots).  Costs one small reduction (a sync on a GPU)."""
    if slots.numel() == 0:
        return
    lo = int(slots.min())
    hi = int(slots.max())
    if lo < -1 or hi >= num_slots:
        raise ValueError(f"{name}: values must be -1 or in [0, {num_slots}), got range [{lo}, {hi}]")


def check_int(name: str, v: object, *, minimum: int | None = None) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError(f"{name}: expected an int, got {type(v).__name__}")
    if minimum is not None and v < minimum:
        raise ValueError(f"{name}: must be >= {minimum}, got {v}")
    return v


def use_native_fp8(device: torch.device) -> bool:
    """Native fp8 casts on a real GPU; integer bit manipulation under the interpreter."""
    return device.type == "cuda" and not KERNELS_INTERPRETED
