"""SGLang 0.5.23's defaults as it runs on CUDA (paths under ``python/sglang/srt/`` of the 0.5.23 wheel; the
facts are gathered in docs/engines/sglang-0.5.23.md)."""

from __future__ import annotations

from dataclasses import dataclass

NAME = "sglang"
VERSION = "0.5.23"

#: arg_groups/fields/schedule.py: --swa-full-tokens-ratio's fallback; --mamba-full-memory-ratio's
DEFAULT_SWA_FULL_TOKENS_RATIO = 0.8
DEFAULT_MAMBA_FULL_MEMORY_RATIO = 0.9
#: mem_cache/kv_cache_configurator.py resolve_max_num_reqs: the estimate's clamp and scale
MRR_SCALE, MRR_MIN, MRR_MAX = 512, 2048, 4096
#: kv_cache_configurator.py: MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO (3 state slots per running request with the
#: radix cache; 1 without it, _calculate_mamba_ratio) plus the extra_buffer strategy's tracking slots
#: (allocation_sizing.py get_mamba_tracking_slots: 2 with the overlap scheduler, 1 without it or lazy)
MAMBA_BASE_SLOTS = 3
DSA_PAGE = 64  # arg_groups/model_overrides/deepseek_v2.py: page_size = 64 x index_kpool on CUDA
#: arg_groups/memory_hook.py handle_gpu_memory_settings: the chunk on an 80-160 GiB GPU (H100, H200)
DEFAULT_CHUNKED_PREFILL_SIZE = 8192
#: managers/scheduler.py: max_prefill_tokens' default (logged in the summary line)
DEFAULT_MAX_PREFILL_TOKENS = 16384
#: configs/model_config.py multimodal_model_archs (MiMoV2ForCausalLM left out: SGLang treats it as multimodal only
#: with both a vision_config and an audio_config, which kvcalc does not record), and the archs ModelConfig turns
#: multimodal off for by default (mm_disabled_models)
MULTIMODAL_ARCHS = frozenset({
    "BailingMM2NativeForConditionalGeneration", "BailingMMNativeForConditionalGeneration",
    "BailingMoeV3VLForConditionalGeneration", "CLIPModel", "Cohere2VisionForConditionalGeneration",
    "Cosmos3EdgeForConditionalGeneration", "DeepseekOCRForCausalLM", "DeepseekVL2ForCausalLM",
    "DiffusionGemmaForBlockDiffusion", "Dots3NoteForCausalLM", "DotsOCRForCausalLM", "DotsVLMForCausalLM",
    "EmbeddingGemma2Model", "Ernie4_5_VLMoeForConditionalGeneration", "Gemma3ForConditionalGeneration",
    "Gemma3nForConditionalGeneration", "Gemma4ForConditionalGeneration", "Gemma4UnifiedForConditionalGeneration",
    "Glm4vForConditionalGeneration", "Glm4vMoeForConditionalGeneration", "Glm5NextForConditionalGeneration",
    "GlmAsrForConditionalGeneration", "GlmImageForConditionalGeneration", "GlmOcrForConditionalGeneration",
    "Grok1AForCausalLM", "Grok1VForCausalLM", "InternS1ForConditionalGeneration",
    "InternS1ProForConditionalGeneration", "InternS2MobiusForConditionalGeneration",
    "InternS2PreviewForConditionalGeneration", "InternVLChatModel", "JetVLMForConditionalGeneration",
    "KimiK25ForConditionalGeneration", "KimiVLForConditionalGeneration", "Lfm2VlForConditionalGeneration",
    "LightOnOCRForConditionalGeneration", "Llama4ForConditionalGeneration", "LlavaForConditionalGeneration",
    "LlavaLlamaForCausalLM", "LlavaMistralForCausalLM", "LlavaQwenForCausalLM", "LlavaVidForCausalLM",
    "LocateAnythingForConditionalGeneration", "MiDashengLMModel", "MiMoV2ASRForCausalLM", "MiniCPMO", "MiniCPMV",
    "MiniMaxM3SparseForConditionalGeneration", "Mistral3ForConditionalGeneration", "MllamaForConditionalGeneration",
    "MossVLForConditionalGeneration", "MultiModalityCausalLM", "MuseGlimmerForConditionalGeneration",
    "MuseSparkForConditionalGeneration", "NVILAForConditionalGeneration", "NVILALiteForConditionalGeneration",
    "NemotronH_Nano_Omni_Reasoning_V3", "NemotronH_Nano_VL_V2", "NemotronH_Omni_Reasoning_V3", "POINTSV15ChatModel",
    "PaddleOCRVLForConditionalGeneration", "Phi4MMForCausalLM", "PixtralForConditionalGeneration",
    "Qwen2AudioForConditionalGeneration", "Qwen2VLForConditionalGeneration", "Qwen2_5_VLForConditionalGeneration",
    "Qwen3ASRForConditionalGeneration", "Qwen3OmniMoeForConditionalGeneration", "Qwen3VLForConditionalGeneration",
    "Qwen3VLMoeForConditionalGeneration", "Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration",
    "Qwen4ExpForConditionalGeneration", "Sarashina2VisionForCausalLM", "Step3VLForConditionalGeneration",
    "Step3p7ForConditionalGeneration", "StepVLForConditionalGeneration", "UnlimitedOCRForCausalLM",
    "VoxtralForConditionalGeneration", "WhisperForConditionalGeneration",
})
MM_DISABLED_ARCHS = frozenset({"Gemma3ForConditionalGeneration", "Llama4ForConditionalGeneration",
                               "Step3VLForConditionalGeneration", "InklingForConditionalGeneration"})
