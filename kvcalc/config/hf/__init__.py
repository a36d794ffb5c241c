"""`kvcalc import-hf`: a Hugging Face ``config.json`` turned into a kvcalc model config.

The importer reads the structure the config declares and copies every value it states (``head_dim`` when the
config has one, never ``hidden_size / heads`` then); a value it must derive says so in its source. What it
does not understand fails closed: an unknown ``model_type``, a layer type it has no cache kind for, a field it
needs but the file lacks, each one line naming the field, and the list of families it knows.

A field the config omits takes its transformers class default where the class states one (``hf/defaults.py``:
vLLM reads config.json through that class, so Gemma 3's diff-style ``text_config`` means head_dim 256 and 131,072
positions); the source then says so.

Families (``model_type``; nested ``text_config`` read for multimodal checkpoints):

* full / sliding-window attention (GQA, MQA, MHA): llama (Llama 2, 3, 3.1; a ``sliding_window`` slides every
  layer), mistral (global ``sliding_window``; 0 means none), mixtral, qwen2, qwen2_moe, qwen3, qwen3_moe, phi3 (Phi-3, Phi-4), gemma, gemma2 and
  gemma3 (local/global patterns; the default pattern when the config omits it), gpt_oss (``layer_types``),
  minimax_m2 (MiniMax-M2: full attention in every layer; ``attn_type_list`` all 1; the MTP modules no engine runs
  are not counted), qwen3_vl and qwen3_vl_moe (Qwen3-VL: every layer full; multimodal), mimo (MiMo-7B: Qwen2
  layers, ``num_nextn_predict_layers`` MTP layers); a stated window on a family without one is refused;
* mimo_v2_flash (MiMo-V2-Flash): ``hybrid_layer_pattern``, full attention and sliding-window attention with their
  own KV heads and K / V widths (``swa_*`` fields, ``sliding_window_size``), vLLM's one MTP layer;
* refused with their reason (``dispatch.NOT_IMPORTED``): gemma4 / gemma4_text, nemotron-nas;
* MLA: deepseek_v2, deepseek_v3, kimi_k2 (``kv_lora_rank + qk_rope_head_dim``, MTP layers);
* MLA + indexer (DSA): deepseek_v32, glm_moe_dsa;
* DeepSeek V4 (deepseek_v4): ``compress_ratios`` per layer (0 window only, 4 c4a, 128 c128a), the window in
  every layer, compressor state, MTP layers;
* hybrids with fixed recurrent state: qwen3_next, qwen3_5 and qwen3_5_moe (gated DeltaNet layers + full attention every
  ``full_attention_interval`` or as ``layer_types`` says; ``mamba_ssm_dtype``; Qwen3.5's MTP layer), nemotron_h (``hybrid_override_pattern``: M Mamba-2, * attention, - and E
  layers without cache), jamba (Mamba-1 + attention every ``attn_layer_period``), falcon_h1 (attention and
  Mamba-2 side by side in every layer), minimax and minimax_m1 (``attn_type_list``: lightning linear
  attention + softmax),
  kimi_linear (Kimi Delta Attention layers by ``linear_attn_config.kda_layers``, MLA in the others).
  Their state is in the precision's ``state`` role: the model dtype, as vLLM keeps it, except where a config
  states its own (Qwen3.5's ``mamba_ssm_dtype``, Nemotron-H's ``mamba_ssm_cache_dtype``, fp32 when absent, as
  vLLM's NemotronHForCausalLMConfig does; KDA's recurrent state in fp32);
* llama4 (chunked local attention over ``attention_chunk_size`` in the RoPE layers, global NoPE layers by
  ``no_rope_layers``).

Torch-free, like the rest of the core. Pure function of the JSON: no network.

Layout: ``files`` reads the config.json (and writes the YAML), ``fields`` holds the field reader and the
helpers the families share, one module per family maps its fields, and ``dispatch`` picks the family by
``model_type``. The importer stands alone: it never loads a model (``kvcalc.config.load_hf`` does that).
"""

from .dispatch import DISPATCH, SUPPORTED, import_config, model_type
from .files import MAX_CONFIG_BYTES, locate, read_config, to_yaml

__all__ = ["DISPATCH", "MAX_CONFIG_BYTES", "SUPPORTED", "import_config", "locate", "model_type", "read_config",
           "to_yaml"]
