"""TensorRT-LLM's settings a user may set, by TensorRT-LLM's own names (``tensorrt_llm/llmapi/llm_args.py``
``KvCacheConfig`` and ``BaseLlmArgs``), declared once (the command line reads them without loading the engine)."""

from __future__ import annotations

from ..options import Option

NAME = "trtllm"
VERSION = "1.1"  # the 1.1 PyTorch backend; its block rounding checked on a 1.1.0rc3 start-up log
TITLE = f"TensorRT-LLM {VERSION}"
SUMMARY = (f"TensorRT-LLM {VERSION} (PyTorch backend): the paged pool free_gpu_memory_fraction of what its profiling "
           "run leaves, tokens_per_block, max_tokens, the window cap on max_seq_len, the host (secondary) pool")

_ALL = ("capacity", "check-log")
#: a typo guard on token counts and sizes (not a TensorRT-LLM limit)
MAX_TOKENS_SETTING = 1 << 32

OPTIONS = (
    Option("free_gpu_memory_fraction", "--free-gpu-memory-fraction", "TensorRT-LLM: the fraction of the memory its "
           "profiling run leaves free that the KV cache takes (KvCacheConfig default 0.9, held as a float32).", float,
           _ALL, minimum=0.0, maximum=1.0),
    Option("tokens_per_block", "--tokens-per-block", "TensorRT-LLM: tokens per KV-cache block (KvCacheConfig "
           "default 32).", int, _ALL, minimum=1, maximum=1 << 16),
    Option("max_tokens", "--max-tokens", "TensorRT-LLM: KvCacheConfig.max_tokens, a cap on the cache's tokens "
           "(the smaller of it and the fraction's is used).", int, _ALL, minimum=1, maximum=MAX_TOKENS_SETTING),
    Option("max_batch_size", "--max-batch-size", "TensorRT-LLM: requests scheduled at once (default 2048).", int,
           _ALL, minimum=1, maximum=1 << 24),
    Option("max_num_tokens", "--max-num-tokens", "TensorRT-LLM: tokens in one batch (default 8192); sizes the "
           "profiling run's dummy requests and their temporary cache.", int, _ALL, minimum=1,
           maximum=MAX_TOKENS_SETTING),
    Option("max_seq_len", "--max-seq-len", "TensorRT-LLM: the longest sequence (default: the context asked, else "
           "the model's max_position_embeddings); shortened to the pool's tokens when they are fewer.", int, _ALL,
           minimum=1, maximum=MAX_TOKENS_SETTING),
    Option("host_cache_size", "--host-cache-size", "TensorRT-LLM: KvCacheConfig.host_cache_size, bytes of host "
           "memory for the secondary (offload) pool per rank (default none).", int, _ALL, minimum=0,
           maximum=1 << 50),
    Option("max_gpu_total_bytes", "--max-gpu-total-bytes", "TensorRT-LLM: KvCacheConfig.max_gpu_total_bytes, a "
           "cap on the pool's bytes that only the variable-sliding-window path reads (0: unset).", int, _ALL,
           minimum=0, maximum=1 << 50),
    Option("max_attention_window", "--max-attention-window", "TensorRT-LLM: KvCacheConfig.max_attention_window, "
           "window sizes repeated over the layers, comma-separated (e.g. 128,131072); two or more sizes give a "
           "pool per window (default: every layer at max_seq_len).", str, _ALL),
    Option("peak_memory_gib", "--peak-memory-gib", "TensorRT-LLM: the log's 'Peak memory during memory usage "
           "profiling (torch + non-torch)' GiB, which replaces the weights and reserve (default: weights + "
           "reserve + the profiling run's temporary cache).", float, _ALL, minimum=0.0, maximum=float(1 << 30)),
    Option("device_memory_gib", "--device-memory-gib", "TensorRT-LLM: the device's total memory as it reads it "
           "(the log's 'device total memory' GiB; default: the GPU's).", float, _ALL, minimum=0.0,
           maximum=float(1 << 30)),
    Option("disable_overlap_scheduler", "--disable-overlap-scheduler", "TensorRT-LLM: the overlap scheduler is on "
           "by default; off, each profiling request keeps one extra token instead of two.", bool, _ALL,
           negative="--no-disable-overlap-scheduler", cli_default=False),
    Option("enable_block_reuse", "--enable-block-reuse", "TensorRT-LLM: KV-cache block reuse (on by default): a "
           "shared prefix's whole blocks are held once.", bool, ("capacity",), negative="--no-enable-block-reuse",
           cli_default=True),
)