#: SGLANG_VLM_CACHE_SIZE_MB: mem_cache/kv_cache_configurator.py mm_runtime_reservation_gb takes it (MB / 1024 GB)
#: off a multimodal model's KV budget (the default CPU feature transport adds no more)
VLM_CACHE_MIB = 100
#: arg_groups/model_overrides/qwen3_vl.py _qwen3vl_hopper_serving_overrides: Qwen3-VL on a compute capability 9 GPU
#: of 60 GiB or more sets SGLANG_VLM_CACHE_SIZE_MB to 0 and picks the cuda_ipc feature transport (one node), whose
#: SGLANG_MM_FEATURE_CACHE_MB pool (1,024, or 3,072 with max_running_requests >= 400) mm_runtime_reservation_gb
#: takes off the KV budget instead
QWEN3_VL_HOPPER_ARCHS = frozenset({"Qwen3VLForConditionalGeneration", "Qwen3VLMoeForConditionalGeneration"})
QWEN3_VL_HOPPER_MIB, QWEN3_VL_BUSY_MIB, QWEN3_VL_BUSY_REQUESTS = 1024, 3 * 1024, 400
#: Blackwell (SM100 / SM103: compute capability major 10, utils/common.py is_sm100_supported) picks TensorRT-LLM
#: kernels whose pages are fixed (arg_groups/overrides.py _mla_backend_page_constraints): trtllm_mha keeps a page of
#: 16, 32, 64 or 128, trtllm_mla one of 32 or 64, anything else (1 by default) becomes 64; fa4 (an MHA model whose K
#: and V widths differ, model_override_base.py get_default_attn_backend) takes 128 (_fa4_page_constraint)
TRTLLM_MHA_PAGES, TRTLLM_MLA_PAGES, TRTLLM_PAGE, FA4_PAGE = (16, 32, 64, 128), (32, 64), 64, 128
#: arg_groups/model_overrides/deepseek_v2.py _deepseek_family_overrides: the family that takes trtllm_mla on SM100
#: (without DSA; DeepseekV2ForCausalLM is not in it and keeps flashinfer, page 1)
TRTLLM_MLA_ARCHS = frozenset({
    "DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM", "KimiK25ForConditionalGeneration", "MistralLarge3ForCausalLM",
    "PixtralForConditionalGeneration", "GlmMoeDsaForCausalLM", "Glm5NextForConditionalGeneration", "HYV4ForCausalLM",
    "HYV4ForCausalLMNextN", "LongcatFlashForCausalLM", "LongcatFlashForCausalLMNextN", "Dots3NoteForCausalLM",
})
#: arg_groups/model_overrides/qwen3_5.py _qwen3_5_hybrid_overrides: on SM100 these declare trtllm_mha with page 64
#: or triton with page 1, whatever --page-size says: triton unless the radix cache is off or the strategy as given is
#: extra_buffer(_lazy) (the declaration is collected before _mamba_radix_cache_resolution turns `auto` into one)
QWEN3_5_SM100_ARCHS = frozenset({"Qwen3NextForCausalLM", "Qwen3_5MoeForConditionalGeneration",
                                 "InternS2PreviewForConditionalGeneration", "InternS2MobiusForConditionalGeneration",
                                 "Qwen3_5ForConditionalGeneration"})
