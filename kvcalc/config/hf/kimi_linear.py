"""Kimi-Linear (kimi_linear): Kimi Delta Attention layers by ``linear_attn_config.kda_layers``, MLA in the
others; KDA's recurrent state in fp32."""

from __future__ import annotations

from .fields import _Fields, _fail

_KDA_SRC = ("vLLM 0.33 MambaStateShapeCalculator.kda_state_shape (conv over q, k and v: 3 x num_heads x head_dim "
            "channels; recurrent num_heads x head_dim x head_dim) and kda_state_dtype")


def import_kimi_linear(fields: _Fields, mt: str) -> dict:
    """Kimi-Linear: layer i (from 0) is a Kimi Delta Attention layer when i + 1 is in
    ``linear_attn_config.kda_layers`` (vLLM KimiLinearConfig.is_kda_layer), an MLA layer otherwise."""
    n = fields.layers()
    lac = fields.raw("linear_attn_config")
    where = f"{fields.file}: {fields.prefix}linear_attn_config"
    if not isinstance(lac, dict):
        raise _fail(f"{where}: required for kimi_linear (kda_layers, num_heads, head_dim, short_conv_kernel_size), "
                    f"got {type(lac).__name__ if lac is not None else 'nothing'}")
    kda = lac.get("kda_layers")
    if not isinstance(kda, list) or any(isinstance(i, bool) or not isinstance(i, int) or not 1 <= i <= n for i in kda) \
            or len(set(kda)) != len(kda):
        raise _fail(f"{where}.kda_layers: must list distinct layer numbers from 1 to {n} (num_hidden_layers)")
    full = lac.get("full_attn_layers")  # vLLM's KimiLinearConfig asserts both lists are there
    if not isinstance(full, list) or any(isinstance(i, bool) or not isinstance(i, int) for i in full) \
            or sorted(set(full) | set(kda)) != list(range(1, n + 1)) or set(full) & set(kda):
        raise _fail(f"{where}.full_attn_layers: with kda_layers must number every layer 1 to {n} exactly once")
    if lac.get("use_full_rank_gate") not in (None, False):
        raise _fail(f"{where}.use_full_rank_gate: Kimi-K3's KDA layer (FlashKDA prefill checkpoints) is not "
                    "modelled; kvcalc imports Kimi-Linear's")
    sub_fields = _Fields(lac, fields.file)
    sub_fields.prefix = f"{fields.prefix}linear_attn_config."
    heads, hd = sub_fields.value("num_heads"), sub_fields.value("head_dim")
    types = ["kda" if i + 1 in set(kda) else "mla" for i in range(n)]
    mtp = fields.int("num_nextn_predict_layers", minimum=0, default=0)
    comps: dict = {}
    kinds: dict = {}
    if "mla" in types or mtp:
        rank, rope = fields.int("kv_lora_rank"), fields.int("qk_rope_head_dim")
        comps["latent"] = {"cache": "mla", "storage": "kv", "rope_dim": fields.value("qk_rope_head_dim"),
                           "dim": {"value": rank + rope, "source": f"{fields.src('kv_lora_rank')} {rank} + "
                                                                   f"qk_rope_head_dim {rope}"}}
        kinds["mla"] = ["latent"]
    if "kda" in types:
        comps["kda"] = {"cache": "kda", "k_heads": heads, "v_heads": heads, "k_head_dim": hd,
                        "v_head_dim": hd, "conv_kernel": sub_fields.value("short_conv_kernel_size"),
                        "ssm_dtype": "fp32",
                        "note": "Kimi Delta Attention: one head count and width for q, k and v; the recurrent "
                                "state in fp32 as vLLM keeps it (mamba_ssm_cache_dtype auto -> float32)",
                        "source": _KDA_SRC}
        kinds["kda"] = ["kda"]
    out = {
        "description": f"{n} layers: {types.count('mla')} MLA, {types.count('kda')} Kimi Delta Attention (fixed state)",
        "precisions": {
            "bf16": {"kv": "bf16", "state": "bf16", "source": "MLA latent and KDA conv state in the model dtype; "
                     "the KDA recurrent state is fp32 whatever the precision (vLLM kda_state_dtype)"},
            "fp8": {"kv": "fp8_e4m3", "state": "bf16",
                    "source": "vLLM --kv-cache-dtype fp8 on MLA (per-tensor scale); KDA state as in bf16"},
        },
        "components": comps, "layer_kinds": kinds,
        "layers": {"select": types, "kinds": {"mla": "mla", "kda": "kda"},
                   "source": f"{fields.src('linear_attn_config')}.kda_layers (numbered from 1): those layers KDA, "
                             "the others MLA (vLLM KimiLinearConfig.is_kda_layer)"},
    }
    if mtp:
        out["mtp"] = {"layers": mtp, "kind": "mla", "source": f"{fields.src('num_nextn_predict_layers')} (MLA layers)"}
    return out
