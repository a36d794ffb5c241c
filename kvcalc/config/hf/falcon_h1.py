"""Falcon-H1 (falcon_h1): attention and Mamba-2 side by side in every layer."""

from __future__ import annotations

from .fields import _Fields, _attention, _fail, _hybrid_precisions


def import_falcon_h1(fields: _Fields, mt: str) -> dict:
    n = fields.layers()
    hidden = fields.int("hidden_size")
    if fields.has("mamba_d_ssm"):
        inter = fields.value("mamba_d_ssm")
    else:
        e = fields.int("mamba_expand")
        inter = {"value": e * hidden, "source": f"{fields.src('mamba_expand')} {e} x hidden_size {hidden}"}
    heads, d_head = fields.int("mamba_n_heads"), fields.int("mamba_d_head")
    if d_head * heads != inter["value"]:  # FalconH1Config.validate_architecture refuses the config; vLLM with it
        raise _fail(f"{fields.file}: mamba_d_ssm: the Mamba intermediate {inter['value']} ({inter['source']}) is not "
                    f"mamba_n_heads {heads} x mamba_d_head {d_head}: transformers refuses the config (\"The dimensions "
                    "for the Mamba head state do not match the model intermediate_size\")")
    comps = {
        "attention": _attention(fields),
        "mamba": {"cache": "mamba2", "heads": fields.value("mamba_n_heads"), "head_dim": fields.value("mamba_d_head"),
                  "state_size": fields.value("mamba_d_state"), "groups": fields.value("mamba_n_groups"),
                  "conv_kernel": fields.value("mamba_d_conv"), "intermediate": inter},
    }
    return {
        "description": f"{n} layers, each with attention and a Mamba-2 mixer side by side",
        "precisions": _hybrid_precisions(), "components": comps,
        "layer_kinds": {"hybrid": ["attention", "mamba"]},
        "layers": [{"pattern": ["hybrid"], "layers": {"value": n, "source": fields.src("num_hidden_layers")},
                    "note": "Falcon-H1: attention and Mamba-2 run in parallel in every layer"}],
    }
