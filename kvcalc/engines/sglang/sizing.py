"""How SGLang 0.5.23 turns a model and a byte budget into token pools (CUDA, no speculative decoding; HiCache's host
pools, which leave the device pools as they are, are :mod:`.tiers`). Each step cites its file and function under ``python/sglang/srt/``.

1. The layout (:func:`layout`): which layers keep K/V (or an MLA latent, or DSA latent + indexer keys), which
   layers a split sliding-window pool holds (``configs/model_config.py::is_hybrid_swa_model``: by architecture;
   Llama 4's by index, ``get_hybrid_layer_ids``, with ``attention_chunk_size`` as the window), which layers keep
   Mamba-style state, the KV dtype, the page size (``arg_groups/model_overrides/``), and the bytes per token
   of each pool (``model_executor/pool_configurator.py::DefaultPoolConfigurator._compute_cell_size``,
   ``HybridSWAPoolConfigurator._recompute_cell_size``).
2. The state pool first (``mem_cache/kv_cache_configurator.py::_handle_max_mamba_cache``): ``r / (1 + r)`` of
   the budget (r = ``mamba_full_memory_ratio``) in state slots, one slot held back.
3. Tokens (:func:`size_pools`): ``available // cell`` floored to the page (``calculate_pool_sizes``), capped
   by ``max_total_tokens`` and re-floored (``_apply_token_constraints``); a split SWA pool gets ``int(full x
   ratio)`` floored to the page and must hold ``window + page`` (``validate_swa_pool_size``).
4. ``max_running_requests`` (``resolve_max_num_reqs``): ``min(clamp(int(T / context_len x 512), 2048, 4096),
   T // 2)`` unless given (then ``given // attn_dp``), capped by the state slots // slots per request.
5. The buffers (``mem_cache/memory_pool.py``): every pool allocates ``size + page_size`` rows (a padding page).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...errors import KvcalcError, NoRoom, quote
from ...formats import FORMATS, get_format
from ...specs import (ChunkedAttention, FullAttention, IndexerCache, MLALatent, RecurrentState,
                     SlidingWindowAttention)
from ...units import GIB, format_bytes
from .defaults import (DEFAULT_SWA_FULL_TOKENS_RATIO, DSA_PAGE, FA4_PAGE, HYBRID_SWA_ARCHS,
                       LLAMA4_ARCHS, LLAMA4_FULL_EVERY, LLAMA4_HYBRID_ARCH, MAMBA_BASE_SLOTS,
                       MAMBA_EXTRA_BUFFER_ARCHS, MAMBA_EXTRA_STRATEGIES, MAMBA_GRANITE_ARCH, MAMBA_RADIX_CACHE_ARCHS,
                       MAMBA_TRACK_INTERVAL, MRR_MAX, MRR_MIN, MRR_SCALE, NEMOTRON_H_ARCHS, QWEN3_5_SM100_ARCHS,
                       SWA_EVICTION_INTERVAL, TRTLLM_MHA_PAGES, TRTLLM_MLA_ARCHS, TRTLLM_MLA_PAGES, TRTLLM_PAGE,
                       VERSION, WINDOW_MINUS_ONE_ARCHS, Settings, llama4_backend)

INT64_MAX = (1 << 63) - 1  # torch.iinfo(torch.int64).max
#: kvcalc precision name -> SGLang --kv-cache-dtype
PRECISION_DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp8": "fp8_e4m3"}


def refuse(message: str) -> KvcalcError:
    return KvcalcError(f"{{{{engine}}}} sglang: {message}")


@dataclass(frozen=True)
class Layout:
    """One rank's pools as SGLang builds them for a model, before any budget."""

    kv_dtype: str  # SGLang's name (bfloat16, fp8_e4m3)
    kv_size: int  # bytes per element
    page: int
    kind: str  # "mha", "mla", "dsa"
    full_layers: tuple[int, ...]  # layers of the (full) KV pool
    swa_layers: tuple[int, ...]  # layers of a split SWA pool (empty: none)
    state_layers: tuple[int, ...]  # Mamba-style state layers
    heads: int  # KV heads per rank (MHA)
    head_dim: int
    v_head_dim: int
    swa_heads: int
    swa_head_dim: int
    swa_v_head_dim: int
    mla_dim: int  # the latent row's width in elements (DSA fp8: 656 packed bytes)
    indexer_row: int  # DSA: bytes per token per layer of the indexer keys (fp8 + fp32 scale)
    window: int | None  # the SWA window SGLang validates against
    swa_ratio: float
    state_per_request: int  # bytes of one state slot (every state layer of this rank)
    state_conv_bytes: int = 0  # of which the conv states (bf16)
    state_ssm_dtype: str = "float32"  # the recurrent state's torch dtype (the model's mamba_ssm_dtype, else fp32)
    slots_per_request: int = 1
    state_charged: int | None = None  # bytes of a slot the budget is charged (pp > 1: the largest stage's share)
    kv_elsewhere: bool = False  # pp > 1 and this stage keeps no KV while another stage does
    chunk_window: bool = False  # the window is Llama 4's attention_chunk_size (resolve_sliding_window_size)
    #: the model's attention_chunk_size, which resolve_sliding_window_size logs at load for any model that has one
    #: (neither a get_attention_sliding_window_size nor a hybrid SWA sliding_window_size before it)
    attention_chunk: int | None = None
    #: the Mamba state options as SGLang resolves them (:func:`mamba_cache`): the strategy, and whether the overlap
    #: scheduler and the radix cache run (the overlap scheduler also sets the SWA request cap's chunks in flight)
    mamba_strategy: str = "auto"
    overlap: bool = True
    radix: bool = True
    notes: tuple[str, ...] = field(default=())

    @property
    def state_charge(self) -> int:
        return self.state_per_request if self.state_charged is None else self.state_charged

    @property
    def has_state(self) -> bool:
        """The model keeps Mamba-style state (SGLang's mambaish config), on this stage or, under pp, another."""
        return bool(self.state_layers) or self.state_charged is not None

    @property
    def full_per_token(self) -> int:
        """Bytes of one token in one full layer."""
        if self.kind == "mha":
            return self.heads * (self.head_dim + self.v_head_dim) * self.kv_size
        return self.mla_dim * self.kv_size

    @property
    def swa_per_token(self) -> int:
        return self.swa_heads * (self.swa_head_dim + self.swa_v_head_dim) * self.kv_size

    @property
    def cell(self) -> int | float:
        """Bytes per token of max_total_num_tokens on this rank: a float when an SWA pool shares the budget at
        ``swa_ratio`` SWA tokens per full token (HybridSWAPoolConfigurator._recompute_cell_size)."""
        full = self.full_per_token * len(self.full_layers) + self.indexer_row * len(self.full_layers)
        if not self.swa_layers:
            return full
        if not self.full_layers:
            return self.swa_per_token * len(self.swa_layers)
        return full + self.swa_ratio * (self.swa_per_token * len(self.swa_layers))


