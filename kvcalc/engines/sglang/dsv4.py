"""DeepSeek V4's pools in SGLang 0.5.23 (``model_executor/pool_configurator.py::DSV4PoolConfigurator``, CUDA,
the default ``SGLANG_DSV4_KV_LAYOUT=v4`` layout, no speculative decoding, no HiSparse, not unified).

The budget pays for the request-scoped c128 compressor state first (``_get_c128_state_fixed_bytes``, sized by
``max_running_requests``, which the model override sets to 256: ``arg_groups/deepseek_v4_hook.py``); what is
left, divided by the bytes one full token costs (``_get_bytes_per_full_token``: the c4 and c128 compressed
entries plus ``swa_full_tokens_ratio`` x the bytes one SWA slot costs in every layer, the c4 compressor state
included), floored to the 256-token page, is ``max_total_num_tokens``. The override's ratio 0.1 counts as the
operator's (``_operator_swa_full_tokens_ratio`` reads the resolved value after the override declared it), so V4
sizes its SWA pool by ratio, not by the request cap (that is V4.1's).

Byte layout (``kernels/ops/attention/dsv4/kv_layout.py``, ``KVLayout.V4``): a token is 448 fp8 + 64 bf16 RoPE
values + 8 B of scales = 584 B; a page of p tokens is padded up to a multiple of 576 B.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import KvcalcError
from ...formats import FORMATS
from ...specs import CompressedMLA, IndexerCache, SlidingWindowMLA
from .defaults import SWA_EVICTION_INTERVAL, VERSION, Settings
from .sizing import swa_pool_tokens

V4_PAGE = 256  # arg_groups/model_overrides/deepseek_v4.py
V4_SWA_RATIO = 0.1  # the override's swa_full_tokens_ratio (model_type deepseek_v4)
V4_MAX_RUNNING_REQUESTS = 256  # arg_groups/deepseek_v4_hook.py apply_deepseek_v4_defaults
#: KVLayout.V4 (kernels/ops/attention/dsv4/kv_layout.py): the fp8_ds_mla_v4 record and its 576 B page alignment
V4_ROW = FORMATS["fp8_ds_mla_v4"]
V4_PAGE_ALIGN = V4_ROW.page_align  # KVLayout.V4.page_align
#: get_dsv4_indexer_bytes_per_token (fp8): the fp8 indexer key with its fp32 scale per 128
INDEXER_ROW = FORMATS["fp8_indexer"]
RING = {4: 8, 128: 128}  # deepseek_v4_memory_pool.py get_compress_state_ring_size, no speculative decoding
STATE_BYTES = 4  # SGLANG_DSV4_COMPRESS_STATE_DTYPE float32


def state_width(ratio: int, dim: int) -> int:
    """fp32 values in one compressor-state row (CompressStatePool): kv and score, each ``1 + overlap`` x the
    head dim; c4 overlaps (2 x 2 x dim), c128 does not (2 x dim)."""
    return 2 * (2 if ratio == 4 else 1) * dim


@dataclass(frozen=True)
class V4Layout:
    """One rank's DeepSeek V4 pools before any budget."""

    ratios: tuple[int, ...]  # the compress ratio of every layer on the stage (0: window only)
    head_dim: int  # a: the attention head dim (448 + 64)
    rope_dim: int
    indexer_dim: int
    window: int
    page: int
    swa_ratio: float
    mrr_per_worker: int  # the request cap the fixed c128 state is sized for
    kv_dtype: str = "fp8_e4m3"
    kind: str = "dsv4"
    layer_ids: tuple[int, ...] = ()  # the model layer of each entry of ``ratios``
    notes: tuple[str, ...] = ()
    radix: bool = True  # the radix cache (--disable-radix-cache: no prefix is shared; the pools are the ratio mode's)

    def n(self, ratio: int) -> int:
        return self.ratios.count(ratio)

    @property
    def kv_bytes(self) -> int:
        """KVLayout.V4's row, qk_nope + 2 x qk_rope + 8 scale bytes: 584 for V4's 448 + 64 (fp8_ds_mla_v4)."""
        return V4_ROW.entry_bytes(self.head_dim, self.rope_dim, "SGLang's DeepSeek V4 row")

    def page_bytes(self, ratio: int = 0) -> int:
        """KVLayout.page_bytes: a page of p = page / ratio tokens (page for the window), rounded up to 576 B."""
        p = self.page // ratio if ratio else self.page
        return -(-p * self.kv_bytes // V4_PAGE_ALIGN) * V4_PAGE_ALIGN

    def paged(self, ratio: int = 0) -> float:
        """_get_paged_kv_bytes_per_token: page_bytes(p) / p."""
        return self.page_bytes(ratio) / (self.page // ratio if ratio else self.page)

    @property
    def indexer_row(self) -> int:
        """get_dsv4_indexer_bytes_per_token (fp8): 128 + 128 // 128 x 4 = 132 (fp8_indexer)."""
        return INDEXER_ROW.entry_bytes(self.indexer_dim, 0, "SGLang's DeepSeek V4 indexer row")

    @property
    def bytes_per_swa_token(self) -> float:
        """_get_bytes_per_swa_token: a window slot in every layer, plus the c4 compressor state priced per slot
        (ring / page rows of 2 x 2 x (a + indexer dim) fp32 values per c4 layer)."""
        c4_state = (state_width(4, self.head_dim) + state_width(4, self.indexer_dim)) * STATE_BYTES
        ring4 = RING[4] if self.n(4) else 0
        return self.paged() * len(self.ratios) + ring4 / self.page * c4_state * self.n(4)

    @property
    def bytes_per_full_token(self) -> float:
        """_get_bytes_per_full_token (ratio mode): the SWA share plus each compressed layer's entry share."""
        c4 = 1 / 4 * self.paged(4) + 1 / 4 * self.indexer_row
        c128 = 1 / 128 * self.paged(128)
        return self.swa_ratio * self.bytes_per_swa_token + c4 * self.n(4) + c128 * self.n(128)

    # ---- what one request takes in each pool (the transfer moves them; a request's reserve adds them up) ----
    @property
    def full_page_bytes(self) -> int:
        """One full page (256 tokens) of a request in every layer's compressed pool: each c4 layer's page of 64
        entries and its indexer page of 64 keys, each c128 layer's page of 2 entries (page_bytes(r), rounded up
        to 576 B; the indexer page 64 x 132 B)."""
        return self.n(4) * (self.page_bytes(4) + self.page // 4 * self.indexer_row) + self.n(128) * self.page_bytes(128)

    @property
    def swa_page_bytes(self) -> int:
        """One SWA page (256 tokens) in every layer's SWA cache, with each c4 layer's two page-scoped compressor
        rings (8 fp32 rows of 4 x 512 and 4 x 128 values: get_state_buf_infos)."""
        rings = self.n(4) * RING[4] * (state_width(4, self.head_dim) + state_width(4, self.indexer_dim)) * STATE_BYTES
        return len(self.ratios) * self.page_bytes() + rings

    @property
    def c128_slot_bytes(self) -> int:
        """A request's c128 state slot (get_request_state_buf_infos): each c128 layer's 128-row ring of 2 x 512 fp32
        values."""
        return self.n(128) * RING[128] * state_width(128, self.head_dim) * STATE_BYTES

    def swa_request_tokens(self, tokens: int) -> int:
        """SWA slots a request of ``tokens`` holds at most: its window, the eviction interval, a page of padding and
        a decode page (pool_configurator.py compute_swa_request_cap, no speculative decoding)."""
        return min(tokens, self.window + SWA_EVICTION_INTERVAL + 2 * self.page)

    def request_bytes(self, tokens: int) -> int:
        """What a request of ``tokens`` takes in DeepSeekV4TokenToKVPool: its ceil(T / 256) full pages, the SWA
        pages of its :meth:`swa_request_tokens` and one c128 state slot. (The pool is sized by a price per full
        token, bytes_per_full_token, which shares the SWA pool at its ratio: a request holding fewer tokens than
        its window and state takes more than that price, one holding many takes less.)"""
        full, swa = -(-tokens // self.page), -(-self.swa_request_tokens(tokens) // self.page)
        return full * self.full_page_bytes + swa * self.swa_page_bytes + self.c128_slot_bytes

    def c128_state_fixed(self, mrr: int) -> int:
        """_get_c128_state_fixed_bytes: (mrr + 1) request slots x the 128-row ring, + a ring and a row, padded to
        128 rows of 2 x a fp32 values, in every c128 layer."""
        if not self.n(128):
            return 0
        rows = (mrr + 1) * RING[128] + RING[128] + 1
        rows = -(-rows // 128) * 128
        return rows * state_width(128, self.head_dim) * STATE_BYTES * self.n(128)


def v4_layout(model, precision: str, settings: Settings, stage_layers, attn_dp: int) -> V4Layout:
    ratios, ids = [], []
    window = head = rope = idx = None
    for i, kind in enumerate(model.layers):
        if i not in stage_layers:
            continue
        r = 0
        for c in model.layer_kinds[kind]:
            comp = model.components[c]
            if isinstance(comp, CompressedMLA):
                r = comp.ratio
            elif isinstance(comp, SlidingWindowMLA):
                window, head, rope = comp.window, comp.dim, comp.rope_dim
            elif isinstance(comp, IndexerCache):
                idx = comp.dim
        if r not in (0, 4, 128):
            raise KvcalcError(f"{{{{engine}}}} sglang: compress ratio {r} is not modelled for SGLang {VERSION}'s DeepSeek V4 "
                              "pools (ratios 1 and 2 are V4.1's)")
        ratios.append(r)
        ids.append(i)
    if precision not in ("fp8", None):
        raise _kv_dtype_refusal(precision)
    notes = ()
    page = V4_PAGE  # arg_groups/model_overrides/deepseek_v4.py declares it on CUDA whatever was asked
    if settings.page_size not in (None, V4_PAGE):
        notes = (f"SGLang {VERSION} replaces page_size {settings.page_size} with {V4_PAGE} for DeepSeek V4 on CUDA (it "
                 f"logs 'Use dsv4 attention backend for DeepseekV4ForCausalLM, setting page_size to {V4_PAGE}.')",)
    mrr = settings.max_running_requests if settings.max_running_requests is not None else V4_MAX_RUNNING_REQUESTS
    return V4Layout(tuple(ratios), head, rope, idx or 128, window, page,
                    settings.swa_full_tokens_ratio if settings.swa_full_tokens_ratio is not None else V4_SWA_RATIO,
                    max(1, mrr // attn_dp), layer_ids=tuple(ids), notes=notes)


def _kv_dtype_refusal(precision: str) -> KvcalcError:
    """What SGLang does with a DeepSeek V4 KV cache that is not fp8_e4m3 (CUDA, the default paged V4 layout; run on
    the CPU by scripts/audit/sglang_mamba_reference.py). bfloat16 passes arg_groups/overrides.py
    _deepseek_v4_kv_cache_dtype (fp8_e4m3 or bfloat16) and DSV4PoolConfigurator sizes the pools as for fp8 (its
    _get_paged_kv_bytes_per_token prices the 584 B V4 row, KVLayout.V4, whatever the dtype), but every pool is a
    mem_cache/deepseek_v4_memory_pool.py DeepSeekV4SingleKVPool, whose create_buffer asserts a uint8 store: KVCache
    stores fp8 as uint8 and bfloat16 as bfloat16, so the first pool built (the SWA cache) fails a bare assert and
    SGLang does not start. Anything else fails the dtype override's own assert."""
    if precision == "bf16":
        return KvcalcError(f"precision: SGLang {VERSION} accepts --kv-cache-dtype bfloat16 for DeepSeek V4 "
                           "(overrides.py _deepseek_v4_kv_cache_dtype) and sizes its pools as for fp8_e4m3 (the 584 B "
                           "V4 row whatever the dtype), then fails to allocate them: DeepSeekV4SingleKVPool.create_buffer "
                           "asserts self.store_dtype == torch.uint8, and a bfloat16 pool stores bfloat16 (a bare "
                           "AssertionError, mem_cache/deepseek_v4_memory_pool.py); fp8 (its default) starts.",
                           param="precision")
    name = {"fp16": "float16"}.get(precision, precision)
    return KvcalcError(f"precision: SGLang {VERSION} refuses --kv-cache-dtype {name} for DeepSeek V4: \"{name} is not "
                       "supported for DeepseekV4ForCausalLM\" (overrides.py _deepseek_v4_kv_cache_dtype)",
                       param="precision")


@dataclass(frozen=True)
class V4Sizing:
    available_bytes: int
    fixed_bytes: int
    max_total_num_tokens: int
    swa_tokens: int
    c4_tokens: int
    c128_tokens: int
    c4_state: int
    c128_state: int
    max_running_requests: int
    state_slots: int = 0
    state_bytes: int = 0
    mrr_capped_by_state: bool = False
    user_tokens_above_profile: bool = False


def size_v4(lay: V4Layout, rest_gib: float, settings: Settings) -> V4Sizing:
    """DSV4PoolConfigurator.calculate_pool_sizes, then resolve_max_num_reqs and finalize_with_max_running_requests."""
    available = int(rest_gib * (1 << 30))
    fixed = lay.c128_state_fixed(lay.mrr_per_worker)
    room = max(available - fixed, 0)
    full = int(room / lay.bytes_per_full_token) // lay.page * lay.page
    above = settings.max_total_tokens is not None and settings.max_total_tokens > full
    if settings.max_total_tokens is not None:  # calculate_pool_sizes_from_max_tokens: re-floored to the page
        full = min(full, settings.max_total_tokens) // lay.page * lay.page
    # _compute_dsv4_sizes validates the SWA pool before MemoryPoolConfig could say "Not enough memory": with no
    # full token the SWA pool is 0 and that check refuses first
    swa = swa_pool_tokens(lay, full)
    if lay.window + lay.page >= swa:
        raise KvcalcError(f"{{{{engine}}}} sglang: SWA pool ({swa} tokens) cannot hold even one request: the prefill "
                          f"admission floor is sliding_window_size ({lay.window}) + page_size ({lay.page}). Increase "
                          "{{swa_full_tokens_ratio}} or the total KV budget.")
    mrr = min(lay.mrr_per_worker, full // 2)  # a declared cap: min(cap // attn_dp, T // 2)
    return V4Sizing(available, fixed, full, swa, full // 4, full // 128,
                    swa // lay.page * (RING[4] if lay.n(4) else 0), (mrr + 1) * RING[128] if lay.n(128) else 0, mrr,
                    user_tokens_above_profile=above)


# ---- the tensors DeepSeekV4TokenToKVPool allocates ----------------------------------------------------------
@dataclass(frozen=True)
class V4Pool:
    """One pool of ``mem_cache/deepseek_v4_memory_pool.py`` on one rank: its per-layer tensor and what it holds."""

    name: str
    role: str  # "swa", "c4", "c128", "indexer", "state" (compressor state)
    ratio: int  # the compress ratio of its layers (0: every layer, the SWA cache)
    dtype: str  # torch dtype of the tensor
    shape: tuple[int, int]  # one layer's tensor
    layers: tuple[int, ...]  # model layer indices
    tokens: int  # the slots SGLang sizes it for (its ``size``): tokens, compressed entries or state rows
    page: int  # slots per page (a state pool: rows per ring)
    row_bytes: int  # bytes one slot holds (a paged pool: the record, its page padding apart)
    width: int  # values one slot holds

    @property
    def bytes(self) -> int:
        size = 4 if self.dtype == "torch.float32" else 1
        return self.shape[0] * self.shape[1] * size * len(self.layers)

    def to_json(self) -> dict:
        return {"name": self.name, "dtype": self.dtype, "shape": list(self.shape), "layers": len(self.layers),
                "tokens": self.tokens, "bytes": self.bytes}


def _pages(size: int, page: int) -> int:
    """_num_dsv4_physical_kv_pages: ceil((size + the 256-token logical page) / page): the allocator's padding
    page, counted at the logical page size, so a compressed pool keeps 256 // ratio padding slots."""
    return -(-(size + V4_PAGE) // page)


def v4_pools(lay: V4Layout, z: "V4Sizing") -> list[V4Pool]:
    """The tensors, in the order DeepSeekV4TokenToKVPool creates them (CUDA, KVLayout.V4, not unified, no
    HiSparse, no speculative decoding):

    * the SWA cache (``DeepSeekV4SingleKVPool``, every layer): ``(pages, page_bytes(256))`` uint8, pages =
      ceil((swa + 256) / 256), ``page_bytes`` = 256 x 584 B rounded up to 576 B (``KVLayout.page_bytes``);
    * per compress ratio r (``_init_compressed_pools``): ``size`` = full // r entries in pages of 256 // r;
    * the c4 indexer keys (``DeepSeekV4IndexerPool``): size = c128 x 32 (``c4_logical_size``), pages of 64
      entries of 132 B (128 fp8 + one fp32 scale per 128), the same page count rule;
    * the compressor states (``_init_paged_compress_states`` -> ``CompressStatePool``): fp32 rows of
      ``2 x (1 + overlap) x head dim`` (c4 overlaps: 4 x 512 for the attention state, 4 x 128 for the
      indexer's; c128: 2 x 512), ``size + ring + 1`` rows padded to the ratio. The c4 states are addressed by
      SWA page (size = swa // 256 x 8); the c128 state by request slot (size = (max_running_requests + 1) x
      128, the request-to-token pool's rows: ``ReqToTokenPool`` allocates ``size + 1``)."""
    a, idx = lay.head_dim, lay.indexer_dim
    ids = lambda r: tuple(i for i, x in zip(lay.layer_ids, lay.ratios) if x == r)  # noqa: E731
    out = [V4Pool("SWA KV Cache", "swa", 0, "torch.uint8", (_pages(z.swa_tokens, lay.page), lay.page_bytes()),
                  tuple(lay.layer_ids), z.swa_tokens, lay.page, lay.kv_bytes, a)]
    sizes = {4: z.c4_tokens, 128: z.c128_tokens}
    for r in (4, 128):
        if lay.n(r):
            p = lay.page // r
            out.append(V4Pool(f"c{r} KV Cache", f"c{r}", r, "torch.uint8", (_pages(sizes[r], p), lay.page_bytes(r)),
                              ids(r), sizes[r], p, lay.kv_bytes, a))
    if lay.n(4):
        p, size = lay.page // 4, z.c128_tokens * 32
        out.append(V4Pool("c4 Indexer keys", "indexer", 4, "torch.uint8", (_pages(size, p), p * lay.indexer_row),
                          ids(4), size, p, lay.indexer_row, idx))
    for r, name, dim, size in ((4, "c4 compressor state", a, z.c4_state), (4, "c4 indexer compressor state", idx,
                                                                             z.c4_state),
                               (128, "c128 compressor state", a, z.c128_state)):
        if lay.n(r):
            ring = RING[r]
            rows = -(-(size + ring + 1) // r) * r
            width = state_width(r, dim)
            out.append(V4Pool(name, "state", r, "torch.float32", (rows, width), ids(r), size, ring, width * STATE_BYTES,
                              width))
    return out
