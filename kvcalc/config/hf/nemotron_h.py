"""Nemotron-H (nemotron_h): ``hybrid_override_pattern``, M Mamba-2, * attention, - and E layers without
cache; the SSM state in ``mamba_ssm_cache_dtype``, fp32 when absent."""

from __future__ import annotations

from .fields import _Fields, _attention, _fail, _hybrid_precisions, _ssm_dtype


def import_nemotron_h(fields: _Fields, mt: str) -> dict:
    n = fields.layers()
    pat = fields.raw("hybrid_override_pattern")
    if not isinstance(pat, str) or len(pat) != n:
        raise _fail(f"{fields.file}: {fields.prefix}hybrid_override_pattern: must be a string of {n} layer codes "
                    f"(num_hidden_layers), got {len(pat) if isinstance(pat, str) else type(pat).__name__}")
    bad = sorted(set(pat) - set("M*-E"))
    if bad:
        raise _fail(f"{fields.file}: {fields.prefix}hybrid_override_pattern: layer code {bad[0]!r} unknown "
                    "(M Mamba-2, * attention, - MLP, E MoE)")
    heads, hdim = fields.int("mamba_num_heads"), fields.int("mamba_head_dim")
    comps: dict = {}
    kinds: dict = {}
    if "*" in pat:
        comps["attention"] = _attention(fields, "head_dim" if fields.has("head_dim") else "attention_head_dim")
        kinds["attention"] = ["attention"]
    if "M" in pat:
        comps["mamba"] = {"cache": "mamba2", "heads": fields.value("mamba_num_heads"),
                          "head_dim": fields.value("mamba_head_dim"), "state_size": fields.value("ssm_state_size"),
                          "groups": fields.value("n_groups"), "conv_kernel": fields.value("conv_kernel"),
                          "intermediate": {"value": heads * hdim, "source": f"{fields.src('mamba_num_heads')} "
                                           f"{heads} x mamba_head_dim {hdim} (vLLM nemotron_h MambaMixer2)"}}
        # vLLM keeps Nemotron-H's SSM state in the dtype the config states, else fp32
        # (model_executor/models/config.py NemotronHForCausalLMConfig, DEFAULT_MAMBA_SSM_CACHE_DTYPE "float32")
        stated = _ssm_dtype(fields, "mamba_ssm_cache_dtype")
        comps["mamba"]["ssm_dtype"] = stated or "fp32"
        comps["mamba"]["note"] = (f"SSM state in {stated}: {fields.src('mamba_ssm_cache_dtype')}" if stated else
                                  "SSM state in fp32: vLLM NemotronHForCausalLMConfig's default when the config "
                                  "states no mamba_ssm_cache_dtype (conv state in the model dtype)")
        kinds["mamba"] = ["mamba"]
    if "-" in pat:
        kinds["mlp"] = []
    if "E" in pat:
        kinds["moe"] = []
    code = {"M": "mamba", "*": "attention", "-": "mlp", "E": "moe"}
    return {
        "description": (f"{n} layers: {pat.count('M')} Mamba-2, {pat.count('*')} attention, "
                        f"{pat.count('-') + pat.count('E')} without cache (MLP / MoE)"),
        "precisions": _hybrid_precisions(), "components": comps, "layer_kinds": kinds,
        "layers": {"select": {"value": pat, "source": fields.src("hybrid_override_pattern")},
                   "kinds": {c: code[c] for c in dict.fromkeys(pat)}},
    }