def _kv_dtype(model, precision: str | None, dsa: bool) -> str:
    """arg_groups/overrides.py: 'auto' is the model dtype (bf16 here), DSA on Hopper bf16 too
    (_dsa_kv_cache_dtype_default); --precision fp8 is fp8_e4m3."""
    if precision is None:
        return "bfloat16"
    name = PRECISION_DTYPES.get(precision)
    if name is None:
        raise KvcalcError(f"precision: SGLang {VERSION}'s --kv-cache-dtype has no {quote(precision)} for the KV cache "
                          f"(kvcalc maps {', '.join(f'{k} to {v}' for k, v in PRECISION_DTYPES.items())})",
                          param="precision")
    if dsa and name not in ("bfloat16", "fp8_e4m3"):
        raise refuse(f"DeepSeek DSA only supports bf16/bfloat16 or fp8_e4m3 kv_cache_dtype (SGLang {VERSION})")
    return name


#: SGLang's --kv-cache-dtype -> the kvcalc format of a K, V or MLA latent row in it
KV_FORMATS = {"bfloat16": "bf16", "float16": "fp16", "fp8_e4m3": "fp8_e4m3", "fp8_e5m2": "fp8_e5m2"}
#: SGLang's --kv-cache-dtype names -> (torch dtype as its logs print it, bytes per element), from kvcalc.formats
KV_DTYPES = {name: (f"torch.{FORMATS[f].torch_dtype}", FORMATS[f].element_bytes) for name, f in KV_FORMATS.items()}


def stored_formats(model, precision: str, settings: Settings) -> dict[str, str]:
    """The format SGLang 0.5.23 stores each cache of ``model`` in at kvcalc precision ``precision``, by component
    (nothing for what it refuses; plan() says why):

    * K, V and an MLA latent in the --kv-cache-dtype the precision maps to (:data:`PRECISION_DTYPES`), plain;
    * a DSA latent in fp8 below compute capability 10 as FlashMLA's packed 656 B row (fp8_ds_mla;
      kv_cache_configurator.py calculate_mla_kv_cache_dim), from 10 on the raw fp8 row;
    * DSA and DeepSeek V4 indexer keys in fp8 with an fp32 scale per 128 (132 B) whatever the precision
      (mem_cache/index_key_cache.py; V4: get_dsv4_indexer_bytes_per_token);
    * Mamba / DeltaNet state: :func:`state_dtypes`;
    * DeepSeek V4's window and compressed entries in the precision's fp8_ds_mla_v4 (the only layout modelled), its
      compressor state in fp32."""
    kv = KV_FORMATS.get(PRECISION_DTYPES.get(precision, ""))
    comps = model.components.values()
    dsa = any(isinstance(c, IndexerCache) and c.ratio == 1 for c in comps)
    out = {}
    for c in comps:
        if isinstance(c, IndexerCache):
            out[c.name] = "fp8_indexer"
        elif isinstance(c, RecurrentState):
            conv, ssm = state_dtypes(c)
            out[c.name] = conv if conv == ssm else f"{conv}+{ssm}"
        elif kv is None or not c.per_token or type(c) not in (MLALatent, FullAttention, SlidingWindowAttention,
                                                              ChunkedAttention):
            continue
        elif type(c) is MLALatent and dsa and kv.startswith("fp8") and (settings.sm_major or 0) < 10:
            out[c.name] = "fp8_ds_mla"
        else:
            out[c.name] = kv
    return out


