"""The buffers an engine of token pools allocates for exactly a batch of requests (``Engine.batch_pools``), as
:mod:`kvcalc.verify.tokenpools` allocates, fills and measures them: torch-free shapes, dtypes and slot rules.
SGLang's (:mod:`kvcalc.engines.sglang.buffers`) and the exact engine's (:mod:`kvcalc.engines.exact.buffers`)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Buffer:
    """One of SGLang's buffers: every layer's tensor of one pool (K, V, latent, indexer keys, a state)."""

    index: int
    name: str  # as report._pools names it ("KV Cache K")
    kind: str  # the plan group's kind: "full", "window 127", "state"
    components: tuple[str, ...]
    layers: tuple[int, ...]  # model layer indices
    dtype: str  # the values' torch dtype name (bfloat16, float8_e4m3fn; uint8 for packed records)
    store: str  # the tensor's torch dtype name (fp8 is stored as uint8)
    shape: tuple[int, ...]  # one layer's tensor
    tensor: str  # "layer" (one tensor per layer), "kv_pair" (K and V halves of one tensor per layer),
    #              "stacked" (one (layers, ...) tensor)
    partner: int | None  # kv_pair: the other half's buffer index
    tokens: int  # token slots (state: slots) SGLang counts, the padding page not included
    padding_rows: int  # leading rows of the shape that are the padding page (the indexer: one page row)
    page: int  # tokens per page (state: 1)
    row_bytes: int  # bytes of one token (state: one slot) in one layer
    width: int  # values the fill synthesises per token (state: per slot)
    format: str  # "plain" (a cast to dtype) or the shared record format (fp8_ds_mla, fp8_indexer)
    paged_records: bool  # the indexer: records split inside (page, page x row_bytes) rows
    rows_per_request: int  # rows a request's prefill leaves in the pool (state: its one running slot)
    first_position: int  # the position of a request's first kept row (SWA: context - window kept)
    bytes: int  # what SGLang allocates (report._pools)
    group: int  # the plan group holding these caches
    request_pages: int = 0  # pages a request holds (0: its rows' pages); DeepSeek V4's compressed pools follow
    #                         the full pool's pages: slot = full slot // ratio
    padding_pages: int = 1  # pages before the first request's (SGLang: the padding page; exact: none)

    def first_slot(self, request: int) -> int:
        """The slot of ``request``'s first row: pages from ``padding_pages``, each request after the previous
        one's."""
        per = self.request_pages or -(-self.rows_per_request // self.page)
        return self.page * (self.padding_pages + request * per)

    @property
    def padding_bytes(self) -> int:
        """Bytes of the padding page over every layer."""
        return self.bytes // self.shape[0] * self.padding_rows

    @property
    def expected_per_layer(self) -> int:
        return self.rows_per_request * self.row_bytes
