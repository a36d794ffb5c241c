"""SGLang 0.5.23's HiCache host pools, the tier below its GPU token pools (paths under ``python/sglang/srt/`` of the
0.5.23 wheel).

With ``--enable-hierarchical-cache`` every rank builds a host pool beside each of its device pools
(mem_cache/hybrid_cache/hybrid_pool_assembler.py: the KV pool; a split SWA pool's own; a hybrid's Mamba state pool),
sized in mem_cache/pool_host/base.py ``HostKVCache.__init__``:

* ``--hicache-size G`` (GB = 10^9 B, per rank): ``int(G * 1e9 // size_per_token)`` tokens (with pp, the smallest of
  the stages: ``sync_fixed_hicache_size``); a hybrid's pools split G by their device bytes (``_split_hicache_size``);
* else ``int(device tokens * hicache_ratio)``, the ratio 2.0 unless given (arg_groups/hicache_hook.py
  ``handle_hicache_ratio_default``); neither given, SGLang lowers it to fit the host (mem_cache/hicache_auto_size.py
  ``auto_size_hicache``): ``min(2.0, int(((available - 10 GiB) // ranks) * 0.8) * 0.95 / device KV bytes)``;
* then one page more: ``pages = tokens // page + 1``, ``tokens = pages * page``.

``size_per_token`` is the device pool's bytes per token on the rank: ``(head_dim + v_head_dim) x heads x layers x
dtype`` (pool_host/mha.py), ``kv_cache_dim x dtype x layers`` (pool_host/mla.py: every TP rank its own MLA copy); a
Mamba slot is the rank's conv and temporal state (pool_host/mamba.py, page 1). The layout moves the bytes, not their
count. Before allocating, each pool's bytes are checked against ``(available - 10 GiB) // ranks on the host``
(``host_memory_budget_bytes``, ``HICACHE_HOST_MEMORY_RESERVE_BYTES``; ranks = tp x pp of the launch); a pool that
does not fit is refused: "Not enough host memory available. Requesting X GB but only have Y GB free. Please reduce
the size of the hierarchical cache." The allocation is logged "Allocating kv hierarchical KV host pool: N tokens,
X GB host memory." (``pool_label`` kv, or full / swa beside a split SWA pool; Mamba: "Allocating X GB host memory for
hierarchical Mamba cache (N state slots, layout=L).").

kvcalc's ``host_memory_gib`` stands for the host's available memory (psutil's available, bounded by the cgroup's
headroom): without it nothing is checked and the auto-sizing cannot run (the ratio stays 2.0, and the lines say so).

Not modelled (refused in one line): DeepSeek V4's and DSA's host pools (memory_pool_host.py, pool_host/dsa.py), the
unified page-envelope host pools, Step-3.5's HiCache overrides of its device pools, page_first_kv_split (Ascend).
"""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import KvcalcError
from ...units import GIB
from ..base import HostTier
from . import sizing as S
from .defaults import DEFAULT_HICACHE_HOST_MEMORY_FRACTION, DEFAULT_HICACHE_RATIO, VERSION, check_hicache

#: mem_cache/pool_host/base.py HICACHE_HOST_MEMORY_RESERVE_BYTES; hicache_auto_size.py _ALLOCATION_SLACK_FRACTION
RESERVE_BYTES = 10 * GIB
SLACK = 0.05
#: the layouts each host pool lays out (pool_host/mha.py, mla.py, mamba.py init_kv_buffer; mamba's page_first_kv_split
#: becomes page_first_direct, hybrid_pool_assembler.py build_hybrid_mamba_stack)
LAYOUTS = {"mha": ("layer_first", "page_first", "page_first_direct", "page_head"),
           "mla": ("layer_first", "page_first", "page_first_direct"),
           "mamba": ("page_first", "page_first_direct", "page_first_kv_split")}

