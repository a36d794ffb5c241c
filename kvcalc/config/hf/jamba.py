"""Jamba (jamba): Mamba-1 + attention every ``attn_layer_period``."""

from __future__ import annotations

from .fields import _Fields, _attention, _hybrid_precisions


def import_jamba(fields: _Fields, mt: str) -> dict:
    n = fields.layers()
    period, offset = fields.int("attn_layer_period"), fields.int("attn_layer_offset", minimum=0)
    hidden, expand = fields.int("hidden_size"), fields.int("mamba_expand")
    types = ["attention" if i % period == offset else "mamba" for i in range(n)]
    how = f"{fields.src('attn_layer_period')} {period}, attn_layer_offset {offset}: layer i attends when i % {period} == {offset}"
    comps = {
        "attention": _attention(fields),
        "mamba": {"cache": "mamba", "conv_kernel": fields.value("mamba_d_conv"), "state_size": fields.value("mamba_d_state"),
                  "intermediate": {"value": expand * hidden, "source": f"{fields.src('mamba_expand')} {expand} x "
                                   f"hidden_size {hidden} (vLLM jamba MambaMixer)"}},
    }
    return {
        "description": f"{n} layers: {types.count('attention')} attention, {types.count('mamba')} Mamba-1",
        "precisions": _hybrid_precisions(), "components": comps,
        "layer_kinds": {"attention": ["attention"], "mamba": ["mamba"]},
        "layers": {"select": types, "kinds": {"attention": "attention", "mamba": "mamba"}, "source": how},
    }
