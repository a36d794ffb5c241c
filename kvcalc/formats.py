"""Storage formats: how many bytes one cached entry takes, scales and padding included.

An *entry* is one cached vector (a K head, a V head, an MLA latent, an indexer key, ...) of ``dim`` values,
of which the last ``rope_dim`` are rotary-position dimensions. Block-scaled formats quantise the values in
groups that share one scale; some keep the RoPE part in a wider type, unquantised. Every format here is
reduced to a handful of numbers, so that a new layout is one table row rather than new code.

This module is the single source of byte layouts: :meth:`StorageFormat.layout` gives every field's offset in
a record (quantised values, RoPE values, scales, padding) and whether a paged cache keeps the scale parts
of a page's entries apart from their data parts. The Triton kernels (``kvcalc_kernels.formats``) build
their layouts from it and add only their writers' rounding rules.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import KvcalcError, quote


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
    """The entry is padded up to a multiple of this many bytes; the pad bytes follow the last region."""
    element: str = ""
    """Encoding of the quantised part: fp32, bf16, fp16, fp8_e4m3, fp8_e5m2 or e2m1."""
    scale_kind: str | None = None
    """Encoding of a stored scale: fp32, ue8m0 (a power of two, byte = exponent + 127), e4m3, or scale_zero_16
    (a scale and a zero point, 2 B each in the model dtype: LMDeploy)."""
    order: tuple[str, ...] = ("quant", "scales", "rope")
    """Order of the record's regions (those the format has); padding comes last."""
    split_pages: bool = False
    """True: a page holds the data parts (everything before the scale part) of all its entries first, then
    their scale parts (scales plus trailing pad). False: whole records back to back."""
    scale_per_entry: bool = False
    """One scale for the whole entry, whatever its width (vLLM's per-token-head modes: one scale per head and
    K/V side); group_size is then None."""
    torch_dtype: str | None = None
    """The torch dtype a plain format is held in (``torch.bfloat16`` -> ``bfloat16``); None for a record format,
    held as uint8 rows. verify's allocators and writers, and the engines that print torch dtypes, read it here."""
    page_align: int = 1
    """Pages of this format are padded up to a multiple of this many bytes where the kernels pack them (FlashMLA's
    DeepSeek V4 layout: 576); 1 for none."""
    blocked: bool = False
    """ggml's block formats: each ``group_size`` values are one block, its scale(s) first, then its packed values
    (``block_q8_0 {half d; int8 qs[32]}``), blocks back to back. The bytes per entry are the same sums; the record
    layout interleaves per block, so :meth:`layout` (the kernels' single-record view) does not describe it."""

    @property
    def element_bytes(self) -> int | None:
        """Bytes of one value of a plain dtype (bf16: 2); None where values are not whole bytes apart."""
        return self.value_bits // 8 if self.plain and self.value_bits % 8 == 0 else None

    @property
    def plain(self) -> bool:
        """A plain dtype: one element per value and nothing else stored (no scale, no zero point, no separate RoPE
        part, no padding). Fixed state (SSM, compressor partials) can only be kept in such a dtype."""
        return (self.group_size is None and not self.scale_per_entry and self.scale_bytes == 0
                and self.scale_kind is None and self.rope_value_bytes is None and self.align == 1)

    def __post_init__(self) -> None:
        if self.scale_per_entry:
            if self.group_size is not None or not self.scale_bytes or self.scale_kind is None:
                raise ValueError(f"format {self.name}: a per-entry scale needs scale_bytes and scale_kind, no group")
        elif (self.group_size is None) != (self.scale_kind is None) or bool(self.group_size) != bool(self.scale_bytes):
            raise ValueError(f"format {self.name}: group_size, scale_bytes and scale_kind go together")

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
        elif self.scale_per_entry:
            total += self.scale_bytes
        if split_rope:
            total += rope_dim * self.rope_value_bytes
        return _round_up(total, self.align)

    def layout(self, dim: int, rope_dim: int = 0, where: str = "entry") -> "RecordLayout":
        """Where every byte of one ``dim``-wide entry sits (offsets within the record)."""
        if self.blocked:
            raise KvcalcError(f"{where}: format {self.name} is one of ggml's block formats (scale and values "
                              f"interleaved per {self.group_size} values); kvcalc's kernels write none of them")
        entry = self.entry_bytes(dim, rope_dim, where)
        split_rope = self.rope_value_bytes is not None
        quant_dim = dim - rope_dim if split_rope else dim
        num_scales = quant_dim // self.group_size if self.group_size else (1 if self.scale_per_entry else 0)
        sizes = {
            "quant": quant_dim * self.value_bits // 8,
            "scales": num_scales * self.scale_bytes,
            "rope": rope_dim * self.rope_value_bytes if split_rope else 0,
        }
        offsets, at = {}, 0
        for region in self.order:
            offsets[region] = at
            at += sizes[region]
        pad = entry - at
        last = next((r for r in reversed(self.order) if sizes[r]), None)
        scale_part = sizes["scales"] + (pad if last == "scales" else 0)
        return RecordLayout(
            format=self.name, dim=dim, rope_dim=rope_dim if split_rope else 0, quant_dim=quant_dim,
            element=self.element, scale_kind=self.scale_kind,
            group_size=self.group_size or (quant_dim if self.scale_per_entry else 0),
            quant_offset=offsets["quant"], quant_bytes=sizes["quant"],
            scale_offset=offsets["scales"], num_scales=num_scales, scale_item_bytes=self.scale_bytes,
            rope_offset=offsets["rope"], rope_bytes=sizes["rope"],
            pad_offset=at, pad_bytes=pad, entry_bytes=entry,
            split_pages=self.split_pages and scale_part > 0, scale_part_bytes=scale_part,
        )


