"""Llama 4 (llama4): chunked local attention over ``attention_chunk_size`` in the RoPE layers, global NoPE
layers by ``no_rope_layers``."""

from __future__ import annotations

from .fields import _Fields, _attention, _fail, _gqa_precisions


def import_llama4(fields: _Fields, mt: str) -> dict:
    n = fields.layers()
    chunk = fields.value("attention_chunk_size")
    nr = fields.raw("no_rope_layers")
    if nr is not None and nr != []:
        if not isinstance(nr, list) or len(nr) != n or any(isinstance(v, bool) or v not in (0, 1) for v in nr):
            raise _fail(f"{fields.file}: {fields.prefix}no_rope_layers: must list {n} values of 0 (NoPE) or 1 (RoPE)")
        rope, how = list(nr), fields.src("no_rope_layers")
    else:
        k = fields.int("no_rope_layer_interval", default=4)
        rope = [int((i + 1) % k != 0) for i in range(n)]
        how = f"transformers Llama4TextConfig default: every {k}th layer NoPE (no_rope_layers omitted)"
    att = _attention(fields)
    comps = {"global": att, "chunked": dict(att, cache="chunked_attention", chunk=chunk)}
    types = ["chunked" if r else "global" for r in rope]
    return {
        "description": (f"{n} layers: {types.count('chunked')} chunked local attention over "
                        f"{chunk['value']} tokens (RoPE), {types.count('global')} global (NoPE)"),
        "precisions": _gqa_precisions(fields), "components": comps,
        "layer_kinds": {"global": ["global"], "chunked": ["chunked"]},
        "layers": {"select": types, "kinds": {"chunked": "chunked", "global": "global"},
                   "source": f"{how}; vLLM gives the RoPE layers chunked local attention"},
    }
