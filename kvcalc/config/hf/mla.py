"""MLA (deepseek_v2, deepseek_v3, kimi_k2: ``kv_lora_rank + qk_rope_head_dim``, MTP layers) and MLA with
the DSA indexer (deepseek_v32, glm_moe_dsa)."""

from __future__ import annotations

from .fields import _Fields


def import_mla(fields: _Fields, mt: str) -> dict:
    """MLA: one latent (``kv_lora_rank + qk_rope_head_dim``) per token."""
    return _mla(fields, indexer=False)


def import_dsa(fields: _Fields, mt: str) -> dict:
    """MLA and the DSA indexer's key per token."""
    return _mla(fields, indexer=True)


def _mla(fields: _Fields, indexer: bool) -> dict:
    n = fields.layers()
    rank, rope = fields.int("kv_lora_rank"), fields.int("qk_rope_head_dim")
    comps = {"latent": {"cache": "mla",
                        "dim": {"value": rank + rope, "source": f"{fields.src('kv_lora_rank')} {rank} + "
                                                                f"qk_rope_head_dim {rope}"},
                        "rope_dim": fields.value("qk_rope_head_dim"), "storage": "kv"}}
    kinds = {"mla": ["latent"]}
    if indexer:
        comps["indexer"] = {"cache": "indexer", "ratio": 1, "dim": fields.value("index_head_dim"), "storage": "indexer"}
        if fields.has("index_topk"):
            comps["indexer"]["topk"] = fields.value("index_topk")
        kinds["mla"].append("indexer")
        precisions = {
            "bf16": {"kv": "bf16", "indexer": "bf16"},
            "fp8": {"kv": "fp8_ds_mla", "indexer": "fp8_indexer",
                    "source": "FlashMLA sparse fp8_ds_mla latent; vLLM indexer cache (fp8 + fp32 scale per 128)"},
        }
    else:
        precisions = {
            "bf16": {"kv": "bf16"},
            "fp8": {"kv": "fp8_e4m3", "source": "vLLM --kv-cache-dtype fp8 on MLA (per-tensor scale)"},
        }
    out = {
        "description": (f"{n} MLA layers: one {rank + rope}-wide latent ({rank} + {rope} RoPE) per token"
                        + (f" and one {fields.int('index_head_dim')}-wide indexer key" if indexer else "")),
        "precisions": precisions, "components": comps, "layer_kinds": kinds,
        "layers": [{"pattern": ["mla"], "layers": {"value": n, "source": fields.src("num_hidden_layers")}}],
    }
    mtp = fields.int("num_nextn_predict_layers", minimum=0, default=0)
    if mtp:
        out["mtp"] = {"layers": mtp, "kind": "mla", "source": f"{fields.src('num_nextn_predict_layers')} (full MLA layers)"}
    return out
