"""MiMo-V2-Flash (mimo_v2_flash): ``hybrid_layer_pattern`` per layer, 1 sliding-window attention over
``sliding_window_size`` tokens with its own heads (``swa_num_key_value_heads``, ``swa_head_dim``,
``swa_v_head_dim``), 0 full attention (``num_key_value_heads``, ``head_dim``, ``v_head_dim``); K and V of different
widths. vLLM 0.33 (model_executor/models/mimo_v2.py MiMoV2FlashDecoderLayer) and SGLang 0.5.23 (models/mimo_v2.py
MiMoV2DecoderLayer) read exactly these fields; transformers' own ``layer_types`` and ``sliding_window``
(``sliding_window_size + 1``) are not what they cache."""

from __future__ import annotations

from .fields import _Fields, _fail, _gqa_precisions, _show

#: vLLM 0.33 model_executor/models/mimo_v2_mtp.py _MIMO_V2_FLASH_NUM_MTP_LAYERS: the MTP layers it runs (the config
#: states no count); each is a sliding-window layer with the SWA heads (MiMoV2MTPLayer)
VLLM_MTP_LAYERS = 1


def _heads(fields: _Fields, kv_key: str, heads_key: str) -> dict:
    kv = fields.value(kv_key)
    heads = fields.int(heads_key)
    if kv["value"] > heads or heads % kv["value"]:
        raise _fail(f"{fields.where(kv_key)}: {kv['value']} KV heads must divide {heads_key} {heads}")
    return kv


def import_mimo_v2_flash(fields: _Fields, mt: str) -> dict:
    n = fields.layers()
    pattern = fields.listed("hybrid_layer_pattern", n, "layer codes")
    if pattern is None:
        raise _fail(f"{fields.where('hybrid_layer_pattern')}: required for this model type (vLLM and SGLang read "
                    "each layer's kind from it), missing")
    for i, code in enumerate(pattern):
        if isinstance(code, bool) or code not in (0, 1):
            raise _fail(f"{fields.file}: {fields.prefix}hybrid_layer_pattern[{i}]: {_show(code)} is neither 0 (full "
                        "attention) nor 1 (sliding window)")
    # vLLM MiMoV2Attention: v_head_dim None means head_dim; MiMoV2FlashConfig states v_head_dim 128 (defaults.py)
    full_hd = fields.value("head_dim")
    full = {"cache": "full_attention", "kv_heads": _heads(fields, "num_key_value_heads", "num_attention_heads"),
            "head_dim": full_hd, "v_head_dim": fields.value("v_head_dim") if fields.has("v_head_dim") else full_hd,
            "storage": "kv"}
    swa_hd = fields.value("swa_head_dim")
    sliding = {"cache": "sliding_attention",
               "kv_heads": _heads(fields, "swa_num_key_value_heads", "swa_num_attention_heads"),
               "head_dim": swa_hd,
               "v_head_dim": fields.value("swa_v_head_dim") if fields.has("swa_v_head_dim") else swa_hd,
               "window": fields.value("sliding_window_size"), "storage": "kv"}
    comps, kinds = {}, {}
    if 0 in pattern:
        comps["full"], kinds["global"] = full, ["full"]
    if 1 in pattern:
        comps["sliding"], kinds["local"] = sliding, ["sliding"]
    local = pattern.count(1)
    fk, fd, fv = full["kv_heads"]["value"], full_hd["value"], full["v_head_dim"]["value"]
    sk, sd, sv = sliding["kv_heads"]["value"], swa_hd["value"], sliding["v_head_dim"]["value"]
    out = {
        "description": (f"{n} layers: {n - local} full attention ({fk} KV heads, K {fd} + V {fv} dims), {local} "
                        f"sliding over {sliding['window']['value']} tokens ({sk} KV heads, K {sd} + V {sv} dims)"),
        "precisions": _gqa_precisions(fields), "components": comps, "layer_kinds": kinds,
        "layers": {"select": {"value": list(pattern), "source": fields.src("hybrid_layer_pattern")},
                   "kinds": {c: {0: "global", 1: "local"}[c] for c in dict.fromkeys(pattern)}},
    }
    if 1 in pattern:
        out["mtp"] = {"layers": VLLM_MTP_LAYERS, "kind": "local",
                      "source": "vLLM 0.33 mimo_v2_mtp.py _MIMO_V2_FLASH_NUM_MTP_LAYERS 1 (the config states no "
                                "count): a sliding-window layer with the SWA heads"}
    return out
