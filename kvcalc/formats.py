"""Storage formats: how many bytes one cached entry takes, scales and padding included.

An *entry* is one cached vector (a K head, a V head, an MLA latent, an indexer key, ...) of ``dim`` values,
of which the last ``rope_dim`` are rotary-position dimensions. Block-scaled formats quantise the values in
groups that share one scale; some keep the RoPE part in a wider type, unquantised. Every format here is
reduced to a handful of numbers, so that a new layout is one table row rather than new code.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import KvcalcError


def _round_up(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple


@dataclass(frozen=True, kw_only=True)
class StorageFormat:
    name: str
    description: str
    source: str
    value_bits: int
    """Bits per stored value of the quantised part."""
    group_size: int | None = None
    """Values that share one scale (per-entry block scaling); None for none stored in the entry."""
    scale_bytes: int = 0
    """Bytes per stored scale (fp32 = 4, ue8m0 or e4m3 = 1)."""
    rope_value_bytes: int | None = None
    """Bytes per RoPE value when the RoPE part is kept apart, unquantised (bf16 = 2, fp8 = 1);
    None when the RoPE part is stored like the rest of the entry."""
    align: int = 1
    """The entry is padded up to a multiple of this many bytes."""

    def entry_bytes(self, dim: int, rope_dim: int = 0, where: str = "entry") -> int:
        """Bytes for one entry of ``dim`` values whose last ``rope_dim`` values are RoPE dimensions."""
        if dim <= 0:
            raise KvcalcError(f"{where}: dim must be positive, got {dim}")
        if not 0 <= rope_dim <= dim:
            raise KvcalcError(f"{where}: rope_dim {rope_dim} must lie between 0 and dim {dim}")
        split_rope = self.rope_value_bytes is not None
        quantised = dim - rope_dim if split_rope else dim
        if (quantised * self.value_bits) % 8:
            raise KvcalcError(
                f"{where}: {quantised} values at {self.value_bits} bits do not fill whole bytes in format {self.name}"
            )
        total = quantised * self.value_bits // 8
        if self.group_size:
            if quantised % self.group_size:
                raise KvcalcError(
                    f"{where}: format {self.name} scales groups of {self.group_size} values, "
                    f"but the quantised part has {quantised} values"
                )
            total += (quantised // self.group_size) * self.scale_bytes
        if split_rope:
            total += rope_dim * self.rope_value_bytes
        return _round_up(total, self.align)


_FLASHMLA = "FlashMLA README; vLLM v1/attention/backends/mla/flashmla_sparse.py (format notes)"
_INDEXER = "vLLM v1/attention/backends/mla/indexer.py; vLLM models/deepseek_v4 indexer (fp4 path)"

FORMATS: dict[str, StorageFormat] = {
    f.name: f
    for f in (
        StorageFormat(name="fp32", description="float32, 4 B per value", source="IEEE 754", value_bits=32),
        StorageFormat(name="bf16", description="bfloat16, 2 B per value", source="IEEE-like bfloat16", value_bits=16),
        StorageFormat(name="fp16", description="float16, 2 B per value", source="IEEE 754", value_bits=16),
        StorageFormat(
            name="fp8_e4m3",
            description="fp8 e4m3, 1 B per value; per-tensor scale kept as a layer parameter, not in the cache",
            source="vLLM --kv-cache-dtype fp8 (per-tensor k_scale / v_scale)",
            value_bits=8,
        ),
        StorageFormat(
            name="fp8_e5m2",
            description="fp8 e5m2, 1 B per value; no scale",
            source="vLLM --kv-cache-dtype fp8_e5m2",
            value_bits=8,
        ),
        StorageFormat(
            name="fp8_ds_mla",
            description="DeepSeek V3.2 FlashMLA: fp8 e4m3 NoPE + one fp32 scale per 128 values + bf16 RoPE "
            "(656 B for a 576-wide latent)",
            source=_FLASHMLA,
            value_bits=8,
            group_size=128,
            scale_bytes=4,
            rope_value_bytes=2,
        ),
        StorageFormat(
            name="fp8_ds_mla_v4",
            description="DeepSeek V4 FlashMLA: fp8 e4m3 NoPE + bf16 RoPE + one ue8m0 scale per 64 values, "
            "padded to 8 B (584 B for a 512-wide entry: 448 + 128 + 7 + 1 pad)",
            source=_FLASHMLA + "; vLLM models/deepseek_v4/attention.py",
            value_bits=8,
            group_size=64,
            scale_bytes=1,
            rope_value_bytes=2,
            align=8,
        ),
        StorageFormat(
            name="mxfp8_ds_mla",
            description="DeepSeek V4.1 FlashMLA: all values fp8 e4m3 (RoPE too) + one ue8m0 scale per 32 "
            "(528 B for a 512-wide entry)",
            source=_FLASHMLA,
            value_bits=8,
            group_size=32,
            scale_bytes=1,
        ),
        StorageFormat(
            name="nvfp4_ds_mla",
            description="V3.2 geometry on SM100: e2m1 NoPE + one e4m3 scale per 16 values + fp8 RoPE "
            "(352 B for a 576-wide latent)",
            source=_FLASHMLA,
            value_bits=4,
            group_size=16,
            scale_bytes=1,
            rope_value_bytes=1,
        ),
        StorageFormat(
            name="fp8_indexer",
            description="lightning-indexer key: fp8 e4m3 + one fp32 scale per 128 values (132 B for 128-wide)",
            source=_INDEXER,
            value_bits=8,
            group_size=128,
            scale_bytes=4,
        ),
        StorageFormat(
            name="fp4_indexer",
            description="lightning-indexer key: e2m1 packed two per byte + one ue8m0 scale per 32 values "
            "(68 B for 128-wide)",
            source=_INDEXER,
            value_bits=4,
            group_size=32,
            scale_bytes=1,
        ),
        StorageFormat(
            name="nvfp4",
            description="NVFP4: e2m1 packed two per byte + one e4m3 scale per 16 values (per-tensor fp32 "
            "global scale kept as a layer parameter)",
            source="NVIDIA NVFP4 format (Blackwell)",
            value_bits=4,
            group_size=16,
            scale_bytes=1,
        ),
    )
}


def get_format(name: str, where: str = "format") -> StorageFormat:
    try:
        return FORMATS[name]
    except KeyError:
        raise KvcalcError(
            f"{where}: unknown storage format {name!r}; known: {', '.join(sorted(FORMATS))}"
        ) from None
