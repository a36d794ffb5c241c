"""A GGUF's weights as llama.cpp maps them: every tensor's bytes, by layer.

A tensor holds ``ggml_nbytes`` bytes (``ggml_row_size(type, ne0)`` times its other dimensions; the block size and
bytes of each ggml type come from the ``gguf`` package's ``GGML_QUANT_SIZES``, ggml's own table). In the file each
is padded to ``general.alignment``; llama.cpp maps a buffer type's tensors as one range (llama-model-loader.cpp
``get_mapping_range``: from the first tensor's offset to the end of the last one's bytes) and logs that range as
its ``CPU_Mapped model buffer size``; a tensor it copies to a GPU gets its own allocation there, padded to the
buffer's alignment (and, on CUDA, a quantized row's padding). Tensors are grouped by layer (``blk.N.``) so that
``--n-gpu-layers`` prices what it moves; ``token_embd`` stays on the CPU (the input layer), the rest (``output``,
``output_norm``, ...) follows the output layer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ...errors import KvcalcError, quote
from .reader import GgufHeader

_BLK = re.compile(r"^blk\.(\d+)\.")


@dataclass(frozen=True)
class Tensor:
    name: str
    layer: int | None  # blk.N; None: the input (-1) / output (None) layers, see ``part``
    part: str  # "layer", "input", "output"
    type_name: str
    type_id: int
    quantized: bool
    blck_size: int
    type_size: int
    ne0: int
    nbytes: int
    offset: int  # absolute, in the file


@dataclass(frozen=True)
class GgufWeights:
    tensors: tuple[Tensor, ...]
    alignment: int
    file_size: int
    data_offset: int
    complete: bool  # the file holds its tensor data (else a metadata-only GGUF)
    n_layer: int  # main layers: the NextN / MTP layers' tensors are "unused ... ignoring" in llama.cpp's load

    @property
    def used(self) -> tuple[Tensor, ...]:
        """The tensors llama.cpp loads: all but the NextN / MTP layers' (llama-model-loader.cpp: "model has unused
        tensor ... -- ignoring")."""
        return tuple(t for t in self.tensors if not (t.part == "layer" and t.layer >= self.n_layer))

    @property
    def nbytes(self) -> int:
        """llama.cpp's "file size" figure: the tensors' own bytes (no padding)."""
        return sum(t.nbytes for t in self.tensors)

    def mapped(self, tensors=None) -> int:
        """get_mapping_range's last - first over ``tensors`` (those llama.cpp loads by default): what a mapped
        buffer spans."""
        ts = self.used if tensors is None else tuple(tensors)
        if not ts:
            return 0
        return max(t.offset + t.nbytes for t in ts) - min(t.offset for t in ts)

    def layer_bytes(self, n_layer_all: int) -> list[int]:
        out = [0] * n_layer_all
        for t in self.tensors:
            if t.part == "layer" and t.layer < n_layer_all:
                out[t.layer] += t.nbytes
        return out


def _types():
    try:
        from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType
    except ImportError:
        raise KvcalcError("model: counting a GGUF's weights needs the gguf package (pip install 'kvcalc[gguf]')",
                          param="model") from None
    return {int(t): (t.name.lower(), *GGML_QUANT_SIZES[t]) for t in GGMLQuantizationType if t in GGML_QUANT_SIZES}


def read_weights(h: GgufHeader, n_layer_all: int, n_layer: int) -> GgufWeights:
    types = _types()
    out = []
    end = 0
    for ti in h.tensors:
        if ti.type_id not in types:
            raise KvcalcError(f"model: {h.path}: tensor {quote(ti.name, 80)} has ggml type {ti.type_id}, which the gguf "
                              "package does not know", param="model")
        name, blck, tsize = types[ti.type_id]
        ne0 = ti.dims[0]
        if ne0 % blck:
            raise KvcalcError(f"model: {h.path}: tensor {quote(ti.name, 80)}: row of {ne0} values is not a whole number of "
                              f"{name} blocks of {blck}", param="model")
        rest = 1
        for d in ti.dims[1:]:
            rest *= d
        nbytes = ne0 // blck * tsize * rest
        m = _BLK.match(ti.name)
        if m and int(m.group(1)) < n_layer_all:
            part, layer = "layer", int(m.group(1))
        else:
            part, layer = ("input" if ti.name.startswith("token_embd") else "output"), None
        off = h.data_offset + ti.offset
        end = max(end, off + nbytes)
        out.append(Tensor(ti.name, layer, part, name, ti.type_id, blck > 1, blck, tsize, ne0, nbytes, off))
    return GgufWeights(tuple(out), h.alignment, h.file_size, h.data_offset, complete=end <= h.file_size,
                       n_layer=n_layer)
