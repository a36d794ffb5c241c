"""A GGUF file's header: its key-values and tensor infos, read with bounds, never its tensor data.

The layout is ggml's (``ggml/src/gguf.cpp`` ``gguf_init_from_file_impl``, and the ``gguf`` package's
``GGUFReader``, which reads the same): the magic ``GGUF``, a version (2 or 3), the tensor and key-value counts
(uint64), the key-values (a string key, a uint32 value type, the value; arrays are a type, a uint64 count and the
items), the tensor infos (a name, the number of dimensions, the dimensions as uint64, the ggml type, the offset
in the data section), then the data section at the next multiple of ``general.alignment`` (32 when absent).

Why not ``gguf.GGUFReader`` itself: it maps the whole file and makes a view of every tensor, so it refuses a GGUF
cut after its tensor infos (a metadata-only file, which is all a cache answer needs) and it builds an object for
every element of every array (a 150,000-token vocabulary). This reader reads the header sequentially through a
buffer, keeps the small arrays (per-layer values) and skips the vocabulary, checks every count and length against
the file's size before it trusts it, and stops at the data section: a 30 GB GGUF costs the bytes of its header.
The ``gguf`` package still supplies the table of ggml types (block size, bytes per block) when a tensor's bytes
are counted (:mod:`.tensors`), so the two agree by construction on what a type is.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

from ...errors import KvcalcError, quote

MAGIC = b"GGUF"
VERSIONS = (2, 3)
DEFAULT_ALIGNMENT = 32  # ggml/src/gguf.cpp GGUF_DEFAULT_ALIGNMENT
MAX_COUNT = 1 << 24  # tensors, key-values or array items: more than any model has (and each costs bytes to state)
MAX_STRING = 1 << 24  # bytes in one string
MAX_DIMS = 4  # GGML_MAX_DIMS
KEEP_ARRAY = 1 << 16  # arrays longer than this (a vocabulary) are skipped, not kept
MAX_HEADER = 1 << 31  # a header past 2 GiB is not a model's

# value types (ggml/src/gguf.cpp enum gguf_type): id -> (name, struct format or None)
_SCALARS = {0: ("uint8", "<B"), 1: ("int8", "<b"), 2: ("uint16", "<H"), 3: ("int16", "<h"), 4: ("uint32", "<I"),
            5: ("int32", "<i"), 6: ("float32", "<f"), 7: ("bool", "<?"), 10: ("uint64", "<Q"), 11: ("int64", "<q"),
            12: ("float64", "<d")}
STRING, ARRAY = 8, 9


@dataclass(frozen=True)
class TensorInfo:
    name: str
    dims: tuple[int, ...]  # ne[0], ne[1], ... (ggml order: the row first)
    type_id: int  # enum ggml_type
    offset: int  # from the start of the data section


@dataclass(frozen=True)
class GgufHeader:
    path: str
    version: int
    metadata: dict  # key -> value (int, float, bool, str, or a list of them; a skipped array: None)
    array_lengths: dict  # key -> length, for every array (kept or skipped)
    tensors: tuple[TensorInfo, ...]
    alignment: int
    data_offset: int
    file_size: int

    def get(self, key: str, default=None):
        return self.metadata.get(key, default)


class _Buf:
    """Sequential reads over a file with its size known: every read is checked against the end."""

    def __init__(self, f, size: int, path: str):
        self.f, self.size, self.path, self.pos = f, size, path, 0

    def fail(self, what: str) -> KvcalcError:
        return KvcalcError(f"{self.path}: not a readable GGUF file: {what} (at byte {self.pos:,} of {self.size:,})",
                           param="model")

    def take(self, n: int, what: str) -> bytes:
        if n < 0 or self.pos + n > self.size or self.pos + n > MAX_HEADER:
            raise self.fail(f"{what} runs past the end of the file")
        data = self.f.read(n)
        if len(data) != n:
            raise self.fail(f"{what} is cut short")
        self.pos += n
        return data

    def skip(self, n: int, what: str) -> None:
        if n < 0 or self.pos + n > self.size:
            raise self.fail(f"{what} runs past the end of the file")
        self.f.seek(n, os.SEEK_CUR)
        self.pos += n

    def scalar(self, fmt: str, what: str):
        return struct.unpack(fmt, self.take(struct.calcsize(fmt), what))[0]

    def count(self, what: str, limit: int = MAX_COUNT) -> int:
        n = self.scalar("<Q", what)
        if n > limit:
            raise self.fail(f"{what} is {n:,} (more than {limit:,})")
        return n

    def string(self, what: str, keep: bool = True) -> str | None:
        n = self.count(f"{what}'s length", MAX_STRING)
        if not keep:
            self.skip(n, what)
            return None
        raw = self.take(n, what)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise self.fail(f"{what} is not UTF-8") from None


def _value(b: _Buf, vtype: int, what: str, keep: bool = True):
    if vtype in _SCALARS:
        v = b.scalar(_SCALARS[vtype][1], what)
        return bool(v) if vtype == 7 else v
    if vtype == STRING:
        return b.string(what, keep)
    raise b.fail(f"{what} has value type {vtype}, which GGUF does not define")


def _array(b: _Buf, what: str) -> tuple[list | None, int]:
    itype = b.scalar("<I", f"{what}'s item type")
    n = b.count(f"{what}'s length")
    if itype == ARRAY:
        raise b.fail(f"{what} is an array of arrays, which no model key holds")
    keep = n <= KEEP_ARRAY
    if itype in _SCALARS and not keep:  # fixed-size items: skipped in one seek
        b.skip(n * struct.calcsize(_SCALARS[itype][1]), what)
        return None, n
    items = [_value(b, itype, f"{what}[{i}]", keep) for i in range(n)]
    return (items if keep else None), n


def read_header(path: str | os.PathLike, what: str = "model") -> GgufHeader:
    """The header of the GGUF at ``path`` (refused in one line naming the file and the byte where it breaks)."""
    p = Path(path)
    shown = quote(os.fspath(path))
    try:
        st = p.stat()
        if not p.is_file():
            raise KvcalcError(f"{what}: {shown} is not a regular file", param=what)
        f = open(p, "rb", buffering=1 << 16)
    except OSError as exc:
        raise KvcalcError(f"{what}: cannot read {shown}: {exc.strerror or exc}", param=what) from None
    with f:
        b = _Buf(f, st.st_size, os.fspath(path))
        if b.size < 24 or f.read(4) != MAGIC:
            raise KvcalcError(f"{what}: {shown} is not a GGUF file (it does not start with 'GGUF')", param=what)
        b.pos = 4
        version = b.scalar("<I", "the version")
        if version not in VERSIONS:
            raise b.fail(f"version {version} (kvcalc reads GGUF versions 2 and 3)")
        n_tensors = b.count("the tensor count")
        n_kv = b.count("the key-value count")
        meta: dict = {}
        lengths: dict = {}
        for i in range(n_kv):
            key = b.string(f"key {i}")
            vtype = b.scalar("<I", f"the type of {quote(key, 80)}")
            if vtype == ARRAY:
                meta[key], lengths[key] = _array(b, quote(key, 80))
            else:
                meta[key] = _value(b, vtype, quote(key, 80))
        alignment = meta.get("general.alignment", DEFAULT_ALIGNMENT)
        if isinstance(alignment, bool) or not isinstance(alignment, int) or alignment <= 0 or alignment & (alignment - 1):
            raise b.fail(f"general.alignment is {quote(alignment)}, not a power of two")
        tensors = []
        for i in range(n_tensors):
            name = b.string(f"tensor {i}'s name")
            nd = b.scalar("<I", f"tensor {quote(name, 80)}'s dimension count")
            if not 1 <= nd <= MAX_DIMS:
                raise b.fail(f"tensor {quote(name, 80)} has {nd} dimensions (ggml has 1 to {MAX_DIMS})")
            dims = tuple(b.scalar("<Q", f"tensor {quote(name, 80)}'s dimensions") for _ in range(nd))
            if any(d < 0 or d > 1 << 40 for d in dims):
                raise b.fail(f"tensor {quote(name, 80)} has a dimension out of range {dims}")
            t = b.scalar("<I", f"tensor {quote(name, 80)}'s type")
            off = b.scalar("<Q", f"tensor {quote(name, 80)}'s offset")
            if off % alignment:
                raise b.fail(f"tensor {quote(name, 80)}'s offset {off} is not a multiple of the alignment {alignment}")
            tensors.append(TensorInfo(name, dims, t, off))
        data_offset = (b.pos + alignment - 1) // alignment * alignment
    return GgufHeader(os.fspath(path), version, meta, lengths, tuple(tensors), alignment, data_offset, b.size)

