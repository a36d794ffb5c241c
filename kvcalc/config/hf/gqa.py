"""Full and sliding-window attention (GQA, MQA, MHA): llama, mistral, mixtral, qwen2(_moe), qwen3(_moe),
phi3, gemma, gemma2, gemma3, gpt_oss; minimax_m2 and qwen3_vl(_moe) (full attention in every layer); mimo (Qwen2
layers and MTP layers)."""

from __future__ import annotations

from .fields import _Fields, _fail, _gqa_precisions, _head_dim, _kv_heads, _show


#: families whose transformers class has no sliding window and whose vLLM 0.33 and SGLang 0.5.23 models give every
#: layer full attention (vLLM minimax_m2.py passes no window; qwen3_vl.py / qwen3_vl_moe.py build Qwen3 / Qwen3-MoE
#: layers with none); a window stated anyway would slide every layer in vLLM (cache_config.sliding_window) and none
#: in SGLang (models/minimax_m2.py, qwen3.py, qwen3_moe.py: RadixAttention without a window)
FULL_ONLY = {"minimax_m2": "MiniMaxM2Config", "qwen3_vl": "Qwen3VLTextConfig", "qwen3_vl_text": "Qwen3VLTextConfig",
             "qwen3_vl_moe": "Qwen3VLMoeTextConfig", "qwen3_vl_moe_text": "Qwen3VLMoeTextConfig"}


def _full_only(fields: _Fields, mt: str, n: int) -> tuple[list[str], str]:
    """Every layer full attention (``FULL_ONLY``); a stated window, layer type or lightning layer is refused."""
    cls = FULL_ONLY[mt]
    why = (f"{mt} has no sliding window (transformers {cls}); vLLM would slide every layer at a stated one and "
           "SGLang none, so kvcalc does not import it")
    window = fields.cfg.get("sliding_window")
    if window not in (None, 0):
        raise _fail(f"{fields.where('sliding_window')}: {_show(window)} stated, but {why}")
    if fields.cfg.get("use_sliding_window") not in (None, False):
        raise _fail(f"{fields.where('use_sliding_window')}: {_show(fields.cfg['use_sliding_window'])} stated, but {why}")
    lt = fields.listed("layer_types", n, "layer types")
    if lt is not None and any(t != "full_attention" for t in lt):
        bad = next(i for i, t in enumerate(lt) if t != "full_attention")
        raise _fail(f"{fields.file}: {fields.prefix}layer_types[{bad}]: {_show(lt[bad])} stated, but {why}")
    how = f"{mt}: every layer full attention (transformers {cls} has no sliding window)"
    if mt == "minimax_m2" and fields.has("attn_type_list"):
        # MiniMax-M2.7 lists 1 (softmax) for every layer; vLLM's and SGLang's minimax_m2.py never read the list,
        # so a 0 (MiniMax-M1's lightning attention) would be ignored by both: refused rather than guessed
        at = fields.listed("attn_type_list", n, "attention types")
        if any(isinstance(t, bool) or t != 1 for t in at):
            bad = next(i for i, t in enumerate(at) if isinstance(t, bool) or t != 1)
            raise _fail(f"{fields.file}: {fields.prefix}attn_type_list[{bad}]: {_show(at[bad])}; minimax_m2 layers are "
                        "all softmax attention (1) in vLLM's and SGLang's minimax_m2.py, which never read the list")
        how = f"{fields.src('attn_type_list')}: all {n} layers 1 (softmax attention); {how}"
    if mt == "minimax_m2" and fields.int("num_mtp_modules", minimum=0, default=0):
        # vLLM 0.33 minimax_m2.py drops the layers.{num_hidden_layers + i} weights and has no MiniMax-M2 draft
        # model (config/speculative.py); SGLang 0.5.23 skips them too: no engine caches for them
        how += (f"; the {fields.int('num_mtp_modules', minimum=0)} MTP modules ({fields.src('num_mtp_modules')}) "
                "are not counted: vLLM and SGLang load no MiniMax-M2 draft model")
    return ["full_attention"] * n, how