#: arg_groups/attention_hook.py handle_attention_backend_compatibility: on ROCm the aiter backend (every MHA model)
#: multiplies mem_fraction_static by 0.85 when context_len is over 8192 (the default or a given fraction alike)
AITER_MEM_FACTOR, AITER_CONTEXT = 0.85, 8192
#: arg_groups/memory_hook.py: the prefill CUDA-graph sizes stop at 4096 tokens when "llama-2" is in the model path
LLAMA2_PREFILL_MAX_BS = 4096
#: SGLANG_SWA_EVICTION_INTERVAL: tokens a request's SWA slots run past the window before eviction
SWA_EVICTION_INTERVAL = 128

#: configs/model_config.py is_hybrid_swa_model: the architectures SGLang gives split full / SWA pools (Gemma 2/3
#: are forced off by arg_groups/model_overrides/gemma2_gemma3.py; Mistral, Qwen and the rest keep one pool)
HYBRID_SWA_ARCHS = frozenset({
    "BeamForCausalLM", "Llama4ForConditionalGeneration", "DeepseekV4ForCausalLM", "GptOssForCausalLM",
    "GraniteSWAForCausalLM", "GraniteMoeSWAForCausalLM", "IQuestQ1ForCausalLM", "MiMoV2ForCausalLM",
    "MiMoV2FlashForCausalLM", "Step3p5ForCausalLM", "Step3p7ForConditionalGeneration", "Gemma4ForCausalLM",
    "Gemma4ForConditionalGeneration", "Gemma4UnifiedForConditionalGeneration", "LagunaForCausalLM",
    "MellumForCausalLM", "MuseGlimmerForCausalLM", "MuseGlimmerForConditionalGeneration",
    "InklingForConditionalGeneration", "UnlimitedOCRForCausalLM",
})
#: arg_groups/model_overrides/llama4.py _llama4_overrides: the archs whose attention backend SGLang picks per GPU
#: (trtllm_mha on SM100, fa3 on SM90, aiter on ROCm, triton elsewhere; model_hook.py asserts one of them)
LLAMA4_ARCHS = frozenset({"Llama4ForConditionalGeneration", "Llama4ForCausalLM"})
#: configs/model_config.py: the one Llama 4 arch with split pools (is_hybrid_swa_model), local attention
#: (is_local_attention_model) and get_hybrid_layer_ids's fixed rule: SWA layers (i + 1) % 4 != 0, the rest full
LLAMA4_HYBRID_ARCH = "Llama4ForConditionalGeneration"
LLAMA4_FULL_EVERY = 4


def llama4_backend(sm_major: int | None) -> str:
    """The attention backend _llama4_overrides picks (CUDA compute capability major; None: ROCm)."""
    return {None: "aiter", 10: "trtllm_mha", 9: "fa3"}.get(sm_major, "triton")


#: models/gpt_oss.py get_attention_sliding_window_size: the SWA sink models attend window - 1 tokens back
WINDOW_MINUS_ONE_ARCHS = frozenset({"GptOssForCausalLM", "GraniteSWAForCausalLM", "GraniteMoeSWAForCausalLM",
                                    "IQuestQ1ForCausalLM"})
