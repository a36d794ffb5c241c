"""A GGUF's hyperparameters (:mod:`.hparams`, as llama.cpp loads them) as a kvcalc config: one component per
distinct cache a layer keeps, one layer kind per distinct set, the NextN / MTP layers as ``mtp``, and the weights
as the GGUF's own tensor bytes (:mod:`.tensors`). Every value names its GGUF key as its source."""

from __future__ import annotations

import re
from pathlib import Path

from ...errors import KvcalcError, quote
from .hparams import HYBRID, NOT_PLANNED, RECURRENT, SUPPORTED, GgufHparams
from .reader import GgufHeader


def _src(h: GgufHeader, key: str, what: str = "") -> str:
    return f"{Path(h.path).name} {key}{(' ' + what) if what else ''}"


def _components(h: GgufHeader, hp: GgufHparams) -> tuple[dict, list[str], list[str]]:
    """(components, the kind of each main layer, the kind of each NextN layer)."""
    # one piece: the state component, then each layer's caches by the filters create_memory applies
    a = hp.arch
    comps: dict = {}
    kind_of_sig: dict = {}
    kinds: list[str] = []

    def add(name: str, body: dict) -> str:
        key = name
        i = 2
        while key in comps and comps[key] != body:
            key, i = f"{name}{i}", i + 1
        comps[key] = body
        return key

    ssm = hp.ssm
    state = None
    if ssm:
        if "shortconv" in ssm:
            state = {"cache": "shortconv", "conv_kernel": ssm["shortconv"], "hidden": hp.n_embd, "dtype": "fp32",
                     "source": _src(h, f"{a}.shortconv.l_cache", f"{ssm['shortconv']}, embedding_length {hp.n_embd}")}
        elif a in ("mamba", "jamba") or (a == "mamba" and not ssm["n_group"]):
            state = {"cache": "mamba", "conv_kernel": ssm["d_conv"], "intermediate": ssm["d_inner"],
                     "state_size": ssm["d_state"], "dtype": "fp32", "source": _src(h, f"{a}.ssm.*")}
        elif a in ("qwen3next", "qwen35", "qwen35moe"):
            if not ssm["dt_rank"] or ssm["d_inner"] % ssm["dt_rank"]:
                raise KvcalcError(f"model: {h.path}: {a}.ssm.inner_size {ssm['d_inner']} does not divide by "
                                  f"ssm.time_step_rank {ssm['dt_rank']} (the value heads)", param="model")
            state = {"cache": "gated_deltanet", "conv_kernel": ssm["d_conv"], "k_heads": ssm["n_group"],
                     "v_heads": ssm["dt_rank"], "k_head_dim": ssm["d_state"],
                     "v_head_dim": ssm["d_inner"] // ssm["dt_rank"], "dtype": "fp32",
                     "source": _src(h, f"{a}.ssm.*", "(group_count k heads of state_size, time_step_rank v heads)")}
        else:
            if not ssm["dt_rank"] or ssm["d_inner"] % ssm["dt_rank"]:
                raise KvcalcError(f"model: {h.path}: {a}.ssm.inner_size {ssm['d_inner']} does not divide by "
                                  f"ssm.time_step_rank {ssm['dt_rank']} (the heads)", param="model")
            state = {"cache": "mamba2", "conv_kernel": ssm["d_conv"], "heads": ssm["dt_rank"],
                     "head_dim": ssm["d_inner"] // ssm["dt_rank"], "state_size": ssm["d_state"],
                     "groups": max(ssm["n_group"], 1) if ssm["n_group"] else 1, "intermediate": ssm["d_inner"],
                     "dtype": "fp32", "source": _src(h, f"{a}.ssm.*")}
            if not ssm["n_group"]:
                raise KvcalcError(f"model: {h.path}: {a}.ssm.group_count is 0; kvcalc's Mamba-2 state needs a group",
                                  param="model")

    def attention(lay) -> dict | None:
        if hp.mla:
            return {"cache": "mla", "dim": lay.k_width, "rope_dim": lay.k_width - hp.kv_lora_rank,
                    "source": _src(h, f"{a}.attention.kv_lora_rank", f"{hp.kv_lora_rank} + rope "
                                   f"{lay.k_width - hp.kv_lora_rank} (key_length {lay.head_k}; is_mla: no V)")}
        if lay.n_head_kv == 0:
            return None
        body = {"cache": "full_attention", "kv_heads": lay.n_head_kv, "head_dim": lay.head_k,
                "source": _src(h, f"{a}.attention.head_count_kv / key_length / value_length")}
        if lay.head_v != lay.head_k:
            body["v_head_dim"] = lay.head_v
        if lay.swa:
            if hp.swa_type == "chunked":
                body.update(cache="chunked_attention", chunk=hp.n_swa)
            else:
                body.update(cache="sliding_attention", window=hp.n_swa)
        return body

    out_main, out_next = [], []
    for lay in hp.layers:
        names: list[str] = []
        shared = hp.n_layer_kv_from_start >= 0 and lay.index >= hp.n_layer_kv_from_start
        if a in RECURRENT:
            names.append(add("state", state))
        else:
            if a in HYBRID:
                has_attn = a == "falcon-h1" or not lay.recurrent
                has_state = lay.recurrent or a == "falcon-h1"
                if a in ("nemotron_h", "nemotron_h_moe") and lay.n_ff:
                    has_attn = has_state = False
            else:
                has_attn, has_state = not shared, False
            body = attention(lay) if has_attn else None
            if body is not None:
                names.append(add({"full_attention": "full", "sliding_attention": "sliding",
                                  "chunked_attention": "chunked", "mla": "mla"}[body["cache"]], body))
            if has_state and not lay.nextn:
                names.append(add("state", state))
        sig = tuple(names)
        if sig not in kind_of_sig:
            base = "+".join(names) if names else ("shared" if shared else "none")
            kind_of_sig[sig] = base
        (out_next if lay.nextn else out_main).append(kind_of_sig[sig])
    kinds = {kind_of_sig[s]: list(s) for s in kind_of_sig}
    return comps, kinds, out_main, out_next