def _layer_types(fields: _Fields, mt: str, n: int) -> tuple[list[str], str]:
    """Per-layer 'full_attention' / 'sliding_attention', and where that came from."""
    if mt in FULL_ONLY:
        return _full_only(fields, mt, n)
    lt = fields.listed("layer_types", n, "layer types")
    if lt is not None:
        for i, t in enumerate(lt):
            if not isinstance(t, str) or t not in ("full_attention", "sliding_attention"):
                raise _fail(f"{fields.file}: {fields.prefix}layer_types[{i}]: {_show(t)} has no kvcalc cache kind "
                            "yet (known: full_attention, sliding_attention)")
        return list(lt), fields.src("layer_types")
    if mt == "gemma2":
        return (["sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(n)],
                "transformers Gemma2Config: even layers local (sliding), odd layers global")
    if mt in ("gemma3", "gemma3_text"):
        if fields.has("sliding_window_pattern"):
            k, how = fields.int("sliding_window_pattern"), fields.src("sliding_window_pattern")
        else:
            k, how = 6, "transformers Gemma3TextConfig default sliding_window_pattern 6 (the config omits it)"
        return ["sliding_attention" if (i + 1) % k else "full_attention" for i in range(n)], \
            f"{how}: every {k}th layer global"
    if fields.raw("sliding_window") == 0:  # config/model.py: "Some checkpoints set sliding_window to 0 to
        # indicate that sliding window is disabled" (vLLM sets it to None)
        return ["full_attention"] * n, f"{fields.src('sliding_window')} 0: no sliding window, every layer full"
    if mt in ("qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "mimo"):
        if fields.flag("use_sliding_window") and fields.has("sliding_window"):
            m = fields.int("max_window_layers", minimum=0)
            return (["sliding_attention" if i >= m else "full_attention" for i in range(n)],
                    f"{fields.src('use_sliding_window')} true: layers from max_window_layers ({m}) on slide "
                    "(transformers Qwen2Config)")
        return ["full_attention"] * n, f"{fields.src('use_sliding_window')} false or absent: every layer full"
    if mt in ("mistral", "mixtral", "phi3", "llama") and fields.has("sliding_window"):
        # no layer_types: vLLM's cache_config.sliding_window applies to every layer (engine/arg_utils.py)
        return ["sliding_attention"] * n, f"{fields.src('sliding_window')} set: every layer slides"
    if mt == "gemma" or mt == "llama" or mt in ("mistral", "mixtral", "phi3"):
        return ["full_attention"] * n, "no sliding window in the config: every layer full"
    raise _fail(f"{fields.file}: layer_types: {mt} configs state their layer types; this one has none")


def import_gqa(fields: _Fields, mt: str) -> dict:
    n = fields.layers()
    types, how = _layer_types(fields, mt, n)
    kv, hd = _kv_heads(fields), _head_dim(fields)
    comps: dict = {}
    kinds: dict = {}
    if "full_attention" in types:
        comps["full"] = {"cache": "full_attention", "kv_heads": kv, "head_dim": hd, "storage": "kv"}
        kinds["global"] = ["full"]
    if "sliding_attention" in types:
        comps["sliding"] = {"cache": "sliding_attention", "kv_heads": kv, "head_dim": hd,
                            "window": fields.value("sliding_window"), "storage": "kv"}
        kinds["local"] = ["sliding"]
    kind_of = {"full_attention": "global", "sliding_attention": "local"}
    if len(set(types)) == 1:
        layers = [{"pattern": [kind_of[types[0]]], "layers": {"value": n, "source": fields.src("num_hidden_layers")},
                   "note": how}]
    else:
        layers = {"select": types, "kinds": {t: kind_of[t] for t in dict.fromkeys(types)}, "source": how}
    local = types.count("sliding_attention")
    desc = (f"{n} layers ({n - local} full" + (f", {local} sliding over {fields.int('sliding_window')} tokens" if local
                                               else "") + f"); {kv['value']} KV heads of {hd['value']} dims")
    return {"description": desc, "precisions": _gqa_precisions(fields), "components": comps,
            "layer_kinds": kinds, "layers": layers}


def import_mimo(fields: _Fields, mt: str) -> dict:
    """MiMo-7B (mimo): Qwen2 layers (vLLM mimo.py MiMoModel and SGLang mimo.py are Qwen2Model) and
    ``num_nextn_predict_layers`` MTP layers, each one more Qwen2 decoder layer (vLLM mimo_mtp.py
    MiMoMultiTokenPredictorLayer.mtp_block, SGLang mimo_mtp.py)."""
    if fields.flag("use_sliding_window"):
        # vLLM's Qwen2 layers would slide (max_window_layers == num_hidden_layers only); SGLang's Qwen2 has no window
        raise _fail(f"{fields.where('use_sliding_window')}: true; a sliding MiMo is not imported (vLLM's Qwen2 layers "
                    "slide, SGLang's never do; every published MiMo states false)")
    lt = fields.listed("layer_types", fields.layers(), "layer types")
    if lt is not None and any(t != "full_attention" for t in lt):
        bad = next(i for i, t in enumerate(lt) if t != "full_attention")
        raise _fail(f"{fields.file}: {fields.prefix}layer_types[{bad}]: {_show(lt[bad])}; a sliding MiMo is not "
                    "imported (vLLM's Qwen2 layers take no per-layer type, SGLang's never slide)")
    if fields.has("head_dim"):
        # vLLM's Qwen2Attention takes hidden_size / num_attention_heads and ignores head_dim; SGLang reads head_dim
        hd, hidden, heads = fields.int("head_dim"), fields.int("hidden_size"), fields.int("num_attention_heads")
        if hidden != hd * heads:
            raise _fail(f"{fields.where('head_dim')}: {hd} is not hidden_size {hidden} / num_attention_heads {heads}; "
                        "vLLM's Qwen2Attention uses the quotient and SGLang the field, so they would differ")
    out = import_gqa(fields, mt)
    mtp = fields.int("num_nextn_predict_layers", minimum=0, default=0)
    if mtp:
        out["mtp"] = {"layers": mtp, "kind": "global",
                      "source": f"{fields.src('num_nextn_predict_layers')} (each a Qwen2 decoder layer: vLLM "
                                "mimo_mtp.py, SGLang mimo_mtp.py)"}
    return out
