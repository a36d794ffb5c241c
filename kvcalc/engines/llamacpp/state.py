"""One sequence's state as llama.cpp writes it (llama.cpp 0c1e57098): ``llama_state_seq_get_size``,
``llama_state_seq_save_file`` and llama-server's slot save (``POST /slots/{id}?action=save`` with
``--slot-save-path``; ``action=restore`` reads the same file back). Every rule is llama.cpp's, file and function named:

* ``src/llama-context.cpp`` ``state_seq_get_size``: ``io_magic`` (u32) and the sequence id (i32), 8 B, then the
  memory's state; ``state_seq_save_file``: magic ``ggsq``, version 3 and the token count (3 x u32), the tokens (4 B
  each), then the memory's state. llama-server (``tools/server/server-context.cpp`` SLOT_SAVE) passes its own packed
  tokens (``server-common.cpp`` ``server_tokens::serialize``: -1, version 1, n, the n tokens, a media count of 0 for
  a text prompt): n + 4 tokens, so the file is 28 + 4 n B plus the state; it answers ``n_saved`` n and
  ``n_written`` the file's bytes.
* ``src/llama-kv-cache.cpp`` ``state_write`` / ``state_write_meta`` / ``state_write_data``, per KV cache: u32
  n_stream, a u32 cell count per stream; where the sequence has cells, each cell's i32 pos, u32 n_seq_id (1) and i32
  sequence id (and a 12-byte cell extension on M-RoPE models, ``has_cell_ext``), u32 v_trans and u32 n_layer, then
  per layer of the cache an i32 type and a u64 row size (V transposed: i32 type, u32 element size, u32 width) and
  the cells' K rows, then the same for V (none under MLA). The cells are the sequence's unmasked ones: every token in
  a full cache; a sliding window keeps min(n, n_swa) (``is_masked_swa``: standard), a chunk the tokens of the last
  chunk (chunked); the cache's own size (``swa_full``, ``n_ubatch``) does not enter.
* ``src/llama-kv-cache-iswa.cpp`` ``state_write``: the non-SWA cache, then the SWA cache, each as above.
* ``src/llama-memory-recurrent.cpp`` ``state_write``: u32 cell count (1 where the sequence has a state), per cell an
  i32 pos and a u32 n_seq_id (0), u32 s_trans and u32 n_layer, then per recurrent layer an i32 type and a u64 row
  size and the cell's R row (f32), then the same for S; the state is the same size whatever the tokens.
* ``src/llama-memory-hybrid.cpp`` / ``-hybrid-iswa.cpp``: the attention cache(s), then the recurrent state.

Checked against llama.cpp itself on 985 contexts of 26 synthetic GGUFs (tests/fixtures/engine-ref/
llamacpp-0.3.36-state.json, scripts/audit/llamacpp_state_reference.py).
"""

from __future__ import annotations

from dataclasses import dataclass

#: llama-model.cpp llama_model_rope_type: the architectures of M-RoPE / IM-RoPE, whose KV cells carry an extension
MROPE = frozenset({"qwen2vl", "paddleocr", "qwen3vl", "qwen3vlmoe", "qwen35", "qwen35moe", "qwen4exp", "qwen3tts"})
CELL_EXT = 12  # llama_kv_cell_ext: x, y, tok (llama-kv-cells.h)
API_PREFIX = 8  # llama_state_seq_get_size: io_magic, seq id
FILE_HEADER = 12  # llama_state_seq_save_file: magic, version, token count
SERVER_TOKENS = 4  # llama-server's packed tokens beside the prompt's: -1, version, n, media count


@dataclass(frozen=True)
class Section:
    """One cache's share of the state: ``cells`` written, each ``cell_bytes`` (its metadata and every layer's rows),
    and ``header_bytes`` beside them."""

    kind: str  # "kv", "swa", "recurrent"
    layers: int
    cells: int
    cell_bytes: int
    header_bytes: int

    @property
    def bytes(self) -> int:
        return self.header_bytes + self.cells * self.cell_bytes


def window_cells(swa_type: str | None, n_swa: int | None, n: int) -> int:
    """The cells of ``n`` tokens (positions 0..n-1) a window keeps unmasked (llama-hparams.h is_masked_swa)."""
    if not n or swa_type is None:
        return n
    if swa_type == "standard":
        return min(n, n_swa)
    if swa_type == "chunked":  # masked before the chunk holding the last position
        return (n - 1) % n_swa + 1
    raise ValueError(f"swa_type {swa_type!r}")


def sections(mc, cp, n: int) -> tuple[Section, ...]:
    """The state of one sequence of ``n`` tokens in the context ``cp`` (layout.Cparams) of the model ``mc``
    (layout.ModelCaches), cache by cache in llama.cpp's order."""
    out = []
    ext = CELL_EXT if mc.arch in MROPE else 0

    def kv(kind: str, layers, c: int) -> Section:
        head = 4 + 4 * cp.n_stream
        if not c:
            return Section(kind, len(layers), 0, 0, head)
        cell = 4 + 4 + ext + 4
        head += 8
        for lay in layers:
            head += 12
            cell += cp.type_k.row_size(lay.k_width)
            if not mc.mla:  # transposed or not, 12 B of header and the same bytes of an unquantized V
                head += 12
                cell += cp.type_v.row_size(lay.v_width)
        return Section(kind, len(layers), c, cell, head)

    attn = [lay for lay in mc.layers if lay.kv]
    if not mc.recurrent_only:
        if mc.swa_type is not None:
            out.append(kv("kv", [lay for lay in attn if not lay.swa], n))
            out.append(kv("swa", [lay for lay in attn if lay.swa], window_cells(mc.swa_type, mc.n_swa, n)))
        else:
            out.append(kv("kv", attn, n))
    if mc.recurrent_only or mc.hybrid:
        recr = [lay for lay in mc.layers if lay.recurrent]
        c = 1 if n else 0
        out.append(Section("recurrent", len(recr), c, 8 + len(recr) * 4 * (mc.r_width + mc.s_width),
                           4 + 8 + len(recr) * 2 * 12))
    return tuple(out)


def state_bytes(mc, cp, n: int) -> int:
    """The memory's state of the sequence (MEM)."""
    return sum(s.bytes for s in sections(mc, cp, n))


def seq_get_size(mc, cp, n: int) -> int:
    """llama_state_seq_get_size."""
    return API_PREFIX + state_bytes(mc, cp, n)


def save_file_bytes(mc, cp, n: int, tokens: int | None = None) -> int:
    """llama_state_seq_save_file of ``tokens`` tokens (default: the sequence's ``n``)."""
    return FILE_HEADER + 4 * (n if tokens is None else tokens) + state_bytes(mc, cp, n)


def server_file_bytes(mc, cp, n: int) -> int:
    """llama-server's slot save file of a text prompt of ``n`` tokens: its ``n_written``."""
    return save_file_bytes(mc, cp, n, n + SERVER_TOKENS)