def _layers_by(model, cls, layers) -> list[tuple[int, object]]:
    out = []
    for i, kind in enumerate(layers):
        for c in model.layer_kinds[kind]:
            comp = model.components[c]
            if isinstance(comp, cls):
                out.append((i, comp))
    return out


def _check_kinds(model) -> None:
    """The kinds are SglangEngine.cache_kinds (refused before planning, by exact type); a value the default pools do
    not hold is refused here."""
    for comp in model.components.values():
        if isinstance(comp, IndexerCache) and comp.ratio != 1:
            raise refuse(f"indexer {comp.name} with ratio {comp.ratio} is not modelled for SGLang {VERSION}")


#: configs/mamba_utils.py mamba2_state_dtype: the conv state's dtype (SGLANG_MAMBA_CONV_DTYPE, default bfloat16)
STATE_CONV_DTYPE = "bf16"
#: the recurrent state's dtypes SGLang takes from the config's mamba_ssm_dtype (its dtype_map less float32, the
#: default)
STATE_HALF_DTYPES = ("bf16", "fp16")


def state_dtypes(comp: RecurrentState) -> tuple[str, str]:
    """(conv, recurrent) dtypes SGLang stores a layer's state in (configs/mamba_utils.py mamba2_state_dtype): conv
    in bf16 whatever the model dtype, the recurrent state in fp32 unless the model states bf16 or fp16
    (mamba_ssm_dtype; SGLANG_MAMBA_SSM_DTYPE unset)."""
    return STATE_CONV_DTYPE, comp.ssm_dtype if comp.ssm_dtype in STATE_HALF_DTYPES else "fp32"


def _state(model, states, attn_tp: int, arch: str | None) -> tuple[int, int, str]:
    """(bytes of one state slot over this rank's state layers, of which conv, the recurrent state's dtype).
    configs/mamba_utils.py Mamba2StateShape: conv and recurrent state in :func:`state_dtypes`. The slots a running
    request holds: :func:`mamba_cache`."""
    per = conv_bytes = 0
    half = any(state_dtypes(comp)[1] in STATE_HALF_DTYPES for _, comp in states)
    for _, comp in states:
        conv, ssm = comp.shard_values(attn_tp)
        conv_dtype, ssm_dtype = state_dtypes(comp)
        conv_bytes += conv * get_format(conv_dtype).value_bits // 8
        per += conv * get_format(conv_dtype).value_bits // 8 + ssm * get_format(ssm_dtype).value_bits // 8
    if arch is None:
        raise refuse("a model with Mamba-style state needs its 'architecture' (config.json architectures[0]): "
                     f"SGLang {VERSION} picks the state cache strategy per architecture")
    return per, conv_bytes, ("bfloat16" if half else "float32")


@dataclass(frozen=True)
class MambaCache:
    """The Mamba state options as SGLang resolves them for one model (:func:`mamba_cache`)."""

    strategy: str  # --mamba-radix-cache-strategy after resolution (auto where SGLang leaves it unresolved)
    overlap: bool  # the overlap scheduler, after every adjustment
    radix: bool  # the radix cache
    slots_per_request: int  # kv_cache_configurator.py _calculate_mamba_ratio (state models)
    notes: tuple[str, ...] = ()


def _strategy_refusal(message: str, sglang_words: str, where: str) -> KvcalcError:
    return KvcalcError(f"mamba_radix_cache_strategy: SGLang {VERSION} refuses {message}: \"{sglang_words}\" "
                       f"({where})", param="mamba_radix_cache_strategy")