#: arg_groups/overrides.py _MAMBA_RADIX_CACHE_ARCHS: the hybrids whose Mamba state goes through the radix cache's
#: strategy resolution (_mamba_radix_cache_resolution); GraniteMoeHybridForCausalLM too when its layer_types name a
#: mamba layer (MAMBA_GRANITE_ARCH)
MAMBA_RADIX_CACHE_ARCHS = frozenset({
    "KimiLinearForCausalLM", "KimiK3ForConditionalGeneration", "BailingMoeV2_5ForCausalLM", "BailingMoeV3ForCausalLM",
    "BailingMoeV3VLForConditionalGeneration", "Qwen3NextForCausalLM", "Qwen3_5MoeForConditionalGeneration",
    "InternS2PreviewForConditionalGeneration", "InternS2MobiusForConditionalGeneration",
    "Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForCausalLM", "Qwen3_5ForCausalLM", "Qwen4ExpForConditionalGeneration",
    "MiniCPMV4_6ForConditionalGeneration", "MiniCPMV4_7ForConditionalGeneration", "NemotronHForCausalLM",
    "NemotronHPuzzleForCausalLM", "NemotronH_Omni_Reasoning_V3", "FalconH1ForCausalLM", "JetNemotronForCausalLM",
    "JetVLMForConditionalGeneration", "Lfm2ForCausalLM", "Lfm2MoeForCausalLM", "ZayaForCausalLM",
    "Glm5NextForConditionalGeneration",
})
MAMBA_GRANITE_ARCH = "GraniteMoeHybridForCausalLM"
#: arg_groups/overrides.py _MAMBA_EXTRA_BUFFER_ARCHS: the archs supports_mamba_cache_extra_buffer accepts (with the
#: default triton linear-attention backend): the `auto` strategy resolves to extra_buffer for them while the
#: overlap scheduler is on or the page is over 1, and an explicit extra_buffer is refused for any other
MAMBA_EXTRA_BUFFER_ARCHS = frozenset({
    "KimiLinearForCausalLM", "Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration",
    "Qwen3_5MoeForCausalLM", "Qwen3_5ForCausalLM", "Qwen3NextForCausalLM", "Qwen4ExpForConditionalGeneration",
    "InternS2PreviewForConditionalGeneration", "MiniCPMV4_6ForConditionalGeneration",
    "MiniCPMV4_7ForConditionalGeneration", "BailingMoeV2_5ForCausalLM", "BailingMoeV3ForCausalLM",
    "BailingMoeV3VLForConditionalGeneration", "FalconH1ForCausalLM", "GraniteMoeHybridForCausalLM",
    "Glm5NextForConditionalGeneration", "NemotronHForCausalLM", "NemotronHPuzzleForCausalLM",
    "NemotronH_Omni_Reasoning_V3", "KimiK3ForConditionalGeneration", "InklingForConditionalGeneration",
    "InklingForConditionalGenerationMTP",
})
#: arg_groups/fields/exec_.py: --mamba-radix-cache-strategy's choices (default auto) and mamba_track_interval (256),
#: which mamba_hook.py validate_mamba_extra_buffer requires the page to divide
MAMBA_STRATEGIES = ("auto", "no_buffer", "extra_buffer", "extra_buffer_lazy")
MAMBA_EXTRA_STRATEGIES = ("extra_buffer", "extra_buffer_lazy")
MAMBA_TRACK_INTERVAL = 256
#: arg_groups/model_overrides/nemotron_h.py _nemotron_h_overrides: on SM100 (no speculative decoding) these declare
#: attention_backend trtllm_mha before the Mamba strategy is validated (validate_mamba_no_buffer refuses it)
NEMOTRON_H_ARCHS = frozenset({"NemotronHForCausalLM", "NemotronHPuzzleForCausalLM", "NemotronH_Omni_Reasoning_V3"})

#: arg_groups/fields/memory.py: --hicache-mem-layout's choices (default page_first; pool_host/mha.py lays each out,
#: the same bytes); HiCache's default ratio in cache mode (arg_groups/hicache_hook.py handle_hicache_ratio_default)
#: and --hicache-host-memory-fraction's default
HICACHE_MEM_LAYOUTS = ("layer_first", "page_first", "page_first_direct", "page_first_kv_split", "page_head")
DEFAULT_HICACHE_RATIO = 2.0
DEFAULT_HICACHE_HOST_MEMORY_FRACTION = 0.8

#: arg_groups/memory_hook.py handle_gpu_memory_settings: (below MiB, chunked_prefill_size, decode max_bs below
#: tp 4, from tp 4)
_CAPACITY_TABLE = ((20 * 1024, 2048, 8, 8), (35 * 1024, 4096, 48, 160), (60 * 1024, 4096, 32, 160),
                   (90 * 1024, 8192, 256, 512), (160 * 1024, 8192, 256, 512))


def capacity_defaults(gpu_mib: int, tp: int) -> tuple[int, int]:
    """(chunked_prefill_size, decode CUDA-graph max_bs) that SGLang picks from the GPU's memory in MiB."""
    for below, chunk, small, large in _CAPACITY_TABLE:
        if gpu_mib < below:
            return chunk, (small if tp < 4 else large)
    return 16384, 512


def prefill_graph_sizes(max_bs: int) -> list[int]:
    """arg_groups/cuda_graph_hook.py generate_prefill_cuda_graph_batch_sizes."""
    sizes = (list(range(4, 33, 4)) + list(range(48, 257, 16)) + list(range(288, 513, 32)) + list(range(576, 1025, 64))
             + list(range(1280, 4097, 256)) + list(range(4608, max_bs + 1, 512)))
    return [s for s in sizes if s <= max_bs]


