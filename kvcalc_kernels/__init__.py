"""kvcalc_kernels: Triton kernels that fill DeepSeek V3.2 / V4 KV caches the way a serving engine does.

The heavy side of kvcalc (needs torch and triton, the ``verify`` extra); the analytic core never imports
it.  Every kernel has a plain PyTorch twin in :mod:`kvcalc_kernels.reference` that the tests compare with.
On a CPU the kernels run under the Triton interpreter: set ``TRITON_INTERPRET=1`` before importing this
package (triton reads it when the kernels are decorated, i.e. at import, not at launch).  Import this package
lazily, inside functions, from anything outside the tests.

Modules: ``formats`` (byte layouts, no torch), ``quant`` (quantise / dequantise), ``compressor`` (V4 token
compressor with chunked state), ``addressing`` (slot -> page bytes, slot mappings), ``paged`` (allocation, record scatter / gather, the
window ring writer),
``reference`` (the oracles).
"""

from .formats import (
    FORMATS,
    FP4_INDEXER,
    FP8_DS_MLA_V4,
    FP8_DS_MLA_V4_CUTEDSL,
    FP8_DS_MLA_V32,
    FP8_INDEXER,
    V4_PAGE_ALIGNMENT,
    Format,
    PageLayout,
    bf16_format,
    get_format,
    page_layout,
    record_layout,
)
from .compressor import CompressorState, compress, save_states, state_row_values
from .addressing import compressed_slots, ring_slots, slots_from_block_table
from .paged import allocate_cache, gather_records, page_bytes, scatter_records, write_swa
from .quant import dequantize, quantize

__all__ = [
    "FORMATS", "FP4_INDEXER", "FP8_DS_MLA_V4", "FP8_DS_MLA_V4_CUTEDSL", "FP8_DS_MLA_V32", "FP8_INDEXER", "V4_PAGE_ALIGNMENT",
    "Format", "PageLayout", "bf16_format", "get_format", "page_layout", "record_layout",
    "CompressorState", "compress", "save_states", "state_row_values",
    "allocate_cache", "compressed_slots", "gather_records", "page_bytes", "ring_slots", "scatter_records",
    "slots_from_block_table", "write_swa",
    "dequantize", "quantize",
]