def mamba_cache(arch: str | None, settings: Settings, has_state: bool, page_seen: int | None,
                trtllm_declared: bool) -> MambaCache:
    """SGLang's resolution of --mamba-radix-cache-strategy, --disable-overlap-schedule and --disable-radix-cache,
    in its order (CUDA, no speculative decoding, the default triton linear-attention backend):

    1. arg_groups/model_hook.py handle_mamba_radix_cache, run for every model from
       handle_model_specific_adjustments (after the model overrides were collected, so ``page_seen`` is the page
       --page-size or an override declared by then, ``trtllm_declared`` whether one declared trtllm_mha):
       overrides.py _mamba_radix_cache_resolution resolves ``auto`` for an arch of _MAMBA_RADIX_CACHE_ARCHS with
       the radix cache on: extra_buffer where the overlap scheduler is on or the page is over 1 and the arch
       supports it (supports_mamba_cache_extra_buffer), else no_buffer, turning the overlap scheduler off. Then
       mamba_hook.py validate_mamba_extra_buffer / validate_mamba_no_buffer assert what the strategy needs; an
       extra_buffer strategy on any other model is refused (handle_mamba_radix_cache).
    2. overrides.py _pipeline_parallel_overlap_disable, later in the pipeline (arg_groups/pipeline.py): pp > 1
       turns the overlap scheduler off, after the strategy was resolved.
    3. mem_cache/kv_cache_configurator.py _calculate_mamba_ratio: 1 slot per running request without the radix
       cache; else 3 plus the extra_buffer tracking slots (allocation_sizing.py get_mamba_tracking_slots: 2 with
       the overlap scheduler, 1 without it, 1 lazy), where the lazy strategy asserts the overlap scheduler."""
    radix = not settings.disable_radix_cache
    overlap = not settings.disable_overlap_schedule
    strategy = settings.mamba_radix_cache_strategy
    name = arch or "this model"
    notes = []
    in_branch = has_state and (arch in MAMBA_RADIX_CACHE_ARCHS or arch == MAMBA_GRANITE_ARCH)
    if in_branch and radix:
        if strategy == "auto":
            if (overlap or (page_seen or 0) > 1) and arch in MAMBA_EXTRA_BUFFER_ARCHS:
                strategy = "extra_buffer"
            else:
                strategy, overlap = "no_buffer", False
                if not settings.disable_overlap_schedule:
                    notes.append(f"SGLang {VERSION} resolves the Mamba radix-cache strategy auto to no_buffer for "
                                 f"{name} and turns the overlap scheduler off (_mamba_radix_cache_resolution)")
        if strategy in MAMBA_EXTRA_STRATEGIES:
            if arch not in MAMBA_EXTRA_BUFFER_ARCHS:
                raise _strategy_refusal(f"{strategy} for {name}", f"extra_buffer is not supported for {name}; use "
                                        "no_buffer.", "arg_groups/mamba_hook.py validate_mamba_extra_buffer")
            if page_seen is not None and MAMBA_TRACK_INTERVAL % page_seen:
                raise KvcalcError(f"page_size: SGLang {VERSION} refuses page_size {page_seen} with the {strategy} "
                                  f"Mamba strategy: validate_mamba_extra_buffer asserts mamba_track_interval "
                                  f"({MAMBA_TRACK_INTERVAL}) % page_size == 0 (a bare AssertionError, "
                                  "arg_groups/mamba_hook.py)", param="page_size")
        else:  # no_buffer: validate_mamba_no_buffer's three asserts, in its order
            where = "arg_groups/mamba_hook.py validate_mamba_no_buffer"
            if page_seen not in (1, None):
                raise _strategy_refusal(f"no_buffer with page_size {page_seen}", "no_buffer only supports "
                                        "page_size=1.", where)
            if overlap:
                raise _strategy_refusal("no_buffer under the overlap scheduler", "no_buffer do not support overlap "
                                        "schedule. Try to set disable_overlap_schedule=True.", where + "; add "
                                        "{{disable_overlap_schedule}}")
            if trtllm_declared:
                raise _strategy_refusal(f"no_buffer for {name} on {settings.arch}, where its model override "
                                        "declares the trtllm_mha attention backend", "no_buffer do not support "
                                        "trtllm_mha attention backend.", where)
    elif radix and strategy in MAMBA_EXTRA_STRATEGIES:
        raise _strategy_refusal(f"{strategy} for a model outside its Mamba radix-cache architectures",
                                f"{{{{mamba_radix_cache_strategy}}}} {strategy} needs mamba state, got {name}.",
                                "arg_groups/model_hook.py handle_mamba_radix_cache")
    if settings.pp > 1 and overlap:
        overlap = False  # logs "Pipeline parallelism is incompatible with overlap schedule."
    extra = radix and strategy in MAMBA_EXTRA_STRATEGIES
    if not radix:
        slots = 1
    else:
        if extra and strategy == "extra_buffer_lazy" and not overlap:
            raise _strategy_refusal("extra_buffer_lazy without the overlap scheduler" + (
                f" (pp {settings.pp} turns it off)" if settings.pp > 1 else ""), "Lazy extra buffer requires "
                "overlap schedule ({{disable_overlap_schedule}} is incompatible)",
                "mem_cache/kv_cache_configurator.py _calculate_mamba_ratio")
        slots = MAMBA_BASE_SLOTS + ((1 if strategy == "extra_buffer_lazy" or not overlap else 2) if extra else 0)
    return MambaCache(strategy, overlap, radix, slots, tuple(notes))


def _state_charged(model, attn_tp: int, arch, settings: Settings, stages) -> int | None:
    """kv_cache_configurator.py _handle_max_mamba_cache under pp > 1: every rank charges
    int(mamba_cache_per_req x max_stage_mamba_layers / all mamba layers), the whole model's slot scaled to the
    stage with the most state layers (so that every rank derives the same pool); None with one stage."""
    if settings.pp == 1 or stages is None:
        return None
    every = _layers_by(model, RecurrentState, model.layers)
    if not every:
        return None
    total = _state(model, every, attn_tp, arch)[0]
    ids = [i for i, _ in every]
    most = max(sum(1 for i in ids if i in st) for st in stages)
    return int(total * (most / max(len(ids), 1)))


