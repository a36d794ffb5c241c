"""What SGLang 0.5.23's prefill/decode disaggregation sends for one request (``disaggregation/prefill.py``
``send_kv_chunk``; the nixl and mooncake backends move the same pages), one rank, no decode-side prefix hit:

* the full-attention pools (K and V buffers per layer, an MLA latent's one buffer, DSA's indexer keys): the
  request's ``ceil(T / page_size)`` pages, the part-filled last page whole (``kv_to_page_num``);
* a sliding-window pool: the pages from ``floor(max(0, T - W) / page) * page`` to T (``_swa_payload``), with
  ``W`` SGLang's ``sliding_window_size``;
* a Mamba / linear-attention pool: the request's one state slot, every state tensor of every layer
  (``_mamba_payload``, ``MambaPool.get_contiguous_buf_infos``);
* beside the cache, one row of each ``MetadataBuffers`` tensor (``disaggregation/utils.py``): output ids,
  cached tokens, logprob value and index (16 x 4 B each), the top logprobs' values and indices (128 x 4 B
  each), top-k p (16 x 4 B) and index (16 x 8 B), the hidden-state row (16 x fp32 without speculative
  decoding, ``scheduler.py``) and the bootstrap room (8 x 8 B): 1,600 B. The decoder does not recompute the
  last prompt token: the first output token comes in that row.

DeepSeek V4 (``DeepSeekV4TokenToKVPool`` on CUDA: not the unified HIP pool, ``SGLANG_OPT_USE_ONLINE_COMPRESS`` off,
no speculative decoding), three components:

* the compressed pages (``get_contiguous_buf_infos``), by the request's ``ceil(T / 256)`` full pages: every
  c4 and c128 layer's page of 256 / r entries (``page_bytes(r)``, rounded up to 576 B), and every c4 layer's
  indexer page of 64 keys (64 x 132 B);
* the SWA state (``get_state_buf_infos``), by the window's SWA pages from ``floor(max(0, T - W) / 256) * 256``:
  every layer's SWA page (``page_bytes(256)``) and every c4 layer's two page-scoped compressor states, a ring of
  8 fp32 rows each (``row x ring_size``: 4 x 512 and 4 x 128 values a row);
* the request-scoped c128 state (``get_request_state_buf_infos``, ``request_scoped_state_transfer_indices``):
  every c128 layer's 128-row ring (2 x 512 fp32 values a row), one item when ``T % 128`` leaves a partial block
  pending, none at a block boundary.
"""

from __future__ import annotations


#: one MetadataBuffers row of each tensor, bytes (16-wide int32 / fp32 rows, 128-wide top logprobs,
#: 16 x int64 top-k index, 16 x fp32 hidden state, 8 x uint64 bootstrap room)
AUX_BYTES = 4 * (16 * 4) + 2 * (128 * 4) + 16 * 4 + 16 * 8 + 16 * 4 + 8 * 8


def token_pool_transfer(p, tokens: int):
    """The default and split-SWA pools: each pool's pages of the request, its state slot."""
    from ...handoff import TransferPlan, by_kind, cdiv

    def window(page: int, w: int):
        start = max(0, tokens - w) // page * page
        return cdiv(tokens - start, page), f"ceil(({tokens:,} - {start:,}) / {page})"

    out = by_kind(p, "page", lambda page: (cdiv(tokens, page), f"ceil({tokens:,} / {page})"), window,
                  "the request's state slot")
    return TransferPlan(out, tokens, AUX_BYTES, NOTES)


NOTES = ("SGLang disaggregation: the prefiller sends each rank's pages and one metadata row per request",)


def v4_transfer(lay, tokens: int):
    """DeepSeek V4's pools (:func:`_v4_groups`)."""
    from ...handoff import TransferPlan

    return TransferPlan(_v4_groups(lay, tokens), tokens, AUX_BYTES, NOTES)


def _v4_groups(lay, tokens: int):
    """The three components of a DeepSeek V4 request (see the module docstring), one rank."""
    from ...handoff import TransferGroup, cdiv

    page, n4, n128, layers = lay.page, lay.n(4), lay.n(128), len(lay.ratios)
    start = max(0, tokens - lay.window) // page * page
    pending = 1 if n128 and tokens % 128 else 0
    out = [TransferGroup(0, "full", "c4_entries + c4_indexer + c128_entries", n4 + n128, "page", page,
                         cdiv(tokens, page), lay.full_page_bytes, f"ceil({tokens:,} / {page})"),
           TransferGroup(1, f"window {lay.window}", "window + c4 compressor states", layers, "page", page,
                         cdiv(tokens - start, page), lay.swa_page_bytes, f"ceil(({tokens:,} - {start:,}) / {page})")]
    if n128:
        out.append(TransferGroup(2, "state", "c128 compressor state", n128, "state slot", 0, pending,
                                 lay.c128_slot_bytes,
                                 "the pending partial block's ring" if pending else "none pending at a 128-token "
                                 "boundary"))
    return tuple(out)