def gguf_config(h: GgufHeader, hp: GgufHparams, name: str | None = None) -> dict:
    """The kvcalc config (a dict ready for YAML) of a GGUF."""
    a = hp.arch
    if a in NOT_PLANNED:
        raise KvcalcError(f"model: {h.path}: llama.cpp architecture {quote(a, 80)}: {NOT_PLANNED[a]}",
                          param="model")
    if a not in SUPPORTED:
        raise KvcalcError(f"model: {h.path}: llama.cpp architecture {quote(a, 80)} is not one kvcalc reads (it reads: "
                          f"{', '.join(sorted(SUPPORTED))})", param="model")
    comps, kinds, main, nextn = _components(h, hp)
    nm = name or re.sub(r"[^A-Za-z0-9._-]+", "-", Path(h.path).name.removesuffix(".gguf")).strip("-.")[:100] or "gguf"
    counts = {k: main.count(k) for k in dict.fromkeys(main)}
    desc = f"{a} (GGUF): {len(main)} layers (" + ", ".join(f"{n} {k}" for k, n in counts.items()) + ")"
    uses_kv = any(c["cache"] in ("full_attention", "sliding_attention", "chunked_attention", "mla")
                  for c in comps.values())
    precisions = {"f16": {**({"kv": "fp16"} if uses_kv else {}),
                          "source": "llama.cpp's default cache type f16 (common.h cache_type_k / cache_type_v); "
                                    "recurrent state in f32 (create_memory)"}}
    out: dict = {"kvcalc": 1, "name": nm, "display_name": hp.name or nm, "description": desc,
                 "sources": {"gguf": f"{h.path} (general.architecture {a}; read by kvcalc)"},
                 "gguf_architecture": {"value": a, "source": _src(h, "general.architecture")},
                 "max_context": {"value": hp.n_ctx_train, "source": _src(h, f"{a}.context_length")},
                 "precisions": precisions, "default_precision": "f16", "components": comps,
                 "layer_kinds": kinds,
                 "layers": {"select": main, "kinds": {k: k for k in dict.fromkeys(main)},
                            "source": _src(h, f"{a}.block_count", f"{len(main) + len(nextn)} (per-layer kinds as "
                                           "llama.cpp's load_hparams reads them)")}}
    if nextn:
        if len(set(nextn)) != 1:
            raise KvcalcError(f"model: {h.path}: NextN layers of different kinds", param="model")
        out["mtp"] = {"layers": len(nextn), "kind": nextn[0], "source": _src(h, f"{a}.nextn_predict_layers")}
    return out