@dataclass(frozen=True)
class MemoryDefaults:
    """What handle_gpu_memory_settings resolves, and the figures its mem_fraction_static came from."""

    mem_fraction_static: float
    chunked_prefill_size: int
    decode_max_bs: int
    reserved_mib: float


def default_mem_fraction_static(gpu_mib: int, *, tp: int, pp: int, attn_dp: int, mla: bool, prefill_graphs: bool,
                                max_running_requests: int | None = None, max_total_tokens: int | None = None,
                                chunked_prefill_size: int | None = None, llama2: bool = False) -> MemoryDefaults:
    """arg_groups/memory_hook.py handle_gpu_memory_settings and reserve_for_graph_mb on CUDA, no speculative
    decoding, no DeepEP, a text model: ``round((gpu_mem - reserved) / gpu_mem, 3)``, reserved = 512 + 1.5 x
    max(chunked_prefill, 2048) + tp x pp / 8 x 1024 + the CUDA-graph reserve, at least 10 GiB above 60 GiB."""
    chunk, max_bs = capacity_defaults(gpu_mib, tp)
    chunk = chunked_prefill_size or chunk
    if max_running_requests is not None and max_bs > max_running_requests:
        max_bs = max_running_requests
    reserved = 512 + max(chunk, 2048) * 1.5 + tp * pp / 8 * 1024
    graph = max_bs * 2.0  # decode graphs
    if attn_dp > 1:
        graph += max_bs * attn_dp * 3
        if max_bs > 300:
            graph += max_bs * attn_dp * 1.5
    if prefill_graphs:
        if mla:
            graph += 1.5 * 1024
        else:
            prefill_max = chunk
            if max_total_tokens is not None:
                prefill_max = min(prefill_max, max_total_tokens)
            if llama2:  # "For Llama2 series models, max_bs is limited to 4096" ("llama-2" in the model path)
                prefill_max = min(prefill_max, LLAMA2_PREFILL_MAX_BS)
            graph += len(prefill_graph_sizes(prefill_max)) * 8
    reserved += graph
    if gpu_mib > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    return MemoryDefaults(round((gpu_mib - reserved) / gpu_mib, 3), chunk, max_bs, reserved)


def is_llama2_path(spec) -> bool:
    """SGLang tests ``"llama-2" in model_path.lower()``; kvcalc has no model path, so it reads the model's name and
    the Hugging Face repository its config came from (``sources.hub``)."""
    hub = (getattr(spec, "sources", None) or {}).get("hub", "")
    return "llama-2" in f"{spec.name} {hub}".lower()


def is_multimodal(spec) -> bool:
    """configs/model_config.py ModelConfig.is_multimodal: multimodal on (not one of mm_disabled_models) and the
    architecture listed, or the config nesting a text_config (``hf_config is not hf_text_config``)."""
    arch = spec.architecture
    if arch in MM_DISABLED_ARCHS or arch == "MiMoV2ForCausalLM":
        return False
    return arch in MULTIMODAL_ARCHS or (spec.multimodal is not None and spec.multimodal.text_config)


def vlm_mem_fraction(mem_fraction_static: float, mm) -> float:
    """arg_groups/memory_hook.py adjust_mem_fraction_for_vlm (no post-capture sizing): without a vision_config
    unchanged; else x 0.95 x clamp(1 - 0.1 x (layers x hidden^2 / (24 x 1024^2) - 1), 0.8, 1.05), with
    getattr(vision_config, "num_hidden_layers", 24) and getattr(..., "hidden_size", 1024); not re-rounded."""
    if mm is None or not mm.vision_config:
        return mem_fraction_static
    layers = 24 if mm.vision_num_hidden_layers is None else mm.vision_num_hidden_layers
    hidden = 1024 if mm.vision_hidden_size is None else mm.vision_hidden_size
    ratio = layers * hidden ** 2 / (24 * 1024 ** 2)
    return mem_fraction_static * (0.95 * max(0.8, min(1.05, 1.0 - 0.1 * (ratio - 1.0))))


#: utils/hf_transformers/common.py CONTEXT_LENGTH_KEYS, in its order (the first stated wins)
CONTEXT_LENGTH_KEYS = ("max_sequence_length", "seq_length", "max_seq_len", "model_max_length",
                       "max_position_embeddings")


