"""The defaults of the transformers config classes vLLM 0.33 reads a config.json through (transformers 5.20,
its pin below 5.21): a field config.json omits takes its class's default, as ``PreTrainedConfig`` gives it.
Multimodal checkpoints write their ``text_config`` as a diff against the class, so Gemma 3's omits
``head_dim`` (256), its head counts and ``max_position_embeddings`` (131,072). Only the fields kvcalc reads, and
only where the class states a value (a None default, which the class derives in ``__post_init__``, such as
Llama's ``head_dim = hidden_size // num_attention_heads``, is left to kvcalc's own derivation). Families vLLM
reads through a config class of its own (kimi_k2, kimi_linear, deepseek_v32: transformers_utils/config.py
_CONFIG_REGISTRY) and families transformers lacks (minimax_m1) have no entry, except mimo, whose remote-code class
subclasses Qwen2Config and takes its defaults."""

from __future__ import annotations

_LLAMA_LIKE = {"hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32}

#: model_type -> (the transformers class, {field: default})
CLASS_DEFAULTS: dict[str, tuple[str, dict]] = {
    "llama": ("LlamaConfig", {**_LLAMA_LIKE, "max_position_embeddings": 2048}),
    "mistral": ("MistralConfig", {**_LLAMA_LIKE, "num_key_value_heads": 8, "max_position_embeddings": 131072,
                                  "sliding_window": 4096}),
    "mixtral": ("MixtralConfig", {**_LLAMA_LIKE, "num_key_value_heads": 8, "max_position_embeddings": 131072}),
    "qwen2": ("Qwen2Config", {**_LLAMA_LIKE, "num_key_value_heads": 32, "max_position_embeddings": 32768,
                              "use_sliding_window": False, "sliding_window": 4096, "max_window_layers": 28}),
    "qwen2_moe": ("Qwen2MoeConfig", {"hidden_size": 2048, "num_hidden_layers": 24, "num_attention_heads": 16,
                                     "num_key_value_heads": 16, "max_position_embeddings": 32768,
                                     "use_sliding_window": False, "sliding_window": 4096, "max_window_layers": 28}),
    "qwen3": ("Qwen3Config", {**_LLAMA_LIKE, "num_key_value_heads": 32, "head_dim": 128,
                              "max_position_embeddings": 32768, "use_sliding_window": False, "sliding_window": 4096,
                              "max_window_layers": 28}),
    "qwen3_moe": ("Qwen3MoeConfig", {"hidden_size": 2048, "num_hidden_layers": 24, "num_attention_heads": 32,
                                     "num_key_value_heads": 4, "max_position_embeddings": 32768,
                                     "use_sliding_window": False, "sliding_window": 4096}),
    "phi3": ("Phi3Config", {"hidden_size": 3072, "num_hidden_layers": 32, "num_attention_heads": 32,
                            "max_position_embeddings": 4096, "original_max_position_embeddings": 4096}),
    "gemma": ("GemmaConfig", {"hidden_size": 3072, "num_hidden_layers": 28, "num_attention_heads": 16,
                              "num_key_value_heads": 16, "head_dim": 256, "max_position_embeddings": 8192}),
    "gemma2": ("Gemma2Config", {"hidden_size": 2304, "num_hidden_layers": 26, "num_attention_heads": 8,
                                "num_key_value_heads": 4, "head_dim": 256, "max_position_embeddings": 8192,
                                "sliding_window": 4096}),
    "gemma3_text": ("Gemma3TextConfig", {"hidden_size": 2304, "num_hidden_layers": 26, "num_attention_heads": 8,
                                         "num_key_value_heads": 4, "head_dim": 256, "max_position_embeddings": 131072,
                                         "sliding_window": 4096}),
    "gpt_oss": ("GptOssConfig", {"num_hidden_layers": 36, "hidden_size": 2880, "head_dim": 64,
                                 "num_attention_heads": 64, "num_key_value_heads": 8, "sliding_window": 128,
                                 "max_position_embeddings": 131072}),
    "deepseek_v2": ("DeepseekV2Config", {**_LLAMA_LIKE, "max_position_embeddings": 2048, "kv_lora_rank": 512,
                                         "qk_rope_head_dim": 64}),
    "deepseek_v3": ("DeepseekV3Config", {"hidden_size": 7168, "num_hidden_layers": 61, "num_attention_heads": 128,
                                         "num_key_value_heads": 128, "kv_lora_rank": 512, "qk_rope_head_dim": 64,
                                         "max_position_embeddings": 4096}),
    "glm_moe_dsa": ("GlmMoeDsaConfig", {"hidden_size": 6144, "num_hidden_layers": 78, "num_attention_heads": 64,
                                        "num_key_value_heads": 64, "kv_lora_rank": 512, "qk_rope_head_dim": 64,
                                        "max_position_embeddings": 202752, "index_head_dim": 128}),
    "deepseek_v4": ("DeepseekV4Config", {"hidden_size": 4096, "num_hidden_layers": 43, "num_attention_heads": 64,
                                         "num_key_value_heads": 1, "head_dim": 512, "max_position_embeddings": 1048576,
                                         "sliding_window": 128, "index_head_dim": 128}),
    "qwen3_next": ("Qwen3NextConfig", {"hidden_size": 2048, "num_hidden_layers": 48, "num_attention_heads": 16,
                                       "num_key_value_heads": 2, "max_position_embeddings": 32768, "head_dim": 256}),
    "qwen3_5_text": ("Qwen3_5TextConfig", {"hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 16,
                                           "num_key_value_heads": 4, "max_position_embeddings": 32768,
                                           "head_dim": 256}),
    "qwen3_5_moe_text": ("Qwen3_5MoeTextConfig", {"hidden_size": 2048, "num_hidden_layers": 40,
                                                  "num_attention_heads": 16, "num_key_value_heads": 2,
                                                  "max_position_embeddings": 32768, "head_dim": 256}),
    "nemotron_h": ("NemotronHConfig", {"hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8,
                                       "head_dim": 128, "max_position_embeddings": 4096}),
    "jamba": ("JambaConfig", {**_LLAMA_LIKE, "num_key_value_heads": 8, "max_position_embeddings": 262144}),
    "falcon_h1": ("FalconH1Config", {**_LLAMA_LIKE, "num_key_value_heads": 8, "max_position_embeddings": 8192,
                                     "mamba_d_ssm": 1024}),
    "minimax": ("MiniMaxConfig", {**_LLAMA_LIKE, "num_key_value_heads": 8, "max_position_embeddings": 131072}),
    "minimax_m2": ("MiniMaxM2Config", {"hidden_size": 3072, "num_hidden_layers": 62, "num_attention_heads": 48,
                                       "num_key_value_heads": 8, "head_dim": 128, "max_position_embeddings": 196608}),
    "qwen3_vl_text": ("Qwen3VLTextConfig", {**_LLAMA_LIKE, "num_key_value_heads": 32, "head_dim": 128,
                                            "max_position_embeddings": 128000}),
    # head_dim None: __post_init__ derives hidden_size // num_attention_heads, as kvcalc does
    "qwen3_vl_moe_text": ("Qwen3VLMoeTextConfig", {"hidden_size": 2048, "num_hidden_layers": 24,
                                                  "num_attention_heads": 16, "num_key_value_heads": 16,
                                                  "max_position_embeddings": 128000}),
    # sliding_window (129) is not listed: vLLM and SGLang read sliding_window_size, which the class has no default for
    "mimo_v2_flash": ("MiMoV2FlashConfig", {"hidden_size": 4096, "num_hidden_layers": 48, "num_attention_heads": 64,
                                            "num_key_value_heads": 4, "head_dim": 192, "v_head_dim": 128,
                                            "max_position_embeddings": 131072}),
    "llama4_text": ("Llama4TextConfig", {"hidden_size": 5120, "num_hidden_layers": 48, "num_attention_heads": 40,
                                         "num_key_value_heads": 8, "head_dim": 128, "max_position_embeddings": 131072,
                                         "attention_chunk_size": 8192}),
}
#: the outer multimodal classes whose text_config is one of the above
CLASS_DEFAULTS["gemma3"] = CLASS_DEFAULTS["gemma3_text"]
CLASS_DEFAULTS["qwen3_5"] = CLASS_DEFAULTS["qwen3_5_text"]
CLASS_DEFAULTS["qwen3_5_moe"] = CLASS_DEFAULTS["qwen3_5_moe_text"]
CLASS_DEFAULTS["llama4"] = CLASS_DEFAULTS["llama4_text"]
CLASS_DEFAULTS["qwen3_vl"] = CLASS_DEFAULTS["qwen3_vl_text"]
CLASS_DEFAULTS["qwen3_vl_moe"] = CLASS_DEFAULTS["qwen3_vl_moe_text"]
#: mimo: transformers has no class; the checkpoint's remote code (configuration_mimo.py, loaded with
#: trust_remote_code) is ``class MiMoConfig(Qwen2Config)`` adding only num_nextn_predict_layers (default 0), so the
#: omitted fields take transformers' Qwen2Config defaults
CLASS_DEFAULTS["mimo"] = CLASS_DEFAULTS["qwen2"]
