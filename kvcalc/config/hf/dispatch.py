"""model_type -> the mapper of its family (``DISPATCH``), and ``import_config``: a Hugging Face config as a
kvcalc config, the parts every family shares (name, sources, max_context, default precision) written here."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Callable

from .deepseek_v4 import import_v4
from .falcon_h1 import import_falcon_h1
from ..schema import CONTEXT_FIELDS, MAX_INT
from ...errors import quote
from .fields import _Fields, _fail, _show
from .gqa import import_gqa, import_mimo
from .jamba import import_jamba
from .kimi_linear import import_kimi_linear
from .llama4 import import_llama4
from .mimo_v2 import import_mimo_v2_flash
from .minimax import import_minimax
from .mla import import_dsa, import_mla
from .nemotron_h import import_nemotron_h
from .qwen3_next import import_qwen3_next

#: A family's mapper: the config's fields and its model_type -> the body of the kvcalc config (description,
#: precisions, components, layer_kinds, layers, and mtp where the model has MTP layers).
Mapper = Callable[[_Fields, str], dict]

DISPATCH: dict[str, Mapper] = {
    # full / sliding-window attention (GQA, MQA, MHA)
    "llama": import_gqa, "mistral": import_gqa, "mixtral": import_gqa, "qwen2": import_gqa, "qwen2_moe": import_gqa,
    "qwen3": import_gqa, "qwen3_moe": import_gqa, "phi3": import_gqa, "gemma": import_gqa, "gemma2": import_gqa,
    "gemma3": import_gqa, "gemma3_text": import_gqa, "gpt_oss": import_gqa, "minimax_m2": import_gqa,
    "qwen3_vl": import_gqa, "qwen3_vl_text": import_gqa, "qwen3_vl_moe": import_gqa, "qwen3_vl_moe_text": import_gqa,
    # Qwen2 layers and MTP layers
    "mimo": import_mimo,
    # full and sliding-window attention of different heads and K / V widths, by hybrid_layer_pattern
    "mimo_v2_flash": import_mimo_v2_flash,
    # MLA
    "deepseek_v2": import_mla, "deepseek_v3": import_mla, "kimi_k2": import_mla,
    # MLA + indexer (DSA)
    "deepseek_v32": import_dsa, "glm_moe_dsa": import_dsa,
    # DeepSeek V4
    "deepseek_v4": import_v4,
    # hybrids with fixed recurrent state
    "qwen3_next": import_qwen3_next, "qwen3_5": import_qwen3_next, "qwen3_5_text": import_qwen3_next,
    "qwen3_5_moe": import_qwen3_next, "qwen3_5_moe_text": import_qwen3_next,
    "nemotron_h": import_nemotron_h,
    "jamba": import_jamba,
    "falcon_h1": import_falcon_h1,
    "minimax": import_minimax, "minimax_m1": import_minimax,
    "kimi_linear": import_kimi_linear,
    # chunked local attention
    "llama4": import_llama4, "llama4_text": import_llama4,
}
SUPPORTED = sorted(DISPATCH)

#: families read on purpose but refused, each with the reason (one line): their caches are known, but an engine
#: would price them wrong
NOT_IMPORTED: dict[str, str] = {
    "gemma4": "Gemma 4 is not imported yet: kvcalc's SGLang engine lacks its sliding_window - 1 window (SGLang "
              "gemma4_causal.py) and kvcalc models neither KV-shared layers nor its bidirectional vision windows",
    "nemotron-nas": "Nemotron-NAS (DeciLM) is not imported yet: SGLang 0.5.23 allocates K and V for its no-op "
                    "attention layers too (layer_setup.py: max(num_hidden_layers, num_attention_layers)), which "
                    "kvcalc's SGLang engine does not model, and refuses variable GQA",
}
NOT_IMPORTED["gemma4_text"] = NOT_IMPORTED["gemma4"]

_NAME_OK = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


def model_type(fields: _Fields) -> str:
    mt = fields.cfg.get("model_type") or fields.top.get("model_type")
    if not isinstance(mt, str) or not mt:
        raise _fail(f"{fields.file}: model_type: missing; kvcalc reads the family from it (supported: "
                    f"{', '.join(SUPPORTED)})")
    return mt


def _name_for(fields: _Fields, name: str | None) -> str:
    if name is None:  # the checkpoint's own name, else the hub cache's repo, else the file's (a folder's)
        f = Path(fields.file)
        hub = f.parent.parent.parent.name if f.parent.parent.name == "snapshots" else ""
        repo = hub.split("--")[-1] if hub.startswith("models--") else ""  # models--Org--Name/snapshots/<sha>/
        raw = (fields.top.get("_name_or_path") or repo or (f.parent.name if f.name == "config.json" else f.stem)
               or "imported")
        name = str(raw).rstrip("/").split("/")[-1].lower()
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.") or "imported-model"
    if not _NAME_OK.match(name):
        raise _fail(f"name: {quote(name)} is not a usable model name (letters, digits, . _ -; at most 100)")
    return name


def _rope_scaling(fields: _Fields) -> dict | None:
    """config.json rope_scaling (or transformers v5's rope_parameters), as far as an engine's context limit
    reads it: the type, the factor, original_max_position_embeddings. Nested per-layer parameters are left out."""
    rs = fields.raw("rope_scaling") or fields.raw("rope_parameters")
    if rs is None:
        return None
    if not isinstance(rs, dict):
        key = "rope_scaling" if fields.raw("rope_scaling") else "rope_parameters"
        raise _fail(f"{fields.where(key)}: expected a mapping such as {{\"rope_type\": \"yarn\", \"factor\": 4}}, "
                    f"got {_show(rs)}")
    kind = rs.get("rope_type", rs.get("type"))
    if not isinstance(kind, str) or not kind or len(kind) > 40:
        return None
    out: dict = {"type": kind}
    factor = rs.get("factor")
    if isinstance(factor, (int, float)) and not isinstance(factor, bool) and math.isfinite(factor) \
            and 0 < factor <= 1 << 20:
        out["factor"] = factor
    orig = rs.get("original_max_position_embeddings")
    if isinstance(orig, int) and not isinstance(orig, bool) and 1 <= orig <= 1 << 40:
        out["original_max_position_embeddings"] = orig
    key = "rope_scaling" if fields.raw("rope_scaling") else "rope_parameters"
    out["source"] = fields.src(key)
    return out


def _multimodal(fields: _Fields) -> dict | None:
    """A multimodal checkpoint (a text_config or a vision_config beside it): the vision tower's
    num_hidden_layers and hidden_size as vision_config states them (null where it does not: SGLang then assumes
    24 and 1024; a ``depth`` is not read as num_hidden_layers, as transformers does not)."""
    vc = fields.top.get("vision_config")
    if fields.inner is None and not isinstance(vc, dict):
        return None
    vc = vc if isinstance(vc, dict) else {}

    def count(key):
        v = vc.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= MAX_INT):
            raise _fail(f"{fields.file}: vision_config.{key}: expected an integer from 1 to {MAX_INT:,}, got {_show(v)}")
        return v

    has = isinstance(fields.top.get("vision_config"), dict)
    return {"text_config": fields.inner is not None, "vision_config": has, "vision_num_hidden_layers": count("num_hidden_layers"),
            "vision_hidden_size": count("hidden_size"),
            "source": f"{fields.file} vision_config" if has else f"{fields.file} text_config (no vision_config)"}


def import_config(data: dict, file: str = "config.json", name: str | None = None) -> dict:
    """The kvcalc config (a dict ready for YAML) for a Hugging Face config."""
    fields = _Fields(data, file)
    mt = model_type(fields)
    fields.use_defaults(mt)
    mapper = DISPATCH.get(mt)
    if mt in NOT_IMPORTED:
        raise _fail(f"{file}: model_type: {quote(mt)}: {NOT_IMPORTED[mt]}")
    if mapper is None:
        raise _fail(f"{file}: model_type: {quote(mt)} is not a family kvcalc imports (supported: {', '.join(SUPPORTED)})")
    body = mapper(fields, mt)
    nm = _name_for(fields, name)
    out: dict = {"kvcalc": 1, "name": nm, "display_name": nm, "description": body.pop("description")}
    out["sources"] = {"config.json": f"{file} (model_type {mt}; imported by kvcalc import-hf)"}
    if fields.has("max_position_embeddings"):
        mp = fields.raw("max_position_embeddings")
        if not (isinstance(mp, (int, float)) and not isinstance(mp, bool) and math.isfinite(mp)
                and 1 <= mp <= 1 << 40 and mp == int(mp)):
            raise _fail(f"{fields.where('max_position_embeddings')}: expected a whole number of tokens, got "
                        f"{_show(mp)}")
        out["max_context"] = {"value": int(mp), "source": fields.src("max_position_embeddings")}
    others = {}
    for key in CONTEXT_FIELDS:
        v = fields.cfg.get(key)
        if v is not None:
            if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= 1 << 40:
                raise _fail(f"{fields.where(key)}: expected a whole number of tokens, got {_show(v)}")
            others[key] = v
    if others:
        out["context_fields"] = {**others, "source": f"{fields.file} {fields.prefix.rstrip('.') or 'top level'}"}
    rope = _rope_scaling(fields)
    if rope is not None:
        out["rope_scaling"] = rope
        if rope["type"] == "longrope" and fields.has("original_max_position_embeddings"):
            out["original_max_position_embeddings"] = fields.value("original_max_position_embeddings")
    arch = fields.top.get("architectures")
    if isinstance(arch, list) and arch and isinstance(arch[0], str) and arch[0].strip() and len(arch[0]) <= 200:
        out["architecture"] = {"value": arch[0], "source": f"{file} architectures[0]"}
    mm = _multimodal(fields)
    if mm is not None:
        out["multimodal"] = mm
    out["precisions"] = body.pop("precisions")
    dtype = fields.raw("torch_dtype") or fields.raw("dtype") or fields.top.get("torch_dtype")
    out["default_precision"] = "fp16" if dtype == "float16" and "fp16" in out["precisions"] else "bf16"
    out.update(body)
    out.update(_weights(fields, mt, file))
    return out


def _weights(fields: _Fields, mt: str, file: str) -> dict:
    """The checkpoint's weights, derived from the config (and checked against model.safetensors.index.json beside a
    local config); where a family's tensors are not derived, none, and the reason in the config's notes."""
    from ...errors import KvcalcError
    from .weights import NOT_DERIVED, read_index, weights_config

    index = read_index(file) if file.endswith(".json") else None
    try:
        return {"weights": weights_config(fields, mt, *(index or (None, "")))}
    except KvcalcError as e:
        if "is not this config's checkpoint" in str(e):
            raise
        if index is not None:
            return {"weights": {"params": {"int8": index[0]},
                                "source": f"{index[1]} total_size (the tensors are not derived from config.json: "
                                          f"{str(e).removeprefix('weights: ')[:200]}; the dense / expert split is "
                                          "not known)"}}
        text = str(e).removeprefix("weights: ").removeprefix(f"{file}: ")
        if "kvcalc does not derive this family" in text:
            why = NOT_DERIVED.get(mt)
            text = f"{mt}'s checkpoint tensors are not derived from config.json yet" + (f": {why}" if why else "")
        return {"notes": f"no weights: {text}"}


def checkpoint_bytes(data: dict, file: str = "config.json") -> int:
    """The checkpoint's model.safetensors.index.json total_size for a Hugging Face config, as kvcalc derives it
    (MTP layers included; kvcalc.config.hf.weights)."""
    from .weights import tally

    fields = _Fields(data, file)
    mt = model_type(fields)
    fields.use_defaults(mt)
    return tally(fields, mt).checkpoint_bytes