def derived_context_len(spec) -> int | None:
    """SGLang 0.5.23's derived context_len (utils/hf_transformers/common.py get_context_length): the first of
    max_sequence_length, seq_length, max_seq_len, model_max_length, max_position_embeddings (kvcalc's max_context),
    times the rope factor unless the rope config states original_max_position_embeddings or is llama3."""
    stated = {**spec.context_fields, "max_position_embeddings": spec.max_context}
    base = next((stated[k] for k in CONTEXT_LENGTH_KEYS if stated.get(k) is not None), None)
    if base is None:
        return None
    rs, factor = spec.rope_scaling, 1.0
    if rs is not None and rs.factor is not None and rs.original_max_position_embeddings is None \
            and rs.type != "llama3":
        factor = rs.factor
    return int(factor * base)


@dataclass(frozen=True)
class Settings:
    """The SGLang server arguments that change the pools (SGLang's own names)."""

    mem_fraction_static: float | None = None  # None: the GPU-memory heuristic
    page_size: int | None = None  # None: 1 on Hopper, or the model override (64 DSA, 256 DeepSeek V4)
    swa_full_tokens_ratio: float | None = None  # None: 0.8 (0.1 for DeepSeek V4)
    max_running_requests: int | None = None
    max_total_tokens: int | None = None
    enable_dp_attention: bool = False  # with --dp N: attention data parallel over the tp ranks
    dp: int = 1  # set from the parallel layout
    pp: int = 1
    mamba_full_memory_ratio: float = DEFAULT_MAMBA_FULL_MEMORY_RATIO
    chunked_prefill_size: int | None = None  # None: from the GPU's memory
    allow_overwrite_longer_context_len: bool = False  # the env var SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1
    arch: str | None = None  # the GPU's architecture (kvcalc/data/gpus.yaml arch); None: Hopper, no GPU named
    context_length: int | None = None  # --context-length as capacity plans it (set from the context asked)
    mamba_radix_cache_strategy: str = "auto"  # --mamba-radix-cache-strategy (resolved per model: sizing.mamba_cache)
    disable_overlap_schedule: bool = False  # --disable-overlap-schedule
    disable_radix_cache: bool = False  # --disable-radix-cache
    max_mamba_cache_size: int | None = None  # --max-mamba-cache-size: state slots (divided over the attention-DP ranks)
    # HiCache (tiers.py): --enable-hierarchical-cache, --hicache-ratio (None: 2.0, auto-sized), --hicache-size (GB a
    # rank, 0: the ratio), --hicache-mem-layout; kvcalc's own host_memory_gib (the host's available memory, GiB)
    enable_hierarchical_cache: bool = False
    hicache_ratio: float | None = None
    hicache_size: int = 0
    hicache_mem_layout: str = "page_first"
    host_memory_gib: float | None = None

    @property
    def sm_major(self) -> int | None:
        """The CUDA compute capability's major (9 where no GPU is named); None on ROCm."""
        from ...hardware import arch_major

        return arch_major(self.arch)

    @property
    def attn_dp(self) -> int:
        return self.dp if self.enable_dp_attention else 1

    @property
    def prefill_chunk(self) -> int:
        """The chunked_prefill_size the scheduler runs: arg_groups/parallel_hook.py handle_data_parallelism
        divides it over the attention-DP ranks; without a GPU named, the H100 / H200 default."""
        return (self.chunked_prefill_size or DEFAULT_CHUNKED_PREFILL_SIZE) // self.attn_dp


def check_hicache(s: "Settings") -> None:
    """Refuse HiCache settings SGLang would not run as given: one without HiCache on (kvcalc's line), HiCache beside
    --disable-radix-cache (SGLang's own). Checked where the host pools are sized (tiers.host_tiers) and a log is read,
    not when settings are built: a command that sizes no tier (transfer) is not refused for them."""
    from ...errors import KvcalcError

    given = [k for k, off in (("hicache_ratio", None), ("hicache_size", 0), ("host_memory_gib", None))
             if getattr(s, k) != off]
    if s.hicache_mem_layout != "page_first":
        given.append("hicache_mem_layout")
    if given and not s.enable_hierarchical_cache:
        raise KvcalcError(f"{given[0]}: a HiCache setting, but HiCache is off ({{{{enable_hierarchical_cache}}}} "
                          "turns it on)", param=given[0])
    if s.enable_hierarchical_cache and s.disable_radix_cache:  # arg_groups/kv_cache_hook.py
        raise KvcalcError("enable_hierarchical_cache: SGLang refuses it: The arguments enable-hierarchical-cache "
                          "and disable-radix-cache are mutually exclusive and cannot be used at the same time. "
                          "Please use only one of them.", param="enable_hierarchical_cache")
