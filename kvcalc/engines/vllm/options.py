"""The vLLM settings a user may set, each with its flag and help, declared once (the command line and the
messages take them from here)."""

from __future__ import annotations

from ..options import Option
from .defaults import (DEFAULT_ASYNC_SCHEDULING, DEFAULT_PREFIX_CACHING, INDEXER_DTYPES, KV_OFFLOADING_BACKENDS,
                       LMCACHE_MODES, VERSION)

TITLE = f"vLLM {VERSION}"
SUMMARY = f"vLLM {VERSION} on CUDA: paged blocks in one shared pool, groups, window admission"

#: the largest block size and step budget kvcalc takes (a typo guard, not a vLLM limit)
MAX_TOKENS_SETTING = 1 << 24

OPTIONS = (
    Option("gpu_memory_utilization", "--gpu-memory-utilization", "Fraction of each GPU's total memory vLLM "
           "may use (vLLM 0.33 default 0.92).", float, minimum=0.0, maximum=1.0),
    Option("block_size", "--block-size", "Tokens per block (default: what vLLM's backends pick; check-log: "
           "from the log).", int, ("capacity", "check-log", "transfer"), minimum=1, maximum=MAX_TOKENS_SETTING),
    Option("max_num_batched_tokens", "--max-num-batched-tokens", "vLLM's per-step token budget (default: "
           "vllm serve's for the GPU: 8192 on H100/H200, 16384 from 160 GiB, 2048 below 70 GiB or A100; "
           "verify: 8192, the fill's chunk; check-log: from the log, else 8192; transfer: sets the in-flight tokens "
           "of the request's reserve).", int, ("capacity", "verify", "check-log", "transfer"), minimum=1,
           maximum=MAX_TOKENS_SETTING),
    Option("max_num_seqs", "--max-num-seqs", "vLLM's cap on requests running at once (default: vllm serve's 1024, "
           "256 below 70 GiB or on A100, capped by --max-num-batched-tokens); workload capacity counts it.", int,
           ("capacity", "transfer"), minimum=1, maximum=MAX_TOKENS_SETTING),
    Option("async_scheduling", "--async-scheduling", "vLLM 0.33 schedules asynchronously by default: two "
           "batches in flight.", bool, ("capacity", "verify", "check-log", "transfer"),
           negative="--no-async-scheduling", cli_default=DEFAULT_ASYNC_SCHEDULING),
    Option("indexer_dtype", "--indexer-dtype", "DeepSeek sparse-indexer cache in vLLM: fp8 (132 B, default) "
           "or mxfp4 (68 B).", str, ("capacity", "transfer"), choices=tuple(INDEXER_DTYPES)),
    Option("prefix_caching", "--prefix-caching", "vLLM's prefix caching (on by default); for Mamba / DeltaNet "
           "state it reserves 2 running blocks plus checkpoint blocks per request, 1 without, and sets the attention "
           "block size (mamba_cache_mode align or none).", bool, ("capacity", "transfer"),
           negative="--no-prefix-caching", cli_default=DEFAULT_PREFIX_CACHING),
    Option("allow_long_max_model_len", "--allow-long-max-model-len", "As vLLM with VLLM_ALLOW_LONG_MAX_MODEL_LEN=1: "
           "plan a max_model_len past the model's derived maximum (vLLM refuses it otherwise).", bool,
           ("capacity", "verify", "transfer"), negative="--no-allow-long-max-model-len", cli_default=False),
    Option("hybrid_kv_cache_manager", "--hybrid-kv-cache-manager", "vLLM's hybrid KV-cache manager (on by default "
           "on CUDA): sliding-window and chunked layers reserve only their window or chunk; "
           "--no-hybrid-kv-cache-manager (vLLM's --disable-hybrid-kv-cache-manager) plans them as full attention "
           "(check-log: from the log's warning).", bool, ("capacity", "verify", "check-log", "transfer"),
           negative="--no-hybrid-kv-cache-manager", cli_default=True),
    Option("gdn_prefill_backend", "--gdn-prefill-backend", "Gated DeltaNet prefill in vLLM: flashinfer "
           "(Hopper's default; 64-token checkpoints) or triton (default: vLLM's choice for --gpu).", str,
           ("capacity", "transfer")),
    # ---- tiers below the GPU (tiers.py)
    Option("kv_offloading_size", "--kv-offloading-size", "vLLM's CPU KV offloading buffer in GiB (2^30 B), the total "
           "over the replica's tp x pp workers; turns offloading on (default backend native: OffloadingConnector's "
           "chunks in one /dev/shm region).", float, ("capacity", "check-log"), minimum=0, maximum=1 << 20),
    Option("kv_offloading_backend", "--kv-offloading-backend", "vLLM's offloading backend, with --kv-offloading-size: "
           "native (default) or lmcache (vLLM 0.33 starts LMCacheMPConnector and does not pass the size on: the "
           "LMCache server's --l1-size-gb, --lmcache-l1-size-gb here, sizes it).", str, ("capacity", "check-log"),
           choices=KV_OFFLOADING_BACKENDS),
    Option("lmcache_mode", "--lmcache-mode", "LMCache's deployment: mp (LMCacheMPConnector, what --kv-offloading-backend "
           "lmcache starts: one LMCache server's L1 for every rank) or in-process (LMCacheConnectorV1 from "
           "--kv-transfer-config, no --kv-offloading-size: each worker its own --lmcache-max-local-cpu-size).", str,
           ("capacity",), choices=LMCACHE_MODES),
    Option("lmcache_chunk_size", "--lmcache-chunk-size", "LMCache's chunk in tokens (LMCACHE_CHUNK_SIZE, the MP "
           "server's --chunk-size; default 256).", int, ("capacity",), minimum=1, maximum=1 << 20),
    Option("lmcache_l1_size_gb", "--lmcache-l1-size-gb", "The LMCache MP server's --l1-size-gb: its CPU pool in GiB "
           "for every rank it serves (the server requires it; no default).", float, ("capacity",),
           minimum=0, maximum=1 << 20),
    Option("lmcache_max_local_cpu_size", "--lmcache-max-local-cpu-size", "In-process LMCache's max_local_cpu_size "
           "(LMCACHE_MAX_LOCAL_CPU_SIZE): each worker's CPU pool in GiB, LMCache's 'GB' (default 5.0).", float,
           ("capacity",), minimum=0, maximum=1 << 20),
    Option("lmcache_max_local_disk_size", "--lmcache-max-local-disk-size", "In-process LMCache's max_local_disk_size "
           "(with local_disk set): each worker's disk tier in GiB (default 0: none).", float, ("capacity",),
           minimum=0, maximum=1 << 30),
    Option("lmcache_save_unfull_chunk", "--lmcache-save-unfull-chunk", "In-process LMCache's save_unfull_chunk: "
           "also store a request's last, partial chunk (off by default).", bool, ("capacity",),
           negative="--no-lmcache-save-unfull-chunk", cli_default=False),
)


def flag(name: str) -> str:
    return next(o.flag for o in OPTIONS if o.name == name)
