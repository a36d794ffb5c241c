"""The llama.cpp engine's settings (llama.cpp's own names; options.py declares the flags) and the GPU's buffers."""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import KvcalcError
from .options import FRONTENDS


@dataclass(frozen=True)
class Settings:
    frontend: str = "llama-server"
    ctx_size: int | None = None
    parallel: int | None = None
    kv_unified: bool | None = None
    cache_type_k: str | None = None
    cache_type_v: str | None = None
    flash_attn: str | None = None
    swa_full: bool | None = None
    batch_size: int | None = None
    ubatch_size: int | None = None
    n_gpu_layers: int | None = None
    no_kv_offload: bool | None = None
    num_ctx: int | None = None
    num_parallel: int | None = None
    kv_cache_type: str | None = None
    num_batch: int | None = None
    n_rs_seq: int = 0  # recurrent state rows kept a sequence for speculative rollback (llama-server: with a draft)
    gpu_memory: int | None = None  # the GPU's total memory (ollama's num_ctx default); set from --gpu
    arch: str | None = None  # the GPU's architecture (gpus.yaml): its buffer names and padding

    def __post_init__(self) -> None:
        if self.frontend not in FRONTENDS:
            raise KvcalcError(f"frontend: choose one of {', '.join(FRONTENDS)}, got {self.frontend!r}"[:200],
                              param="frontend")


def backend_of(arch: str | None) -> tuple[str, str]:
    """(buffer kind, buffer name) of the GPU: CUDA0 on NVIDIA, ROCm0 on AMD (ggml-cuda built for HIP names its
    devices so), both with CUDA's alignment and quantized-row padding; CUDA where no GPU is named."""
    if arch and arch.startswith("gfx"):
        return "cuda", "ROCm0"
    return "cuda", "CUDA0"
