"""Nemotron-H (nemotron_h): ``hybrid_override_pattern`` (or transformers 5's ``layers_block_type`` list), M
Mamba-2, * attention, - and E layers without cache; the SSM state in ``mamba_ssm_cache_dtype``, fp32 when absent;
the MTP step's attention layers."""

from __future__ import annotations

from ..schema import MAX_LAYERS
from ...errors import quote
from .fields import _Fields, _attention, _fail, _hybrid_precisions, _show, _ssm_dtype


#: transformers NemotronHConfig._list_to_pattern, with configuration_utils.py's legacy names (mamba, attention)
_CODES = {"linear_attention": "M", "mamba": "M", "full_attention": "*", "attention": "*", "mlp": "-", "moe": "E"}


def _block_types(fields: _Fields, key: str) -> str | None:
    """A ``layers_block_type`` list as pattern codes (None when absent)."""
    lst = fields.listed(key, what="layer types")
    if lst is None:
        return None
    for i, t in enumerate(lst):
        if not isinstance(t, str) or t not in _CODES:
            raise _fail(f"{fields.file}: {fields.prefix}{key}[{i}]: {_show(t)} is not a layer type NemotronHConfig "
                        f"knows ({', '.join(sorted(_CODES))})")
    return "".join(_CODES[t] for t in lst)


def _pattern(fields: _Fields) -> tuple[str, str]:
    """The layers as codes, and where they came from: ``hybrid_override_pattern`` (num_hidden_layers long), or
    transformers 5's ``layers_block_type`` list (the layer count is its length)."""
    pat = fields.raw("hybrid_override_pattern")
    if pat is None:
        listed = _block_types(fields, "layers_block_type")
        if listed is not None:
            if not listed or len(listed) > MAX_LAYERS:
                raise _fail(f"{fields.where('layers_block_type')}: must list 1 to {MAX_LAYERS:,} layer types")
            return listed, fields.src("layers_block_type")
    n = fields.layers()
    if not isinstance(pat, str) or len(pat) != n:
        raise _fail(f"{fields.file}: {fields.prefix}hybrid_override_pattern: must be a string of {n} layer codes "
                    f"(num_hidden_layers), got {len(pat) if isinstance(pat, str) else type(pat).__name__} (or give "
                    "layers_block_type)")
    bad = sorted(set(pat) - set("M*-E"))
    if bad:
        raise _fail(f"{fields.file}: {fields.prefix}hybrid_override_pattern: layer code {quote(bad[0])} unknown "
                    "(M Mamba-2, * attention, - MLP, E MoE)")
    return pat, fields.src("hybrid_override_pattern")


def _mtp(fields: _Fields) -> dict | None:
    """vLLM nemotron_h_mtp.py: num_nextn_predict_layers x the MTP pattern's layers, each * an attention layer
    (the pattern: mtp_hybrid_override_pattern, else mtp_layers_block_type, NemotronHConfig's default
    [full_attention, moe])."""
    steps = fields.int("num_nextn_predict_layers", minimum=0, default=0)
    if not steps:
        return None
    pat = fields.raw("mtp_hybrid_override_pattern")
    if pat is not None and (not isinstance(pat, str) or set(pat) - set("M*-E")):
        raise _fail(f"{fields.where('mtp_hybrid_override_pattern')}: must be a string of layer codes (M * - E), got "
                    f"{_show(pat)}")
    where = fields.src("mtp_hybrid_override_pattern")
    if pat is None:
        pat = _block_types(fields, "mtp_layers_block_type")
        where = fields.src("mtp_layers_block_type")
        if pat is None:
            pat, where = "*E", "transformers NemotronHConfig default mtp_layers_block_type [full_attention, moe]"
    n = steps * pat.count("*")
    if not n:
        return None
    return {"layers": n, "kind": "attention",
            "source": f"{fields.src('num_nextn_predict_layers')} {steps} x the attention layers of {where} ({quote(pat)})"}


def import_nemotron_h(fields: _Fields, mt: str) -> dict:
    pat, pat_source = _pattern(fields)
    n = len(pat)
    heads, hdim = fields.int("mamba_num_heads"), fields.int("mamba_head_dim")
    comps: dict = {}
    kinds: dict = {}
    if "*" in pat:
        # vLLM's nemotron_h.py reads config.head_dim, NemotronHConfig's default 128 where config.json omits it
        # (an attention_head_dim beside it is not read)
        comps["attention"] = _attention(fields)
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
        "layers": {"select": {"value": pat, "source": pat_source},
                   "kinds": {c: code[c] for c in dict.fromkeys(pat)}},
        **({"mtp": mtp} if (mtp := _mtp(fields)) and "*" in pat else {}),
    }
