"""Qwen3-Next and Qwen3.5 (qwen3_next, qwen3_5): gated DeltaNet layers + full attention every
``full_attention_interval`` or as ``layer_types`` says; ``mamba_ssm_dtype``; Qwen3.5's MTP layer."""

from __future__ import annotations

from .fields import _Fields, _attention, _fail, _hybrid_precisions, _ssm_dtype


def import_qwen3_next(fields: _Fields, mt: str) -> dict:
    n = fields.layers()
    lt = fields.listed("layer_types", n, "layer types")
    if lt is not None:
        if any(not isinstance(t, str) or t not in ("linear_attention", "full_attention") for t in lt):
            raise _fail(f"{fields.file}: {fields.prefix}layer_types: must list {n} of linear_attention / full_attention")
        types, how = list(lt), fields.src("layer_types")
    else:
        if fields.has("full_attention_interval"):
            k, how = fields.int("full_attention_interval"), fields.src("full_attention_interval")
        else:
            k, how = 4, "transformers Qwen3NextConfig default full_attention_interval 4 (the config omits it)"
        types = ["linear_attention" if (i + 1) % k else "full_attention" for i in range(n)]
        how = f"{how}: every {k}th layer full attention, the others gated DeltaNet"
    comps = {
        "full": _attention(fields),
        "linear": {"cache": "gated_deltanet", "k_heads": fields.value("linear_num_key_heads"),
                   "v_heads": fields.value("linear_num_value_heads"),
                   "k_head_dim": fields.value("linear_key_head_dim"),
                   "v_head_dim": fields.value("linear_value_head_dim"),
                   "conv_kernel": fields.value("linear_conv_kernel_dim")},
    }
    ssm = _ssm_dtype(fields, "mamba_ssm_dtype")
    if ssm is not None:
        comps["linear"]["ssm_dtype"] = ssm
        comps["linear"]["note"] = f"recurrent state in {ssm}: {fields.src('mamba_ssm_dtype')}"
    full = types.count("full_attention")
    out = {
        "description": f"{n} layers: {full} full attention, {n - full} gated DeltaNet (fixed state per request)",
        "precisions": _hybrid_precisions(), "components": comps,
        "layer_kinds": {"attention": ["full"], "linear": ["linear"]},
        "layers": {"select": types, "kinds": {"linear_attention": "linear", "full_attention": "attention"},
                   "source": how},
    }
    mtp = fields.int("mtp_num_hidden_layers", minimum=0, default=0)
    if mtp:
        out["mtp"] = {"layers": mtp, "kind": "attention",
                      "source": f"{fields.src('mtp_num_hidden_layers')} (a full-attention layer)"}
    return out
