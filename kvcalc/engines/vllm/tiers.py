"""vLLM 0.33's tiers below the GPU pool (paths under ``vllm/`` of the 0.33.0 wheel; LMCache's under ``lmcache/``,
:mod:`kvcalc.engines.lmcache`).

``--kv-offloading-size S`` turns offloading on (config/cache.py ``CacheConfig.kv_offloading_size``: "the total buffer
size summed across all TP ranks"); config/vllm.py ``VllmConfig._post_init_kv_transfer_config`` picks the connector:

* backend ``native`` (the default): ``OffloadingConnector`` with ``cpu_bytes_to_use = S * (1 << 30)`` (GiB). Its
  ``CPUOffloadingSpec`` (v1/kv_offload/cpu/spec.py) sizes the tier: a chunk is ``blocks_per_chunk`` GPU blocks (1:
  distributed/kv_transfer/kv_connector/v1/offloading/config.py ``build_offloading_config``), a row holds every
  worker's slice of it side by side, ``worker_kv_bytes_per_block`` each (``kv_cache_tensors[0].size // num_blocks``:
  the widest group's block, kv_cache_planning.py ``_get_kv_cache_bytes_per_block``), rounded up to the page
  (``SharedOffloadRegion.BLOCK_SIZE_ALIGNMENT = mmap.PAGESIZE``, 4096); ``num_chunks = int(cpu_bytes_to_use) //
  row``. The workers are ``parallel_config.world_size`` (tp x pp of one DP engine). A pure-MLA engine of tp only
  keeps one copy (``replicated_layout``: every layer's cache replicated over TP, pp = 1, CUDA or XPU), so a row is
  one worker's block. On CUDA the rows are one mmap region in /dev/shm (v1/kv_offload/cpu/shared_offload_region.py,
  logged "Created mmap file %s (%.2f GB)", bytes / 1e9); elsewhere (ROCm) each worker allocates its own
  ``num_chunks x block`` tensor (v1/kv_offload/cpu/gpu_worker.py). Tokens are vLLM's ``cpu_kv_cache_size_tokens``
  (v1/kv_offload/cpu/common.py ``_kv_cache_size_tokens``): ``num_chunks x max_model_len // chunks per request``, a
  request taking ``cdiv(max_model_len, chunk tokens)`` chunks in each group, a window its window's chunks, a state
  group one.
* backend ``lmcache``: ``LMCacheMPConnector`` and nothing else: "The actual KV storage capacity is managed by the
  standalone LMCache server process, so ``kv_offloading_size`` is not propagated here." The server's
  ``--l1-size-gb`` is one pool for every rank it serves (v1/distributed/config.py), each rank's slice of a chunk an
  object of its own (v1/distributed/api.py ``ObjectKey.kv_rank``; MLA: one per pipeline stage, "Tensor parallel does
  not change the KV caches for MLA models").
* LMCache in process (``LMCacheConnectorV1``, named by ``--kv-transfer-config`` with no offloading size): every
  worker its own ``max_local_cpu_size`` pool and ``max_local_disk_size`` disk tier (MLA: the first rank only,
  ``save_only_first_rank``, v1/cache_engine.py).

Not modelled: ``VLLM_USE_SIMPLE_KV_OFFLOAD=1`` (SimpleCPUOffloadConnector), kv_connector_extra_config's
``block_size`` / ``blocks_per_chunk``, prefill context parallelism, the MP server's L2 adapters, LMCache's layerwise
mode and its paged (P2P, NIXL, io_uring) allocators, LMCache for hybrid models (object groups).
"""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import KvcalcError
from ...pool import GroupKind
from ..base import HostTier
from .. import lmcache as LM
from .defaults import VERSION, check_offloading

#: v1/kv_offload/cpu/shared_offload_region.py SharedOffloadRegion.BLOCK_SIZE_ALIGNMENT = mmap.PAGESIZE (x86-64)
PAGE = 4096

