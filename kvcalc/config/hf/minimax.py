"""MiniMax-Text-01 / M1 (minimax, minimax_m1): ``attn_type_list``, lightning linear attention + softmax."""

from __future__ import annotations

from .fields import _Fields, _attention, _fail, _head_dim, _hybrid_precisions


def import_minimax(fields: _Fields, mt: str) -> dict:
    n = fields.layers()
    types = fields.raw("attn_type_list")
    if not isinstance(types, list) or len(types) != n or any(isinstance(t, bool) or t not in (0, 1) for t in types):
        raise _fail(f"{fields.file}: {fields.prefix}attn_type_list: must list {n} values of 0 (linear) or 1 (softmax)")
    comps = {
        "softmax": _attention(fields),
        "linear": {"cache": "linear_attention", "heads": fields.value("num_attention_heads"),
                   "head_dim": fields.value("head_dim") if fields.has("head_dim") else _head_dim(fields)},
    }
    return {
        "description": (f"{n} layers: {types.count(1)} softmax attention, {types.count(0)} lightning (linear) attention"
                        " (vLLM dropped MiniMax-Text-01 / M1 in 0.23; the state dtype follows the precision)"),
        "precisions": _hybrid_precisions(), "components": comps,
        "layer_kinds": {"softmax": ["softmax"], "linear": ["linear"]},
        "layers": {"select": {"value": types, "source": fields.src("attn_type_list")},
                   "kinds": {0: "linear", 1: "softmax"}},
    }
