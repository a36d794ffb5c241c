"""TensorRT-LLM 1.1's KV-cache arithmetic (PyTorch backend), each rule with its file and function. Torch-free.

Files (``tensorrt_llm/`` of the 1.1 sources; the C++ under ``cpp/tensorrt_llm/batch_manager/``):

* ``_torch/pyexecutor/_util.py`` ``KvCacheCreator``: ``_get_token_num_for_estimation`` (the profiling run's temporary
  cache), ``configure_kv_cache_capacity`` (peak memory = torch's peak + what is used outside torch),
  ``_cal_max_memory`` (``(total - peak + temporary) x fraction``), then ``max_tokens = memory // kv size per token``;
* ``_torch/pyexecutor/resource_manager.py`` ``KVCacheManager``: ``get_cache_size_per_token`` (the creator's bytes per
  token: ``head_dim x kv_heads // tp`` per layer, K and V, or MLA's ``kv_lora_rank + qk_rope_head_dim`` once),
  ``get_cache_bytes_per_token`` (the pool's: ``ceil(kv_heads / tp)`` heads per layer), ``calculate_max_num_blocks``
  (``ceil(max_tokens / tokens_per_block)`` primary blocks, ``int((host_cache_size / bpt) / tokens_per_block)``
  secondary ones), ``_validate_and_adjust_attention_windows`` (a window, and so max_seq_len, longer than the pool's
  tokens is shortened to them);
* ``kvCacheManager.cpp`` ``BaseKVCacheManager::calculateMaxNumBlocks`` (variable sliding windows: the memory split
  over window sizes in proportion to window x bytes per token, blocks rounded up per window) and
  ``KVCacheManager::allocatePools`` (its log lines).
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass

from ...units import GIB

#: the ranks whose rounding changed: 1.1 rounds the primary blocks up (a 1.1.0rc3 log: 86,711 tokens -> 2,710 blocks
#: of 32 = 86,720), the later KVCacheManager floors them (int(max_tokens // tokens_per_block))
ROUNDING = "ceil"


def f32(x: float) -> float:
    """A value as a C++ float holds it (the fraction passes through KvCacheConfig's float: 0.9 is read back as
    0.8999999761581421, as the log prints it)."""
    return struct.unpack("f", struct.pack("f", x))[0]


#: kvcalc's storage formats -> TensorRT-LLM's cache dtype (kv_cache_config.dtype: auto = the model's, fp8, nvfp4;
#: DeepSeek's fp8 precision is a plain fp8 row here), and back
DTYPE_OF_FORMAT = {"bf16": "bf16", "fp16": "fp16", "fp8_e4m3": "fp8", "fp8_ds_mla": "fp8", "nvfp4": "nvfp4"}
FORMAT_OF_DTYPE = {"bf16": "bf16", "fp16": "fp16", "fp8": "fp8_e4m3", "nvfp4": "nvfp4"}

#: bytes per element of the cache dtypes TensorRT-LLM's KV cache takes (kv_cache_config.dtype auto = the model's
#: dtype; fp8; nvfp4: 4-bit values, one fp8 scale per 16)
DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp8": 1}


@dataclass(frozen=True)
class Layer:
    """One attention layer as the KV-cache manager sees it: K and V heads of ``head_dim`` (kv_factor 2), or MLA's one
    latent row of ``head_dim`` = kv_lora_rank + qk_rope_head_dim (kv_factor 1, one head on every rank)."""

    kv_heads: int
    head_dim: int
    mla: bool = False
    window: int | None = None  # the layer's attention window (max_attention_window), None: max_seq_len


def creator_bytes_per_token(layers: list[Layer], dtype: str, tp: int) -> int:
    """``KVCacheManager.get_cache_size_per_token`` (what KvCacheCreator turns bytes into tokens with): per layer
    ``2 x (head_dim x kv_heads // tp)`` elements (MLA: ``kv_lora_rank + qk_rope_head_dim``, not split), times 2 B for
    bf16 / fp16, 1 for fp8; nvfp4 ``ceil(e / 2) + ceil(e / 16)``. Its config holds one head count and head size for
    every layer, which :func:`uniform` checks."""
    e = 0
    for layer in layers:
        e += layer.head_dim if layer.mla else 2 * (layer.head_dim * layer.kv_heads // tp)
    if dtype == "nvfp4":
        return -(-e // 2) + -(-e // 16)
    return e * DTYPE_BYTES[dtype]


def manager_bytes_per_token(layers: list[Layer], dtype: str, tp: int) -> int:
    """``KVCacheManager.get_cache_bytes_per_token`` (what the pool's blocks are made of): per layer kv_factor x
    ``ceil(kv_heads / tp)`` x head_dim elements (MLA: one head, kv_factor 1), in the dtype's bytes; nvfp4 adds one
    fp8 scale per 16 elements (``calculate_scaling_factor_size_bytes``)."""
    e = sum(layer.head_dim if layer.mla else 2 * -(-layer.kv_heads // tp) * layer.head_dim for layer in layers)
    if dtype == "nvfp4":
        return e // 2 + e // 16
    return e * DTYPE_BYTES[dtype]


def effective_max_num_tokens(max_num_tokens: int, max_seq_len: int, max_batch_size: int) -> int:
    """model_engine.py ``_init_max_num_tokens``: max_num_tokens at most max_seq_len x max_batch_size."""
    return min(max_num_tokens, max_seq_len * max_batch_size)


def estimation_tokens(max_num_tokens: int, max_seq_len: int, tokens_per_block: int, overlap: bool,
                      beam: int = 1) -> tuple[int, int]:
    """``KvCacheCreator._get_token_num_for_estimation``: the profiling run's dummy requests, each
    ``min(max_num_tokens, max_seq_len - 1)`` tokens until they sum to max_num_tokens
    (``_create_dummy_context_requests``), each keeping 1 more token (2 with the overlap scheduler) in whole blocks:
    (requests, tokens of the temporary cache)."""
    length = min(max_num_tokens, max(1, max_seq_len - 1))
    extra = 1 + (1 if overlap else 0)
    full, rest = divmod(max_num_tokens, length)
    blocks = full * -(-(length + extra) // tokens_per_block) + (-(-(rest + extra) // tokens_per_block) if rest else 0)
    return full + (1 if rest else 0), blocks * tokens_per_block * beam


def available_memory(total: int, peak: int, temporary: int, fraction: float) -> int:
    """``KvCacheCreator._cal_max_memory``: ``int((total - peak + temporary) x fraction)`` (a float product)."""
    return int((total - peak + temporary) * fraction)


def primary_blocks(max_tokens: int, tokens_per_block: int) -> int:
    """``KVCacheManager.calculate_max_num_blocks``: 1.1 rounds up."""
    return math.ceil(max_tokens / tokens_per_block) if ROUNDING == "ceil" else max_tokens // tokens_per_block


def secondary_blocks(host_cache_size: int | None, bytes_per_token: int, tokens_per_block: int) -> int:
    """``calculate_max_num_blocks``: ``max(0, int((host_cache_size / bpt) / tokens_per_block))``."""
    if not host_cache_size:
        return 0
    return max(0, int((host_cache_size / bytes_per_token) / tokens_per_block))


def window_shares(windows: dict[int, int]) -> dict[int, float]:
    """``BlockManager::calculateWindowSizeToShare``: window w's share of the pool, in float32 as the C++ holds it:
    ``c_w = bpt_w / sum bpt`` then ``c_w x w``, normalised (``windows``: window -> its layers' bytes per token)."""
    total = f32(float(sum(windows.values())))
    c = {w: f32(f32(float(b)) / total) for w, b in windows.items()}
    c = {w: f32(v * f32(float(w))) for w, v in c.items()}
    norm = f32(sum(c.values()))
    return {w: f32(v / norm) for w, v in c.items()}


def window_secondary_blocks(host: int | None, windows: dict[int, int], tokens_per_block: int) -> dict[int, int]:
    """calculateMaxNumBlocks's secondary blocks per window: ``max(0, int32(host x share_w / bpt_w) / tpb)``."""
    if not host:
        return {w: 0 for w in windows}
    return {w: max(0, int(f32(host * share) / windows[w]) // tokens_per_block)
            for w, share in window_shares(windows).items()}


#: the rope types whose factor TensorRT-LLM does not multiply max_position_embeddings by
#: (model_engine.py _infer_max_seq_len_from_config)
ROPE_NOT_SCALED = ("su", "longrope", "llama3", "yarn")


def inferred_max_seq_len(spec) -> int | None:
    """model_engine.py _infer_max_seq_len_from_config: max_position_embeddings, times the rope factor (rounded up)
    unless the rope type is su, longrope, llama3 or yarn."""
    base = spec.max_context
    if base is None:
        return None
    rs = spec.rope_scaling
    if rs is not None and rs.factor is not None and rs.type not in ROPE_NOT_SCALED and rs.factor != 1:
        return math.ceil(base * rs.factor)
    return base


def window_blocks(memory: int, windows: dict[int, int], tokens_per_block: int,
                  max_tokens: int | None) -> dict[int, int]:
    """``BaseKVCacheManager::calculateMaxNumBlocks`` for variable sliding windows: window w takes
    ``uint64(memory x share_w / bpt_w)`` tokens (capped by max_tokens), ``ceil`` to blocks."""
    out = {}
    for w, share in window_shares(windows).items():
        tokens = int(f32(memory * share) / windows[w])
        if max_tokens is not None:
            tokens = min(tokens, max_tokens)
        out[w] = -(-tokens // tokens_per_block)
    return out


def gib(n: int | float) -> str:
    """A byte count as TensorRT-LLM prints GiB (``%0.2f`` of bytes / 2^30)."""
    return f"{n / GIB:.2f}"


def mamba_state_bytes(conv_dim: int, conv_kernel: int, heads: int, head_dim: int, state_size: int, tp: int,
                      dtype_bytes: int = 2) -> int:
    """MambaCacheManager (``_torch/pyexecutor/mamba_cache_manager.py``): one request slot of one layer on a rank:
    conv ``[conv_dim / tp, d_conv - 1]`` in the model dtype and ssm ``[heads / tp, head_dim, d_state]`` in
    mamba_ssm_cache_dtype (auto: the model dtype, ``validate_and_set_mamba_ssm_cache_dtype``); both must divide by
    tp (its asserts)."""
    return (conv_dim // tp * (conv_kernel - 1) + heads // tp * head_dim * state_size) * dtype_bytes