def _page(model, settings: Settings, dsa: bool, mla: bool, asym: bool, notes: list) -> int:
    """The page size SGLang runs, from --page-size (None: 1) and the overrides that win over it."""
    user, arch = settings.page_size, model.architecture
    if settings.sm_major is None and (dsa or mla):
        raise refuse(f"MLA and DSA caches on ROCm ({settings.arch}: aiter or triton by KV heads per rank, DSA pages "
                     f"by SGLANG_USE_AITER) are not modelled for SGLang {VERSION}")
    if dsa:
        # arg_groups/model_overrides/deepseek_v2.py: the override declares page_size = 64 x index_kpool on CUDA,
        # unconditionally, and a declaration is the last writer (arg_groups/overrides.py)
        if user is not None and user != DSA_PAGE:
            notes.append(f"SGLang {VERSION} replaces page_size {user} with {DSA_PAGE} for DeepSeek DSA on CUDA (it "
                         f"logs 'Setting page size to {DSA_PAGE} for DeepSeek DSA.')")
        return DSA_PAGE
    if settings.sm_major != 10:
        return user or 1
    if mla:
        backend, page = ("trtllm_mla", user if user in TRTLLM_MLA_PAGES else TRTLLM_PAGE) \
            if arch in TRTLLM_MLA_ARCHS else ("flashinfer", user or 1)
    elif arch in QWEN3_5_SM100_ARCHS:
        backend, page = ("trtllm_mha", TRTLLM_PAGE) if _qwen3_5_trtllm(settings) else ("triton", 1)
    elif asym:
        backend, page = "fa4", FA4_PAGE
    else:
        backend, page = "trtllm_mha", user if user in TRTLLM_MHA_PAGES else TRTLLM_PAGE
    if page != (user or 1):
        notes.append(f"SGLang {VERSION} picks the {backend} attention backend on {settings.arch}, with page_size "
                     f"{page}" + (f", not the {user} asked" if user else ""))
    return page


def _qwen3_5_trtllm(settings: Settings) -> bool:
    """arg_groups/model_overrides/qwen3_5.py _qwen3_5_hybrid_overrides on SM100 (no speculative decoding): trtllm_mha
    (page 64) unless the radix cache is on and mamba_extra_buffer_of is false; the override is collected before
    _mamba_radix_cache_resolution, so it reads the strategy as given and ``auto`` takes triton (page 1)."""
    return settings.disable_radix_cache or settings.mamba_radix_cache_strategy in MAMBA_EXTRA_STRATEGIES


def _windowed(comp) -> bool:
    return isinstance(comp, (SlidingWindowAttention, ChunkedAttention))


def _llama4_split(model, full, ids, notes: list) -> tuple[list, list, int | None]:
    """configs/model_config.py get_hybrid_layer_ids for Llama4ForConditionalGeneration: SWA layers (i + 1) % 4
    != 0, full layers the rest, whatever the config's layer kinds; the window is attention_chunk_size
    (load_model_utils.py resolve_sliding_window_size: mllama4.py has no get_attention_sliding_window_size)."""
    sliding = [(i, c) for i, c in full if (ids[i] + 1) % LLAMA4_FULL_EVERY]
    dense = [(i, c) for i, c in full if not (ids[i] + 1) % LLAMA4_FULL_EVERY]
    chunks = {c.chunk for c in model.components.values() if isinstance(c, ChunkedAttention)}
    if len(chunks) > 1:
        raise refuse(f"{model.name} states more than one attention chunk ({sorted(chunks)}); SGLang {VERSION} "
                     "reads one attention_chunk_size for the whole model")
    window = chunks.pop() if chunks else None
    if any(_windowed(c) for _, c in dense) or any(not _windowed(c) for _, c in sliding):
        notes.append(f"SGLang {VERSION} splits Llama 4's layers by index, not by the config's layer kinds: layers "
                     f"(i + 1) % {LLAMA4_FULL_EVERY} != 0 go to the SWA pool, the rest to the full pool "
                     "(get_hybrid_layer_ids); this config's kinds differ, and the pools follow SGLang")
    if window is None:
        notes.append(f"no attention chunk in {model.name}: SGLang {VERSION} still splits the pools "
                     "(is_hybrid_swa_model) but knows no window, so the SWA pool keeps every token")
    else:
        notes.append(f"SGLang {VERSION} gives Llama 4's chunked layers its sliding-window pool: sliding_window_size "
                     f"= attention_chunk_size = {window} (model_runner_components/load_model_utils.py "
                     "resolve_sliding_window_size; models/mllama4.py defines no get_attention_sliding_window_size), "
                     f"a sliding window over the chunk: a request keeps its last {window:,} tokens (+ the eviction "
                     "interval), whatever the chunk boundaries (mem_cache/common.py free_swa_out_of_window_slots), a "
                     f"superset of the chunk a token attends to; SWA layers (i + 1) % {LLAMA4_FULL_EVERY} != 0, full "
                     "layers the rest (configs/model_config.py get_hybrid_layer_ids)")
    return dense, sliding, window


def _split(model, arch, full, ids, notes: list) -> tuple[list, list, int | None]:
    """(full-pool layers, SWA-pool layers, the window SGLang validates against) for the attention layers."""
    if arch == LLAMA4_HYBRID_ARCH:
        return _llama4_split(model, full, ids, notes)
    sliding = [(i, c) for i, c in full if _windowed(c)]
    dense = [(i, c) for i, c in full if not _windowed(c)]
    if sliding and arch not in HYBRID_SWA_ARCHS:
        notes.append(f"SGLang {VERSION} keeps one pool for every layer of this model: it splits full and "
                     f"sliding-window pools only for the architectures it lists (is_hybrid_swa_model), and "
                     + (f"{arch} is not one" if arch else "the config states no architecture")
                     + "; the window (or chunk) is applied in the kernel only")
        return full, [], None
    if not sliding:
        return dense, sliding, None
    swa = sliding[0][1]
    size = swa.chunk if isinstance(swa, ChunkedAttention) else swa.window
    return dense, sliding, size - 1 if arch in WINDOW_MINUS_ONE_ARCHS else size