#: the keys each tier adds to capacity's JSON, and what each counts
JSON_KEYS = {
    "cpu_chunks": "native offloading: chunks in the tier, per replica (each chunk row holds every worker's slice, so "
                  "each worker holds as many)",
    "cpu_tokens": "native offloading: vLLM's cpu_kv_cache_size_tokens, per replica (every worker holds its slice of "
                  "the same tokens)",
    "cpu_bytes": "native offloading: host bytes of the replica's tier (vLLM's cpu_kv_cache_size_bytes: chunks x the "
                 "aligned row; on ROCm the workers' tensors, unpadded)",
    "cpu_bytes_per_rank": "native offloading: one worker's slots (the whole single copy for replicated MLA)",
    "cpu_chunk_bytes": "native offloading: one chunk row, every worker's slice, rounded up to 4 KiB",
    "cpu_log_line": "native offloading on CUDA: the line vLLM logs when it creates the region",
    "lmcache_mode": "how LMCache runs: mp (LMCacheMPConnector and its server) or in-process (LMCacheConnectorV1)",
    "lmcache_chunks": "LMCache: whole chunks of the replica's tokens the CPU pool holds (mp: the server's objects / "
                      "the ranks storing; in-process: one worker's pool)",
    "lmcache_tokens": "LMCache: tokens of those chunks (every rank holds its slice of the same tokens)",
    "lmcache_bytes": "LMCache: host bytes the replica's CPU tier takes (mp: the server's L1; in-process: every "
                     "storing worker's pool)",
    "lmcache_chunk_bytes": "LMCache: one rank's object of a chunk, before the 4 KiB alignment",
    "lmcache_disk_chunks": "in-process LMCache's disk tier: whole chunks one worker's disk holds",
    "lmcache_disk_tokens": "in-process LMCache's disk tier: their tokens",
    "lmcache_disk_bytes": "in-process LMCache's disk tier: disk bytes of every storing worker",
}


def host_tiers(cap) -> tuple[HostTier, ...]:
    """The tiers ``cap``'s settings turn on (capacity's answer: its plan, fit and parallel layout)."""
    s = cap.plan.settings
    check_offloading(s)
    out: list[HostTier] = []
    if s.offloading_backend == "native":
        out.append(native_tier(cap))
    if s.lmcache == "mp":
        out.append(lmcache_mp_tier(cap))
    elif s.lmcache == "in-process":
        out += lmcache_in_process_tiers(cap)
    return tuple(out)


