"""The SGLang server arguments a user may set, with SGLang's own flags, declared once (the command line reads
them without loading the engine)."""

from __future__ import annotations

from ..options import Option
from .defaults import HICACHE_MEM_LAYOUTS, MAMBA_STRATEGIES, VERSION

TITLE = f"SGLang {VERSION}"
SUMMARY = (f"SGLang {VERSION} on CUDA: token pools sized from mem_fraction_static, split SWA and Mamba state "
           "pools, max_running_requests")

OPTIONS = (
    Option("mem_fraction_static", "--mem-fraction-static", "SGLang: the fraction of the memory free before the "
           "weights load that weights and KV pools may take (default: SGLang's heuristic for the GPU and layout).",
           float, minimum=0.0001, maximum=1),
    Option("page_size", "--page-size", "SGLang: tokens per page (default 1 on Hopper; DeepSeek DSA and V4 get 64 "
           "and 256 whatever is asked, as SGLang's model overrides set them).", int, minimum=1, maximum=1 << 20,
           commands=("capacity", "verify", "transfer")),
    Option("swa_full_tokens_ratio", "--swa-full-tokens-ratio", "SGLang: SWA-pool tokens per full-pool token for "
           "split sliding-window pools (default 0.8; 0.1 for DeepSeek V4).", float, minimum=0.0001, maximum=1,
           commands=("capacity", "verify")),
    Option("max_running_requests", "--max-running-requests", "SGLang: the running-request cap (default: from the "
           "token pool, 2048 to 4096; 256 for DeepSeek V4; verify: the batch).", int, minimum=1, maximum=1 << 24,
           commands=("capacity", "verify")),
    Option("max_total_tokens", "--max-total-tokens", "SGLang: a cap on max_total_num_tokens.", int, minimum=1,
           maximum=1 << 40),
    Option("enable_dp_attention", "--enable-dp-attention", "SGLang: with --dp N, attention data parallelism over "
           "the tp ranks (attention tp = tp / N; the N ranks are the tp GPUs).", bool,
           negative="--no-enable-dp-attention", cli_default=False),
    Option("mamba_full_memory_ratio", "--mamba-full-memory-ratio", "SGLang: Mamba-state to KV memory ratio "
           "(default 0.9: the state pool gets 0.9 / 1.9 of the budget).", float, minimum=0.0001, maximum=1 << 10),
    Option("allow_overwrite_longer_context_len", "--allow-overwrite-longer-context-len", "As SGLang with "
           "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1: plan a --context past the model's derived context_len "
           "(SGLang refuses it otherwise).", bool, ("capacity", "verify", "transfer"),
           negative="--no-allow-overwrite-longer-context-len", cli_default=False),
    Option("mamba_radix_cache_strategy", "--mamba-radix-cache-strategy", "SGLang: the Mamba state's radix-cache "
           "strategy (default auto: extra_buffer, 5 state slots a running request, for Qwen3-Next / 3.5 and "
           "Nemotron-H with the overlap scheduler; no_buffer, 3 slots, needs --disable-overlap-schedule and page 1).",
           str, ("capacity", "verify", "transfer"), choices=MAMBA_STRATEGIES),
    Option("disable_overlap_schedule", "--disable-overlap-schedule", "SGLang: turn the overlap scheduler off "
           "(extra_buffer then keeps 1 tracking slot, not 2; auto resolves to no_buffer at page 1).", bool,
           ("capacity", "verify", "transfer"), negative="--no-disable-overlap-schedule", cli_default=False),
    Option("disable_radix_cache", "--disable-radix-cache", "SGLang: no prefix cache: 1 Mamba state slot a running "
           "request (with --max-running-requests the state pool holds just those); a split SWA pool is sized from "
           "--max-running-requests; no prefix is shared.", bool, ("capacity", "transfer"),
           negative="--no-disable-radix-cache", cli_default=False),
    Option("max_mamba_cache_size", "--max-mamba-cache-size", "SGLang: Mamba state slots (divided over the "
           "attention-DP ranks) instead of --mamba-full-memory-ratio's share of the budget.", int, minimum=1,
           maximum=1 << 30),
    Option("chunked_prefill_size", "--chunked-prefill-size", "SGLang: tokens per prefill chunk (default: from "
           "the GPU's memory; it sets the default mem_fraction_static, and SGLang refuses one the page size does "
           "not divide).", int, minimum=1, maximum=1 << 24, commands=("capacity", "transfer")),
    # ---- HiCache, the host tier (tiers.py)
    Option("enable_hierarchical_cache", "--enable-hierarchical-cache", "SGLang's HiCache: a host-memory KV pool "
           "per rank beside the GPU's (2 x the device pool by default).", bool, ("capacity", "check-log"),
           negative="--no-enable-hierarchical-cache", cli_default=False),
    Option("hicache_ratio", "--hicache-ratio", "SGLang: the host pool's tokens per device-pool token (default 2.0; "
           "left unset with --hicache-size 0, SGLang 0.5.23 lowers it to fit the host's memory: --host-memory-gib).",
           float, ("capacity", "check-log"), minimum=0.001, maximum=1 << 10),
    Option("hicache_size", "--hicache-size", "SGLang: the host pool of each rank in GB (10^9 B), instead of the "
           "ratio (default 0: the ratio).", int, ("capacity", "check-log"), minimum=0, maximum=1 << 24),
    Option("hicache_mem_layout", "--hicache-mem-layout", "SGLang: the host pool's layout (default page_first); it "
           "moves the bytes, not their count (hybrid Mamba: page_first or page_first_direct).", str,
           ("capacity", "check-log"), choices=HICACHE_MEM_LAYOUTS),
    Option("host_memory_gib", "--host-memory-gib", "kvcalc: the host's available memory in GiB (psutil's available, "
           "or the cgroup's headroom), for SGLang's host-memory check and its auto-sizing (default: not checked).",
           float, ("capacity",), minimum=0.001, maximum=1 << 24),
)
