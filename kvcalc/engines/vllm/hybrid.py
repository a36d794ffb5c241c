"""Hybrids with Mamba-style state in vLLM 0.33: the attention block grown to hold a state page
(``platforms/interface.py::_align_hybrid_block_size``) and the state blocks a request holds
(``MambaSpec.max_memory_usage_bytes``)."""

from __future__ import annotations

import math
from dataclasses import replace

from ...specs import CacheSpec, FullAttention, GatedDeltaNetState, Mamba2State, MLALatent, RecurrentState
from .defaults import FLASH_ATTENTION_BLOCK, FLASHINFER_GDN_CHECKPOINT_ALIGNMENT, FLASHMLA_BLOCK, Settings

def _checkpoint_alignment(comp: RecurrentState, settings: Settings) -> int | None:
    """MambaBase.get_prefill_checkpoint_alignment in align mode: the Qwen gated DeltaNet layer with FlashInfer's
    prefill exports checkpoints on a 64-token grid; Mamba-1, Mamba-2 and KDA layers declare none."""
    if type(comp) is GatedDeltaNetState and settings.gdn_prefill_backend == "flashinfer":
        return FLASHINFER_GDN_CHECKPOINT_ALIGNMENT
    return None


def state_blocks(comps: list[RecurrentState], settings: Settings) -> dict[str, int]:
    """Blocks a request holds in each state component's group (MambaSpec.max_memory_usage_bytes / page):
    align mode (prefix caching) ``2 + num_prefill_checkpoint_blocks``, else 1 (no speculative decoding).
    Checkpoint blocks: 1 for Mamba-2 (mamba_mixer2.py get_kv_cache_spec), 1 for the gated DeltaNet when every
    state layer exports checkpoints (qwen_gdn_linear_attn.py _exports_checkpoints), else 0."""
    if not settings.prefix_caching:
        return {c.name: 1 for c in comps}
    every = all(_checkpoint_alignment(c, settings) is not None for c in comps)
    out = {}
    for c in comps:
        ckpt = 1 if isinstance(c, Mamba2State) or (type(c) is GatedDeltaNetState and every) else 0
        out[c.name] = 2 + ckpt
    return out


def align_hybrid(attn: list[CacheSpec], states: list[RecurrentState], precision, settings: Settings,
                  block: int, tp: int) -> tuple[int, int | None]:
    """platforms/interface.py _align_hybrid_block_size: the attention block grows until one attention page
    holds the largest state page, which is then padded to it. Returns (block size, padded state page)."""
    state_page = max(c.fixed_bytes_on_rank(precision.formats.get(c.storage), tp) for c in states)
    main = next((c for c in attn if isinstance(c, (FullAttention, MLALatent))), None)
    if main is None or state_page == 0:
        return block, None
    if isinstance(main, FullAttention) and tp > 1:
        main = replace(main, kv_heads=main.kv_heads_on_rank(tp))
    one_token = main.entry_bytes(precision.formats.get(main.storage))
    mla = isinstance(main, MLALatent)
    kernel = max(FLASHMLA_BLOCK if mla else FLASH_ATTENTION_BLOCK, block)
    backends = math.lcm(*{FLASHMLA_BLOCK if isinstance(c, MLALatent) else FLASH_ATTENTION_BLOCK
                         for c in attn if isinstance(c, (FullAttention, MLALatent))})
    if mla:  # TRTLLM / FlashInfer MLA decode kernels: manager blocks a multiple of 128
        kernel = max(kernel, 128)
    if settings.prefix_caching:
        aligns = [_checkpoint_alignment(c, settings) for c in states]
        kernel = math.lcm(kernel, math.lcm(*aligns) if all(a is not None for a in aligns) else 1)
    need = kernel * -(-state_page // (kernel * one_token))
    need = backends * -(-need // backends)
    block = max(block, need)
    page = block * one_token
    return block, (page if page > state_page else None)

