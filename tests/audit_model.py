"""An independent second implementation of kvcalc's byte counts, for the audit test.

Deliberately shares nothing with ``kvcalc.config``, ``kvcalc.specs``, ``kvcalc.formats`` or
``kvcalc.estimate``: it reads the YAML with ``yaml.safe_load`` itself and applies the published formulas,
written out here from their sources, one plain-Python function per cache kind and per storage format.
Sources: vLLM's DeepSeek V4 write-up and FlashMLA README (fp8_ds_mla 656 B, fp8_ds_mla_v4 584 B), vLLM
indexer cache (128 fp8 + one fp32 scale), vLLM MambaStateShapeCalculator (SSM / linear-attention state),
vLLM Triton backend (per-token-head scales), DeepSeek V4 compressor (state [span, 2, span/ratio, dim]).
"""

from __future__ import annotations

import functools
import math
import os

import yaml

PLAIN = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8_e4m3": 1, "fp8_e5m2": 1, "int8": 1}


def v(x):
    """A config value, with or without its {value, source} wrapper."""
    return x["value"] if isinstance(x, dict) and "value" in x else x


def entry_bytes(fmt: str, dim: int, rope: int = 0) -> int:
    """Bytes of one entry of ``dim`` values (the last ``rope`` of them RoPE) in storage format ``fmt``."""
    if fmt in PLAIN:
        return dim * PLAIN[fmt]
    if fmt == "fp8_ds_mla":  # FlashMLA: fp8 NoPE, one fp32 scale per 128 NoPE values, bf16 RoPE
        nope = dim - rope
        return nope + 4 * (nope // 128) + 2 * rope
    if fmt == "fp8_ds_mla_v4":  # fp8 NoPE + bf16 RoPE + one ue8m0 byte per 64 NoPE values, padded to 8 B
        nope = dim - rope
        scales = nope // 64
        return nope + 2 * rope + (scales + 7) // 8 * 8
    if fmt == "mxfp8_ds_mla":  # every value fp8, one ue8m0 per 32
        return dim + dim // 32
    if fmt == "nvfp4_ds_mla":  # e2m1 NoPE (half a byte), one e4m3 per 16 NoPE values, fp8 RoPE
        nope = dim - rope
        return nope // 2 + nope // 16 + rope
    if fmt == "fp8_indexer":  # fp8 + one fp32 scale per 128
        return dim + 4 * (dim // 128)
    if fmt == "fp4_indexer":  # e2m1 packed + one ue8m0 per 32
        return dim // 2 + dim // 32
    if fmt == "nvfp4":  # e2m1 packed + one e4m3 per 16
        return dim // 2 + dim // 16
    if fmt in ("int8_per_token_head", "fp8_per_token_head"):  # data + one fp32 scale per entry
        return dim + 4
    if fmt == "int4_per_token_head":
        return dim // 2 + 4
    if fmt == "lmdeploy_int8":  # uint8 + scale and zero point, 2 B each
        return dim + 2 * 2
    if fmt == "lmdeploy_int4":
        return dim // 2 + 2 * 2
    raise KeyError(f"audit: no formula for format {fmt}")


def entries(kind: str, c: dict, L: int) -> int:
    if kind in ("full_attention", "mla"):
        return L
    if kind in ("sliding_attention", "sliding_mla"):
        return min(L, v(c["window"]))
    if kind == "chunked_attention":
        ch = v(c["chunk"])
        return L - ch * ((L - 1) // ch) if L else 0
    if kind in ("compressed_mla", "indexer"):
        return L // v(c.get("ratio", 1))
    return 0


def per_entry(kind: str, c: dict, fmt: str) -> int:
    if kind in ("full_attention", "sliding_attention", "chunked_attention"):
        hd = v(c["head_dim"])
        vd = v(c.get("v_head_dim", hd)) if c.get("v_head_dim") is not None else hd
        return v(c["kv_heads"]) * (entry_bytes(fmt, hd) + entry_bytes(fmt, vd))
    if kind in ("mla", "sliding_mla"):
        return entry_bytes(fmt, v(c["dim"]), v(c.get("rope_dim", 0)))
    if kind == "compressed_mla":
        one = entry_bytes(fmt, v(c["dim"]), v(c.get("rope_dim", 0)))
        return one * (1 if v(c.get("shared_kv", True)) else 2)
    if kind == "indexer":
        return entry_bytes(fmt, v(c["dim"]))
    return 0


def fixed(kind: str, c: dict, comps: dict, state_fmt: str | None) -> int:
    if kind == "state":
        return math.prod(v(s) for s in v(c["shape"])) * PLAIN[v(c.get("dtype", "fp32"))]
    if kind == "compressor_state":  # [span, kv + score, span / ratio, dim] fp32
        t = comps[v(c["compresses"])]
        ratio = v(t.get("ratio", 1))
        span = v(t.get("span")) or ratio
        return span * 2 * (span // ratio) * v(t["dim"]) * PLAIN[v(c.get("dtype", "fp32"))]
    conv_t = PLAIN[v(c["dtype"])] if c.get("dtype") else PLAIN[state_fmt] if state_fmt else None
    if kind in ("mamba", "mamba2", "gated_deltanet", "kda", "linear_attention"):
        ssm_t = PLAIN[v(c["ssm_dtype"])] if c.get("ssm_dtype") else conv_t
        k = v(c.get("conv_kernel", 1))
        if kind == "mamba":
            conv, ssm = (k - 1) * v(c["intermediate"]), v(c["intermediate"]) * v(c["state_size"])
        elif kind == "mamba2":
            inter = v(c.get("intermediate")) or v(c["heads"]) * v(c["head_dim"])
            conv = (k - 1) * (inter + 2 * v(c.get("groups", 1)) * v(c["state_size"]))
            ssm = v(c["heads"]) * v(c["head_dim"]) * v(c["state_size"])
        elif kind in ("gated_deltanet", "kda"):
            conv = (k - 1) * (2 * v(c["k_heads"]) * v(c["k_head_dim"]) + v(c["v_heads"]) * v(c["v_head_dim"]))
            ssm = v(c["v_heads"]) * v(c["v_head_dim"]) * v(c["k_head_dim"])
        else:
            conv, ssm = 0, v(c["heads"]) * v(c["head_dim"]) ** 2
        return conv * conv_t + ssm * ssm_t
    return 0


def layer_list(cfg: dict) -> list[str]:
    lay = cfg["layers"]
    if isinstance(lay, dict):
        sel = v(lay["select"])
        sel = list(sel) if isinstance(sel, str) else sel
        kinds = {str(k): kv for k, kv in lay["kinds"].items()}
        return [kinds[str(x)] for x in sel]
    out: list[str] = []
    for item in lay:
        if isinstance(item, dict):
            pat = item["pattern"] if isinstance(item["pattern"], list) else [item["pattern"]]
            n = v(item["layers"])
            out += [pat[i % len(pat)] for i in range(n)]
        else:
            out.append(item)
    return out


@functools.lru_cache(maxsize=None)
def _parsed(path: str, mtime_ns: int, size: int) -> dict:
    with open(path) as f:
        return yaml.safe_load(f)


def load_config(path) -> dict:
    """The config's YAML, parsed once per version of the file (the audit asks for every precision, context and
    MTP setting of each config: parsing it each time was most of the test's time). Read-only to callers."""
    st = os.stat(path)
    return _parsed(str(path), st.st_mtime_ns, st.st_size)


def bytes_per_sequence(path, precision: str, L: int, mtp: bool = False) -> int:
    cfg = load_config(path)
    comps = cfg["components"]
    prec = {k: val for k, val in cfg["precisions"][precision].items() if k not in ("source", "note")}
    layers = layer_list(cfg)
    if mtp and cfg.get("mtp"):
        layers += [cfg["mtp"]["kind"]] * v(cfg["mtp"]["layers"])
    total = 0
    for kind_name in layers:
        for cname in cfg["layer_kinds"][kind_name]:
            c = comps[cname]
            kind = c["cache"]
            role = c.get("storage", "kv")
            if kind in ("state", "compressor_state", "mamba", "mamba2", "gated_deltanet", "kda", "linear_attention"):
                total += fixed(kind, c, comps, prec.get("state"))
            else:
                total += entries(kind, c, L) * per_entry(kind, c, prec[role])
    return total