def _llama4_checks(arch, settings: Settings, notes: list) -> None:
    """_llama4_overrides picks the attention backend per GPU; Llama4ForConditionalGeneration.forward takes no
    pp_proxy_tensors, so model_executor/model_runner.py asserts "Pipeline Parallel is not compatible with this
    model." under pp > 1."""
    if arch not in LLAMA4_ARCHS:
        return
    if arch == LLAMA4_HYBRID_ARCH and settings.pp > 1:
        raise KvcalcError(f"pp: SGLang {VERSION} refuses {arch} with {{{{pp}}}} {settings.pp}: \"Pipeline Parallel is "
                          "not compatible with this model.\" (model_runner.py: models/mllama4.py's forward takes no "
                          "pp_proxy_tensors)", param="pp")
    backend = llama4_backend(settings.sm_major)
    platform = {10: "sm100", 9: "sm90", None: "hip"}.get(settings.sm_major, "other platforms")
    notes.append(f"SGLang {VERSION} logs 'Use {backend} as attention backend on {platform} for Llama4 model' "
                 "(arg_groups/model_overrides/llama4.py _llama4_overrides)")


def layout(model, precision: str | None, settings: Settings, tp: int, stage_layers, stages=None) -> Layout:
    """The pools of one rank of tensor-parallel size ``tp`` (attention TP = tp // attn_dp); ``stages``: every
    pipeline stage's layers (pp > 1)."""
    _check_kinds(model)
    layers = [k for i, k in enumerate(model.layers) if i in stage_layers]
    if tp % settings.attn_dp:
        raise KvcalcError(f"dp: {settings.attn_dp} attention data-parallel ranks must divide tp {tp}", param="dp")
    attn_tp = tp // settings.attn_dp
    arch = model.architecture
    full = _layers_by(model, FullAttention, layers)
    mla = _layers_by(model, MLALatent, layers)
    idx = _layers_by(model, IndexerCache, layers)
    states = _layers_by(model, RecurrentState, layers)
    dsa = bool(idx)
    kv_dtype = _kv_dtype(model, precision, dsa)
    _, kv_size = KV_DTYPES[kv_dtype]
    notes = []
    _llama4_checks(arch, settings, notes)
    dense, sliding, window = _split(model, arch, full, sorted(stage_layers), notes)
    page = _page(model, settings, dsa, bool(mla), any(c.head_dim != c.value_dim for _, c in full), notes)
    first = (dense or sliding or [(None, None)])[0][1]
    swa = sliding[0][1] if sliding else None
    mla_dim = 0
    if mla:
        latent = mla[0][1]
        # kv_cache_configurator.py calculate_mla_kv_cache_dim: DSA in fp8 packs 512 fp8 + 4 scales + 64 bf16 RoPE
        # (FlashMLA's layout); from compute capability 10 the trtllm DSA kernels keep the raw 576 B row
        packed = dsa and kv_size == 1 and (settings.sm_major or 0) < 10
        mla_dim = FORMATS["fp8_ds_mla"].entry_bytes(latent.dim, latent.rope_dim, f"component {latent.name}") \
            if packed else latent.dim
    charged = _state_charged(model, attn_tp, arch, settings, stages)
    has_state = bool(states) or charged is not None
    per_req, conv_bytes, ssm_dtype = _state(model, states, attn_tp, arch) if has_state else (0, 0, "float32")
    # what handle_mamba_radix_cache sees: the page --page-size or the model override declared by then, and
    # whether an override declared trtllm_mha (nemotron_h.py on SM100; qwen3_5.py's own choice)
    qwen_sm100 = settings.sm_major == 10 and arch in QWEN3_5_SM100_ARCHS
    page_seen = (TRTLLM_PAGE if _qwen3_5_trtllm(settings) else 1) if qwen_sm100 else settings.page_size
    trtllm = settings.sm_major == 10 and (arch in NEMOTRON_H_ARCHS or (qwen_sm100 and _qwen3_5_trtllm(settings)))
    mamba = mamba_cache(arch, settings, has_state, page_seen, trtllm)
    notes += mamba.notes
    heads = lambda c: max(1, c.kv_heads // attn_tp) if c is not None else 0  # noqa: E731
    return Layout(
        kv_dtype=kv_dtype, kv_size=kv_size, page=page,
        kind="dsa" if dsa else "mla" if mla else "mha",
        full_layers=tuple(i for i, _ in (mla if mla else dense)),
        swa_layers=tuple(i for i, _ in sliding),
        state_layers=tuple(i for i, _ in states),
        heads=heads(first) if not mla else 1,
        head_dim=first.head_dim if (first is not None and not mla) else 0,
        v_head_dim=first.value_dim if (first is not None and not mla) else 0,
        swa_heads=heads(swa), swa_head_dim=swa.head_dim if swa else 0, swa_v_head_dim=swa.value_dim if swa else 0,
        mla_dim=mla_dim,
        indexer_row=FORMATS["fp8_indexer"].entry_bytes(idx[0][1].dim, 0, f"component {idx[0][1].name}") if dsa else 0,
        window=window,
        swa_ratio=settings.swa_full_tokens_ratio if settings.swa_full_tokens_ratio is not None
        else DEFAULT_SWA_FULL_TOKENS_RATIO,
        state_per_request=per_req, state_conv_bytes=conv_bytes, state_ssm_dtype=ssm_dtype,
        slots_per_request=mamba.slots_per_request if has_state else 1,
        mamba_strategy=mamba.strategy, overlap=mamba.overlap, radix=mamba.radix,
        state_charged=charged,
        kv_elsewhere=settings.pp > 1 and not (mla or full)
        and bool(_layers_by(model, (FullAttention, MLALatent), model.layers)),
        chunk_window=arch == LLAMA4_HYBRID_ARCH and window is not None,
        attention_chunk=next((c.chunk for c in model.components.values() if isinstance(c, ChunkedAttention)), None),
        notes=tuple(notes),
    )


def fa3_local_graph_note(lay: Layout, context: int) -> str:
    """fa3 (SM90) applies Llama 4's chunk in the kernel (layers/attention/local_attention.py); its decode CUDA
    graphs keep local-attention metadata for max_bs x ceil(context_len / chunk) virtual batches, each
    ceil(chunk / page) + 2 int32 (LocalAttentionMetadataBuilder.alloc_cuda_graph_buffers), outside the pools."""
    per_slot = -(-context // lay.window) * (-(-lay.window // lay.page) + 2) * 4
    return (f"on sm90 the fa3 backend applies the {lay.window}-token chunk in the kernel (layers/attention/"
            f"local_attention.py); its decode CUDA graphs keep chunk metadata outside the KV pool, in "
            f"mem_fraction_static's slack: ceil(context_len / {lay.window}) x (ceil({lay.window} / page) + 2) int32 "
            f"per graph batch slot, {format_bytes(per_slot)} at context_len {context:,}, times the decode graphs' "
            "max_bs (cuda_graph_max_bs)")


# ---- sizing ---------------------------------------------------------------------------------------------------
def swa_pool_tokens(lay, full: int) -> int:
    """pool_configurator.py: the split SWA pool's tokens for ``full`` full tokens, int(full x
    swa_full_tokens_ratio) floored to the page (``lay``: a Layout or DeepSeek V4's)."""
    return int(full * lay.swa_ratio) // lay.page * lay.page


@dataclass(frozen=True)
class Sizing:
    """What SGLang logs at start-up for one rank, and what it allocates."""

    available_bytes: int  # the KV budget after the state pool (int(rest x 2^30))
    state_slots: int  # max_mamba_cache_size (0: no state pool)
    state_bytes: int  # (slots + 1) x bytes per slot
    max_total_num_tokens: int
    swa_tokens: int | None
    max_running_requests: int
    mrr_capped_by_state: bool
    user_tokens_above_profile: bool  # --max-total-tokens exceeded the profiled value (SGLang warns)
    swa_cap_mode: bool = False  # the SWA pool sized from the request cap (SWARequestCapPoolConfigurator)


def state_pool(lay: Layout, rest_gib: float, settings: Settings) -> tuple[float, int]:
    """kv_cache_configurator.py _handle_max_mamba_cache: the rest after the state pool (GiB) and the slots. The slots
    are --max-mamba-cache-size // attn_dp where given; else, without the radix cache and with
    --max-running-requests, max(1, max_running_requests // attn_dp); else the auto-fit: r / (1 + r) of the rest
    (r = mamba_full_memory_ratio), one slot held back. The pool takes (slots + 1) slots (a padding slot)."""
    if not lay.has_state:
        return rest_gib, 0
    per = lay.state_charge
    if settings.max_mamba_cache_size is not None:
        slots = settings.max_mamba_cache_size // settings.attn_dp
    elif settings.disable_radix_cache and settings.max_running_requests is not None:
        slots = max(1, settings.max_running_requests // settings.attn_dp)
    else:
        r = settings.mamba_full_memory_ratio
        budget_bytes = rest_gib * r / (1 + r) * (1 << 30)
        slots = int((budget_bytes - per) // per)
    if slots <= 0:
        raise refuse(f"Not enough GPU memory for hybrid (mamba/linear-attention) state cache. Computed "
                     f"max_mamba_cache_size={slots} (total_rest_memory={rest_gib:.2f} GB, mamba_cache_per_req="
                     f"{per / (1 << 20):.2f} MB)")
    return rest_gib - (slots + 1) * per / (1 << 30), slots


def swa_request_cap(lay: Layout, settings: Settings) -> int:
    """pool_configurator.py compute_swa_request_cap (no speculative decoding, not PD decode): per request window +
    SGLANG_SWA_EVICTION_INTERVAL + page + a decode page, times max(1, max_running_requests // attn_dp), plus the
    prefill chunks in flight (2 with the overlap scheduler, 1 without) and a page."""
    per = lay.window + SWA_EVICTION_INTERVAL + 2 * lay.page
    reqs = max(1, settings.max_running_requests // settings.attn_dp)
    return per * reqs + (2 if lay.overlap else 1) * settings.prefill_chunk + lay.page


def swa_cap_mode(lay: Layout, settings: Settings) -> bool:
    """SWARequestCapPoolConfigurator.is_applicable: a split SWA pool (full layers, a known window) sized from the
    request cap when --max-running-requests is given, the radix cache is off and prefill is chunked."""
    return bool(lay.swa_layers and lay.full_layers and lay.window is not None and not lay.radix
                and settings.max_running_requests is not None and settings.prefill_chunk > 0)


def size_pools(lay: Layout, rest_gib: float, context: int, settings: Settings) -> Sizing:
    """From the budget left after the weights (GiB, as SGLang holds it) to SGLang's pools on one rank."""
    rest_gib, slots = state_pool(lay, rest_gib, settings)
    if rest_gib <= 0:
        raise NoRoom(f"{{{{engine}}}} sglang: Loaded weights leave no GPU memory for the KV cache (the state pool took "
                     "the rest)", "weights")
    available = int(rest_gib * (1 << 30))
    page = lay.page
    cell = lay.cell
    cap_mode = swa_cap_mode(lay, settings)
    swa_cap = ceil_page(swa_request_cap(lay, settings), page) if cap_mode else None
    if cap_mode:  # SWARequestCapPoolConfigurator.calculate_pool_sizes: the SWA pool first, the rest to the full pool
        swa_bytes = swa_cap * lay.swa_per_token * len(lay.swa_layers)
        full_cell = (lay.full_per_token + lay.indexer_row) * len(lay.full_layers)  # _full_cell_bytes
        tokens = int((available - swa_bytes) // full_cell) // page * page
        if tokens <= 0:
            raise refuse(f"SWA pool cap ({swa_cap} tokens, {swa_bytes / (1 << 30):.2f} GiB) leaves no room for the "
                         f"full KV pool within the available {available / (1 << 30):.2f} GiB. Reduce "
                         "{{max_running_requests}}, lower SGLANG_SWA_EVICTION_INTERVAL, or increase "
                         "{{mem_fraction_static}}.")
    elif cell:
        tokens = int(available // cell) // page * page
    else:  # pool_configurator.py DefaultPoolConfigurator: a stage without KV (its KV on another pp stage) is
        # unbounded (int64 max) so that the stages' MIN ignores it; else max_total_tokens or context_len
        tokens = (INT64_MAX if lay.kv_elsewhere else settings.max_total_tokens or context) // page * page
    profiled = tokens
    above = settings.max_total_tokens is not None and settings.max_total_tokens > tokens
    if settings.max_total_tokens is not None:
        tokens = min(tokens, settings.max_total_tokens) // page * page
    if tokens <= 0:
        raise refuse("Not enough memory. Please try to increase {{mem_fraction_static}}.")
    swa = None
    if cap_mode:  # no floor check; a total capped below the profiled one re-derives through
        # calculate_pool_sizes_from_max_tokens, which keeps the SWA cap min'd with that (unfloored) total
        cut = settings.max_total_tokens is not None and settings.max_total_tokens < profiled
        swa = min(swa_cap, settings.max_total_tokens) if cut else swa_cap
    elif lay.swa_layers and lay.full_layers:
        swa = swa_pool_tokens(lay, tokens)
        if lay.window is not None and lay.window + page >= swa:
            raise refuse(f"SWA pool ({swa} tokens) cannot hold even one request: the prefill admission floor is "
                         f"sliding_window_size ({lay.window}) + page_size ({page}). Increase "
                         "{{swa_full_tokens_ratio}} or the total KV budget.")
    mrr, capped = max_running_requests(tokens, context, settings, slots, lay)
    return Sizing(available, slots, (slots + 1) * lay.state_per_request if slots else 0, tokens, swa, mrr, capped,
                  above, cap_mode)


def max_running_requests(tokens: int, context: int, settings: Settings, slots: int, lay: Layout) -> tuple[int, bool]:
    """kv_cache_configurator.py resolve_max_num_reqs (per attention-DP worker)."""
    est = max(min(int(tokens / context * MRR_SCALE), MRR_MAX), MRR_MIN)
    if settings.max_running_requests is not None:
        mrr = min(max(1, settings.max_running_requests // settings.attn_dp), tokens // 2)
    else:
        mrr = min(est, tokens // 2)
    capped = False
    if lay.has_state:
        cap = slots // lay.slots_per_request
        capped = cap < mrr
        mrr = min(mrr, cap)
        if mrr <= 0:
            raise refuse(f"Hybrid (mamba/linear-attention) state cache is too small to serve any requests. "
                         f"max_mamba_cache_size={slots}, mamba_ratio={lay.slots_per_request}, resulting "
                         f"max_num_reqs={mrr}")
    return mrr, capped


def swa_tokens_per_request(lay: Layout, context: int) -> int:
    """SWA slots one request holds at most: its window plus the eviction interval, a page of headroom and a
    decode page (pool_configurator.py compute_swa_request_cap, no speculative decoding)."""
    return min(context, lay.window + SWA_EVICTION_INTERVAL + 2 * lay.page) if lay.window is not None else context


def ceil_page(n: int, page: int) -> int:
    return -(-n // page) * page


def gib(n: float) -> str:
    """SGLang's '{x:.2f} GB' with GB = 2^30 B."""
    return f"{n / GIB:.2f}"


def rows(size: int, page: int) -> int:
    """memory_pool.py: size + page_size rows (one padding page)."""
    return size + page


def dsa_index_pages(size: int, page: int) -> int:
    """mem_cache/index_key_cache.py IndexKeyCache: (size + page + 1) // page pages."""
    return (size + page + 1) // page

