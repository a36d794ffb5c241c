"""DeepSeek V4 (deepseek_v4): ``compress_ratios`` per layer (0 window only, 4 c4a, 128 c128a), the window
in every layer, compressor state, MTP layers."""

from __future__ import annotations

from ...errors import quote
from .fields import _Fields, _fail

_V4_SRC = "vLLM models/deepseek_v4/compressor.py (overlap = compress_ratio == 4: coff 2, span 2 x ratio)"


def import_v4(fields: _Fields, mt: str) -> dict:
    n = fields.layers()
    ratios = fields.raw("compress_ratios")
    mtp = fields.int("num_nextn_predict_layers", minimum=0, default=0)
    if not isinstance(ratios, list) or len(ratios) not in (n, n + mtp):
        raise _fail(f"{fields.file}: {fields.prefix}compress_ratios: must list one ratio per layer ({n}, or {n + mtp} "
                    f"with the MTP layers), got {len(ratios) if isinstance(ratios, list) else type(ratios).__name__}")
    for i, r in enumerate(ratios):
        if isinstance(r, bool) or r not in (0, 4, 128):
            raise _fail(f"{fields.file}: {fields.prefix}compress_ratios[{i}]: {quote(r)} is not a ratio kvcalc knows "
                        "(0: window only, 4: c4a, 128: c128a)")
    hd, rope, window = fields.value("head_dim"), fields.value("qk_rope_head_dim"), fields.value("sliding_window")
    src = fields.src("compress_ratios")
    comps: dict = {"window": {"cache": "sliding_mla", "window": window, "dim": hd, "rope_dim": rope, "storage": "kv"}}
    kinds: dict = {"swa": ["window"]}
    used = set(ratios)
    if 4 in used:
        comps["c4_entries"] = {"cache": "compressed_mla", "ratio": {"value": 4, "source": src},
                               "span": {"value": 8, "source": _V4_SRC}, "dim": hd, "rope_dim": rope,
                               "shared_kv": True, "storage": "kv"}
        comps["c4_indexer"] = {"cache": "indexer", "ratio": {"value": 4, "source": src},
                               "dim": fields.value("index_head_dim"), "span": {"value": 8, "source": _V4_SRC},
                               "storage": "indexer"}
        if fields.has("index_topk"):
            comps["c4_indexer"]["topk"] = fields.value("index_topk")
        comps["c4_state"] = {"cache": "compressor_state", "compresses": "c4_entries", "dtype": "fp32",
                             "source": _V4_SRC}
        comps["c4_indexer_state"] = {"cache": "compressor_state", "compresses": "c4_indexer", "dtype": "fp32",
                                     "source": _V4_SRC}
        kinds["c4a"] = ["window", "c4_entries", "c4_indexer", "c4_state", "c4_indexer_state"]
    if 128 in used:
        comps["c128_entries"] = {"cache": "compressed_mla", "ratio": {"value": 128, "source": src},
                                 "span": {"value": 128, "source": _V4_SRC}, "dim": hd, "rope_dim": rope,
                                 "shared_kv": True, "storage": "kv"}
        comps["c128_state"] = {"cache": "compressor_state", "compresses": "c128_entries", "dtype": "fp32",
                               "source": _V4_SRC}
        kinds["c128a"] = ["window", "c128_entries", "c128_state"]
    name = {0: "swa", 4: "c4a", 128: "c128a"}
    main = ratios[:n]
    out = {
        "description": (f"{n} layers: {main.count(0)} window-only, {main.count(4)} c4a and {main.count(128)} c128a; "
                        f"{window['value']}-token window in every layer; shared K=V {hd['value']}-wide entries"),
        "precisions": {
            "bf16": {"kv": "bf16", "indexer": "bf16"},
            "fp8": {"kv": "fp8_ds_mla_v4", "indexer": "fp4_indexer",
                    "source": "vLLM DeepSeek V4: fp8 attention cache (584 B) and fp4 indexer cache (68 B)"},
        },
        "components": comps,
        "layer_kinds": {k: v for k, v in kinds.items() if k in {name[r] for r in ratios}},
        "layers": {"select": {"value": main, "source": f"{src}, first {n} entries"},
                   "kinds": {r: name[r] for r in sorted(set(main))}},
    }
    if mtp:
        r = ratios[n] if len(ratios) > n else 0
        out["mtp"] = {"layers": mtp, "kind": name[r],
                      "source": f"{fields.src('num_nextn_predict_layers')}; compress_ratios entry {n} = {r}"}
        out["layer_kinds"].setdefault(name[r], kinds[name[r]])
    return out