@dataclass(frozen=True)
class RecordLayout:
    """One entry's bytes, field by field (offsets from the start of the record).

    With ``split_pages`` a paged cache keeps the *data part* (``[0, data_part_bytes)``) of every entry of
    a page first, then every entry's *scale part* (``scale_part_bytes``: the scales and any pad after them).
    """

    format: str
    dim: int
    rope_dim: int
    quant_dim: int
    element: str
    scale_kind: str | None
    group_size: int
    quant_offset: int
    quant_bytes: int
    scale_offset: int
    num_scales: int
    scale_item_bytes: int
    rope_offset: int
    rope_bytes: int
    pad_offset: int
    pad_bytes: int
    entry_bytes: int
    split_pages: bool
    scale_part_bytes: int

    @property
    def data_part_bytes(self) -> int:
        return self.entry_bytes - self.scale_part_bytes if self.split_pages else self.entry_bytes

    def regions(self) -> list[tuple[str, int, int]]:
        """(name, start, end) of every non-empty byte range, sorted by start; they tile [0, entry_bytes)."""
        out = [
            (name, start, start + size)
            for name, start, size in (
                ("quant", self.quant_offset, self.quant_bytes),
                ("scales", self.scale_offset, self.num_scales * self.scale_item_bytes),
                ("rope", self.rope_offset, self.rope_bytes),
                ("pad", self.pad_offset, self.pad_bytes),
            )
            if size
        ]
        return sorted(out, key=lambda r: r[1])


_FLASHMLA = "FlashMLA README; vLLM v1/attention/backends/mla/flashmla_sparse.py (format notes)"
_INDEXER = "vLLM v1/attention/backends/mla/indexer.py; vLLM models/deepseek_v4 indexer (fp4 path)"
_GGML_COMMIT = "0c1e57098, as bundled in llama-cpp-python 0.3.36"

