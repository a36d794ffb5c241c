"""vLLM 0.33's defaults and the settings kvcalc models (paths under ``vllm/`` of the 0.33.0 wheel)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from ...config.schema import CONTEXT_FIELDS

from ...errors import KvcalcError, quote
from ...formats import FORMATS
from ...specs import GatedDeltaNetState
from ...units import GIB

NAME = "vllm"
VERSION = "0.33.0"

#: DeepSeek V4 pages are rounded up to a multiple of this with the fp8_ds_mla cache dtype, 512 otherwise
#: (models/deepseek_v4/attention.py DeepseekV4Attention.get_kv_cache_spec; v1/attention/backends/mla/
#: sparse_swa.py DeepseekV4SWACache, "packed_page_alignment: int = 576"; 512 for FlashInfer sparse).
V4_PAGE_ALIGNMENT = FORMATS["fp8_ds_mla_v4"].page_align  # 576: the fact is the format's (kvcalc.formats)
V4_PLAIN_ALIGNMENT = 512
#: block sizes (tokens) the backends declare (get_supported_kernel_block_sizes) and the layers fix
FLASH_ATTENTION_BLOCK = 16  # v1/attention/backends/flash_attn.py: MultipleOf(16); config/cache.py DEFAULT_BLOCK_SIZE
FLASHINFER_MLA_BLOCK = 32  # v1/attention/backends/mla/flashinfer_mla.py [32, 64]: 16 refused, so 32 (Blackwell)
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
#: prefix caching is on by default (config/cache.py CacheConfig.enable_prefix_caching), which puts hybrid
#: models' Mamba-style state in "align" mode (model_executor/models/config.py MambaModelConfig)
DEFAULT_PREFIX_CACHING = True
#: v1/attention/backends/gdn_attn.py: FlashInfer's GDN prefill exports mid-prefill states on a 64-token grid
FLASHINFER_GDN_CHECKPOINT_ALIGNMENT = 64
#: the GDN prefill kernels kvcalc tells apart: only FlashInfer's exports mid-prefill checkpoints
GDN_PREFILL_BACKENDS = ("flashinfer", "triton")
#: config/cache.py KVOffloadingBackend = Literal["native", "lmcache"]; CacheConfig.kv_offloading_backend "native"
KV_OFFLOADING_BACKENDS = ("native", "lmcache")
#: how LMCache runs beside vLLM: "mp", LMCacheMPConnector (what config/vllm.py _post_init_kv_transfer_config picks for
#: the lmcache backend), or "in-process", LMCacheConnectorV1 named in --kv-transfer-config (no offloading size)
LMCACHE_MODES = ("mp", "in-process")
#: the LMCache settings kvcalc takes, and which deployment reads each (tiers.py)
LMCACHE_SETTINGS = {"lmcache_chunk_size": None, "lmcache_l1_size_gb": "mp", "lmcache_max_local_cpu_size": "in-process",
                    "lmcache_max_local_disk_size": "in-process", "lmcache_save_unfull_chunk": "in-process"}


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


def default_max_num_seqs(total_memory_bytes: int | None, device_name: str = "") -> int:
    """``vllm serve``'s default max_num_seqs before the token budget caps it (get_batch_defaults,
    OPENAI_API_SERVER): 1024 from 160 GiB, and from 70 GiB unless the device is an A100; else 256. Without a
    device: 1024, the H100 / H200 figure."""
    if total_memory_bytes is None or total_memory_bytes >= 160 * GIB:
        return 1024
    if total_memory_bytes >= 70 * GIB and "a100" not in device_name.lower():
        return 1024
    return 256


def max_in_flight_tokens(max_num_batched_tokens: int, async_scheduling: bool, pp: int = 1) -> int:
    """config/vllm.py VllmConfig.max_in_flight_tokens = max_concurrent_batches * max_num_batched_tokens;
    max_concurrent_batches is pp + 1 with async scheduling (V2 model runner, the default), else pp."""
    return (pp + 1 if async_scheduling else pp) * max_num_batched_tokens


def format_gib(n: int) -> str:
    """utils/mem_utils.py format_gib: ``str(round(b / 2**30, 2))`` ('14.41', '16.0')."""
    return str(round(n / GIB, 2))


#: config/model.py _get_and_verify_max_len: rope types whose factor does not multiply the derived maximum
#: (YaRN and Llama 3 leave max_position_embeddings already scaled; su is read as longrope)
ROPE_NOT_MULTIPLIED = ("su", "longrope", "llama3", "yarn", "deepseek_yarn", "deepseek_llama_scaling")


#: transformers_utils/model_arch_config_convertor.py derive_max_model_len_and_key: the keys, in its order
MAX_LEN_KEYS = ("max_position_embeddings", *CONTEXT_FIELDS)


def derived_len_and_key(spec) -> tuple[int | None, str | None]:
    """derive_max_model_len_and_key: the smallest of the context-length fields the config states (kvcalc's
    max_context is max_position_embeddings), model_max_length overriding them ("For Command-R / Cohere")."""
    stated = {"max_position_embeddings": spec.max_context, **spec.context_fields}
    best, key = None, None
    for k in MAX_LEN_KEYS:
        v = stated.get(k)
        if v is not None and (best is None or v < best):
            best, key = v, k
    if stated.get("model_max_length"):
        best, key = stated["model_max_length"], "model_max_length"
    return best, key


def derived_max_model_len(spec) -> int | None:
    """vLLM 0.33's derived max_model_len (config/model.py _get_and_verify_max_len): the derived length
    (:func:`derived_len_and_key`) times the rope factor for the rope types that scale it (linear, dynamic, ...),
    never for a Gemma 3 model ("gemma3" in its model type: its 128k is already scaled)."""
    base = derived_len_and_key(spec)[0]
    if base is None:
        return None
    rs, factor = spec.rope_scaling, 1.0
    gemma3 = "gemma3" in (spec.architecture or "").lower()
    if rs is not None and rs.type not in ROPE_NOT_MULTIPLIED and rs.factor is not None and not gemma3:
        factor = rs.factor
    return int(base * factor)


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
    gpu_memory_utilization: float = DEFAULT_GPU_MEMORY_UTILIZATION  # --gpu-memory-utilization
    allow_long_max_model_len: bool = False  # the environment variable VLLM_ALLOW_LONG_MAX_MODEL_LEN=1
    max_num_seqs: int | None = None  # --max-num-seqs (None: vllm serve's 1024, capped by the token budget)
    batched_tokens_defaulted: bool = False  # max_num_batched_tokens is vllm serve's default, not the user's
    arch: str | None = None  # the GPU's architecture (kvcalc/data/gpus.yaml arch); None: Hopper, no GPU named
    hybrid_kv_cache_manager: bool = True  # --disable-hybrid-kv-cache-manager turns it off (on by default on CUDA)
    # the tiers below the GPU (tiers.py): --kv-offloading-size (GiB, the replica's workers together) and
    # --kv-offloading-backend (None: native where a size is given); LMCache's own settings (its env / config file,
    # or the MP server's flags), None: LMCache's defaults
    kv_offloading_size: float | None = None
    kv_offloading_backend: str | None = None
    lmcache_mode: str | None = None  # None: mp where the backend is lmcache
    lmcache_chunk_size: int | None = None
    lmcache_l1_size_gb: float | None = None
    lmcache_max_local_cpu_size: float | None = None
    lmcache_max_local_disk_size: float | None = None
    lmcache_save_unfull_chunk: bool = False

    @property
    def sm_major(self) -> int | None:
        """The CUDA compute capability's major (9 where no GPU is named); None on ROCm."""
        from ...hardware import arch_major

        return arch_major(self.arch)

    def at_context(self, max_model_len: int) -> "Settings":
        """engine/arg_utils.py _set_default_max_num_seqs_and_batched_tokens_args: a defaulted
        max_num_batched_tokens is capped at max_num_seqs x max_model_len (max_num_seqs, capped in turn by it,
        stays: max_num_seqs x L >= max_num_seqs)."""
        cap = self.num_seqs * max_model_len
        if self.batched_tokens_defaulted and cap < self.max_num_batched_tokens:
            return replace(self, max_num_batched_tokens=cap)
        return self

    def __post_init__(self) -> None:
        if self.max_num_seqs is not None and self.max_num_batched_tokens < self.max_num_seqs:
            raise KvcalcError(f"max_num_seqs: vLLM refuses it: max_num_batched_tokens ({self.max_num_batched_tokens}) "
                              f"must be greater than or equal to max_num_seqs ({self.max_num_seqs}).",
                              param="max_num_seqs")
        if self.gdn_prefill_backend not in GDN_PREFILL_BACKENDS:
            raise KvcalcError(f"gdn_prefill_backend: choose flashinfer or triton, got {quote(self.gdn_prefill_backend)}"[:200],
                              param="gdn_prefill_backend")

    @property
    def offloading_backend(self) -> str | None:
        """The offloading backend vLLM runs: None without a size (config/vllm.py _post_init_kv_transfer_config
        returns at once), else the one given, native by default (CacheConfig.kv_offloading_backend)."""
        if self.kv_offloading_size is None:
            return None
        return self.kv_offloading_backend or "native"

    @property
    def lmcache(self) -> str | None:
        """How LMCache runs here: "mp" (the lmcache backend's LMCacheMPConnector, or the mode named), "in-process"
        (LMCacheConnectorV1), or None (no LMCache)."""
        if self.offloading_backend == "lmcache":
            return self.lmcache_mode or "mp"
        return self.lmcache_mode

    @property
    def num_seqs(self) -> int:
        """The running-request cap: the setting, else _set_default_max_num_seqs_and_batched_tokens_args's
        min(1024, max_num_batched_tokens)."""
        return self.max_num_seqs if self.max_num_seqs is not None else min(1024, self.max_num_batched_tokens)

    @property
    def in_flight(self) -> int:
        return max_in_flight_tokens(self.max_num_batched_tokens, self.async_scheduling, self.pp)



