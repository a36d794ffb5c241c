"""kvcalc cache kinds -> the layer specs vLLM 0.33 registers for them (``v1/kv_cache_interface.py``), and the
cache block size the backends agree on."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from ...errors import KvcalcError, quote
from ...formats import FORMATS, StorageFormat
from ...specs import (
    CacheSpec,
    ChunkedAttention,
    CompressedMLA,
    CompressorState,
    FullAttention,
    GatedDeltaNetState,
    IndexerCache,
    KDAState,
    Mamba1State,
    Mamba2State,
    MLALatent,
    RecurrentState,
    SlidingWindowAttention,
    SlidingWindowMLA,
)
from .defaults import (FLASH_ATTENTION_BLOCK, FLASHINFER_MLA_BLOCK, FLASHMLA_BLOCK, INDEXER_DTYPES, V4_BLOCK,
                       V4_PAGE_ALIGNMENT, V4_PLAIN_ALIGNMENT, V4_STATE_BLOCK, V4_STATE_BLOCK_DEFAULT, V4_SWA_BLOCK, VERSION, Settings)
from .hybrid import align_hybrid, state_blocks

@dataclass(frozen=True)
class LayerSpec:
    """One cache of one model layer as vLLM registers it (a "layer" of the KV-cache planner)."""

    layer: int  # the model's layer index
    component: str  # the kvcalc component it stores
    spec: str  # vLLM's class name
    base: str  # uniform-type base: layers of one base and block size can share a group
    block_size: int  # tokens per block
    tokens_per_state: int  # tokens per stored entry (compress ratio; 1 otherwise)
    state_bytes: int  # bytes of one stored entry (all heads)
    alignment: int  # page padded up to a multiple of this (1: none)
    window: int | None  # sliding window in tokens (None: every token)
    format: str  # storage format of the entries
    padded_page: int | None = None  # MambaSpec.page_size_padded: the state page padded to the attention page
    state_blocks: int | None = None  # MambaSpec: blocks a request holds whatever its length
    chunk: int | None = None  # ChunkedLocalAttentionSpec.attention_chunk_size

    @property
    def entries_per_block(self) -> int:
        return 1 if self.state_blocks is not None else self.block_size // self.tokens_per_state

    @property
    def real_page_bytes(self) -> int:
        return self.entries_per_block * self.state_bytes

    @property
    def page_bytes(self) -> int:
        if self.padded_page is not None:
            return self.padded_page
        return -(-self.real_page_bytes // self.alignment) * self.alignment

    def key(self) -> tuple:
        """Specs with equal keys merge (KVCacheSpec.merge requires equal fields)."""
        return (self.spec, self.block_size, self.tokens_per_state, self.state_bytes, self.alignment, self.window,
                self.format, self.padded_page, self.state_blocks, self.chunk)

    def uniform_key(self) -> tuple:
        """Specs with equal keys are one uniform type (UniformTypeKVCacheSpecs.is_uniform_type: equal
        block sizes, one registered base type, for sliding windows the same window, for chunked local attention
        the same chunk: is_uniform_with_collection)."""
        return (self.base, self.block_size, self.window if self.base != "full" else None, self.chunk)

    def blocks_per_request(self, max_model_len: int, in_flight: int) -> int:
        """FullAttentionSpec.max_memory_usage_bytes / page, or SlidingWindowSpec.
        max_admission_blocks_per_request (+1: the window may start mid-block; in_flight: out-of-window
        blocks are freed only once the tokens in flight are processed), or ChunkedLocalAttentionSpec's
        (one chunk plus the tokens in flight, no +1: a chunk starts on a block boundary), or MambaSpec's fixed
        count."""
        if self.state_blocks is not None:
            return self.state_blocks
        if self.chunk is not None:
            return -(-min(self.chunk + in_flight, max_model_len) // self.block_size)
        if self.window is None:
            return -(-max_model_len // self.block_size)
        tokens = min(self.window - 1 + in_flight, max_model_len)
        return -(-tokens // self.block_size) + 1


#: architectures built on model_executor/models/qwen2.py Qwen2Model, which refuses a sliding window in only some
#: layers
QWEN2_MODEL_ARCHS = frozenset({"Qwen2ForCausalLM", "Qwen3ForCausalLM"})


# ---- kvcalc cache kinds -> vLLM layer specs ----------------------------------------------------------------
@dataclass(frozen=True)
class _Ctx:
    kv: StorageFormat  # the precision's format for the main cache
    block_size: int  # cache_config.block_size
    settings: Settings
    tp: int = 1
    state_page: int | None = None  # cache_config.mamba_page_size_padded
    state_blocks: dict | None = None  # component -> MambaSpec blocks per request

    @property
    def v4_alignment(self) -> int:
        return V4_PAGE_ALIGNMENT if self.kv.name == "fp8_ds_mla_v4" else V4_PLAIN_ALIGNMENT


def _full(c: FullAttention, fmt, ctx: _Ctx, layer: int) -> LayerSpec:
    if fmt.name.startswith("lmdeploy_"):
        raise KvcalcError(f"{{{{engine}}}} vllm: {fmt.name} is LMDeploy's KV layout (scale and zero point per head); vLLM "
                          f"{VERSION} has no such KV dtype (its int8/int4_per_token_head keep one fp32 scale); use "
                          "the exact engine")
    if isinstance(c, ChunkedAttention):
        # model_executor/layers/attention/chunked_local_attention.py ChunkedLocalAttention.get_kv_cache_spec: the
        # cache block size, K and V per KV head like full attention; its own base type (not FullAttentionSpec)
        return LayerSpec(layer, c.name, "ChunkedLocalAttentionSpec", "chunked", ctx.block_size, 1, c.entry_bytes(fmt),
                         1, None, fmt.name, chunk=c.chunk)
    window = c.window if isinstance(c, SlidingWindowAttention) else None
    return LayerSpec(layer, c.name, "SlidingWindowSpec" if window else "FullAttentionSpec",
                     "sliding" if window else "full", ctx.block_size, 1, c.entry_bytes(fmt), 1, window, fmt.name)


def _mla(c: MLALatent, fmt, ctx: _Ctx, layer: int) -> LayerSpec:
    # model_executor/layers/attention/mla_attention.py MLAAttention.get_kv_cache_spec: one latent row,
    # state_content_bytes 656 for fp8_ds_mla, no alignment
    return LayerSpec(layer, c.name, "MLAAttentionSpec", "full", ctx.block_size, 1, c.entry_bytes(fmt), 1, None,
                     fmt.name)


def _indexer(c: IndexerCache, fmt, ctx: _Ctx, layer: int) -> LayerSpec:
    # ``fmt`` is vLLM's indexer format (:func:`stored_format`), not the precision's; V3.2: models/deepseek_v2.py
    # DeepseekV32IndexerCache; V4: models/deepseek_v4/attention.py DeepseekV4IndexerCache with tokens_per_state =
    # compress_ratio and the V4 page alignment
    v4 = c.ratio > 1
    return LayerSpec(layer, c.name, "MLAAttentionSpec", "full", ctx.block_size, c.ratio, c.entry_bytes(fmt),
                     ctx.v4_alignment if v4 else 1, None, fmt.name)


def _v4_window(c: SlidingWindowMLA, fmt, ctx: _Ctx, layer: int) -> LayerSpec:
    # v1/attention/backends/mla/sparse_swa.py DeepseekV4SWACache.get_kv_cache_spec
    return LayerSpec(layer, c.name, "SlidingWindowMLASpec", "sliding_mla", V4_SWA_BLOCK, 1, c.entry_bytes(fmt),
                     ctx.v4_alignment, c.window, fmt.name)


def _v4_compressed(c: CompressedMLA, fmt, ctx: _Ctx, layer: int) -> LayerSpec:
    # models/deepseek_v4/attention.py DeepseekV4Attention.get_kv_cache_spec: tokens_per_state = ratio
    return LayerSpec(layer, c.name, "MLAAttentionSpec", "full", ctx.block_size, c.ratio, c.entry_bytes(fmt),
                     ctx.v4_alignment, None, fmt.name)


def _v4_state(c: CompressorState, fmt, ctx: _Ctx, layer: int) -> LayerSpec:
    # models/deepseek_v4/compressor.py CompressorStateCache.get_kv_cache_spec: a sliding window of
    # span = coff * ratio token slots, each 2 * coff * head_dim fp32 values, in blocks of 4 (ratio 4) or 8
    span, _, coff, dim = c.shape
    ratio = span // coff
    slot = FORMATS[c.dtype].entry_bytes(math.prod(c.shape[1:]), 0, f"component {c.name}")
    return LayerSpec(layer, c.name, "SlidingWindowMLASpec", "sliding_mla", V4_STATE_BLOCK.get(ratio, V4_STATE_BLOCK_DEFAULT),
                     1, slot, ctx.v4_alignment, span, c.dtype)


def _state(c: RecurrentState, fmt, ctx: _Ctx, layer: int) -> LayerSpec:
    # model_executor/layers/mamba/abstract.py MambaBase.get_kv_cache_spec: one page of the layer's whole state,
    # padded to the attention page (cache_config.mamba_page_size_padded), a fixed number of blocks per request
    conv, ssm = c.dtypes(fmt)
    return LayerSpec(layer, c.name, "MambaSpec", "mamba", ctx.block_size, 1, c.fixed_bytes_on_rank(fmt, ctx.tp), 1,
                     None, conv if conv == ssm else f"{conv}+{ssm}", padded_page=ctx.state_page,
                     state_blocks=ctx.state_blocks[c.name])


#: the cache kind (most specific class first) -> the vLLM layer spec it becomes, and the block sizes its
#: backend accepts (None: any multiple of the number given)
#: each cache kind vLLM pages, by exact type (an allow-list: a kind not here is refused, never dropped): the layer
#: spec builder, the kernel block sizes it needs (None: any multiple of the preferred) and the block it prefers
_RULES: dict[type, tuple[object, tuple[int, ...] | None, int]] = {
    **dict.fromkeys((Mamba2State, GatedDeltaNetState, KDAState, Mamba1State), (_state, (), 0)),  # no attention
    # backend: the block size is set by the alignment below
    CompressorState: (_v4_state, (), 0),
    SlidingWindowMLA: (_v4_window, (), 0),
    CompressedMLA: (_v4_compressed, (V4_BLOCK,), V4_BLOCK),
    IndexerCache: (_indexer, None, 0),  # block sizes: by ratio, below
    MLALatent: (_mla, (FLASHMLA_BLOCK,), FLASHMLA_BLOCK),
    **dict.fromkeys((FullAttention, SlidingWindowAttention, ChunkedAttention), (_full, None, FLASH_ATTENTION_BLOCK)),
}
#: the kinds the engine lists (Engine.cache_kinds)
CACHE_KINDS = frozenset(_RULES)


def refuse_kind(comp) -> KvcalcError:
    """The one line refusing a kind vLLM does not page (VllmEngine.refuse_kind)."""
    if comp.kind == "linear_attention":  # MiniMax-Text-01 / M1: vLLM removed them in 0.23
        return KvcalcError(f"{{{{engine}}}} vllm: cache kind 'linear_attention' (component {comp.name}) is not modelled "
                           f"for vLLM {VERSION}, which no longer runs MiniMax-Text-01 / M1 (removed in 0.23); use the "
                           "exact engine")
    return KvcalcError(f"{{{{engine}}}} vllm: cache kind {quote(comp.kind)} (component {comp.name}) is not modelled for "
                       f"vLLM {VERSION}; use the exact engine")


def mla_backend(settings: Settings, quantized: bool, sparse: bool) -> tuple[str, tuple[int, ...] | None, int]:
    """The MLA backend vLLM 0.33 picks by default on the GPU (platforms/cuda.py _get_backend_priorities, the
    first valid entry; rocm.py get_attn_backend_cls), as (its name, the kernel block it needs (None: any multiple
    of the preferred), the block it prefers: backend.py get_preferred_block_size, 16 where it accepts 16):

    * dense MLA on Hopper: FLASH_ATTN_MLA (MultipleOf(16); bf16 / fp16 only), with an fp8 cache FLASHMLA ([64]);
      on Blackwell (major 10) FLASHINFER_MLA ([32, 64]: 32); elsewhere TRITON_MLA (MultipleOf(16));
    * DSA (sparse, with the indexer's [64] on CUDA): FLASH_ATTN_MLA_SPARSE / FLASHMLA_SPARSE (Hopper),
      FLASHMLA_SPARSE / FLASHINFER_MLA_SPARSE (major 10), FLASHINFER_MLA_SPARSE_SM120 (major 12), all multiples
      of 64 with the indexer; on ROCm ROCM_AITER_MLA_SPARSE ([1, MultipleOf(16)], the indexer too): 16."""
    sm = settings.sm_major
    if sparse:
        if sm is None:
            return "ROCM_AITER_MLA_SPARSE", None, FLASH_ATTENTION_BLOCK
        names = {9: "FLASHMLA_SPARSE" if quantized else "FLASH_ATTN_MLA_SPARSE",
                 10: "FLASHINFER_MLA_SPARSE" if quantized else "FLASHMLA_SPARSE", 12: "FLASHINFER_MLA_SPARSE_SM120"}
        if sm not in names:
            raise KvcalcError(f"{{{{engine}}}} vllm: vLLM {VERSION} has no sparse MLA backend for DeepSeek DSA on "
                              f"{settings.arch} (FlashAttention and FlashMLA sparse need compute capability 9 or 10, "
                              "FlashInfer's 9, 10 or 12): \"No valid attention backend found\"")
        return names[sm], (FLASHMLA_BLOCK,), FLASHMLA_BLOCK
    if sm == 9:
        return ("FLASHMLA", (FLASHMLA_BLOCK,), FLASHMLA_BLOCK) if quantized else \
            ("FLASH_ATTN_MLA", None, FLASH_ATTENTION_BLOCK)
    if sm == 10:
        return "FLASHINFER_MLA", (FLASHINFER_MLA_BLOCK,), FLASHINFER_MLA_BLOCK
    return "TRITON_MLA", None, FLASH_ATTENTION_BLOCK


def _rule(comp: CacheSpec, mla: tuple | None = None):
    """The kind's rule (:data:`_RULES`, by exact type); the MLA backend's blocks for a latent and a DSA indexer."""
    rule = _RULES.get(type(comp))
    if rule is None:
        raise refuse_kind(comp)
    fn, sizes, preferred = rule
    if type(comp) is IndexerCache:
        if comp.ratio > 1:
            return fn, (V4_BLOCK,), V4_BLOCK
        return fn, mla[1] if mla else (FLASHMLA_BLOCK,), mla[2] if mla else FLASHMLA_BLOCK
    if type(comp) is MLALatent and mla is not None:
        return fn, mla[1], mla[2]
    return fn, sizes, preferred


def cache_block_size(comps: list[CacheSpec], requested: int | None, mla: tuple | None = None) -> int:
    """cache_config.block_size: the size every backend accepts (platforms/interface.py
    _preferred_block_size_for_backends), or the one asked for if every backend supports it (``mla``: the MLA
    backend, :func:`mla_backend`). A dense MLA latent takes any multiple of 16 asked for: where its preferred
    backend needs more, vLLM falls back to TRITON_MLA (cuda.py: "--block-size ... precluded higher-priority
    backend(s)")."""
    fixed: set[int] = set()
    multiple = 1
    dense = mla is not None and not any(isinstance(c, IndexerCache) for c in comps)
    for comp in comps:
        _, sizes, preferred = _rule(comp, mla)
        if requested is not None and dense and isinstance(comp, MLALatent):
            sizes, preferred = None, FLASH_ATTENTION_BLOCK
        if sizes is None:  # flash attention: any multiple of 16
            multiple = math.lcm(multiple, preferred)
        elif sizes:
            fixed.update(sizes)
    if len(fixed) > 1:
        raise KvcalcError(f"{{{{engine}}}} vllm: the model's caches need incompatible block sizes {sorted(fixed)}")
    if requested is not None:
        # v1/attention/backend.py supports_block_size: with hybrid blocks a block need only be a multiple of the
        # kernel's block ("even if the kernel requires a fixed block_size"); so 128 passes FlashMLA's [64]
        if fixed == {V4_BLOCK} and requested != V4_BLOCK:
            raise KvcalcError(
                f"block_size: vLLM {VERSION} also accepts multiples of {V4_BLOCK} for DeepSeek V4, but kvcalc models its "
                f"compressed and state groups at the {V4_BLOCK}-token block only (the size checked against vLLM's "
                f"planner), got {requested}", param="block_size")
        if fixed and requested % next(iter(fixed)):
            raise KvcalcError(
                f"block_size: vLLM {VERSION}'s backends for this model need a multiple of {sorted(fixed)[0]} tokens "
                f"(their kernel block), got {requested}", param="block_size"
            )
        if requested % multiple:
            raise KvcalcError(
                f"block_size: vLLM {VERSION}'s attention backend needs a multiple of {multiple} tokens, got "
                f"{requested}", param="block_size"
            )
        return requested
    if fixed:
        (size,) = fixed
        if size % multiple:
            raise KvcalcError(f"{{{{engine}}}} vllm: block sizes {size} and multiples of {multiple} do not meet")
        return size
    return multiple


def layer_specs(model, precision, settings: Settings, mtp: bool = False, kv_heads_divisor: int = 1
                ) -> tuple[list[LayerSpec], int]:
    """Every layer spec vLLM registers for ``model`` at ``precision``, in layer order, and the cache block
    size. ``kv_heads_divisor`` is the tensor-parallel size: it splits full-attention heads (checked by the
    caller) and the channels and heads of fixed state."""
    layers = list(model.layers) + (list(model.mtp_layers) if mtp else [])
    used = [model.components[c] for k in dict.fromkeys(layers) for c in model.layer_kinds[k]]
    if model.architecture in QWEN2_MODEL_ARCHS and any(isinstance(c, SlidingWindowAttention) for c in used) \
            and any(type(c) is FullAttention for c in used):
        # model_executor/models/qwen2.py Qwen2Model (Qwen3Model is one): mixed layer types need
        # max_window_layers == num_hidden_layers, which then cannot mix
        raise KvcalcError(f"{{{{engine}}}} vllm: vLLM {VERSION} refuses {model.name}: \"Sliding window for some but all "
                          "layers is not supported\" (a Qwen2 / Qwen3 model whose max_window_layers is less than its "
                          "layers)")
    if any(isinstance(c, CompressedMLA) for c in used) and settings.sm_major not in (None, 9, 10, 12):
        # models/deepseek_v4/nvidia/model.py picks the FlashMLA class (kernels for major 9 or 10, sparse_mla.py),
        # the FlashInfer SM120 class on major 12; nothing checks it at start-up, but no V4 kernel runs elsewhere
        raise KvcalcError(f"{{{{engine}}}} vllm: vLLM {VERSION}'s DeepSeek V4 kernels need compute capability 9, 10 or 12 "
                          f"(FlashMLA sparse, FlashInfer SM120); {settings.arch} has none")
    mla = _mla_of(used, precision, settings)
    block = cache_block_size(used, settings.block_size, mla)
    kv = precision.formats.get("kv") or next(iter(precision.formats.values()))
    states = [c for c in used if isinstance(c, RecurrentState)]
    page, blocks = None, None
    if states:
        if mtp:
            raise KvcalcError(f"{{{{engine}}}} vllm: speculative decoding adds state blocks per draft token "
                              f"(num_speculative_tokens) to {states[0].name}; not modelled with {{{{mtp}}}}")
        block, page = align_hybrid([c for c in used if not isinstance(c, RecurrentState)], states, precision,
                                    settings, block, kv_heads_divisor)
        blocks = state_blocks(states, settings)
    ctx = _Ctx(kv=kv, block_size=block, settings=settings, tp=kv_heads_divisor, state_page=page,
               state_blocks=blocks)
    out = []
    for index, kind in enumerate(layers):
        for cname in model.layer_kinds[kind]:
            comp = model.components[cname]
            if isinstance(comp, FullAttention) and kv_heads_divisor > 1:
                comp = replace(comp, kv_heads=max(1, comp.kv_heads // kv_heads_divisor))
            fn, _, _ = _rule(comp, mla)
            fmt = stored_format(comp, precision, settings, mla) if comp.per_token else \
                precision.formats.get(comp.storage) if isinstance(comp, RecurrentState) else None
            out.append(fn(comp, fmt, ctx, index))
    return out, block


def stored_format(comp: CacheSpec, precision, settings: Settings, mla: tuple | None) -> StorageFormat:
    """The format vLLM 0.33 stores a per-token cache in (``mla``: the MLA backend, :func:`mla_backend`): the DSA
    indexer keys in the engine's indexer dtype whatever the precision, fp8 (132 B) unless mxfp4 is asked for
    (v1/attention/backends/mla/indexer.py DSA_INDEXER_KV_DTYPES, dsa_indexer_uses_fp4); a DSA latent in its
    backend's row (:func:`_dsa_row`); everything else in the precision's format for its role."""
    fmt = precision.formats.get(comp.storage)
    if isinstance(comp, IndexerCache):
        return FORMATS[INDEXER_DTYPES[settings.indexer_dtype]]
    if type(comp) is MLALatent and mla is not None:
        return _dsa_row(mla, fmt, settings)
    return fmt


def stored_formats(model, precision, settings: Settings) -> dict[str, str]:
    """Every per-token cache of ``model`` by component, in the format vLLM stores it (:func:`stored_format`); Mamba
    state keeps the precision's dtypes (mamba_cache_dtype auto); DeepSeek V4's compressor state its own dtype, one
    slot per token of its span (:func:`_v4_state`: a SlidingWindowMLASpec), so that after L tokens it holds
    min(L, span) slots, not a whole ring."""
    from ...estimate import PER_TOKEN

    used = list(model.components.values())
    mla = _mla_of(used, precision, settings)
    out = {}
    for comp in used:
        if comp.per_token and precision.formats.get(comp.storage) is not None:
            out[comp.name] = stored_format(comp, precision, settings, mla).name
        elif isinstance(comp, CompressorState):
            out[comp.name] = f"{comp.dtype}{PER_TOKEN}"
    return out


def _dsa_row(mla: tuple, fmt, settings: Settings):
    """The latent's row as the DSA backend stores it: FlashMLA's and FlashInfer-SM120's fp8_ds_mla (656 B), but a
    plain fp8 row (576 B) for FLASHINFER_MLA_SPARSE (Blackwell, --kv-cache-dtype fp8: mla_attention.py
    keeps "standard fp8") and ROCM_AITER_MLA_SPARSE; FLASHINFER_MLA_SPARSE_SM120 takes no bf16 (its auto is
    fp8_ds_mla: flashinfer_mla_sparse.py)."""
    name = mla[0]
    if name == "FLASHINFER_MLA_SPARSE_SM120" and fmt is not None and fmt.value_bits >= 16:
        raise KvcalcError(f"{{{{engine}}}} vllm: vLLM {VERSION}'s DSA backend on {settings.arch} "
                          "(FLASHINFER_MLA_SPARSE_SM120) stores fp8_ds_mla only and refuses a bf16 cache; use "
                          "{{precision}} fp8")
    if name in ("FLASHINFER_MLA_SPARSE", "ROCM_AITER_MLA_SPARSE") and fmt is not None and fmt.name == "fp8_ds_mla":
        return FORMATS["fp8_e4m3"]
    return fmt


def _mla_of(used: list[CacheSpec], precision, settings: Settings) -> tuple | None:
    """The MLA backend of a model with an MLA latent (not DeepSeek V4's own), else None."""
    latent = next((c for c in used if type(c) is MLALatent), None)
    if latent is None:
        return None
    fmt = precision.formats.get(latent.storage)
    sparse = any(isinstance(c, IndexerCache) and c.ratio == 1 for c in used)
    return mla_backend(settings, fmt is not None and fmt.value_bits < 16, sparse)


def block_outermost(specs: list[LayerSpec]) -> bool:
    """The DeepSeek V4 indexer backend declares block-outermost layouts only (mla/indexer.py, BLHNC/BLNHC);
    every other backend here takes the default layer-outermost one (v1/attention/backends/utils.py)."""
    return any(s.spec == "MLAAttentionSpec" and s.format in INDEXER_DTYPES.values() and s.tokens_per_state > 1
               for s in specs)