# ---- native: OffloadingConnector -> CPUOffloadingSpec ------------------------------------------------------------
@dataclass(frozen=True)
class NativeOffload:
    """CPUOffloadingSpec's figures: ``num_chunks`` rows of ``row`` bytes (every copy's block, 4 KiB-aligned)."""

    cpu_bytes: int  # int(cpu_bytes_to_use)
    bytes_per_block: int  # worker_kv_bytes_per_block
    world: int
    copies: int  # 1 for the replicated MLA layout, else the world
    blocks_per_chunk: int = 1

    @property
    def row(self) -> int:
        return -(-self.bytes_per_block * self.copies * self.blocks_per_chunk // PAGE) * PAGE

    @property
    def num_chunks(self) -> int:
        return self.cpu_bytes // self.row

    @property
    def region_bytes(self) -> int:
        """cpu_kv_cache_size_bytes: num_chunks x the aligned row (the /dev/shm region on CUDA)."""
        return self.num_chunks * self.row


def native_offload(size_gib: float, bytes_per_block: int, world: int, replicated: bool = False,
                   blocks_per_chunk: int = 1) -> NativeOffload:
    """``--kv-offloading-size size_gib`` over ``world`` workers of ``bytes_per_block`` each: cpu_bytes_to_use =
    ``size * (1 << 30)`` (config/vllm.py), ``int()`` of it (spec.py)."""
    return NativeOffload(int(size_gib * (1 << 30)), bytes_per_block, world, 1 if replicated else world,
                         blocks_per_chunk)


#: the layer specs vLLM builds with max_tp_shards=1 (MLA latents, DSA indexers, DeepSeek V4's caches: replicated
#: whole on every TP rank, kv_cache_planning.py _layer_tp_replicas); the plan's pages name them (specs.py)
LATENT_SPECS = frozenset({"MLAAttentionSpec", "SlidingWindowMLASpec"})


def replicated_layout(plan, tp: int, pp: int) -> bool:
    """offloading/config.py build_offloading_config's replicated_layout, from the plan's layer specs: an MLA model
    every cache of which is replicated over TP (kv_tp_replicas == tp), tp > 1, pp = 1, on CUDA or XPU (spec.py
    _uses_shared_region: not ROCm), one node with the mp executor (kvcalc's assumption)."""
    specs = {pg.spec for g in plan.groups for pg in g.pages}
    return tp > 1 and pp == 1 and plan.settings.sm_major is not None and bool(specs) and specs <= LATENT_SPECS


def chunks_per_request(plan, tokens_per_chunk_blocks: int = 1, whole: bool = False) -> int:
    """common.py _kv_cache_size_tokens's chunks per request at max_model_len (``whole``: only the chunks a request's
    whole blocks fill, which is what the connector stores: a partial block has no hash)."""
    L = plan.context
    total = 0
    for g in plan.groups:
        tpc = g.block_size * tokens_per_chunk_blocks
        n = L // tpc if whole else -(-L // tpc)
        if g.kind is GroupKind.STATE:
            n = min(n, 1)
        elif g.kind.local and g.window:
            n = min(n, -(-g.window // tpc))  # SlidingWindowSpec: max(cdiv(w, c), cdiv(w - 1, c)) = cdiv(w, c)
        total += n
    return total


def native_tier(cap) -> HostTier:
    """OffloadingConnector's CPU tier for ``cap`` (see the module docstring)."""
    p, par, s = cap.plan, cap.parallel, cap.plan.settings
    if cap.stages_uneven:
        raise KvcalcError(f"kv_offloading_size: vLLM {VERSION}'s scheduler counts CPU chunks by worker 0's block, and "
                          f"the {par.pp} pipeline stages hold different layer counts, so the workers' slots disagree "
                          "(generate_scheduler_kv_cache_config): not modelled; a pp that divides the layers",
                          param="kv_offloading_size")
    world = par.tp * par.pp
    rep = replicated_layout(p, par.tp, par.pp)
    off = native_offload(s.kv_offloading_size, p.bytes_per_block, world, rep)
    n, block = off.num_chunks, p.settings_json.get("block_size", p.groups[0].block_size)
    per_req = chunks_per_request(p)
    tokens = n * p.context // per_req if per_req else 0
    whole = chunks_per_request(p, whole=True)
    requests = n // whole if whole else 0
    cuda = s.sm_major is not None
    host = off.region_bytes if cuda else world * n * p.bytes_per_block
    per_rank = off.region_bytes if rep else n * p.bytes_per_block
    log = f"Created mmap file /dev/shm/vllm_offload_<engine_id>.mmap ({off.region_bytes / 1e9:.2f} GB)" if cuda \
        and n else None
    mixed = tokens != n * block  # hybrid groups share the chunks; vLLM's metric counts a request's chunks in each
    lines = [f"CPU offloading: vLLM {VERSION} OffloadingConnector, {{{{kv_offloading_size}}}} {s.kv_offloading_size:g} "
             f"GiB = {off.cpu_bytes:,} B over the replica's {world} worker(s): {n:,} chunks of one {block}-token block "
             f"(a row of {off.copies} x {p.bytes_per_block:,} B"
             + (", MLA's single copy: every TP rank holds the same latent" if rep else "")
             + f", 4 KiB-aligned {off.row:,} B) = {tokens:,} tokens"
             + (f" (vLLM's cpu_kv_cache_size_tokens at {p.context:,}: every group's chunks of a request counted)"
                if mixed else "") + "."]
    where = (f"one /dev/shm region of {off.region_bytes:,} B a replica" if cuda else
             f"each worker's own {n * p.bytes_per_block:,} B tensor (no shared region off CUDA)")
    lines.append(f"  Host memory: {where}" + (f", {off.region_bytes * par.dp:,} B for {par.dp} replicas"
                                              if par.dp > 1 and cuda else "")
                 + f"; it holds {requests:,} request(s)' {p.context:,}-token prompts beside the GPU pool's "
                 f"{cap.requests_per_replica:,} (vLLM offloads prompt blocks only; LRU).")
    if cuda and n:
        lines.append(f"  vLLM would log: {log}; /dev/shm must have that free (vLLM refuses: \"Insufficient space in "
                     "/dev/shm for CPU KV offload shared region in /dev/shm\"; docker's default is 64 MB).")
    if n == 0:
        lines.append(f"  {off.cpu_bytes:,} B is less than one row of {off.row:,} B: vLLM offloads nothing.")
    json = {"cpu_chunks": n, "cpu_tokens": tokens, "cpu_bytes": host, "cpu_bytes_per_rank": per_rank,
            "cpu_chunk_bytes": off.row, "cpu_log_line": log}
    return HostTier("vllm-cpu-offloading", tokens, per_rank, "chunk", n, block, p.bytes_per_block, world, host,
                    requests, lines=tuple(lines), json=json,
                    source="vllm v1/kv_offload/cpu/spec.py CPUOffloadingSpec.__init__; config/vllm.py "
                           "_post_init_kv_transfer_config")


# ---- LMCache ---------------------------------------------------------------------------------------------------
def lmcache_per_token(plan) -> int:
    """One token's bytes on one rank, every layer of the stage, as LMCache lays a chunk out (kv_shape: K and V, or
    MLA's one latent): a plan of one full-attention group of full-attention or MLA pages; any other is refused."""
    from .defaults import INDEXER_DTYPES

    pages = [pg for g in plan.groups for pg in g.pages]
    plain = all(pg.spec in ("FullAttentionSpec", "MLAAttentionSpec") and pg.entries_per_block == pg.block_size
                and pg.format not in INDEXER_DTYPES.values() for pg in pages)
    if len(plan.groups) != 1 or plan.groups[0].kind is not GroupKind.FULL or not pages or not plain:
        raise KvcalcError(f"{{{{engine}}}} vllm: LMCache's tier is modelled for models of one full-attention KV cache "
                          f"(full attention or MLA); {plan.model}'s caches form {len(plan.groups)} group(s) "
                          f"({', '.join(sorted({g.kind_name for g in plan.groups}))}; pages "
                          f"{', '.join(sorted({pg.spec for pg in pages}))}): LMCache's object groups for hybrid and "
                          "sparse-attention models are not modelled", param="lmcache_mode")
    g = plan.groups[0]
    return sum(pg.real_page_bytes * pg.count for pg in g.pages) // g.block_size


def _mla(plan) -> bool:
    return any(pg.spec == "MLAAttentionSpec" for g in plan.groups for pg in g.pages)


def lmcache_mp_tier(cap) -> HostTier:
    """The LMCache MP server's L1 (v1/distributed/config.py; LMCacheMPConnector, integration/vllm/
    lmcache_mp_connector.py): one pool for the replica's ranks, an object per rank and chunk."""
    p, par, s = cap.plan, cap.parallel, cap.plan.settings
    per_token = lmcache_per_token(p)
    C = s.lmcache_chunk_size or LM.DEFAULT_CHUNK_SIZE
    block = p.groups[0].block_size
    if C % block:  # lmcache_mp_connector.py LMCacheMPConnector.__init__ (scheduler role)
        raise KvcalcError(f"lmcache_chunk_size: LMCache refuses it: LMCache chunk size {C} must be a multiple of group "
                          f"0 tokens_per_block {block}", param="lmcache_chunk_size")
    ranks = par.pp if _mla(p) else par.tp * par.pp  # lmcache_mp_connector.py extract_world_size_and_kv_rank
    if s.lmcache_l1_size_gb is None:
        obj = per_token * C
        raise KvcalcError(
            f"lmcache_l1_size_gb: with the lmcache backend vLLM {VERSION} does not pass {{{{kv_offloading_size}}}} on "
            "(LMCacheMPConnector; \"The actual KV storage capacity is managed by the standalone LMCache server "
            f"process\"): the server's --l1-size-gb sizes the tier, and the server requires it. Give it here; each "
            f"{C}-token chunk takes {ranks} x {LM.aligned(obj):,} B of it", param="lmcache_l1_size_gb")
    # the server's default lazy allocator (--l1-use-lazy) pins its final size in 64 MiB steps, rounded up
    # (v1/memory_allocators/lazy_memory_allocator.py: _final_size = align_to(final_size, PIN_CHUNK_SIZE))
    pool = LM.ChunkPool(LM.aligned(LM.gib_bytes(s.lmcache_l1_size_gb), LM.LAZY_PIN_CHUNK), C, per_token, ranks)
    requests = pool.requests(p.context)
    ignored = (f"vLLM does not pass {{{{kv_offloading_size}}}} {s.kv_offloading_size:g} GiB on"
               if s.kv_offloading_size is not None else "no offloading size")
    lines = (f"LMCache {LM.VERSION} CPU tier (MP server, LMCacheMPConnector; {ignored}): the server's L1 "
             f"{{{{lmcache_l1_size_gb}}}} {s.lmcache_l1_size_gb:g} GiB = {pool.pool_bytes:,} B holds {pool.objects:,} "
             f"objects of {pool.object_bytes:,} B ({C} tokens of one rank, 4 KiB-aligned {pool.object_slot:,} B), "
             f"{ranks} per chunk: {pool.chunks:,} chunks = {pool.tokens:,} tokens.",
             f"  It holds {requests:,} request(s)' {p.context:,}-token prefix (whole chunks only), beside the GPU pool's "
             f"{cap.requests_per_replica:,}; the server starts evicting at {LM.EVICTION_TRIGGER_WATERMARK:.0%} of L1 "
             f"(--eviction-trigger-watermark), {LM.EVICTION_RATIO:.0%} at a time"
             + (f"; pp {par.pp}: every stage's objects counted at the fullest stage's size" if par.pp > 1 else "")
             + ".")
    json = {"lmcache_mode": "mp", "lmcache_chunks": pool.chunks, "lmcache_tokens": pool.tokens,
            "lmcache_bytes": pool.pool_bytes, "lmcache_chunk_bytes": pool.object_bytes}
    return HostTier("lmcache-l1", pool.tokens, pool.pool_bytes // ranks, "chunk", pool.chunks, C, pool.object_bytes,
                    ranks, pool.pool_bytes, requests, lines=lines, json=json,
                    source="lmcache v1/distributed/config.py parse_args_to_config; vllm config/vllm.py "
                           "_post_init_kv_transfer_config")


def lmcache_in_process_tiers(cap) -> list[HostTier]:
    """In-process LMCache (LMCacheConnectorV1): each storing worker's CPU pool (local_cpu_backend.py) and disk tier
    (local_disk_backend.py)."""
    p, par, s = cap.plan, cap.parallel, cap.plan.settings
    per_token = lmcache_per_token(p)
    C = s.lmcache_chunk_size or LM.DEFAULT_CHUNK_SIZE
    mla = _mla(p)
    # MLA: save_only_first_rank (cache_engine.py): the worker whose id is metadata.py's first_rank 0, the global rank
    # (integration/vllm/utils.py worker_id = parallel_config.rank): one worker of the replica, whatever the pp
    storing = 1 if mla else par.tp * par.pp
    cpu_gib = LM.DEFAULT_MAX_LOCAL_CPU_SIZE if s.lmcache_max_local_cpu_size is None else s.lmcache_max_local_cpu_size
    unfull = s.lmcache_save_unfull_chunk
    out = []
    for medium, gib, label, key in (("host memory", cpu_gib, "lmcache_max_local_cpu_size", "lmcache"),
                                    ("disk", s.lmcache_max_local_disk_size or 0.0, "lmcache_max_local_disk_size",
                                     "lmcache_disk")):
        pool = LM.ChunkPool(LM.gib_bytes(gib), C, per_token)
        if medium == "disk" and not pool.pool_bytes:
            continue
        if medium == "host memory" and not pool.pool_bytes:  # v1/storage_backend/__init__.py
            out.append(HostTier("lmcache-cpu", 0, 0, "chunk", 0, C, pool.object_bytes, storing, 0, 0,
                                lines=("LMCache in process: no CPU tier (\"No cpu memory is allocated as "
                                       "max_local_cpu_size <= 0\").",),
                                json={"lmcache_mode": "in-process", "lmcache_chunks": 0, "lmcache_tokens": 0,
                                      "lmcache_bytes": 0, "lmcache_chunk_bytes": pool.object_bytes}))
            continue
        requests = pool.requests(p.context, unfull)
        what = "CPU pool" if medium == "host memory" else "disk tier"
        lines = [f"LMCache {LM.VERSION} {what} (in process, LMCacheConnectorV1, each worker its own): {{{{{label}}}}} "
                 f"{gib:g} GiB = {pool.pool_bytes:,} B holds {pool.objects:,} chunks of {pool.object_bytes:,} B "
                 f"({C} tokens of the rank, 4 KiB-aligned {pool.object_slot:,} B) = {pool.tokens:,} tokens a worker, "
                 f"{storing} worker(s) storing: {storing * pool.pool_bytes:,} B of {medium}.",
                 f"  It holds {requests:,} request(s)' {p.context:,}-token prefix beside the GPU pool's "
                 f"{cap.requests_per_replica:,} ("
                 + ("the last, partial chunk too, save_unfull_chunk" if unfull else
                    "whole chunks: the last, partial one is not stored") + ")."]
        if mla and medium == "host memory":
            lines.append("  MLA: only the first rank stores (save_only_first_rank); LMCache caps that pool at the "
                         "host's available memory less reserve_local_cpu_size, which kvcalc does not know.")
        json = {f"{key}_chunks": pool.chunks, f"{key}_tokens": pool.tokens, f"{key}_bytes": storing * pool.pool_bytes}
        if medium == "host memory":
            json = {"lmcache_mode": "in-process", **json, "lmcache_chunk_bytes": pool.object_bytes}
        out.append(HostTier("lmcache-cpu" if medium == "host memory" else "lmcache-disk", pool.tokens, pool.pool_bytes,
                            "chunk", pool.chunks, C, pool.object_bytes, storing, storing * pool.pool_bytes, requests,
                            medium=medium, lines=tuple(lines), json=json,
                            source=f"lmcache v1/storage_backend/local_{'cpu' if medium == 'host memory' else 'disk'}"
                                   "_backend.py"))
    return out
