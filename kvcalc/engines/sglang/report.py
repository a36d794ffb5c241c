"""SGLang's figures for a budget, as its start-up log prints them, and how many requests of a context fit."""

from __future__ import annotations

from dataclasses import replace

from ...units import GIB, format_bytes
from ..base import Fit
from .figures import SglangFigures, V4PoolFigures
from . import sizing as S
from .defaults import DEFAULT_MAX_PREFILL_TOKENS, SWA_EVICTION_INTERVAL, VERSION
from .dsv4 import RING, V4Layout, size_v4, v4_pools


def _pools(lay: S.Layout, z: S.Sizing) -> list[dict]:
    """The buffers one rank allocates (mem_cache/memory_pool.py: size + page_size rows per pool)."""
    page, out = lay.page, []
    dtype = S.KV_DTYPES[lay.kv_dtype][0]
    n_full, n_swa = len(lay.full_layers), len(lay.swa_layers)
    if n_full:
        rows = S.rows(z.max_total_num_tokens, page)
        name = "Full KV Cache" if n_swa else "KV Cache"
        if lay.kind == "mha":
            for side, dim in (("K", lay.head_dim), ("V", lay.v_head_dim)):
                out.append({"name": f"{name} {side}", "dtype": dtype, "shape": [rows, lay.heads, dim], "layers": n_full,
                            "tokens": z.max_total_num_tokens, "bytes": rows * lay.heads * dim * lay.kv_size * n_full})
        else:
            stored = "torch.uint8" if lay.kind == "dsa" and lay.kv_size == 1 else dtype
            out.append({"name": name, "dtype": stored, "shape": [rows, 1, lay.mla_dim], "layers": n_full,
                        "tokens": z.max_total_num_tokens, "bytes": rows * lay.mla_dim * lay.kv_size * n_full})
            if lay.kind == "dsa":
                pages = S.dsa_index_pages(z.max_total_num_tokens, page)
                out.append({"name": "Indexer keys", "dtype": "torch.uint8", "shape": [pages, page * lay.indexer_row],
                            "layers": n_full, "tokens": z.max_total_num_tokens,
                            "bytes": pages * page * lay.indexer_row * n_full})
    if n_swa:
        rows = S.rows(z.swa_tokens, page)
        for side, dim in (("K", lay.swa_head_dim), ("V", lay.swa_v_head_dim)):
            out.append({"name": f"SWA KV Cache {side}", "dtype": dtype, "shape": [rows, lay.swa_heads, dim],
                        "layers": n_swa, "tokens": z.swa_tokens,
                        "bytes": rows * lay.swa_heads * dim * lay.kv_size * n_swa})
    if z.state_slots:
        slots = z.state_slots + 1
        conv = lay.state_conv_bytes
        out.append({"name": "Mamba conv state", "dtype": "torch.bfloat16", "shape": [slots, conv // 2],
                    "layers": len(lay.state_layers), "tokens": None, "bytes": slots * conv})
        out.append({"name": "Mamba ssm state", "dtype": f"torch.{lay.state_ssm_dtype}", "shape": [slots],
                    "layers": len(lay.state_layers), "tokens": None,
                    "bytes": slots * (lay.state_per_request - conv)})
    return out


def _log_lines(lay: S.Layout, z: S.Sizing, pools: list[dict], context: int, chunk: int) -> list[str]:
    by = {p["name"]: p["bytes"] for p in pools}
    dtype = S.KV_DTYPES[lay.kv_dtype][0]
    out = []
    if lay.attention_chunk is not None:  # model_runner_components/load_model_utils.py resolve_sliding_window_size
        out.append(f"Setting sliding_window_size to be attention_chunk_size: {lay.attention_chunk}")
    if z.state_slots:
        out.append(f"Mamba Cache is allocated. max_mamba_cache_size: {z.state_slots}, conv_state size: "
                   f"{S.gib(by['Mamba conv state'])}GB, ssm_state size: {S.gib(by['Mamba ssm state'])}GB")
    if lay.swa_layers and lay.full_layers and not z.swa_cap_mode:  # _solve_pool_sizes (ratio mode) logs it
        out.append(f"Use sliding window memory pool. full_layer_tokens={z.max_total_num_tokens}, "
                   f"swa_layer_tokens={z.swa_tokens}")
    for name, tokens in (("Full KV Cache" if lay.swa_layers else "KV Cache", z.max_total_num_tokens),
                         ("SWA KV Cache", z.swa_tokens)):
        if f"{name} K" in by:
            out.append(f"{name} is allocated. dtype: {dtype}, #tokens: {tokens}, K size: {S.gib(by[f'{name} K'])} GB, "
                       f"V size: {S.gib(by[f'{name} V'])} GB")
        elif name in by:
            kv = by[name] + by.get("Indexer keys", 0)
            out.append(f"{name} is allocated. dtype: {dtype}, #tokens: {tokens}, KV size: {S.gib(kv)} GB")
    if lay.swa_layers and lay.full_layers:
        usage = sum(b for n, b in by.items() if "KV Cache" in n)
        out.append(f"SWAKVPool mem usage: {S.gib(usage)} GB, swa size: {z.swa_tokens}, full size: "
                   f"{z.max_total_num_tokens}")
    out.append(f"max_total_num_tokens={z.max_total_num_tokens}, chunked_prefill_size={chunk}, max_prefill_tokens="
               f"{DEFAULT_MAX_PREFILL_TOKENS}, max_running_requests={z.max_running_requests}, context_len={context}")
    return out


def _stage_sizings(plans, pool: int, settings) -> list[S.Sizing]:
    """Each pipeline stage sizes with its own layers; the token count is the smallest over the stages
    (kv_cache_configurator.py _apply_token_constraints, an all-reduce MIN), then every stage re-derives."""
    rest = pool / GIB
    sizes = [S.size_pools(p.pools.layout, rest, p.context, settings) for p in plans]
    low = min(z.max_total_num_tokens for z in sizes)
    if any(z.max_total_num_tokens != low for z in sizes):
        capped = replace(settings, max_total_tokens=low if settings.max_total_tokens is None
                         else min(low, settings.max_total_tokens))
        sizes = [S.size_pools(p.pools.layout, rest, p.context, capped) for p in plans]
    return sizes


def _limits(lay: S.Layout, z: S.Sizing, L: int) -> dict[str, int]:
    """Requests of L tokens each limit admits: the request cap, the token pool, the SWA pool."""
    limits = {"max_running_requests": z.max_running_requests,
              "token pool": z.max_total_num_tokens // S.ceil_page(L, lay.page)}
    if z.swa_tokens is not None:
        limits["SWA pool"] = z.swa_tokens // S.swa_tokens_per_request(lay, L)
    return limits


def requests_at(plans, pool: int, settings, context: int) -> int:
    """Requests of ``context`` tokens that fit on the fullest stage (the pools do not depend on the context)."""
    return min(p.pools.requests_at(p, pool, settings, context) for p in plans) or 0


def token_pool_requests(lay: S.Layout, pool: int, settings, context: int) -> int:
    z = S.size_pools(lay, pool / GIB, context, settings)
    return min(_limits(lay, z, context).values())


def v4_requests(lay: V4Layout, pool: int, settings, context: int) -> int:
    return min(_v4_limits(lay, size_v4(lay, pool / GIB, settings), context).values())


def fit_token_pools(plans, pool: int, settings) -> Fit:
    sizes = _stage_sizings(plans, pool, settings)
    i = max(range(len(plans)), key=lambda k: sum(p["bytes"] for p in _pools(plans[k].pools.layout, sizes[k])))
    p, lay, z = plans[i], plans[i].pools.layout, sizes[i]
    L = p.context
    pools = _pools(lay, z)
    chunk = settings.prefill_chunk
    limits = _limits(lay, z, L)
    fits = min(limits.values())
    binding = min(limits, key=lambda k: limits[k])
    lines = [f"SGLang would log: {line}" for line in _log_lines(lay, z, pools, L, chunk)]
    lines += _why(lay, z, pool, L, limits, binding, settings)
    notes = []
    if z.max_total_num_tokens < L:
        notes.append(f"SGLang {VERSION} warns: KV pool holds {z.max_total_num_tokens} tokens, fewer than "
                     f"--context-length {L}. One full-length request cannot fit")
    if z.mrr_capped_by_state:
        notes.append(f"max_running_requests is capped to {z.max_running_requests} by the mamba state cache "
                     f"(max_mamba_cache_size={z.state_slots}, {lay.slots_per_request} state slots per request)")
    if z.user_tokens_above_profile:
        notes.append(f"max_total_tokens={settings.max_total_tokens} is larger than the profiled value; SGLang uses "
                     "the profiled value")
    figures = SglangFigures(pool, z.available_bytes, lay.cell, z.max_total_num_tokens, z.swa_tokens,
                            z.max_running_requests, z.state_slots or None, z.state_bytes or None, lay.page,
                            lay.kv_dtype, chunk, tuple(pools), binding, limits)
    return Fit(z.max_total_num_tokens // lay.page, fits, z.max_total_num_tokens / L, z.max_total_num_tokens,
               tuple(lines), _table(pools), figures, log_line=_log_lines(lay, z, pools, L, chunk)[-1],
               notes=tuple(notes))


def _table(pools: list[dict]) -> tuple:
    return (("pool", "dtype", "shape per layer", "layers", "#tokens", "bytes"),
            tuple((x["name"], x["dtype"], "(" + ", ".join(f"{d:,}" for d in x["shape"]) + ")", str(x["layers"]),
                   f"{x['tokens']:,}" if x["tokens"] is not None else "-", format_bytes(x["bytes"])) for x in pools))


def _strategy_text(lay: S.Layout) -> str:
    """The Mamba state options as resolved (kv_cache_configurator.py _calculate_mamba_ratio's inputs)."""
    if not lay.radix:
        return "no radix cache"
    return f"{lay.mamba_strategy}, overlap scheduler {'on' if lay.overlap else 'off'}"


def _why(lay: S.Layout, z: S.Sizing, pool: int, L: int, limits: dict, binding: str, settings) -> list[str]:
    cell = lay.cell
    parts = []
    if lay.full_layers:
        per = lay.full_per_token + lay.indexer_row
        what = {"mha": f"{lay.heads} KV head(s) x ({lay.head_dim} + {lay.v_head_dim}) x {lay.kv_size} B",
                "mla": f"a {lay.mla_dim}-wide latent x {lay.kv_size} B",
                "dsa": f"a {lay.mla_dim}-wide latent x {lay.kv_size} B + {lay.indexer_row} B of indexer keys"}[lay.kind]
        parts.append(f"{len(lay.full_layers)} full layers x {per:,} B ({what})")
    if lay.swa_layers:
        parts.append(f"{lay.swa_ratio:g} x {len(lay.swa_layers)} SWA layers x {lay.swa_per_token:,} B")
    cell_text = f"{cell:,.2f}" if isinstance(cell, float) else f"{cell:,}"
    out = []
    if z.state_slots:
        how = ("max_mamba_cache_size gives" if settings.max_mamba_cache_size is not None else
               "max_running_requests without the radix cache gives" if settings.disable_radix_cache
               and settings.max_running_requests is not None else "mamba_full_memory_ratio r / (1 + r) of it holds")
        out.append(f"The Mamba state pool comes off the {pool:,} B budget first: {how} {z.state_slots:,} slots of "
                   f"{lay.state_per_request:,} B (+1 padding slot), {format_bytes(z.state_bytes)}; "
                   f"{lay.slots_per_request} slot(s) per running request ({_strategy_text(lay)}).")
    if z.swa_cap_mode:
        out.append(f"Without the radix cache and with max_running_requests {settings.max_running_requests}, the SWA "
                   f"pool is sized from the request cap first (SWARequestCapPoolConfigurator): {z.swa_tokens:,} "
                   f"tokens; max_total_num_tokens = what is left of {z.available_bytes:,} B // "
                   f"{(lay.full_per_token + lay.indexer_row) * len(lay.full_layers):,} B per full token, floored to "
                   f"the {lay.page}-token page.")
    else:
        out.append(f"max_total_num_tokens = {z.available_bytes:,} B // {cell_text} B per token "
                   f"({' + '.join(parts)}), floored to the {lay.page}-token page.")
    if lay.swa_layers and lay.full_layers and not z.swa_cap_mode:
        out.append(f"The SWA pool holds int({z.max_total_num_tokens:,} x {lay.swa_ratio:g}) = {z.swa_tokens:,} tokens "
                   f"(window {lay.window} + page {lay.page} is its floor); a request keeps at most "
                   f"{S.swa_tokens_per_request(lay, L):,} of them.")
    each = ", ".join(f"{k} {v:,}" for k, v in limits.items())
    attn_dp = settings.attn_dp
    who = f"per attention-DP worker ({attn_dp} of them share the tp GPUs)" if attn_dp > 1 else "per replica"
    out.append(f"Requests of {L:,} tokens {who}: {each}; the {binding} binds.")
    return out


# ---- DeepSeek V4 ------------------------------------------------------------------------------------------------
def _v4_limits(lay: V4Layout, z, L: int) -> dict[str, int]:
    per_swa = min(L, lay.window + SWA_EVICTION_INTERVAL + 2 * lay.page)  # compute_swa_request_cap's per request
    return {"max_running_requests": z.max_running_requests,
            "token pool": z.max_total_num_tokens // S.ceil_page(L, lay.page), "SWA pool": z.swa_tokens // per_swa}


def _v4_pools(lay: V4Layout, z) -> list[dict]:
    """The tensors DeepSeekV4TokenToKVPool allocates (:func:`.dsv4.v4_pools`)."""
    return [p.to_json() for p in v4_pools(lay, z)]


def fit_v4(plans, pool: int, settings) -> Fit:
    p = plans[0]
    lay, L = p.pools.layout, p.context
    z = size_v4(lay, pool / GIB, settings)
    for q in plans[1:]:  # pipeline stages: the smallest token count
        z2 = size_v4(q.pools.layout, pool / GIB, settings)
        if z2.max_total_num_tokens < z.max_total_num_tokens:
            p, lay, z = q, q.pools.layout, z2
    limits = _v4_limits(lay, z, L)
    binding = min(limits, key=lambda k: limits[k])
    pools = _v4_pools(lay, z)
    chunk = settings.prefill_chunk
    g = 1 << 30
    log = [f"DSV4 SWA sizing: mode=ratio (explicit), swa_tokens={z.swa_tokens}, swa_full_tokens_ratio={lay.swa_ratio}",
           f"DSV4 memory calculation: unified=False, unified_fp8=False, dspark_draft_bf16=False, bytes_per_full_token="
           f"{lay.bytes_per_full_token:.2f}, available_bytes={z.available_bytes / g:.2f} GB, c128_state_fixed="
           f"{z.fixed_bytes / g:.2f} GB, c2_state_fixed=0.00 GB, swa_fixed=0.00 GB, swa_ring_fixed=0.00 GB, "
           f"c4_state_fixed=0.00 GB, full_token={z.max_total_num_tokens}",
           f"DSV4 pool sizes: full={z.max_total_num_tokens}, swa={z.swa_tokens}, c4={z.c4_tokens}, "
           f"c128={z.c128_tokens}, c4_state={z.c4_state}, c128_state=0",
           f"Initialize DeepSeekV4TokenToKVPool with max_num_reqs={z.max_running_requests} swa_size={z.swa_tokens} "
           f"c4_size={z.c4_tokens} c4_logical_size={z.c128_tokens * 32} c128_size={z.c128_tokens} c4_state_pool_size="
           f"{z.c4_state} c128_state_pool_size={z.c128_state} unified=False unified_fp8=False",
           "DSV4 SWA storage: worker=target, storage=paged, paged_allocator=True",
           f"max_total_num_tokens={z.max_total_num_tokens}, chunked_prefill_size={chunk}, max_prefill_tokens="
           f"{DEFAULT_MAX_PREFILL_TOKENS}, max_running_requests={z.max_running_requests}, context_len={L}"]
    lines = [f"SGLang would log: {line}" for line in log]
    lines += [f"The c128 compressor state comes off the {pool:,} B budget first: ({lay.mrr_per_worker} + 1) request "
              f"slots x {RING[128]} rows, {format_bytes(z.fixed_bytes)}; max_total_num_tokens = "
              f"{z.available_bytes - z.fixed_bytes:,} B / {lay.bytes_per_full_token:,.2f} B per full token (c4 and "
              f"c128 entries + {lay.swa_ratio:g} x {lay.bytes_per_swa_token:,.2f} B per SWA slot), floored to the "
              f"{lay.page}-token page.",
              f"Requests of {L:,} tokens per replica: " + ", ".join(f"{k} {v:,}" for k, v in limits.items())
              + f"; the {binding} binds."]
    table = _table(pools)
    figures = SglangFigures(pool, z.available_bytes, lay.bytes_per_full_token, z.max_total_num_tokens, z.swa_tokens,
                            z.max_running_requests, None, None, lay.page, lay.kv_dtype, chunk, tuple(pools), binding,
                            limits, V4PoolFigures(z.c4_tokens, z.c128_tokens, z.c4_state, z.c128_state, z.fixed_bytes))
    notes = (f"the pools as DeepSeekV4TokenToKVPool allocates them, {format_bytes(sum(x['bytes'] for x in pools))} in "
             f"all; DSV4PoolConfigurator priced them at {format_bytes(z.available_bytes)} (it counts each page's "
             "bytes per token, without the padding pages and the state pools' spare rows)",)
    if z.user_tokens_above_profile:
        notes += (f"max_total_tokens={settings.max_total_tokens} is larger than the profiled value; SGLang uses "
                  "the profiled value",)
    return Fit(z.max_total_num_tokens // lay.page, min(limits.values()), z.max_total_num_tokens / L,
               z.max_total_num_tokens, tuple(lines), table, figures, log_line=log[-1], notes=notes)