def check_offloading(s: "Settings") -> None:
    """Refuse offloading settings vLLM would not run as given, one line naming the setting: a negative size, vLLM's
    own refusal of size 0 with the native backend, a backend without a size, LMCache settings without LMCache or of
    the other deployment. Checked where the tiers are sized (tiers.host_tiers) and a log is read, not when settings
    are built: a command that sizes no tier (transfer) is not refused for them."""
    import math

    size = s.kv_offloading_size
    if size is not None and (isinstance(size, bool) or not isinstance(size, (int, float)) or not math.isfinite(size)
                             or size < 0):
        raise KvcalcError(f"kv_offloading_size: must be a size in GiB from 0, got {quote(size)}"[:200],
                          param="kv_offloading_size")
    if s.kv_offloading_backend is not None and s.kv_offloading_backend not in KV_OFFLOADING_BACKENDS:
        raise KvcalcError(f"kv_offloading_backend: choose native or lmcache, got {quote(s.kv_offloading_backend)}"[:200],
                          param="kv_offloading_backend")
    if s.lmcache_mode is not None and s.lmcache_mode not in LMCACHE_MODES:
        raise KvcalcError(f"lmcache_mode: choose mp or in-process, got {quote(s.lmcache_mode)}"[:200],
                          param="lmcache_mode")
    if s.kv_offloading_backend is not None and size is None:
        raise KvcalcError("kv_offloading_backend: vLLM turns KV offloading on only when a size is given "
                          "(config/vllm.py _post_init_kv_transfer_config returns without kv_offloading_size); give "
                          "{{kv_offloading_size}}", param="kv_offloading_backend")
    if s.offloading_backend == "native" and size == 0:
        raise KvcalcError("kv_offloading_size: vLLM refuses 0: cpu_bytes_to_use must be specified in "
                          "kv_connector_extra_config (v1/kv_offload/cpu/spec.py CPUOffloadingSpec: 0 bytes is none)",
                          param="kv_offloading_size")
    given = [k for k in LMCACHE_SETTINGS if getattr(s, k) not in (None, False)]
    if s.offloading_backend == "native" and (s.lmcache_mode is not None or given):
        first = "lmcache_mode" if s.lmcache_mode is not None else given[0]
        raise KvcalcError(f"{first}: an LMCache setting, but the offloading backend is native (OffloadingConnector); "
                          "LMCache runs with {{kv_offloading_backend}} lmcache", param=first)
    if s.offloading_backend == "lmcache" and s.lmcache_mode == "in-process":
        raise KvcalcError("lmcache_mode: with {{kv_offloading_size}} and the lmcache backend vLLM 0.33 starts "
                          "LMCacheMPConnector (config/vllm.py _post_init_kv_transfer_config), not the in-process "
                          "LMCacheConnectorV1, which --kv-transfer-config names without an offloading size",
                          param="lmcache_mode")
    mode = s.lmcache
    if mode is None and given:
        raise KvcalcError(f"{given[0]}: an LMCache setting, but LMCache is not on: {{{{kv_offloading_backend}}}} lmcache "
                          "(with {{kv_offloading_size}}) or {{lmcache_mode}} in-process turns it on", param=given[0])
    for k in given:
        if LMCACHE_SETTINGS[k] not in (None, mode):
            raise KvcalcError(f"{k}: a setting of LMCache's {LMCACHE_SETTINGS[k]} deployment, not of the {mode} one "
                              f"({'{{lmcache_mode}} in-process' if mode == 'mp' else 'the MP server'} takes it)",
                              param=k)


def default_gdn_prefill_backend(gpu=None, model=None) -> str:
    """vLLM's "auto" GDN prefill backend on ``gpu`` (a catalogue name or a kvcalc.hardware.GPU; None: the Hopper
    answer, like the other defaults): 'flashinfer' or 'triton'. model_executor/layers/mamba/gdn/
    qwen_gdn_linear_attn.py _resolve_gdn_prefill_backend: FlashInfer on compute capability 9.0; on the 10.x and
    12.x families when head_k_dim is 128 and the CUDA runtime is 13 or newer (assumed); Triton (FLA) elsewhere."""
    from ...hardware import arch_major, resolve_gpu

    if gpu is None:
        return "flashinfer"
    arch = resolve_gpu(gpu).arch
    major = arch_major(arch) if arch else None  # a GPU of no stated architecture: not Hopper, Triton
    if major == 9:
        return "flashinfer"
    if major in (10, 12) and model is not None:
        dims = {c.k_head_dim for c in model.components.values() if type(c) is GatedDeltaNetState}
        return "flashinfer" if dims and dims <= {128} else "triton"
    return "triton"