FORMATS: dict[str, StorageFormat] = {
    f.name: f
    for f in (
        StorageFormat(name="fp32", description="float32, 4 B per value", source="IEEE 754", value_bits=32, element="fp32",
                      torch_dtype="float32"),
        StorageFormat(name="bf16", description="bfloat16, 2 B per value", source="IEEE-like bfloat16", value_bits=16,
                      element="bf16", torch_dtype="bfloat16"),
        StorageFormat(name="fp16", description="float16, 2 B per value", source="IEEE 754", value_bits=16, element="fp16",
                      torch_dtype="float16"),
        StorageFormat(
            name="fp8_e4m3",
            description="fp8 e4m3, 1 B per value; per-tensor scale kept as a layer parameter, not in the cache",
            source="vLLM --kv-cache-dtype fp8 (per-tensor k_scale / v_scale)",
            value_bits=8,
            element="fp8_e4m3",
            torch_dtype="float8_e4m3fn",
        ),
        StorageFormat(
            name="fp8_e5m2",
            description="fp8 e5m2, 1 B per value; no scale",
            source="vLLM --kv-cache-dtype fp8_e5m2",
            value_bits=8,
            element="fp8_e5m2",
            torch_dtype="float8_e5m2",
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
            element="fp8_e4m3",
            scale_kind="fp32",
            order=("quant", "scales", "rope"),
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
            element="fp8_e4m3",
            scale_kind="ue8m0",
            order=("quant", "rope", "scales"),
            split_pages=True,
            # vLLM models/deepseek_v4/attention.py DeepseekV4Attention.get_kv_cache_spec and sparse_swa.py
            # DeepseekV4SWACache: "packed_page_alignment: int = 576" (FlashMLA's packed V4 pages)
            page_align=576,
        ),
        StorageFormat(
            name="mxfp8_ds_mla",
            description="DeepSeek V4.1 FlashMLA: all values fp8 e4m3 (RoPE too) + one ue8m0 scale per 32 "
            "(528 B for a 512-wide entry)",
            source=_FLASHMLA,
            value_bits=8,
            group_size=32,
            scale_bytes=1,
            element="fp8_e4m3",
            scale_kind="ue8m0",
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
            element="e2m1",
            scale_kind="e4m3",
        ),
        StorageFormat(
            name="fp8_indexer",
            description="lightning-indexer key: fp8 e4m3 + one fp32 scale per 128 values (132 B for 128-wide)",
            source=_INDEXER,
            value_bits=8,
            group_size=128,
            scale_bytes=4,
            element="fp8_e4m3",
            scale_kind="fp32",
            split_pages=True,
        ),
        StorageFormat(
            name="fp4_indexer",
            description="lightning-indexer key: e2m1 packed two per byte + one ue8m0 scale per 32 values "
            "(68 B for 128-wide)",
            source=_INDEXER,
            value_bits=4,
            group_size=32,
            scale_bytes=1,
            element="e2m1",
            scale_kind="ue8m0",
            split_pages=True,
        ),
        StorageFormat(
            name="nvfp4",
            description="NVFP4: e2m1 packed two per byte + one e4m3 scale per 16 values (per-tensor fp32 "
            "global scale kept as a layer parameter)",
            source="NVIDIA NVFP4 format (Blackwell)",
            value_bits=4,
            group_size=16,
            scale_bytes=1,
            element="e2m1",
            scale_kind="e4m3",
        ),
        *(
            StorageFormat(
                name=f"{kind}_per_token_head",
                description=f"{what} per value + one fp32 scale per token, head and K/V side",
                source="vLLM 0.33 --kv-cache-dtype " + kind + "_per_token_head (Triton attention backend: "
                       "v1/attention/backends/triton_attn.py customize_spec, data + one fp32 scale per head side)",
                value_bits=bits, element=element, scale_bytes=4, scale_kind="fp32", scale_per_entry=True,
            )
            for kind, what, bits, element in (("int8", "int8, 1 B", 8, "int8"), ("int4", "int4, 4 bits packed two per "
                                              "byte,", 4, "int4"), ("fp8", "fp8 e4m3, 1 B", 8, "fp8_e4m3"))
        ),
        *(
            StorageFormat(
                name=f"lmdeploy_{kind}",
                description=f"{what} per value (asymmetric) + a scale and a zero point in the model dtype (fp16 / "
                            "bf16: 2 x 2 B) per token, head and K/V side",
                source=f"LMDeploy --quant-policy {bits} (PyTorch engine): lmdeploy/pytorch/engine/cache_engine.py "
                       "get_cache_block_size: uint8 K and V blocks (int4 packs head_dim / 2) plus key/value "
                       "scale_zero blocks of shape (..., heads, 2) in model_config.dtype",
                value_bits=bits, element=f"u{kind}", scale_bytes=4, scale_kind="scale_zero_16", scale_per_entry=True,
            )
            for kind, what, bits in (("int8", "uint8, 1 B", 8), ("int4", "uint4, 4 bits packed two per byte,", 4))
        ),
        *(
            StorageFormat(
                name=name, description=what, value_bits=bits, group_size=32, scale_bytes=scale, element=element,
                scale_kind="fp16_min" if scale == 4 else "fp16", order=("scales", "quant"), blocked=True,
                source=f"ggml/src/ggml-common.h {block} (llama.cpp {_GGML_COMMIT}): {layout}; llama.cpp "
                       "-ctk / -ctv",
            )
            for name, bits, scale, element, block, layout, what in (
                ("q8_0", 8, 2, "int8", "block_q8_0", "fp16 d + 32 x int8", "ggml q8_0: 32 int8 values and one fp16 "
                 "scale a block (34 B per 32 values)"),
                ("q4_0", 4, 2, "int4", "block_q4_0", "fp16 d + 16 B of nibbles", "ggml q4_0: 32 4-bit values and one "
                 "fp16 scale a block (18 B per 32)"),
                ("q4_1", 4, 4, "uint4", "block_q4_1", "fp16 d, fp16 m + 16 B of nibbles", "ggml q4_1: 32 4-bit values, "
                 "an fp16 scale and an fp16 minimum a block (20 B per 32)"),
                ("q5_0", 5, 2, "int5", "block_q5_0", "fp16 d + 4 B of fifth bits + 16 B of nibbles", "ggml q5_0: 32 "
                 "5-bit values and one fp16 scale a block (22 B per 32)"),
                ("q5_1", 5, 4, "uint5", "block_q5_1", "fp16 d, fp16 m + 4 B of fifth bits + 16 B of nibbles",
                 "ggml q5_1: 32 5-bit values, an fp16 scale and an fp16 minimum a block (24 B per 32)"),
                ("iq4_nl", 4, 2, "iq4_nl", "block_iq4_nl", "fp16 d + 16 B of 4-bit indices into a non-linear table",
                 "ggml iq4_nl: 32 4-bit non-linear values and one fp16 scale a block (18 B per 32)"),
            )
        ),
    )
}


