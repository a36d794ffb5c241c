"""The buffers SGLang 0.5.23 allocates on one rank for exactly a batch of requests, for `kvcalc verify`
(torch-free: shapes, dtypes and slot rules; :mod:`kvcalc.verify.tokenpools` allocates and fills them).

The pools are the ones SGLang would build if told to hold ``batch`` requests of the plan's context: the token
pools hold ``batch x ceil_page(context)`` tokens (its ``max_total_tokens`` cap, :func:`.sizing.size_pools`
with a budget that does not bind), a split SWA pool ``swa_full_tokens_ratio`` of that, a Mamba state pool
``batch x`` the state slots a running request holds. Each buffer is what ``mem_cache/memory_pool.py`` creates:

* ``MHATokenToKVPool._create_buffers_normal``: per layer K ``(size + page, heads, head_dim)`` and V; when the
  two shapes match they are the halves of one ``(2, size + page, heads, head_dim)`` tensor per layer;
* ``MLATokenToKVPool._create_buffers``: per layer ``(size + page, 1, kv_cache_dim)`` (DSA in fp8: the 656 B
  FlashMLA row as uint8);
* ``index_key_cache.py::IndexKeyCache``: per layer ``((size + page + 1) // page, page x 132)`` uint8, each page
  all its fp8 keys, then all its fp32 scales;
* ``MambaPool``: conv and ssm state each one ``(mamba layers, slots + 1, ...)`` tensor;
* fp8 K/V are stored as uint8 (``KVCache.store_dtype``: index_put has no fp8 kernel).

Row 0's page (slot 0 of a state pool) is the padding page: the allocators hand out pages from 1
(``allocator/paged.py`` and ``token.py`` ``clear``: "The padded slot 0 is used for writing dummy outputs from
padded tokens"; ``allocator/mamba.py``: slots from 1). A fresh allocator hands pages out in order, so request
``r`` holds the pages after those of requests ``0 .. r - 1``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ...pool import GroupKind
from ..buffers import Buffer
from ...specs import CompressedMLA, CompressorState, IndexerCache, MLALatent, SlidingWindowMLA
from . import sizing as S
from .dsv4 import V4Layout, V4Sizing, size_v4, v4_pools
from .report import _pools

#: a budget that never binds (GiB): the tokens come from max_total_tokens alone
_UNBOUNDED_GIB = float(1 << 20)


@dataclass(frozen=True)
class BatchPools:
    """SGLang's pools for ``batch`` requests: its figures (as it logs them) and the buffers."""

    batch: int
    context: int
    max_total_num_tokens: int
    swa_tokens: int | None
    state_slots: int
    max_running_requests: int
    page_size: int
    kv_cache_dtype: str
    buffers: tuple[Buffer, ...]
    swa_floor: int | None = None  # window + page where the split SWA pool's needs, not the batch, size the pools
    estimate_basis = "complete"  # the basis the prediction is computed on
    _basis = ("predicted: exact analytic bytes of the batch (complete basis) in the formats SGLang stores, each pool "
             "its share of its cache group's; planned: the engine's token pools sized to hold exactly the batch (the "
             "batch x the context rounded up to the page), as it allocates them (size + page_size rows per layer, the "
             "padding page included); blocks: a pool's token rows (a state pool's slots), the padding page not "
             "included; allocated: storage bytes on CPU, allocator delta on CUDA; written: bytes counted in memory "
             "after the fill")

    @property
    def basis(self) -> str:
        if self.swa_floor is None:
            return self._basis
        return self._basis + (f"; here the split SWA pool (int(T x swa_full_tokens_ratio)) of exactly the batch would "
                               "not take it, so the pools are the smallest SGLang builds that do: max_total_num_tokens "
                               f"{self.max_total_num_tokens:,}, whose SWA pool exceeds sliding_window_size + page_size "
                               f"({self.swa_floor:,}) and holds the batch's SWA rows")

    def checks(self) -> list[tuple[str, bool]]:
        """What the pools must hold beyond their bytes: exactly the batch."""
        per = -(-self.context // self.page_size) * self.page_size
        if self.swa_floor is not None:
            return [(f"the pools hold the batch: max_total_num_tokens {self.max_total_num_tokens:,} > {self.batch} x "
                     f"{per:,}, the fewest whose SWA pool ({self.swa_tokens:,}) exceeds sliding_window_size + "
                     f"page_size ({self.swa_floor:,}, validate_swa_pool_size) and holds the batch's SWA rows; "
                     f"max_running_requests {self.max_running_requests:,} >= {self.batch}",
                     self.max_total_num_tokens > self.batch * per and self.swa_tokens > self.swa_floor
                     and self.max_running_requests >= self.batch)]
        return [(f"the pools hold exactly the batch: max_total_num_tokens {self.max_total_num_tokens:,} == "
                 f"{self.batch} x {per:,}, max_running_requests {self.max_running_requests:,} >= {self.batch}",
                 self.max_total_num_tokens == self.batch * per and self.max_running_requests >= self.batch)]

    def to_json(self) -> dict:
        return {"max_total_num_tokens": self.max_total_num_tokens, "swa_max_total_num_tokens": self.swa_tokens,
                "max_mamba_cache_size": self.state_slots or None, "max_running_requests": self.max_running_requests,
                "page_size": self.page_size, "kv_cache_dtype": self.kv_cache_dtype,
                "swa_floor_tokens": self.swa_floor,
                "padding": "the first page of every token pool, slot 0 of every state pool (SGLang's padding "
                           "page: its allocators hand out pages from 1)"}


def swa_floor_tokens(lay: S.Layout, tokens: int, swa_need: int = 0) -> int:
    """The fewest page-aligned max_total_num_tokens, from ``tokens`` up, whose SWA pool (int(T x ratio) on the
    page) exceeds window + page, which SGLang requires (validate_swa_pool_size), and holds ``swa_need`` rows (the
    batch's SWA rows): a batch short next to the window (Llama 4: 8,192), or a split pool smaller than the batch
    keeps, gets the smallest pools that take it instead of exactly the batch."""
    if not (lay.swa_layers and lay.full_layers) or lay.window is None:
        return tokens
    page, floor = lay.page, lay.window + lay.page

    def ok(t: int) -> bool:
        swa = S.swa_pool_tokens(lay, t)
        return swa > floor and swa >= swa_need

    if ok(tokens):
        return tokens
    t = max(tokens, S.ceil_page(int((max(floor + 1, swa_need)) / lay.swa_ratio), page))
    while not ok(t):  # the float product: step up page by page from the estimate
        t += page
    while t - page >= tokens and ok(t - page):
        t -= page
    return t


def _sizing(plan, lay: S.Layout, batch: int) -> S.Sizing:
    """size_pools with max_total_tokens = batch x ceil_page(context) (raised where a split SWA pool would fall
    below SGLang's floor or the batch's rows, :func:`swa_floor_tokens`) and a budget that does not bind; the state
    pool holds the slots ``batch`` running requests take."""
    swa_need = batch * S.ceil_page(min(plan.context, lay.window), lay.page) if lay.window is not None else 0
    tokens = swa_floor_tokens(lay, batch * S.ceil_page(plan.context, lay.page), swa_need)
    settings = replace(plan.settings, max_total_tokens=tokens)
    z = S.size_pools(lay, _UNBOUNDED_GIB, plan.context, settings)
    if lay.state_layers:
        slots = batch * lay.slots_per_request
        mrr, capped = S.max_running_requests(z.max_total_num_tokens, plan.context, settings, slots, lay)
        z = replace(z, state_slots=slots, state_bytes=(slots + 1) * lay.state_per_request, max_running_requests=mrr,
                    mrr_capped_by_state=capped)
    return z


def _components(plan, model, kind: GroupKind, cls=None) -> tuple[str, ...]:
    group = next((g for g in plan.groups if g.kind is kind), None)
    names = tuple(dict.fromkeys(c for _, c in group.members)) if group is not None else ()
    return tuple(c for c in names if cls is None or isinstance(model.components[c], cls))


def _kv_buffers(plan, model, lay: S.Layout, z: S.Sizing, entry: dict) -> dict:
    """The fields of one K or V buffer (full or SWA pool)."""
    swa = entry["name"].startswith("SWA")
    side = entry["name"][-1]
    heads = lay.swa_heads if swa else lay.heads
    dims = (lay.swa_head_dim, lay.swa_v_head_dim) if swa else (lay.head_dim, lay.v_head_dim)
    dim = dims[0] if side == "K" else dims[1]
    kept = min(plan.context, lay.window) if swa else plan.context
    kind = GroupKind.WINDOW if swa else GroupKind.FULL
    return dict(kind=f"window {lay.window}" if swa else "full", group=kind,
                components=_components(plan, model, kind), layers=lay.swa_layers if swa else lay.full_layers,
                shape=(S.rows(z.swa_tokens if swa else z.max_total_num_tokens, lay.page), heads, dim),
                tensor="kv_pair" if dims[0] == dims[1] else "layer", tokens=z.swa_tokens if swa else
                z.max_total_num_tokens, padding_rows=lay.page, page=lay.page, row_bytes=heads * dim * lay.kv_size,
                width=heads * dim, format="plain", paged_records=False, rows_per_request=kept,
                first_position=plan.context - kept)


def _latent_buffers(plan, model, lay: S.Layout, z: S.Sizing, entry: dict) -> dict:
    """The MLA latent (DSA in fp8: the packed FlashMLA row) or the DSA indexer keys."""
    tokens, page = z.max_total_num_tokens, lay.page
    base = dict(kind="full", group=GroupKind.FULL, layers=lay.full_layers, tensor="layer", tokens=tokens, page=page,
                rows_per_request=plan.context, first_position=0)
    if entry["name"] == "Indexer keys":
        comps = _components(plan, model, GroupKind.FULL, IndexerCache)
        return dict(base, components=comps, shape=(S.dsa_index_pages(tokens, page), page * lay.indexer_row),
                    padding_rows=1, row_bytes=lay.indexer_row, width=model.components[comps[0]].dim,
                    format="fp8_indexer", paged_records=True)
    comps = _components(plan, model, GroupKind.FULL, MLALatent)
    packed = lay.kind == "dsa" and lay.kv_size == 1
    return dict(base, components=comps, shape=(S.rows(tokens, page), 1, lay.mla_dim), padding_rows=page,
                row_bytes=lay.mla_dim * lay.kv_size, width=model.components[comps[0]].dim,
                format="fp8_ds_mla" if packed else "plain", paged_records=False)


def _state_buffers(plan, model, lay: S.Layout, z: S.Sizing, entry: dict) -> dict:
    """A Mamba conv or ssm state: one (layers, slots + 1, values) tensor; a request writes its one slot."""
    n = len(lay.state_layers)
    per_layer = entry["bytes"] // n // (z.state_slots + 1)
    size = 2 if entry["dtype"] in ("torch.bfloat16", "torch.float16") else 4
    if entry["bytes"] % (n * (z.state_slots + 1)) or per_layer % size:
        raise S.refuse(f"{entry['name']}: {entry['bytes']:,} B do not split evenly over {n} layers and "
                       f"{z.state_slots + 1} slots; verify allocates equal state layers only")
    return dict(kind="state", group=GroupKind.STATE, components=_components(plan, model, GroupKind.STATE),
                layers=lay.state_layers, shape=(z.state_slots + 1, per_layer // size), tensor="stacked",
                tokens=z.state_slots, padding_rows=1, page=1, row_bytes=per_layer, width=per_layer // size,
                format="plain", paged_records=False, rows_per_request=1, first_position=0)


def _v4_fields(plan, model, lay: V4Layout, batch: int) -> tuple[list[dict], V4Sizing]:
    """DeepSeek V4's tensors (:func:`.dsv4.v4_pools`) for ``batch`` requests: the pools sized with
    max_total_tokens = batch x ceil_page(context), a budget that does not bind, and max_running_requests = the
    batch unless set (the c128 state is sized by it). A request's rows: the last ``window`` tokens in the SWA
    cache, ``context // r`` entries in a ratio-r pool (and the c4 indexer), in the pages that follow its full
    pool's pages (slot = full slot // r); one ring of each compressor state (8 rows per SWA page for c4, 128 per
    request slot for c128), its first page / slot after the padding page / slot 0."""
    L = plan.context
    mrr = plan.settings.max_running_requests or batch
    lay = replace(lay, mrr_per_worker=max(1, mrr // plan.settings.attn_dp))
    settings = replace(plan.settings, max_total_tokens=batch * S.ceil_page(L, lay.page))
    z = size_v4(lay, _UNBOUNDED_GIB, settings)
    kept, full_pages = min(L, lay.window), -(-L // lay.page)
    comps = model.components

    def of(cls, ratio: int, state: bool = False) -> tuple[str, ...]:
        """The components of ``cls`` with this compress ratio (``state``: the compressor states of them)."""
        def hit(c):
            return isinstance(c, cls) and (ratio == 0 or getattr(c, "ratio", 0) == ratio)
        kind = CompressorState if state else cls
        return tuple(c for c in _components(plan, model, GroupKind.FULL, kind)
                     if hit(comps[comps[c].compresses] if state else comps[c]))

    out = []
    for p in v4_pools(lay, z):
        f = dict(name=p.name, layers=p.layers, shape=p.shape, tensor="layer", tokens=p.tokens, page=p.page,
                 row_bytes=p.row_bytes, width=p.width, bytes=p.bytes, group=GroupKind.FULL)
        if p.role == "state":
            names = of(IndexerCache if "indexer" in p.name else CompressedMLA, p.ratio, state=True)
            out.append(dict(f, kind="state", components=names, dtype="float32", store="float32", padding_rows=p.page,
                            format="plain", paged_records=False, rows_per_request=p.page, first_position=0))
            continue
        if p.role == "swa":
            names, rows, first, per = of(SlidingWindowMLA, 0), kept, L - kept, 0
        else:
            names = of(IndexerCache if p.role == "indexer" else CompressedMLA, p.ratio)
            rows, first, per = L // p.ratio, 0, full_pages
        out.append(dict(f, kind=f"window {lay.window}" if p.role == "swa" else "full", components=names,
                        dtype="uint8", store="uint8", padding_rows=1, request_pages=per,
                        format="fp8_indexer_v4" if p.role == "indexer" else "fp8_ds_mla_v4", paged_records=True,
                        rows_per_request=rows, first_position=first))
    return out, z


def token_pool_buffers(plan, lay: S.Layout, batch: int, model) -> BatchPools:
    """The buffers SGLang allocates on this plan's rank to hold exactly ``batch`` requests of its context: the
    default and split-SWA pools."""
    z = _sizing(plan, lay, batch)
    fields = []
    for e in _pools(lay, z):
        build = (_state_buffers if e["name"].startswith("Mamba") else
                 _kv_buffers if e["name"].endswith((" K", " V")) else _latent_buffers)
        f = build(plan, model, lay, z, e)
        dtype = e["dtype"].removeprefix("torch.")
        fields.append(dict(f, name=e["name"], dtype=dtype, store="uint8" if dtype.startswith("float8") else dtype,
                           bytes=e["bytes"]))
    raised = z.max_total_num_tokens > batch * S.ceil_page(plan.context, lay.page)
    return _batch(plan, batch, lay, z, fields, z.swa_tokens, z.state_slots, raised)


def v4_buffers(plan, lay: V4Layout, batch: int, model) -> BatchPools:
    """DeepSeek V4's pools for ``batch`` requests (:func:`_v4_fields`)."""
    fields, z = _v4_fields(plan, model, lay, batch)
    return _batch(plan, batch, lay, z, fields, z.swa_tokens, 0, False)


def _batch(plan, batch: int, lay, z, fields: list[dict], swa, slots: int, raised: bool) -> BatchPools:
    out = []
    for i, f in enumerate(fields):
        kind = f.pop("group")
        group = next(g.index for g in plan.groups if g.kind is kind)
        partner = next((j for j, g in enumerate(fields) if j != i and f["tensor"] == "kv_pair"
                        and g["name"][:-1] == f["name"][:-1]), None)
        b = Buffer(index=i, group=group, partner=partner, **f)
        need = batch * -(-b.rows_per_request // b.page) * b.page
        if need > b.tokens:
            raise S.refuse(f"the {b.name} pool holds {b.tokens:,} tokens, fewer than the {need:,} that {batch} "
                           f"request(s) keep ({b.rows_per_request:,} each, whole pages); raise "
                           "{{swa_full_tokens_ratio}} or the context")
        out.append(b)
    return BatchPools(batch, plan.context, z.max_total_num_tokens, swa, slots, z.max_running_requests, lay.page,
                      lay.kv_dtype, tuple(out), swa_floor=lay.window + lay.page if raised else None)
