"""ggml's cache types and how a backend buffer sizes a tensor (llama.cpp 0c1e57098, as bundled in llama-cpp-python
0.3.36). Torch-free; plain integers.

* ``ggml/src/ggml.c`` ``type_traits[]`` and ``ggml/src/ggml-common.h`` (the block structs, pinned there by
  ``static_assert``): a type stores ``blck_size`` values in ``type_size`` bytes; ``ggml_row_size(type, ne) =
  type_size * ne / blck_size`` (ggml.c ``ggml_row_size``), a contiguous tensor's ``ggml_nbytes`` is its row size times
  the other dimensions.
* ``ggml/src/ggml-alloc.c`` ``ggml_backend_alloc_ctx_tensors_from_buft_impl``: every tensor of a buffer is padded to
  the buffer type's alignment (``GGML_PAD(get_alloc_size(t), alignment)``) and the buffer is their sum: 32 on the CPU
  (``TENSOR_ALIGNMENT``, ggml-impl.h), 128 on CUDA / HIP (ggml-cuda.cu ``get_alignment``), 32 on Metal.
* ``ggml-cuda.cu`` ``ggml_backend_cuda_buffer_type_get_alloc_size``: a quantized tensor whose rows are not a multiple
  of ``MATRIX_ROW_PADDING`` (512) values gets one row's worth of ``512 - ne0 % 512`` values more, once a tensor.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import KvcalcError, quote


@dataclass(frozen=True)
class GgmlType:
    name: str  # ggml_type_name
    type_id: int  # enum ggml_type (ggml/include/ggml.h)
    blck_size: int
    type_size: int

    @property
    def quantized(self) -> bool:
        """ggml_is_quantized: a block of more than one value (the float types hold one value a block)."""
        return self.blck_size > 1

    def row_size(self, ne: int) -> int:
        """ggml_row_size: the bytes of ``ne`` values (``ne`` a multiple of the block; a release build floors)."""
        return self.type_size * ne // self.blck_size


#: --cache-type-k / --cache-type-v (common/arg.cpp kv_cache_types, in its order)
CACHE_TYPES: dict[str, GgmlType] = {t.name: t for t in (
    GgmlType("f32", 0, 1, 4),
    GgmlType("f16", 1, 1, 2),
    GgmlType("bf16", 30, 1, 2),
    GgmlType("q8_0", 8, 32, 34),  # ggml-common.h block_q8_0: fp16 d + 32 x int8
    GgmlType("q4_0", 2, 32, 18),  # block_q4_0: fp16 d + 16 B of nibbles
    GgmlType("q4_1", 3, 32, 20),  # block_q4_1: fp16 d, fp16 m + 16 B
    GgmlType("iq4_nl", 20, 32, 18),  # block_iq4_nl: fp16 d + 16 B
    GgmlType("q5_0", 6, 32, 22),  # block_q5_0: fp16 d + 4 B high bits + 16 B
    GgmlType("q5_1", 7, 32, 24),  # block_q5_1: fp16 d, fp16 m + 4 B + 16 B
)}

#: the state caches' type (llama-model.cpp create_memory: llama_memory_recurrent(..., GGML_TYPE_F32, GGML_TYPE_F32, ...))
F32 = CACHE_TYPES["f32"]

#: kvcalc's storage-format name of each cache type (kvcalc.formats), for the bytes other commands count
KVCALC_FORMAT = {"f32": "fp32", "f16": "fp16", "bf16": "bf16", "q8_0": "q8_0", "q4_0": "q4_0", "q4_1": "q4_1",
                 "iq4_nl": "iq4_nl", "q5_0": "q5_0", "q5_1": "q5_1"}

#: a buffer type's tensor alignment: CPU TENSOR_ALIGNMENT (ggml-impl.h), CUDA / HIP ggml-cuda.cu, Metal
ALIGNMENT = {"cpu": 32, "cuda": 128, "metal": 32}
#: ggml-cuda/common.cuh MATRIX_ROW_PADDING
MATRIX_ROW_PADDING = 512


def cache_type(name, what: str) -> GgmlType:
    """The cache type llama.cpp's ``--cache-type-k/-v`` takes by this name (common/arg.cpp kv_cache_type_from_str
    matches ggml_type_name exactly; kvcalc also takes kvcalc's names fp16 / bf16 / fp32)."""
    if isinstance(name, str):
        key = {"fp16": "f16", "fp32": "f32"}.get(name.lower(), name.lower())
        if key in CACHE_TYPES:
            return CACHE_TYPES[key]
    raise KvcalcError(f"{what}: Unsupported cache type: {quote(name)} (llama.cpp takes "
                      f"{', '.join(CACHE_TYPES)})"[:300], param=what)


def pad(x: int, n: int) -> int:
    """GGML_PAD(x, n) (ggml.h): x rounded up to a multiple of n."""
    return (x + n - 1) // n * n


def alloc_size(t: GgmlType, ne0: int, nbytes: int, backend: str) -> int:
    """ggml_backend_buft_get_alloc_size: the tensor's bytes, plus CUDA's quantized-row padding there."""
    if backend == "cuda" and t.quantized and ne0 % MATRIX_ROW_PADDING:
        return nbytes + t.row_size(MATRIX_ROW_PADDING - ne0 % MATRIX_ROW_PADDING)
    return nbytes


def buffer_bytes(t: GgmlType, ne0: int, nbytes: int, backend: str) -> int:
    """What one tensor adds to its buffer: its allocation padded to the buffer type's alignment."""
    return pad(alloc_size(t, ne0, nbytes, backend), ALIGNMENT[backend])
