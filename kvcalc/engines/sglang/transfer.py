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

DeepSeek V4's pools (compressor rings and request-scoped c128 state beside the pages) are not modelled here.
"""

from __future__ import annotations

from ...errors import KvcalcError
from ...specs import CompressedMLA

#: one MetadataBuffers row of each tensor, bytes (16-wide int32 / fp32 rows, 128-wide top logprobs,
#: 16 x int64 top-k index, 16 x fp32 hidden state, 8 x uint64 bootstrap room)
AUX_BYTES = 4 * (16 * 4) + 2 * (128 * 4) + 16 * 4 + 16 * 8 + 16 * 4 + 8 * 8


def sglang_transfer(p, spec, tokens: int):
    from ...transfer import TransferPlan, by_kind, cdiv

    if any(isinstance(spec.components[c], CompressedMLA) for g in p.groups for _, c in g.members):
        raise KvcalcError(f"engine: SGLang's DeepSeek V4 transfer (compressor rings and request-scoped c128 state "
                          f"beside the pages) is not modelled; the vllm and exact engines count {spec.name}'s transfer",
                          param="engine")
    def window(page: int, w: int):
        start = max(0, tokens - w) // page * page
        return cdiv(tokens - start, page), f"ceil(({tokens:,} - {start:,}) / {page})"

    out = by_kind(p, "page", lambda page: (cdiv(tokens, page), f"ceil({tokens:,} / {page})"), window,
                  "the request's state slot")
    notes = ("SGLang disaggregation: the prefiller sends each rank's pages and one metadata row per request",)
    return TransferPlan(out, tokens, AUX_BYTES, notes)