#: the keys the tier adds to capacity's JSON, and what each counts
JSON_KEYS = {
    "hicache_host_tokens": "tokens of one rank's KV host pool (the full pool's, beside split SWA pools)",
    "hicache_host_pages": "its pages (tokens // page + 1)",
    "hicache_host_bytes": "its bytes on one rank (tokens x the device pool's bytes per token)",
    "hicache_ratio": "the ratio SGLang sized the pools with (None: sized by hicache_size)",
    "hicache_swa_host_tokens": "a split SWA pool's host tokens on one rank",
    "hicache_swa_host_bytes": "their bytes",
    "hicache_mamba_host_slots": "a hybrid's Mamba host pool: state slots on one rank",
    "hicache_mamba_host_bytes": "their bytes",
    "hicache_host_bytes_per_rank": "every host pool of one rank",
    "hicache_host_bytes_total": "every host pool of every rank of the replica",
}


def host_pool_tokens(device_tokens: int, page: int, per_token: int, ratio: float | None, size_gb: float = 0) -> int:
    """HostKVCache.__init__'s size: ``int(size_gb * 1e9 // per_token)`` where a size is given, else
    ``int(device_tokens * ratio)``; then ``(n // page + 1) * page``."""
    n = int(size_gb * 1e9 // per_token) if size_gb > 0 else int(device_tokens * ratio)
    return (n // page + 1) * page


@dataclass(frozen=True)
class HostPool:
    """One host pool of one rank: its label, the device pool it mirrors, its size."""

    label: str  # SGLang's pool_label: kv, full, swa; "mamba" for the state pool
    device_units: int  # the device pool's tokens (state slots)
    device_bytes: int  # the device pool's buffers (get_kv_size_bytes / mem_usage_bytes), for the split and auto-size
    per_unit: int  # size_per_token (a slot's bytes)
    page: int
    units: int = 0  # the host pool's tokens (slots), once sized

    @property
    def bytes(self) -> int:
        return self.units * self.per_unit

    def log_line(self, layout: str) -> str:
        """base.py _allocate_host_buffer's line (pool_host/mamba.py MambaPoolHost's for the state pool)."""
        if self.label == "mamba":
            layout = "page_first_direct" if layout == "page_first_kv_split" else layout
            return (f"Allocating {self.bytes / 1e9:.2f} GB host memory for hierarchical Mamba cache ({self.units} "
                    f"state slots, layout={layout}).")
        return (f"Allocating {self.label} hierarchical KV host pool: {self.units} tokens, {self.bytes / 1e9:.2f} GB "
                "host memory.")


def device_pools(cap) -> list[HostPool]:
    """The device pools HiCache mirrors on the fullest rank, from the plan's layout and the fit's figures (every
    other pool layout is refused)."""
    lay = cap.plan.pools.layout
    arch = getattr(cap.model, "architecture", "") or ""
    if not isinstance(lay, S.Layout) or lay.kind == "dsa":
        what = "DeepSeek V4's" if not isinstance(lay, S.Layout) else "DeepSeek DSA's (with the indexer keys)"
        raise KvcalcError(f"enable_hierarchical_cache: {what} HiCache host pools (memory_pool_host.py, "
                          f"pool_host/dsa.py) are not modelled for SGLang {VERSION}", param="enable_hierarchical_cache")
    if arch == "Step3p5ForCausalLM":  # arg_groups/overrides.py: HiCache resets its SWA ratio and pools
        raise KvcalcError(f"enable_hierarchical_cache: SGLang {VERSION} resets swa_full_tokens_ratio to 1.0 and turns "
                          "the hybrid SWA memory off for Step3p5ForCausalLM with hierarchical cache; that device plan is "
                          "not modelled", param="enable_hierarchical_cache")
    f = cap.fit.figures
    by = {}
    for x in f.pools:
        by[x["name"]] = by.get(x["name"], 0) + x["bytes"]
    out = []
    if lay.full_layers:
        kv = sum(b for n, b in by.items() if n.startswith(("KV Cache", "Full KV Cache")))
        per = lay.full_per_token * len(lay.full_layers)
        out.append(HostPool("full" if lay.swa_layers else "kv", f.max_total_num_tokens, kv, per, f.page_size))
    if lay.swa_layers:
        swa = sum(b for n, b in by.items() if n.startswith("SWA KV Cache"))
        per = lay.swa_per_token * len(lay.swa_layers)
        out.append(HostPool("swa", f.swa_max_total_num_tokens, swa, per, f.page_size))
    if lay.state_layers and f.max_mamba_cache_size:
        state = by.get("Mamba conv state", 0) + by.get("Mamba ssm state", 0)
        out.append(HostPool("mamba", f.max_mamba_cache_size, state, lay.state_per_request, 1))
    return out


@dataclass(frozen=True)
class HiCacheSizing:
    pools: tuple[HostPool, ...]
    ratio: float | None  # the ratio used (None: sized by hicache_size)
    auto: str  # how the ratio came: "given", "size" (none: hicache_size), "auto-sized", "unsized" (2.0, no host memory)
    budget: int | None  # a rank's host budget, where the host's memory is known
    ranks: int


def size_hicache(pools: list[HostPool], settings, ranks: int) -> HiCacheSizing:
    """The host pools' sizes (base.py HostKVCache.__init__, hybrid_pool_assembler.py _split_hicache_size,
    hicache_auto_size.py auto_size_hicache) and the refusal where the host cannot hold one (base.py
    _allocate_host_buffer). ``ranks``: the launch's tp x pp on the host."""
    s = settings
    avail = None if s.host_memory_gib is None else int(s.host_memory_gib * GIB)
    budget = None if avail is None else (avail - RESERVE_BYTES) // ranks  # host_memory_budget_bytes
    ratio, how = s.hicache_ratio, "given"
    if s.hicache_size > 0:
        ratio, how = None, "size"
        total = sum(p.device_bytes for p in pools)
        shares = [s.hicache_size if len(pools) == 1 else s.hicache_size * p.device_bytes / total for p in pools]
    elif ratio is None and budget is None:
        ratio, how = DEFAULT_HICACHE_RATIO, "unsized"
    elif ratio is None:  # neither ratio nor size: SGLang lowers the default ratio to fit the host's memory
        budget = int(budget * DEFAULT_HICACHE_HOST_MEMORY_FRACTION)
        device = sum(p.device_bytes for p in pools)
        ratio = min(DEFAULT_HICACHE_RATIO, budget * (1 - SLACK) / device)
        how = "auto-sized"
        if ratio <= 0:
            raise KvcalcError(f"host_memory_gib: {s.host_memory_gib:g} GiB: SGLang refuses to start: No host memory is "
                              "left for HiCache after the 10 GiB reserve; set {{hicache_ratio}} or {{hicache_size}} "
                              "explicitly.", param="host_memory_gib")
    sized = []
    for i, p in enumerate(pools):
        size = shares[i] if how == "size" else 0
        units = host_pool_tokens(p.device_units, p.page, p.per_unit, ratio, size)
        sized.append(HostPool(p.label, p.device_units, p.device_bytes, p.per_unit, p.page, units))
    if budget is not None:
        left = budget
        for p in sized:  # each pool books against what the ones before it left (the auto-size snapshot, or psutil)
            if p.bytes > left:
                raise KvcalcError(f"host_memory_gib: SGLang refuses to start: Not enough host memory available. "
                                  f"Requesting {p.bytes / 1e9:.2f} GB but only have {left / 1e9:.2f} GB free. Please "
                                  "reduce the size of the hierarchical cache. (The "
                                  f"{p.label} host pool of each of {ranks} rank(s), with {{{{host_memory_gib}}}} "
                                  f"{s.host_memory_gib:g} GiB available less SGLang's 10 GiB reserve.)",
                                  param="host_memory_gib")
            left -= p.bytes
    return HiCacheSizing(tuple(sized), ratio, how, budget, ranks)


def host_tiers(cap) -> tuple[HostTier, ...]:
    """HiCache's host pools for ``cap`` (one tier: the KV pool's figures; the SWA and Mamba pools in its lines and
    keys)."""
    s = cap.plan.settings
    check_hicache(s)
    if not s.enable_hierarchical_cache:
        return ()
    pools = device_pools(cap)
    if not pools or pools[0].label == "mamba":
        raise KvcalcError("enable_hierarchical_cache: the planned rank keeps no KV token pool to mirror (pipeline "
                          "stage of state layers only); HiCache is not modelled for it", param="enable_hierarchical_cache")
    for p in pools:
        kind = "mamba" if p.label == "mamba" else ("mha" if cap.plan.pools.layout.kind == "mha" else "mla")
        layout = s.hicache_mem_layout
        if layout not in LAYOUTS[kind]:
            raise KvcalcError(f"hicache_mem_layout: SGLang refuses it for the {p.label} host pool: Unsupported layout: "
                              f"{layout}" + (" (page_first_kv_split is Ascend NPU's layout)"
                                             if layout == "page_first_kv_split" else ""), param="hicache_mem_layout")
    par = cap.parallel
    ranks = par.tp * par.pp
    z = size_hicache(pools, s, ranks)
    return (_tier(cap, z),)


def _tier(cap, z: HiCacheSizing) -> HostTier:
    s, par = cap.plan.settings, cap.parallel
    kv = z.pools[0]
    rank_bytes = sum(p.bytes for p in z.pools)
    replica = rank_bytes * z.ranks
    L = cap.plan.context
    need = L // kv.page * kv.page
    requests = kv.units // need if need else 0
    mamba = next((p for p in z.pools if p.label == "mamba"), None)
    if mamba is not None:
        requests = min(requests, mamba.units)
    if z.auto == "given":
        how = f"{{{{hicache_ratio}}}} {z.ratio:g}"
    elif z.auto == "size":
        how = f"{{{{hicache_size}}}} {s.hicache_size} GB a rank" + (", split by device bytes" if len(z.pools) > 1 else "")
    elif z.auto == "unsized":
        how = f"ratio {z.ratio:g}, SGLang's default"
    else:
        how = f"ratio {z.ratio:.3f}, SGLang's auto-size of 2.0 for {{{{host_memory_gib}}}} {s.host_memory_gib:g} GiB"
    lines = [f"HiCache host pools (SGLang {VERSION}, {how}; layout {s.hicache_mem_layout}, the same bytes): per rank "
             + "; ".join(f"{p.label} {p.units:,} {'slots' if p.label == 'mamba' else 'tokens'} of {p.per_unit:,} B "
                         f"= {p.bytes:,} B (device {p.device_units:,})" for p in z.pools) + "."]
    lines.append(f"  Host memory: {rank_bytes:,} B a rank x {z.ranks} rank(s) = {replica:,} B a replica"
                 + (f", x {par.dp} replicas" if par.dp > 1 and not s.enable_dp_attention else "")
                 + f"; it holds {requests:,} request(s)' {L:,}-token prefix beside the GPU pool's "
                 f"{cap.requests_per_replica:,}.")
    if z.auto == "unsized":
        lines.append("  With neither ratio nor size SGLang lowers the ratio until the pools fit 0.8 of the host's "
                     "available memory less 10 GiB (hicache_auto_size.py): give {{host_memory_gib}} to size and "
                     "check it; planned at 2.0, unchecked.")
    elif z.budget is None:
        lines.append("  SGLang checks each pool against the host's available memory less 10 GiB, divided by the ranks "
                     "on the host: give {{host_memory_gib}} to check it (not checked here).")
    else:
        lines.append(f"  Checked: a rank's budget {z.budget:,} B ({{{{host_memory_gib}}}} less 10 GiB, over {z.ranks} "
                     "rank(s) on one host" + (", x 0.8 to auto-size" if z.auto == "auto-sized" else "") + ").")
        every = replica * par.dp
        if par.dp > 1 and not s.enable_dp_attention and every > int(s.host_memory_gib * GIB) - RESERVE_BYTES:
            lines.append(f"  But SGLang checks one replica's ranks (pool_host/base.py ranks_per_host: the launch's tp x "
                         f"pp): its {par.dp} replicas on this host take {every:,} B together, more than the "
                         f"{{{{host_memory_gib}}}} less 10 GiB; they start, and the host may run out of memory.")
    if cap.stages_uneven:
        lines.append("  The pipeline's stages hold different layer counts: each rank's pool is its own stage's; the "
                     "bytes above are the fullest stage's, an upper bound for the others.")
    lines.append("  SGLang would log: " + " ".join(p.log_line(s.hicache_mem_layout) for p in z.pools))
    json = {"hicache_host_tokens": kv.units, "hicache_host_pages": kv.units // kv.page,
            "hicache_host_bytes": kv.bytes, "hicache_ratio": z.ratio}
    for p in z.pools[1:]:
        unit = "slots" if p.label == "mamba" else "tokens"
        json[f"hicache_{p.label}_host_{unit}"] = p.units
        json[f"hicache_{p.label}_host_bytes"] = p.bytes
    json.update(hicache_host_bytes_per_rank=rank_bytes, hicache_host_bytes_total=replica)
    return HostTier("sglang-hicache", kv.units, rank_bytes, "page", kv.units // kv.page, kv.page, kv.page * kv.per_unit,
                    z.ranks, replica, requests, lines=tuple(lines), json=json,
                    source="sglang srt/mem_cache/pool_host/base.py HostKVCache.__init__, _allocate_host_buffer")


# ---- check-log ---------------------------------------------------------------------------------------------------
def log_rows(facts, p) -> list:
    """The logged HiCache host pools beside their sizes from the logged device pools (logs.py reads the lines): the
    KV (full) pool's tokens and GB, a split SWA pool's tokens, the Mamba pool's slots; the ratio the auto-sizing line
    logged (3 decimals) gives a range of tokens."""
    from ..logs import NOTHING, Quantity, Row

    v, ln = facts.values, facts.lines.get
    keys = ("hicache_kv_tokens", "hicache_kv_gb", "hicache_old_gb", "hicache_swa_tokens", "hicache_mamba_slots")
    lay = p.pools.layout
    if not any(k in v for k in keys) or not isinstance(lay, S.Layout) or lay.kind == "dsa":
        return []
    s = p.settings
    size = s.hicache_size or 0
    auto = v.get("hicache_auto_ratio")
    ratios = (auto - 0.0005, auto + 0.0005) if auto is not None else (s.hicache_ratio or DEFAULT_HICACHE_RATIO,) * 2
    how = (f"hicache_size {size} GB" if size else f"auto-sized ratio {auto:.3f}" if auto is not None
           else f"ratio {ratios[0]:g}")
    T = v.get("kv_tokens", v.get("max_total_num_tokens"))
    rows = []

    def pool(figure, key, device, per, page, split_ok=True):
        if key not in v:
            return None
        if device is None or (size and not split_ok):
            rows.append(Row(figure, Quantity(v[key]), NOTHING, None, ln(key)))
            return None
        lo, hi = (host_pool_tokens(device, page, per, r, size) for r in ratios)
        rows.append(Row(f"{figure} ({how})", Quantity(v[key]), Quantity(lo, hi, collapse=True), lo <= v[key] <= hi,
                        ln(key)))
        return v[key]

    hybrid = bool(lay.swa_layers or lay.state_layers)
    per_kv = lay.full_per_token * len(lay.full_layers)
    label = "full" if lay.swa_layers else "kv"
    pool(f"HiCache {label} host pool (tokens)", "hicache_kv_tokens", T, per_kv, lay.page, not hybrid)
    gb_key = "hicache_kv_gb" if "hicache_kv_gb" in v else ("hicache_old_gb" if "hicache_old_gb" in v else None)
    if gb_key is not None:  # kvcalc's own pool (from the logged device pool), not the log's tokens
        logged = f"{v[gb_key]:.2f}"
        figure = f"HiCache {label} host pool (GB = 10^9 B, 2 decimals)"
        if T is None or (size and hybrid):
            rows.append(Row(figure, Quantity(f"{logged} GB"), NOTHING, None, ln(gb_key)))
        else:
            lo, hi = (f"{host_pool_tokens(T, lay.page, per_kv, r, size) * per_kv / 1e9:.2f}" for r in ratios)
            rows.append(Row(figure, Quantity(f"{logged} GB"), Quantity(f"{lo} GB" if lo == hi else f"{lo} .. {hi} GB"),
                            float(lo) <= float(logged) <= float(hi), ln(gb_key)))
    if lay.swa_layers:
        pool("HiCache swa host pool (tokens)", "hicache_swa_tokens", v.get("swa_tokens"),
             lay.swa_per_token * len(lay.swa_layers), lay.page, False)
    if lay.state_layers:
        pool("HiCache Mamba host pool (state slots)", "hicache_mamba_slots", v.get("mamba_slots"),
             lay.state_per_request, 1, False)
    return rows