@dataclass(frozen=True)
class KVFormat:
    """Keys and values stored in different formats (llama.cpp's ``--cache-type-k q8_0 --cache-type-v q4_0``): the
    ``kv`` role of a precision where K and V differ, named ``k/v`` (``q8_0/q4_0``). Only a cache that stores K and V
    apart (:class:`kvcalc.specs.FullAttention`) takes one; a latent that serves as both refuses it."""

    k: StorageFormat
    v: StorageFormat

    @property
    def name(self) -> str:
        return f"{self.k.name}/{self.v.name}"

    @property
    def description(self) -> str:
        return f"keys {self.k.name}, values {self.v.name}"

    @property
    def plain(self) -> bool:
        return False

    def side(self, which: str) -> StorageFormat:
        return self.k if which == "k" else self.v

    def entry_bytes(self, dim: int, rope_dim: int = 0, where: str = "entry") -> int:
        raise KvcalcError(f"{where}: keys and values in different formats ({self.name}) need a cache that stores "
                          "them apart; this one stores one vector for both")


def get_format(name: str, where: str = "format") -> "StorageFormat | KVFormat":
    """The format named ``name``; ``k/v`` (``q8_0/q4_0``) names keys and values in two formats."""
    if isinstance(name, str) and "/" in name:
        k, _, v = name.partition("/")
        return KVFormat(_single(k, where), _single(v, where))
    return _single(name, where)


def _single(name: str, where: str) -> StorageFormat:
    try:
        return FORMATS[name]
    except KeyError:
        raise KvcalcError(
            f"{where}: unknown storage format {quote(name)}; known: {', '.join(sorted(FORMATS))}"
        ) from None
