"""Byte layouts of the cache formats the kernels write.

The layouts come from the analytic core (``kvcalc.formats``, the single source of byte layouts, page alignment
included); this module adds only the writers' rules (scale
floors, bf16 input rounding) and the page arithmetic the kernels address with. Nothing here imports torch
or triton. The tests check the layouts against hand-written offsets and the published entry sizes (584,
656, 132, 68 bytes).

A *record* is one cached entry in its canonical byte order, the order the published descriptions give:

``fp8_ds_mla_v4`` (DeepSeek V4 main / SWA cache, 584 B; vLLM ``v1/attention/backends/mla/flashmla_sparse.py``
module docstring, ``models/deepseek_v4/common/ops/cache_utils.py::quantize_and_insert_k_kernel``)::

    [0, 448)    448 x fp8 e4m3    NoPE values, 7 blocks of 64
    [448, 576)   64 x bf16        RoPE values, little-endian, not quantised
    [576, 583)    7 x ue8m0       one power-of-two scale per 64 NoPE values (byte = exponent + 127)
    [583]         1 x pad         written as 0

``fp8_ds_mla`` (DeepSeek V3.2 MLA latent, 656 B; flashmla_sparse.py docstring,
``models/deepseek_v32/common/kernels.py`` MLA_CACHE_DS_MLA branch)::

    [0, 512)    512 x fp8 e4m3    NoPE values, 4 tiles of 128
    [512, 528)    4 x fp32        one scale per 128 NoPE values, little-endian
    [528, 656)   64 x bf16        RoPE values

``fp8_indexer`` (lightning-indexer key, 132 B)::

    [0, 128)    128 x fp8 e4m3
    [128, 132)    1 x fp32        power-of-two scale

``fp4_indexer`` (lightning-indexer key, MXFP4, 68 B)::

    [0, 64)      64 x uint8       128 e2m1 values, two per byte: element 2k in the LOW nibble,
                                  element 2k+1 in the HIGH nibble
    [64, 68)      4 x ue8m0       one scale per 32 values

``bf16`` (plain, ``dim`` x 2 B).

*Pages.*  A paged cache is a ``uint8`` tensor ``[num_pages, page_bytes]``; a page holds ``block_size``
entries.  Two page layouts exist in vLLM:

* *split* (V4 ``fp8_ds_mla_v4``, both indexer formats): the data parts of all ``block_size`` entries come
  first, ``data_bytes`` apart, then the scale parts, ``scale_part_bytes`` apart (vLLM ``cache_utils.py``: "[0,
  64*576): token data ... [64*576, 64*576 + 64*8): scales"; ``fused_compress_quant_cache.py`` indexer
  kernels: "[0, bs*128): FP8 data, [bs*128, +bs*4): float32 scales").
* *interleaved* (V3.2 ``fp8_ds_mla``, ``bf16``, compressor state rows): whole records back to back.

*Input rounding.*  vLLM rounds V4 entries (main, SWA and compressed) and both indexer keys to bf16 before
quantising them (``quantize_and_insert_k_kernel`` asserts bf16 input; the fused compressor kernels do
``normed.to(tl.bfloat16).to(tl.float32)``), so those formats have ``rounds_to_bf16``.  The V3.2 writer
quantises its fp32 RMSNorm output directly, so ``fp8_ds_mla`` does not.

``page_bytes`` is ``block_size * entry_bytes`` rounded up to ``alignment`` (576 for V4 with fp8_ds_mla in
vLLM, ``CompressorStateCache.get_kv_cache_spec`` / ``MLAAttentionSpec``).  A contiguous array of records is
the special case ``block_size = 1``, no alignment.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from kvcalc.formats import FORMATS as CORE_FORMATS
from kvcalc.formats import RecordLayout

#: DeepSeek V4's fp8 pages are padded to a multiple of this (the format's own fact: kvcalc.formats)
V4_PAGE_ALIGNMENT = CORE_FORMATS["fp8_ds_mla_v4"].page_align

# e4m3 (OCP "fn" variant, no infinities): largest finite value.
FP8_E4M3_MAX = 448.0
# e2m1: largest finite value.
FP4_E2M1_MAX = 6.0
# ue8m0 exponent bias: a stored byte b means the scale 2 ** (b - 127).
UE8M0_BIAS = 127

#: the analytic core's element names -> the kernels' element kinds
_ELEM = {"fp8_e4m3": "fp8", "e2m1": "fp4", "bf16": "bf16"}


@dataclass(frozen=True)
class Format:
    """One cache-entry format as the kernels write it: the byte layout from the analytic core
    (:meth:`kvcalc.formats.StorageFormat.layout`, the single source) plus the writer's rounding rules.

    Plain bf16 is read as "no quantised part, ``dim`` raw bf16 values" (``quant_dim`` 0, ``rope_dim`` =
    ``dim``), so one kernel path serves the RoPE tail and plain entries alike.
    """

    layout: RecordLayout
    e_min: int
    """Smallest scale exponent the quantiser picks (from vLLM's amax / scale floors)."""
    source: str
    rounds_to_bf16: bool = True
    """True: vLLM rounds every entry to bf16 before quantising it, so the quantisers round fp32 input to
    bf16 (nearest even) first.  False (V3.2 ``fp8_ds_mla`` only): vLLM's writer quantises the fp32 values
    directly (see the format's definition)."""
    scale_mx4: bool = False
    """True: the 4-byte scale slot holds the power-of-two scale as four equal UE8M0 bytes (vLLM's MX scales
    on SM100, ``pack_ue8m0_x4``), not as an fp32."""
    path: str = "triton"
    """The vLLM writer whose rules these are: 'triton' (the Triton kernels) or 'cutedsl' (the CuTeDSL
    compressor vLLM runs for 512-wide DeepSeek V4 compressed entries on NVIDIA GPUs)."""
    scale_rule: str = "exact"
    """How the scale exponent is found. 'exact': the smallest e with ``amax <= qmax * 2**e`` (integer
    arithmetic; what ``ceil(log2(amax / qmax))`` means). The V3.2 writers take that ceil in fp32, which
    can land one lower for a scale 1 to 2 ulps above a power of two (``_bits.ceil_log2_fp32``):
    'fp32_log2_div': ``s = div_rn(max(amax, 1e-4), 448)`` (the V3.2 indexer, ``_fp8_ue8m0_quantize``);
    'fp32_log2_mul': ``s = max(amax * fp32(1 / 448), 1e-4)`` (the V3.2 latent, ``fused_norm_rope``).
    (The V4 CuTeDSL compressor divides in fp32 and rounds the scale's exponent up by its bits; its amax is
    a bf16 value, which never divides onto a power of two, so 'exact' is its rule: a test checks every bf16.)"""

    # ---- the layout, as the kernels name it ------------------------------------------------------
    @property
    def name(self) -> str:
        return self.layout.format if self.layout.format != "bf16" or self.dim in (128, 512, 576) else f"bf16[{self.dim}]"

    @property
    def dim(self) -> int:
        return self.layout.dim

    @property
    def elem(self) -> str:
        return _ELEM[self.layout.element]

    @property
    def quant_dim(self) -> int:
        return 0 if self.elem == "bf16" else self.layout.quant_dim

    @property
    def rope_dim(self) -> int:
        return self.dim if self.elem == "bf16" else self.layout.rope_dim

    @property
    def quant_block(self) -> int:
        return self.layout.group_size

    @property
    def scale_kind(self) -> str | None:
        return self.layout.scale_kind

    @property
    def quant_offset(self) -> int:
        return self.layout.quant_offset

    @property
    def rope_offset(self) -> int:
        return self.layout.quant_offset if self.elem == "bf16" else self.layout.rope_offset

    @property
    def scale_offset(self) -> int:
        return self.layout.entry_bytes if self.elem == "bf16" else self.layout.scale_offset

    @property
    def entry_bytes(self) -> int:
        return self.layout.entry_bytes

    @property
    def split_pages(self) -> bool:
        return self.layout.split_pages

    @property
    def num_scales(self) -> int:
        return self.layout.num_scales

    @property
    def scale_item_bytes(self) -> int:
        return self.layout.scale_item_bytes

    @property
    def scale_part_bytes(self) -> int:
        """Bytes of the scale part of a record: the scales and the pad after them."""
        return self.layout.scale_part_bytes if self.num_scales else 0

    @property
    def scale_slots(self) -> int:
        """Scale slots in the record (real scales + pad slots, pads written as 0)."""
        return self.scale_part_bytes // self.scale_item_bytes if self.num_scales else 0

    @property
    def quant_bytes(self) -> int:
        return self.layout.quant_bytes if self.quant_dim else 0

    @property
    def rope_bytes(self) -> int:
        return 2 * self.rope_dim

    @property
    def data_bytes(self) -> int:
        """Bytes of the data part (everything but the scale part) when pages are split."""
        return self.entry_bytes - self.scale_part_bytes

    @property
    def qmax(self) -> float:
        return {"fp8": FP8_E4M3_MAX, "fp4": FP4_E2M1_MAX}.get(self.elem, 0.0)

    def regions(self) -> list[tuple[str, int, int]]:
        """(name, start, end) of every byte range of a record, sorted by start; they tile [0, entry_bytes)."""
        if self.elem == "bf16":
            return [("rope", 0, self.entry_bytes)]
        return self.layout.regions()


_V4_SRC = (
    "vLLM 0.33 v1/attention/backends/mla/flashmla_sparse.py (module docstring, 584 B); "
    "models/deepseek_v4/common/ops/cache_utils.py quantize_and_insert_k_kernel; "
    "models/deepseek_v4/common/ops/fused_compress_quant_cache.py _fused_kv_compress_norm_rope_insert_sparse_attn"
)
_V32_SRC = (
    "vLLM 0.33 v1/attention/backends/mla/flashmla_sparse.py (module docstring, 656 B); "
    "models/deepseek_v32/common/kernels.py (MLA_CACHE_DS_MLA branch)"
)
_IDX8_SRC = (
    "vLLM 0.33 models/deepseek_v4/common/ops/fused_compress_quant_cache.py "
    "_fused_kv_compress_norm_rope_insert_indexer_attn; v1/attention/backends/mla/indexer.py (132 B)"
)
_IDX4_SRC = (
    "vLLM 0.33 models/deepseek_v4/common/ops/fused_compress_quant_cache.py "
    "_fused_kv_compress_norm_rope_insert_indexer_mxfp4_attn; fused_indexer_q.py _fp32x2_to_fp4x2"
)


def _from_core(name: str, dim: int, rope_dim: int, **rules) -> Format:
    return Format(layout=CORE_FORMATS[name].layout(dim, rope_dim, f"format {name}"), **rules)


FP8_DS_MLA_V4 = _from_core(
    "fp8_ds_mla_v4", 512, 64,
    # amax floored at 1e-4: ceil(log2(1e-4 / 448)) = -22
    e_min=-22, source=_V4_SRC,
)
FP8_DS_MLA_V4_CUTEDSL = _from_core(
    "fp8_ds_mla_v4", 512, 64,
    # scale floored at 1e-4 (not amax): ceil(log2(1e-4)) = -13, so the smallest scale byte is 114, not 105
    e_min=-13, path="cutedsl",
    source="vLLM 0.33 models/deepseek_v4/compressor.py (head_dim 512 on NVIDIA -> CuTeDSL); "
           "nvidia/ops/sparse_attn_compress_cutedsl.py: scale_raw = fmax(min_scale 1e-4, absmax / 448), "
           "ue8m0 = exponent of scale_raw rounded up",
)
FP8_DS_MLA_V32 = _from_core(
    "fp8_ds_mla", 576, 64,
    # scale floored at 1e-4 before rounding up to a power of two: ceil(log2(1e-4)) = -13
    e_min=-13, source=_V32_SRC,
    # No bf16 rounding: the default V3.2 writer (deepseek_v32/attention.py -> common/kernels.py
    # fused_norm_rope, MLA_CACHE_DS_MLA branch) quantises the fp32 output of its RMSNorm, ``kv_c``, directly
    # (``(kv_2d / tile_scale).to(fp8)``).  Only the context-parallel path (do_kv_cache_update /
    # concat_and_cache_ds_mla) gets bf16 rows; pass bf16 to reproduce that one.
    rounds_to_bf16=False,
)
FP8_INDEXER = _from_core("fp8_indexer", 128, 0, e_min=-22, source=_IDX8_SRC)
_V32_IDX_SRC = ("vLLM 0.33 models/deepseek_v32/common/kernels.py _fp8_quant_and_cache_write / _fp8_ue8m0_quantize: "
                "the fp32 key quantised directly (no bf16 rounding), amax floored at 1e-4")
FP8_INDEXER_V32 = _from_core("fp8_indexer", 128, 0, e_min=-22, source=_V32_IDX_SRC, rounds_to_bf16=False, path="v32")
FP8_INDEXER_V32_MX = _from_core(
    "fp8_indexer", 128, 0, e_min=-22, rounds_to_bf16=False, scale_mx4=True, path="v32-sm100",
    source=_V32_IDX_SRC + "; on SM100 (mqa_logits_use_mx_scales) the scale as four equal UE8M0 bytes "
    "(v1/attention/ops/common.py pack_ue8m0_x4)",
)
#: vLLM's own fp32 arithmetic for the V3.2 scale exponents (see Format.scale_rule); selectable by name
_FP32_LOG2 = ("; the exponent as vLLM computes it: ceil(log2(scale)) in fp32, scale = {how} "
              "(assumes a correctly rounded fp32 log2 on the device)")
FP8_DS_MLA_V32_FP32LOG2 = replace(
    FP8_DS_MLA_V32, scale_rule="fp32_log2_mul", path="v32-fp32log2",
    source=_V32_SRC + _FP32_LOG2.format(how="max(amax * (1.0 / FP8_MAX), 1e-4)"))
FP8_INDEXER_V32_FP32LOG2 = replace(
    FP8_INDEXER_V32, scale_rule="fp32_log2_div", path="v32-fp32log2",
    source=_V32_IDX_SRC + _FP32_LOG2.format(how="tl.div_rn(tl.maximum(amax, 1e-4), FP8_MAX)"))
FP8_INDEXER_V32_MX_FP32LOG2 = replace(
    FP8_INDEXER_V32_MX, scale_rule="fp32_log2_div", path="v32-sm100-fp32log2",
    source=FP8_INDEXER_V32_MX.source + _FP32_LOG2.format(how="tl.div_rn(tl.maximum(amax, 1e-4), FP8_MAX)"))
FP4_INDEXER = _from_core(
    "fp4_indexer", 128, 0,
    # amax floored at 6 * 2**-126: exponent >= -126
    e_min=-126, source=_IDX4_SRC,
)


def _round_up(n: int, m: int) -> int:
    return -(-n // m) * m


def bf16_format(dim: int) -> Format:
    """Plain bf16 entries of ``dim`` values (V4 main 512 -> 1024 B, V3.2 latent 576 -> 1152 B)."""
    if not isinstance(dim, int) or isinstance(dim, bool) or dim <= 0:
        raise ValueError(f"dim: must be positive, got {dim}")
    return _from_core("bf16", dim, 0, e_min=0,
                      source="plain bfloat16 (vLLM 'auto' cache dtype for a bf16 model)")


FORMATS: dict[str, Format] = {
    f.name: f for f in (FP8_DS_MLA_V4, FP8_DS_MLA_V32, FP8_INDEXER, FP4_INDEXER)
}
#: writer-path variants, by the name the kernels take: same bytes layout, another scale rule
FORMATS["fp8_ds_mla_v4_cutedsl"] = FP8_DS_MLA_V4_CUTEDSL
FORMATS["fp8_indexer_v32"] = FP8_INDEXER_V32
FORMATS["fp8_indexer_v32_mx"] = FP8_INDEXER_V32_MX
FORMATS["fp8_ds_mla_fp32log2"] = FP8_DS_MLA_V32_FP32LOG2
FORMATS["fp8_indexer_v32_fp32log2"] = FP8_INDEXER_V32_FP32LOG2
FORMATS["fp8_indexer_v32_mx_fp32log2"] = FP8_INDEXER_V32_MX_FP32LOG2


def get_format(fmt: "str | Format", dim: int | None = None) -> Format:
    """Look a format up by name ('bf16' needs ``dim``), or pass a Format through."""
    if isinstance(fmt, Format):
        return fmt
    if not isinstance(fmt, str):
        raise TypeError(f"fmt: expected a format name or Format, got {type(fmt).__name__}")
    if fmt == "bf16":
        if dim is None:
            raise ValueError("fmt: 'bf16' needs dim (the number of values per entry)")
        return bf16_format(dim)
    try:
        return FORMATS[fmt]
    except KeyError:
        raise ValueError(f"fmt: unknown format {fmt!r}; known: bf16, {', '.join(sorted(FORMATS))}") from None


@dataclass(frozen=True)
class PageLayout:
    """Where entry ``pos`` of a page keeps its bytes (offsets relative to the page start)."""

    fmt: Format
    block_size: int
    alignment: int
    page_bytes: int
    data_stride: int
    scale_base: int
    scale_stride: int

    def data_offset(self, pos: int) -> int:
        return pos * self.data_stride

    def scale_offset(self, pos: int) -> int:
        return self.scale_base + pos * self.scale_stride

    def record_spans(self, pos: int) -> list[tuple[int, int, int]]:
        """(record_start, page_start, length) byte runs that map record bytes of entry ``pos`` into a page."""
        f = self.fmt
        if not f.split_pages or f.scale_part_bytes == 0:
            return [(0, self.data_offset(pos), f.entry_bytes)]
        return [(0, self.data_offset(pos), f.data_bytes), (f.data_bytes, self.scale_offset(pos), f.scale_part_bytes)]


def page_layout(fmt: "str | Format", block_size: int, alignment: int = 1, dim: int | None = None,
                page_bytes: int | None = None) -> PageLayout:
    """Page layout of ``fmt`` with ``block_size`` entries per page, page size rounded up to ``alignment``.

    ``page_bytes`` may be given to use a larger page (vLLM pads pages of different groups to a common size).
    """
    f = get_format(fmt, dim)
    if not isinstance(block_size, int) or block_size <= 0:
        raise ValueError(f"block_size: must be a positive int, got {block_size!r}")
    if not isinstance(alignment, int) or alignment <= 0:
        raise ValueError(f"alignment: must be a positive int, got {alignment!r}")
    need = _round_up(block_size * f.entry_bytes, alignment)
    if page_bytes is None:
        page_bytes = need
    elif page_bytes < block_size * f.entry_bytes:
        raise ValueError(
            f"page_bytes: {page_bytes} is smaller than {block_size} entries x {f.entry_bytes} B of {f.name}"
        )
    if f.split_pages and f.scale_part_bytes:
        return PageLayout(f, block_size, alignment, page_bytes, f.data_bytes, block_size * f.data_bytes,
                          f.scale_part_bytes)
    return PageLayout(f, block_size, alignment, page_bytes, f.entry_bytes, f.scale_offset, f.entry_bytes)


def record_layout(fmt: "str | Format", dim: int | None = None) -> PageLayout:
    """Contiguous records: one entry per 'page', pages ``entry_bytes`` apart."""
    return page_layout(fmt, 1, 1, dim)

