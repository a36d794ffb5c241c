"""Which llama.cpp architecture runs a model, and what that architecture does with the model's layers.

A GGUF names its architecture (``general.architecture``); a Hugging Face config or a shipped config names the class
its checkpoint was saved as, and llama.cpp's converter (``convert_hf_to_gguf.py``, ``conversion/*.py``
``@ModelBase.register``) maps each class to one architecture. What matters for the cache, per architecture
(``src/models/<arch>.cpp`` ``load_arch_hparams``):

* whether a sliding window is honoured: gemma2 / gemma3 / gemma3n / cohere2 / gpt-oss / lfm2 keep a sliding-window
  cache (``LLAMA_SWA_TYPE_STANDARD``), llama4 a chunked one (``LLAMA_SWA_TYPE_CHUNKED``, n_swa 8192); llama (Mistral
  7B v0.1 converts to it) keeps no window, and phi3 turns its window off ("Phi SWA is currently disabled"), so every
  layer of those caches every token;
* the caches it allocates: attention K / V (MLA: one K row, no V), recurrent state, or both.
"""

from __future__ import annotations

# which architectures kvcalc plans, what each keeps (create_memory's branches) and why some are not planned: one
# table, the GGUF reader's (a config's architecture is checked against the same)
from ...config.gguf.hparams import ATTENTION, HYBRID, NOT_PLANNED, RECURRENT, SUPPORTED  # noqa: F401
from ...errors import KvcalcError, quote

#: Hugging Face class -> llama.cpp architecture (conversion/*.py @ModelBase.register ... model_arch)
FROM_HF: dict[str, str] = {
    "LlamaForCausalLM": "llama", "MistralForCausalLM": "llama", "MixtralForCausalLM": "llama",  # conversion/llama.py
    "Qwen2ForCausalLM": "qwen2", "Qwen2MoeForCausalLM": "qwen2moe",  # conversion/qwen.py
    "Qwen3ForCausalLM": "qwen3", "Qwen3MoeForCausalLM": "qwen3moe", "Qwen3NextForCausalLM": "qwen3next",
    "Qwen3_5ForConditionalGeneration": "qwen35", "Qwen3_5ForCausalLM": "qwen35",
    "Qwen3_5MoeForConditionalGeneration": "qwen35moe", "Qwen3_5MoeForCausalLM": "qwen35moe",
    "Qwen3VLForConditionalGeneration": "qwen3vl", "Qwen3VLMoeForConditionalGeneration": "qwen3vlmoe",  # qwen3vl.py
    "Phi3ForCausalLM": "phi3",  # conversion/phi.py
    "Gemma2ForCausalLM": "gemma2", "Gemma3ForCausalLM": "gemma3", "Gemma3ForConditionalGeneration": "gemma3",
    "Gemma3nForCausalLM": "gemma3n", "Gemma3nForConditionalGeneration": "gemma3n",  # conversion/gemma.py
    "GptOssForCausalLM": "gpt-oss",  # conversion/gpt_oss.py (MODEL_ARCH.GPT_OSS, "gpt-oss")
    "DeepseekV2ForCausalLM": "deepseek2", "DeepseekV3ForCausalLM": "deepseek2",  # conversion/deepseek.py
    "DeepseekV32ForCausalLM": "deepseek32", "GlmMoeDsaForCausalLM": "glm-dsa", "DeepseekV4ForCausalLM": "deepseek4",
    "Llama4ForConditionalGeneration": "llama4", "Llama4ForCausalLM": "llama4",  # conversion/llama4.py
    "CohereForCausalLM": "command-r", "Cohere2ForCausalLM": "cohere2",  # conversion/command_r.py
    "MambaForCausalLM": "mamba", "Mamba2ForCausalLM": "mamba2",  # conversion/mamba.py
    "JambaForCausalLM": "jamba", "FalconH1ForCausalLM": "falcon-h1",
    "GraniteMoeHybridForCausalLM": "granitehybrid", "Lfm2ForCausalLM": "lfm2", "Lfm2MoeForCausalLM": "lfm2moe",
    "NemotronHForCausalLM": "nemotron_h",
    "MiniMaxM2ForCausalLM": "minimax-m2", "MiniMaxM1ForCausalLM": "minimax-01", "MiMoV2FlashForCausalLM": "mimo2",
    "KimiLinearForCausalLM": "kimi-linear",
}

#: the window each architecture keeps (its load_arch_hparams): "standard", "chunked", or None (every layer full)
SWA_TYPE: dict[str, str | None] = {"gemma2": "standard", "gemma3": "standard", "gemma3n": "standard",
                                   "cohere2": "standard", "gpt-oss": "standard", "lfm2": "standard",
                                   "lfm2moe": "standard", "llama4": "chunked"}

#: why a layer's window is not kept, per architecture that has one in its config but not in its cache
WINDOW_DROPPED = {
    "llama": "llama.cpp's llama architecture keeps no sliding window (src/models/llama.cpp reads none): every layer "
             "caches every token",
    "phi3": "llama.cpp turns Phi-3's sliding window off (src/models/phi3.cpp: \"Phi SWA is currently disabled\", "
            "swa_type NONE): every layer caches every token",
}


def llama_arch(spec) -> str:
    """The llama.cpp architecture of ``spec``: its GGUF's, else the one llama.cpp's converter maps its Hugging Face
    class to; refused in one line where there is none, or where llama.cpp keeps the model's caches in a class of
    its own."""
    arch = getattr(spec, "gguf_architecture", None)
    if arch is None:
        hf = spec.architecture
        if hf is None:
            raise KvcalcError(f"{spec.name}: names no architecture, so kvcalc cannot tell which llama.cpp architecture "
                              "runs it (give the GGUF, or a config.json with architectures)", param="model")
        arch = FROM_HF.get(hf)
        if arch is None:
            raise KvcalcError(f"{spec.name}: llama.cpp's converter maps no architecture from {quote(hf)} in "
                              "kvcalc's table (give the model's GGUF)", param="model")
    if arch in NOT_PLANNED:
        raise KvcalcError(f"{spec.name}: llama.cpp architecture {quote(arch)}: {NOT_PLANNED[arch]}", param="model")
    if arch not in SUPPORTED:
        raise KvcalcError(f"{spec.name}: llama.cpp architecture {quote(arch)} is not planned by kvcalc (it plans: "
                          f"{', '.join(sorted(SUPPORTED))})", param="model")
    return arch
