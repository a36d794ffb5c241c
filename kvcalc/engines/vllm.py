"""vLLM's KV-cache planning, pinned to one version and cited file by file (paths under ``vllm/`` of the
0.33.0 wheel). Modelled as it runs on CUDA.

What vLLM does, in the order this module follows it:

1. Every attention layer registers one *layer spec* per cache it keeps (``v1/kv_cache_interface.py``):
   full attention / MLA (``FullAttentionSpec``, ``MLAAttentionSpec``), sliding window
   (``SlidingWindowSpec``, ``SlidingWindowMLASpec``). Each has a block size in tokens and a page: the bytes
   one block of that layer takes (``AttentionSpec.real_page_size_bytes``, padded up to ``alignment`` for the
   DeepSeek V4 specs, ``_apply_alignment_padding``).
2. The planner groups the layer specs (``v1/core/kv_cache_planning.py::get_kv_cache_groups``): one group if
   every spec is equal or of one uniform type; the *packed* grouping when the layout is block-outermost and
   pages differ (DeepSeek V4, ``_get_packed_kv_cache_groups``); otherwise equal-page groups of equal layer
   count, padded (``_get_kv_cache_groups_uniform_page_size``).
3. All groups draw block ids from one shared pool; a block id costs ``bytes_per_block``, the widest group's
   sum of pages (``_get_kv_cache_bytes_per_block``), in every group at once (the groups alias one buffer).
   ``num_blocks = available // bytes_per_block``; block 0 is the null block (``v1/core/block_pool.py``).
4. A request at ``max_model_len`` needs, per group, ``cdiv(L, block)`` blocks (full attention) or
   ``cdiv(min(window - 1 + in_flight, L), block) + 1`` (sliding window, ``SlidingWindowSpec.
   max_admission_blocks_per_request``), ``in_flight = max_concurrent_batches * max_num_batched_tokens``
   (``config/vllm.py::VllmConfig.max_in_flight_tokens``: 2 batches with async scheduling, 1 without).
5. ``Maximum concurrency = num_blocks / blocks per request`` (null block included) and ``GPU KV cache size
   = int(concurrency * L)`` tokens (``v1/core/kv_cache_utils.py::get_max_concurrency_for_kv_cache_config``,
   ``update_kv_cache_capacity``). The start-up check needs ``bytes_per_block * blocks per request`` to fit in
   ``available - bytes_per_block`` (``kv_cache_planning.py::_check_enough_kv_cache_memory``).
6. Hybrids with Mamba-style state (``MambaSpec``): the attention block grows until one attention page holds
   a state page, and the state page is padded to it (``platforms/interface.py::_align_hybrid_block_size``);
   a request holds a fixed number of state blocks per group: 2 running blocks plus checkpoint blocks with
   prefix caching (``mamba_cache_mode`` align), 1 without (``MambaSpec.max_memory_usage_bytes``).

Nothing here branches on a model's name: each kvcalc cache kind maps to the layer specs vLLM builds for it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from ..errors import KvcalcError
from ..formats import FORMATS, StorageFormat
from ..specs import (
    CacheSpec,
    CompressedMLA,
    CompressorState,
    FullAttention,
    GatedDeltaNetState,
    IndexerCache,
    Mamba2State,
    MLALatent,
    RecurrentState,
    SlidingWindowAttention,
    SlidingWindowMLA,
)

NAME = "vllm"
VERSION = "0.33.0"

#: DeepSeek V4 pages are rounded up to a multiple of this with the fp8_ds_mla cache dtype, 512 otherwise
#: (models/deepseek_v4/attention.py DeepseekV4Attention.get_kv_cache_spec; v1/attention/backends/mla/
#: sparse_swa.py DeepseekV4SWACache, "packed_page_alignment: int = 576"; 512 for FlashInfer sparse).
V4_PAGE_ALIGNMENT = 576
V4_PLAIN_ALIGNMENT = 512
#: block sizes (tokens) the backends declare (get_supported_kernel_block_sizes) and the layers fix
FLASH_ATTENTION_BLOCK = 16  # v1/attention/backends/flash_attn.py: MultipleOf(16); config/cache.py DEFAULT_BLOCK_SIZE
FLASHMLA_BLOCK = 64  # v1/attention/backends/mla/flashmla.py [64]; mla/indexer.py (V3.2 indexer, CUDA) [64]
V4_BLOCK = 256  # models/deepseek_v4/sparse_mla.py [256]; mla/indexer.py (V4 indexer) [256]
V4_SWA_BLOCK = 64  # sparse_swa.py DeepseekV4SWACache(block_size=64), not settable from the CLI
#: compressor state blocks: 4 tokens for ratio 4, 8 otherwise (models/deepseek_v4/compressor.py CompressorStateCache)
V4_STATE_BLOCK = {4: 4}
V4_STATE_BLOCK_DEFAULT = 8
#: the DSA indexer K cache is always quantised; "auto" means fp8 (132 B), mxfp4 (68 B) is opt-in
#: (v1/attention/backends/mla/indexer.py DSA_INDEXER_KV_DTYPES, dsa_indexer_uses_fp4)
INDEXER_DTYPES = {"fp8": "fp8_indexer", "mxfp4": "fp4_indexer"}
DEFAULT_INDEXER_DTYPE = "fp8"
#: config/cache.py CacheConfig.gpu_memory_utilization
DEFAULT_GPU_MEMORY_UTILIZATION = 0.92
#: async scheduling is on by default (config/vllm.py, async_scheduling None -> True for the multiproc and
#: uniproc executors, no pooling, PP = 1 on the V1 runner)
DEFAULT_ASYNC_SCHEDULING = True
GIB = 1 << 30
#: prefix caching is on by default (config/cache.py CacheConfig.enable_prefix_caching), which puts hybrid
#: models' Mamba-style state in "align" mode (model_executor/models/config.py MambaModelConfig)
DEFAULT_PREFIX_CACHING = True
#: v1/attention/backends/gdn_attn.py: FlashInfer's GDN prefill exports mid-prefill states on a 64-token grid
FLASHINFER_GDN_CHECKPOINT_ALIGNMENT = 64
#: model_executor/layers/mamba/gdn/qwen_gdn_linear_attn.py _resolve_gdn_prefill_backend ("auto"): FlashInfer
#: on Hopper; on Blackwell when head_k_dim is 128 and the CUDA runtime is 13 or newer; Triton (FLA) elsewhere
HOPPER_GPUS = ("h100-sxm", "h100-pcie", "h100-nvl", "h200", "h20")
BLACKWELL_GPUS = ("b200", "gb200", "rtx-5090")


def default_max_num_batched_tokens(total_memory_bytes: int | None, device_name: str = "") -> int:
    """``vllm serve``'s default (engine/arg_utils.py EngineArgs.get_batch_defaults, OPENAI_API_SERVER):
    16384 on devices of at least 160 GiB, 8192 from 70 GiB unless the device is an A100, else 2048.
    Without a device: 8192, the H100 / H200 figure."""
    if total_memory_bytes is None:
        return 8192
    if total_memory_bytes >= 160 * GIB:
        return 16384
    if total_memory_bytes >= 70 * GIB and "a100" not in device_name.lower():
        return 8192
    return 2048


def max_in_flight_tokens(max_num_batched_tokens: int, async_scheduling: bool, pp: int = 1) -> int:
    """config/vllm.py VllmConfig.max_in_flight_tokens = max_concurrent_batches * max_num_batched_tokens;
    max_concurrent_batches is pp + 1 with async scheduling (V2 model runner, the default), else pp."""
    return (pp + 1 if async_scheduling else pp) * max_num_batched_tokens


def format_gib(n: int) -> str:
    """utils/mem_utils.py format_gib: ``str(round(b / 2**30, 2))`` ('14.41', '16.0')."""
    return str(round(n / GIB, 2))


@dataclass(frozen=True)
class Settings:
    """The engine options that change the plan (vLLM's names in the comments)."""

    block_size: int | None = None  # --block-size (None: the backends' preferred size)
    max_num_batched_tokens: int = 8192  # --max-num-batched-tokens
    async_scheduling: bool = DEFAULT_ASYNC_SCHEDULING  # --async-scheduling / --no-async-scheduling
    indexer_dtype: str = DEFAULT_INDEXER_DTYPE  # --attention-config '{"indexer_kv_dtype": ...}'
    pp: int = 1
    prefix_caching: bool = DEFAULT_PREFIX_CACHING  # --enable-prefix-caching / --no-enable-prefix-caching
    gdn_prefill_backend: str = "flashinfer"  # --additional-config '{"gdn_prefill_backend": ...}' ("auto" on Hopper)

    def __post_init__(self) -> None:
        if self.gdn_prefill_backend not in ("flashinfer", "triton"):
            raise KvcalcError(f"gdn_prefill_backend: choose flashinfer or triton, got {self.gdn_prefill_backend!r}"[:200],
                              param="gdn_prefill_backend")

    @property
    def in_flight(self) -> int:
        return max_in_flight_tokens(self.max_num_batched_tokens, self.async_scheduling, self.pp)


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
                self.format, self.padded_page, self.state_blocks)

    def uniform_key(self) -> tuple:
        """Specs with equal keys are one uniform type (UniformTypeKVCacheSpecs.is_uniform_type: equal
        block sizes, one registered base type, and for sliding windows the same window)."""
        return (self.base, self.block_size, self.window if self.base != "full" else None)

    def blocks_per_request(self, max_model_len: int, in_flight: int) -> int:
        """FullAttentionSpec.max_memory_usage_bytes / page, or SlidingWindowSpec.
        max_admission_blocks_per_request (+1: the window may start mid-block; in_flight: out-of-window
        blocks are freed only once the tokens in flight are processed), or MambaSpec's fixed count."""
        if self.state_blocks is not None:
            return self.state_blocks
        if self.window is None:
            return -(-max_model_len // self.block_size)
        tokens = min(self.window - 1 + in_flight, max_model_len)
        return -(-tokens // self.block_size) + 1


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
        raise KvcalcError(f"engine vllm: {fmt.name} is LMDeploy's KV layout (scale and zero point per head); vLLM "
                          f"{VERSION} has no such KV dtype (its int8/int4_per_token_head keep one fp32 scale); use "
                          "the exact engine")
    window = c.window if isinstance(c, SlidingWindowAttention) else None
    return LayerSpec(layer, c.name, "SlidingWindowSpec" if window else "FullAttentionSpec",
                     "sliding" if window else "full", ctx.block_size, 1, c.entry_bytes(fmt), 1, window, fmt.name)


def _mla(c: MLALatent, fmt, ctx: _Ctx, layer: int) -> LayerSpec:
    # model_executor/layers/attention/mla_attention.py MLAAttention.get_kv_cache_spec: one latent row,
    # state_content_bytes 656 for fp8_ds_mla, no alignment
    return LayerSpec(layer, c.name, "MLAAttentionSpec", "full", ctx.block_size, 1, c.entry_bytes(fmt), 1, None,
                     fmt.name)


def _indexer(c: IndexerCache, fmt, ctx: _Ctx, layer: int) -> LayerSpec:
    # the engine picks the indexer format, not the precision: fp8 (132 B) unless mxfp4 is asked for
    # (V3.2: models/deepseek_v2.py DeepseekV32IndexerCache; V4: models/deepseek_v4/attention.py
    # DeepseekV4IndexerCache with tokens_per_state = compress_ratio and the V4 page alignment)
    efmt = FORMATS[INDEXER_DTYPES[ctx.settings.indexer_dtype]]
    v4 = c.ratio > 1
    return LayerSpec(layer, c.name, "MLAAttentionSpec", "full", ctx.block_size, c.ratio, c.entry_bytes(efmt),
                     ctx.v4_alignment if v4 else 1, None, efmt.name)


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
_RULES: list[tuple[type, object, tuple[int, ...] | None, int]] = [
    (RecurrentState, _state, (), 0),  # no attention backend: block size set by the alignment below
    (CompressorState, _v4_state, (), 0),
    (SlidingWindowMLA, _v4_window, (), 0),
    (CompressedMLA, _v4_compressed, (V4_BLOCK,), V4_BLOCK),
    (IndexerCache, _indexer, None, 0),  # block sizes: by ratio, below
    (MLALatent, _mla, (FLASHMLA_BLOCK,), FLASHMLA_BLOCK),
    (FullAttention, _full, None, FLASH_ATTENTION_BLOCK),  # also SlidingWindowAttention
]


def _rule(comp: CacheSpec):
    if comp.kind == "chunked_attention":  # vLLM's ChunkedLocalAttentionSpec: not modelled; never as full attention
        raise KvcalcError(
            f"engine vllm: cache kind 'chunked_attention' (component {comp.name}) is not modelled for vLLM "
            f"{VERSION}; use the exact engine"
        )
    if comp.kind == "linear_attention":  # MiniMax-Text-01 / M1: vLLM removed them in 0.23
        raise KvcalcError(
            f"engine vllm: cache kind 'linear_attention' (component {comp.name}) is not modelled for vLLM "
            f"{VERSION}, which no longer runs MiniMax-Text-01 / M1 (removed in 0.23); use the exact engine"
        )
    for cls, fn, sizes, preferred in _RULES:
        if isinstance(comp, cls):
            if cls is IndexerCache:
                return fn, ((V4_BLOCK,) if comp.ratio > 1 else (FLASHMLA_BLOCK,)), (V4_BLOCK if comp.ratio > 1 else FLASHMLA_BLOCK)
            return fn, sizes, preferred
    raise KvcalcError(
        f"engine vllm: cache kind {comp.kind!r} (component {comp.name}) is not modelled for vLLM {VERSION}; "
        "use the exact engine"
    )


def cache_block_size(comps: list[CacheSpec], requested: int | None) -> int:
    """cache_config.block_size: the size every backend accepts (platforms/interface.py
    _preferred_block_size_for_backends), or the one asked for if every backend supports it."""
    fixed: set[int] = set()
    multiple = 1
    for comp in comps:
        _, sizes, preferred = _rule(comp)
        if sizes is None:  # flash attention: any multiple of 16
            multiple = math.lcm(multiple, preferred)
        elif sizes:
            fixed.update(sizes)
    if len(fixed) > 1:
        raise KvcalcError(f"engine vllm: the model's caches need incompatible block sizes {sorted(fixed)}")
    if requested is not None:
        if fixed and requested not in fixed:
            raise KvcalcError(
                f"block_size: vLLM {VERSION}'s backends for this model accept only {sorted(fixed)[0]} tokens, "
                f"got {requested}", param="block_size"
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
            raise KvcalcError(f"engine vllm: block sizes {size} and multiples of {multiple} do not meet")
        return size
    return multiple


def default_gdn_prefill_backend(gpu_key: str | None, model=None) -> str:
    """vLLM's "auto" GDN prefill backend on this GPU (see HOPPER_GPUS): 'flashinfer' or 'triton'. Blackwell
    needs head_k_dim 128 and CUDA 13 (assumed). Without a GPU: the Hopper answer, like the other defaults."""
    if gpu_key is None or gpu_key in HOPPER_GPUS:
        return "flashinfer"
    if gpu_key in BLACKWELL_GPUS and model is not None:
        dims = {c.k_head_dim for c in model.components.values() if type(c) is GatedDeltaNetState}
        return "flashinfer" if dims and dims <= {128} else "triton"
    return "triton"


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


def _align_hybrid(attn: list[CacheSpec], states: list[RecurrentState], precision, settings: Settings,
                  block: int, tp: int) -> tuple[int, int | None]:
    """platforms/interface.py _align_hybrid_block_size: the attention block grows until one attention page
    holds the largest state page, which is then padded to it. Returns (block size, padded state page)."""
    state_page = max(c.fixed_bytes_on_rank(precision.formats.get(c.storage), tp) for c in states)
    main = next((c for c in attn if isinstance(c, (FullAttention, MLALatent))), None)
    if main is None or state_page == 0:
        return block, None
    if isinstance(main, FullAttention) and tp > 1:
        main = replace(main, kv_heads=max(1, main.kv_heads // tp))
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


def layer_specs(model, precision, settings: Settings, mtp: bool = False, kv_heads_divisor: int = 1
                ) -> tuple[list[LayerSpec], int]:
    """Every layer spec vLLM registers for ``model`` at ``precision``, in layer order, and the cache block
    size. ``kv_heads_divisor`` is the tensor-parallel size: it splits full-attention heads (checked by the
    caller) and the channels and heads of fixed state."""
    layers = list(model.layers) + (list(model.mtp_layers) if mtp else [])
    used = [model.components[c] for k in dict.fromkeys(layers) for c in model.layer_kinds[k]]
    block = cache_block_size(used, settings.block_size)
    kv = precision.formats.get("kv") or next(iter(precision.formats.values()))
    states = [c for c in used if isinstance(c, RecurrentState)]
    page, blocks = None, None
    if states:
        if mtp:
            raise KvcalcError(f"engine vllm: speculative decoding adds state blocks per draft token "
                              f"(num_speculative_tokens) to {states[0].name}; not modelled with --mtp")
        block, page = _align_hybrid([c for c in used if not isinstance(c, RecurrentState)], states, precision,
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
            fn, _, _ = _rule(comp)
            fmt = precision.formats.get(comp.storage) if comp.per_token or isinstance(comp, RecurrentState) else None
            out.append(fn(comp, fmt, ctx, index))
    return out, block


def block_outermost(specs: list[LayerSpec]) -> bool:
    """The DeepSeek V4 indexer backend declares block-outermost layouts only (mla/indexer.py, BLHNC/BLNHC);
    every other backend here takes the default layer-outermost one (v1/attention/backends/utils.py)."""
    return any(s.spec == "MLAAttentionSpec" and s.format in INDEXER_DTYPES.values() and s.tokens_per_state > 1
               for s in specs)


# ---- grouping (v1/core/kv_cache_planning.py) ---------------------------------------------------------------
def _approximate_gcd(values: list[int], lower_bound: int) -> int:
    """The chunk size d >= lower_bound that pads sum(ceil(x / d) * d - x) least; ties go to the larger d
    (_approximate_gcd)."""
    best_d, best_pad = lower_bound, None
    for d in range(max(1, lower_bound), max(values) + 1):
        pad = sum((d - x % d) % d for x in values)
        if best_pad is None or pad < best_pad or (pad == best_pad and d > best_d):
            best_d, best_pad = d, pad
    return best_d


def _max_layers_per_page(bucket: list[LayerSpec]) -> int:
    counts: dict[int, int] = {}
    for s in bucket:
        counts[s.page_bytes] = counts.get(s.page_bytes, 0) + 1
    return max(counts.values())


def group_layers(specs: list[LayerSpec]) -> tuple[list[list[LayerSpec]], str, int]:
    """vLLM's KV-cache groups (lists of layer specs), the rule that made them, and the padding layers
    added (get_kv_cache_groups)."""
    if len({s.key() for s in specs}) == 1:
        return [specs], "one spec: one group (_get_kv_cache_groups_uniform_spec)", 0
    if len({s.uniform_key() for s in specs}) == 1:
        return [specs], "one uniform type: one group (UniformTypeKVCacheSpecs)", 0
    if block_outermost(specs) and len({s.page_bytes for s in specs}) > 1:
        return _packed(specs), "packed groups, block-outermost layout (_get_packed_kv_cache_groups)", 0
    return _uniform_page(specs)


def _packed(specs: list[LayerSpec]) -> list[list[LayerSpec]]:
    buckets: list[list[LayerSpec]] = []
    for s in specs:  # greedy: the first bucket the spec keeps uniform
        for b in buckets:
            if b[0].uniform_key() == s.uniform_key():
                b.append(s)
                break
        else:
            buckets.append([s])
    info = []
    for b in buckets:
        by_page: dict[int, list[LayerSpec]] = {}
        for s in b:
            by_page.setdefault(s.page_bytes, []).append(s)
        balanced = len({len(v) for v in by_page.values()}) == 1
        info.append((b, by_page, balanced))
    floor = max((_max_layers_per_page(b) for b, by_page, bal in info if bal and len(by_page) > 1), default=0)
    repeats = _approximate_gcd([_max_layers_per_page(b) for b, _, bal in info if bal], floor) if floor else None
    if repeats is None:  # pragma: no cover - needs a packed model without a mixed balanced bucket
        raise KvcalcError(f"engine vllm: this layer mix takes a state-bucket split kvcalc does not model")
    groups = []
    for b, by_page, bal in info:
        n = -(-_max_layers_per_page(b) // repeats) if bal else 1
        if n == 1:
            groups.append(b)
            continue
        pattern = list(zip(*by_page.values()))
        for i in range(n):
            groups.append([s for rep in pattern[i::n] for s in rep])
    return groups


def _uniform_page(specs: list[LayerSpec]) -> tuple[list[list[LayerSpec]], str, int]:
    pages = {s.page_bytes for s in specs}
    if len(pages) > 1:  # unify_kv_cache_spec_page_size: a page dividing the largest scales its block size
        target = max(pages)
        unified = []
        for s in specs:
            if s.page_bytes == target:
                unified.append(s)
            elif target % s.page_bytes == 0 and s.alignment == 1 and s.real_page_bytes == s.page_bytes:
                unified.append(replace(s, block_size=s.block_size * (target // s.page_bytes)))
            else:
                raise KvcalcError(
                    f"engine vllm: page sizes {sorted(pages)} cannot be unified (vLLM {VERSION} falls back to "
                    "allocating every layer in full; not modelled)"
                )
        specs = unified
    buckets: dict[tuple, list[LayerSpec]] = {}
    for s in specs:
        buckets.setdefault(s.key(), []).append(s)
    sizes = [len(b) for b in buckets.values()]
    group_size = max(sizes) if max(sizes) < min(sizes) * 1.5 else min(sizes)
    groups, padding = [], 0
    for b in buckets.values():
        n = -(-len(b) // group_size)
        padding += n * group_size - len(b)
        groups.extend(b[i::n] for i in range(n))
    return groups, "equal-page groups of equal layer count (_get_kv_cache_groups_uniform_page_size)", padding


def pp_stages(num_layers: int, pp: int) -> list[range]:
    """distributed/utils.py get_pp_indices: num_layers // pp per stage, the remainder added one layer each
    to the stages before the last (partitions[-2], partitions[-3], ...)."""
    if pp > num_layers:
        raise KvcalcError(f"pp: {pp} pipeline stages for {num_layers} layers leaves a stage empty", param="pp")
    sizes = [num_layers // pp] * pp
    for i in range(2, num_layers % pp + 2):
        sizes[-i] += 1
    out, start = [], 0
    for n in sizes:
        out.append(range(start, start + n))
        start += n
    return out
