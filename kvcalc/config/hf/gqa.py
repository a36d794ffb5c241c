"""Full and sliding-window attention (GQA, MQA, MHA): llama, mistral, mixtral, qwen2(_moe), qwen3(_moe),
phi3, gemma, gemma2, gemma3, gpt_oss."""

from __future__ import annotations

from .fields import _Fields, _fail, _gqa_precisions, _head_dim, _kv_heads, _show


def _layer_types(fields: _Fields, mt: str, n: int) -> tuple[list[str], str]:
    """Per-layer 'full_attention' / 'sliding_attention', and where that came from."""
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
    if mt in ("qwen2", "qwen2_moe", "qwen3", "qwen3_moe"):
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
