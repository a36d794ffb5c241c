"""YAML architecture config -> ModelSpec, strictly.

Unknown keys, missing keys, wrong types and impossible values are errors that name the file and the field.
Any value may be written plainly or as ``{value: ..., source: "..."}``; the sources are kept for ``show``.
The format is documented in docs/config-format.md.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path
from typing import Any

from ..errors import KvcalcError, quote
from ..formats import get_format
from ..specs import CACHE_KINDS, CacheSpec, CompressorState, RecurrentState, required_fields, spec_fields
from ..yamlio import load_yaml
from .model import WEIGHT_DTYPES, ModelSpec, Multimodal, Precision, RopeScaling, Routing, Weights
from .registry import config_names, config_path, shipped_name
from .schema import CONTEXT_FIELDS, FORMAT_VERSION, MAX_INT, MAX_EXPERTS, MAX_LAYERS, MAX_PARAMS, MAX_TEXT, REQUIRED_TOP, TOP_KEYS

# ---- value helpers -------------------------------------------------------------------------------------
class _Ctx:
    """Reading helpers that know the file and field they are in.

    Numbers, booleans and per-layer lists may be written ``{value: X, source: "..."}``; names (model,
    kinds, components, formats) and the mappings keyed by them may not, so a component called ``value``
    is a component, not a wrapper.
    """

    def __init__(self, path: str):
        self.path = path
        self.provenance: dict[str, str] = {}

    def err(self, where: str, msg: str) -> KvcalcError:
        return KvcalcError(f"{self.path}: {where}: {msg}" if where else f"{self.path}: {msg}")

    def unwrap(self, value: Any, where: str) -> Any:
        """``{value: X, source: S}`` -> X (recording S); anything else unchanged."""
        if isinstance(value, dict) and "value" in value:
            extra = set(value) - {"value", "source", "note"}
            if extra:
                raise self.err(where, f"unknown key(s) {sorted(map(str, extra))} beside 'value' (allowed: value, source, note)")
            if "source" in value:
                self.provenance[where] = self.text(value["source"], f"{where}.source")
            return value["value"]
        return value

    def mapping(self, value: Any, where: str) -> dict:
        if not isinstance(value, dict):
            raise self.err(where, f"must be a mapping, got {_typename(value)}")
        return value

    def integer(self, value: Any, where: str, minimum: int = 1, maximum: int = MAX_INT) -> int:
        value = self.unwrap(value, where)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.err(where, f"must be an integer, got {_typename(value)} {quote(value)}")
        if value < minimum:
            raise self.err(where, f"must be at least {minimum}, got {value}")
        if value > maximum:
            raise self.err(where, f"{value} is implausibly large (limit {maximum:,})")
        return value

    def name(self, value: Any, where: str) -> str:
        """An identifier: a non-empty string, never wrapped."""
        if not isinstance(value, str) or not value.strip():
            raise self.err(where, f"must be a non-empty string, got {_typename(value)}")
        return value

    def text(self, value: Any, where: str) -> str:
        """Free text (descriptions, sources): a string."""
        if not isinstance(value, str):
            raise self.err(where, f"must be a string, got {_typename(value)}")
        if len(value) > MAX_TEXT:
            raise self.err(where, f"is {len(value):,} characters long; text fields hold at most {MAX_TEXT:,}")
        return value

    def boolean(self, value: Any, where: str) -> bool:
        value = self.unwrap(value, where)
        if not isinstance(value, bool):
            raise self.err(where, f"must be true or false, got {quote(value)}")
        return value

    def int_list(self, value: Any, where: str) -> tuple[int, ...]:
        seq = self.unwrap(value, where)
        if not isinstance(seq, list) or not seq:
            raise self.err(where, f"must be a non-empty list of integers, got {_typename(seq)}")
        return tuple(self.integer(v, f"{where}[{i}]") for i, v in enumerate(seq))

    def keys(self, data: dict, where: str, allowed, required=()) -> None:
        unknown = [k for k in data if k not in allowed]
        if unknown:
            k = unknown[0]
            hint = difflib.get_close_matches(str(k), [str(a) for a in allowed], n=1)
            more = f"; did you mean {quote(hint[0])}?" if hint else f"; allowed: {', '.join(sorted(map(str, allowed)))}"
            raise self.err(f"{where}.{k}" if where else str(k), f"unknown key{more}")
        for k in required:
            if k not in data:
                raise self.err(f"{where}.{k}" if where else k, "missing required key")

    def note_source(self, data: dict, where: str) -> str:
        if "note" in data:
            self.text(data["note"], f"{where}.note")
        if "source" not in data:
            return ""
        source = self.text(data["source"], f"{where}.source")
        self.provenance[where] = source
        return source


def _typename(value: Any) -> str:
    return {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean", type(None): "nothing"}.get(
        type(value), type(value).__name__
    )


def _ref(ctx: _Ctx, value: Any, where: str, known, what: str) -> str:
    """A reference to a declared name (layer kind, component)."""
    if not isinstance(value, str) or value not in known:
        hint = difflib.get_close_matches(value, list(known), n=1) if isinstance(value, str) else []
        more = f"; did you mean {quote(hint[0])}?" if hint else f"; declared: {', '.join(known)}"
        raise ctx.err(where, f"unknown {what} {quote(value)}{more}")
    return value


# ---- sections ------------------------------------------------------------------------------------------
def _component(ctx: _Ctx, name: str, raw: Any) -> CacheSpec:
    where = f"components.{name}"
    data = ctx.mapping(raw, where)
    if "cache" not in data:
        raise ctx.err(f"{where}.cache", f"missing required key; one of: {', '.join(CACHE_KINDS)}")
    kind = ctx.name(data["cache"], f"{where}.cache")
    cls = CACHE_KINDS.get(kind)
    if cls is None:
        hint = difflib.get_close_matches(kind, CACHE_KINDS, n=1)
        raise ctx.err(
            f"{where}.cache",
            f"unknown cache kind {quote(kind)}" + (f"; did you mean {quote(hint[0])}?" if hint else f"; one of: {', '.join(CACHE_KINDS)}"),
        )
    types = spec_fields(cls)
    if not cls.per_token:
        types.pop("storage", None)
    ctx.keys(data, where, set(types) | {"cache", "source", "note"}, sorted(required_fields(cls) - {"storage"}))
    kwargs: dict[str, Any] = {"name": name}
    source = ctx.note_source(data, where)
    if source:
        kwargs["source"] = source
    for key, typ in types.items():
        if key not in data:
            continue
        fw = f"{where}.{key}"
        if typ in ("int", "int | None"):
            # rope_dim may be 0; everything else must be positive
            kwargs[key] = ctx.integer(data[key], fw, minimum=0 if key == "rope_dim" else 1)
        elif typ == "bool":
            kwargs[key] = ctx.boolean(data[key], fw)
        elif typ in ("str", "str | None"):
            kwargs[key] = ctx.name(data[key], fw)
        elif typ.startswith("tuple[int"):
            kwargs[key] = ctx.int_list(data[key], fw)
        else:  # pragma: no cover - a spec class declared a type the loader does not know
            raise ctx.err(fw, f"internal: unsupported field type {typ}")
    spec = cls(**kwargs)
    try:
        spec.validate(where)
    except KvcalcError as exc:
        raise KvcalcError(f"{ctx.path}: {exc}") from None
    return spec


def _precisions(ctx: _Ctx, raw: Any, roles: set[str], components: dict[str, CacheSpec]) -> dict[str, Precision]:
    data = ctx.mapping(raw, "precisions")
    if not data:
        raise ctx.err("precisions", "must declare at least one precision")
    out = {}
    for pname, pdata in data.items():
        where = f"precisions.{pname}"
        ctx.name(pname, where)
        pdata = ctx.mapping(pdata, where)
        source = ctx.note_source(pdata, where)
        ctx.keys(pdata, where, roles | {"source", "note"}, sorted(roles))
        formats = {
            role: get_format(ctx.name(pdata[role], f"{where}.{role}"), f"{ctx.path}: {where}.{role}")
            for role in pdata
            if role in roles
        }
        # every component must be storable in this precision (e.g. group sizes divide the dims)
        for comp in components.values():
            if comp.per_token:
                try:
                    comp.entry_bytes(formats[comp.storage])
                except KvcalcError as exc:
                    raise ctx.err(f"{where}.{comp.storage}", str(exc)) from None
            elif isinstance(comp, RecurrentState) and comp.dtype is None:
                fmt = formats[comp.storage]
                if not fmt.plain:
                    raise ctx.err(f"{where}.{comp.storage}", f"state role of component {comp.name} must be a plain "
                                  f"dtype (fp32, bf16, ...), got {fmt.name}")
        out[pname] = Precision(name=pname, formats=formats, source=source)
    return out


def _layers(ctx: _Ctx, raw: Any, kinds: dict[str, tuple[str, ...]]) -> tuple[str, ...]:
    out: list[str] = []

    def extend(names: list[str], n: int, where: str) -> None:
        if len(out) + n > MAX_LAYERS:
            raise ctx.err(where, f"the layout exceeds {MAX_LAYERS:,} layers")
        out.extend(names[j % len(names)] for j in range(n))

    if isinstance(raw, dict):  # {select: [per-layer values], kinds: {value: kind}}
        ctx.keys(raw, "layers", {"select", "kinds", "source", "note"}, ["select", "kinds"])
        ctx.note_source(raw, "layers")
        values = ctx.unwrap(raw["select"], "layers.select")
        if isinstance(values, str):  # a pattern string, one character per layer ("M-M*-": Nemotron-H)
            values = list(values)
        if not isinstance(values, list) or not values:
            raise ctx.err("layers.select", f"must be a non-empty list or pattern string, got {_typename(values)}")
        if len(values) > MAX_LAYERS:
            raise ctx.err("layers.select", f"lists more than {MAX_LAYERS:,} layers")
        mapping = ctx.mapping(raw["kinds"], "layers.kinds")
        for v, kind in mapping.items():
            _ref(ctx, kind, f"layers.kinds.{v}", kinds, "layer kind")
        for i, v in enumerate(values):
            # booleans would silently match the keys 0 and 1; lists and mappings are not values
            if isinstance(v, (bool, dict, list)) or v not in mapping:
                raise ctx.err(f"layers.select[{i}]", f"value {quote(v)} has no entry in layers.kinds (keys: {list(mapping)})")
            out.append(mapping[v])
    elif isinstance(raw, list) and raw:
        for i, item in enumerate(raw):
            where = f"layers[{i}]"
            if isinstance(item, dict):
                ctx.keys(item, where, {"pattern", "layers", "source", "note"}, ["pattern", "layers"])
                ctx.note_source(item, where)
                pattern = item["pattern"] if isinstance(item["pattern"], list) else [item["pattern"]]
                if not pattern:
                    raise ctx.err(f"{where}.pattern", "must name at least one layer kind")
                names = [_ref(ctx, p, f"{where}.pattern[{j}]", kinds, "layer kind") for j, p in enumerate(pattern)]
                extend(names, ctx.integer(item["layers"], f"{where}.layers"), f"{where}.layers")
            else:
                extend([_ref(ctx, item, where, kinds, "layer kind")], 1, where)
    else:
        raise ctx.err("layers", "must be a non-empty list of layer kinds / {pattern, layers} items, or {select, kinds}")
    return tuple(out)


def _weights(ctx: _Ctx, raw: Any) -> Weights:
    data = ctx.mapping(raw, "weights")
    ctx.keys(data, "weights", {"params", "expert_params", "routing", "source", "note"}, ["params"])
    source = ctx.note_source(data, "weights")
    out = []
    for key in ("params", "expert_params"):
        table = ctx.mapping(data.get(key, {}), f"weights.{key}")
        counts = {}
        for dtype, n in table.items():
            where = f"weights.{key}.{dtype}"
            if dtype not in WEIGHT_DTYPES:
                raise ctx.err(where, f"unknown weight dtype; known: {', '.join(WEIGHT_DTYPES)}")
            counts[dtype] = ctx.integer(n, where, maximum=MAX_PARAMS)
        out.append(counts)
    if not out[0] and not out[1]:
        raise ctx.err("weights.params", "must give at least one parameter count")
    routing = _routing(ctx, data["routing"]) if "routing" in data else None
    if routing is not None and not out[1]:
        raise ctx.err("weights.routing", "is given but weights.expert_params is not: routing needs routed experts")
    return Weights(dense=out[0], experts=out[1], source=source, routing=routing)


def _routing(ctx: _Ctx, raw: Any) -> Routing:
    data = ctx.mapping(raw, "weights.routing")
    ctx.keys(data, "weights.routing", {"experts", "per_token", "source", "note"}, ["experts", "per_token"])
    source = ctx.note_source(data, "weights.routing")
    experts = ctx.integer(data["experts"], "weights.routing.experts", maximum=MAX_EXPERTS)
    per_token = ctx.integer(data["per_token"], "weights.routing.per_token", maximum=MAX_EXPERTS)
    if per_token > experts:
        raise ctx.err("weights.routing.per_token", f"{per_token} is more than the {experts} routed experts")
    source = source or ctx.provenance.get("weights.routing.experts", "")
    return Routing(experts=experts, per_token=per_token, source=source)


def _rope_scaling(ctx: _Ctx, data: dict) -> RopeScaling | None:
    if "rope_scaling" not in data:
        return None
    raw = ctx.mapping(data["rope_scaling"], "rope_scaling")
    ctx.keys(raw, "rope_scaling", {"type", "factor", "original_max_position_embeddings", "source", "note"}, ["type"])
    ctx.note_source(raw, "rope_scaling")
    kind = ctx.name(raw["type"], "rope_scaling.type")
    factor = None
    if "factor" in raw:
        factor = ctx.unwrap(raw["factor"], "rope_scaling.factor")
        if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not 0 < factor <= 1 << 20:
            raise ctx.err("rope_scaling.factor", f"must be a positive number, got {_typename(factor)} {quote(factor)}"[:200])
    orig = (ctx.integer(raw["original_max_position_embeddings"], "rope_scaling.original_max_position_embeddings")
            if "original_max_position_embeddings" in raw else None)
    return RopeScaling(kind, float(factor) if factor is not None else None, orig)


def _multimodal(ctx: _Ctx, data: dict) -> Multimodal | None:
    if "multimodal" not in data:
        return None
    raw = ctx.mapping(data["multimodal"], "multimodal")
    ctx.keys(raw, "multimodal", {"text_config", "vision_config", "vision_num_hidden_layers", "vision_hidden_size",
                                 "source", "note"}, ["text_config", "vision_config"])
    ctx.note_source(raw, "multimodal")
    text, has = (ctx.unwrap(raw[k], f"multimodal.{k}") for k in ("text_config", "vision_config"))
    for key, v in (("text_config", text), ("vision_config", has)):
        if not isinstance(v, bool):
            raise ctx.err(f"multimodal.{key}", f"must be true or false, got {_typename(v)}")
    out = {k: None if raw.get(k) is None else ctx.integer(raw[k], f"multimodal.{k}")
           for k in ("vision_num_hidden_layers", "vision_hidden_size")}
    if not has and any(v is not None for v in out.values()):
        raise ctx.err("multimodal", "states a vision tower's sizes but vision_config: false")
    return Multimodal(text, has, **out)


def _context_fields(ctx: _Ctx, data: dict) -> dict[str, int]:
    if "context_fields" not in data:
        return {}
    raw = ctx.mapping(data["context_fields"], "context_fields")
    ctx.keys(raw, "context_fields", set(CONTEXT_FIELDS) | {"source", "note"}, [])
    ctx.note_source(raw, "context_fields")
    return {k: ctx.integer(raw[k], f"context_fields.{k}") for k in CONTEXT_FIELDS if k in raw}


def _architecture(ctx: _Ctx, data: dict, key: str = "architecture", example: str = "a class name such as "
                  "GptOssForCausalLM") -> str | None:
    if key not in data:
        return None
    value = ctx.unwrap(data[key], key)
    if not isinstance(value, str) or not value.strip() or len(value) > 200:
        raise ctx.err(key, f"must be {example}, got {_typename(value)}")
    return value


def _header(ctx: _Ctx, data: Any) -> tuple[str, dict[str, str], int | None]:
    """The top level's shape and version; the name, free texts, sources and max_context."""
    if not isinstance(data, dict):
        raise ctx.err("", f"the top level must be a mapping, got {_typename(data)}")
    ctx.keys(data, "", TOP_KEYS, REQUIRED_TOP)
    version = data["kvcalc"]
    if version != FORMAT_VERSION or isinstance(version, bool):
        raise ctx.err("kvcalc", f"unsupported config format version {quote(version)}; this kvcalc reads {FORMAT_VERSION}")
    name = ctx.name(data["name"], "name")
    for key in ("display_name", "description", "notes"):
        if key in data:
            ctx.text(data[key], key)
    sources_raw = data.get("sources", {})
    if not isinstance(sources_raw, dict):
        raise ctx.err("sources", f"must be a mapping of names to citations, got {_typename(sources_raw)}")
    sources = {str(k): ctx.text(v, f"sources.{k}") for k, v in sources_raw.items()}
    max_context = ctx.integer(data["max_context"], "max_context") if "max_context" in data else None
    return name, sources, max_context


def _components(ctx: _Ctx, raw: Any) -> dict[str, CacheSpec]:
    comp_raw = ctx.mapping(raw, "components")
    if not comp_raw:
        raise ctx.err("components", "must declare at least one component")
    components = {ctx.name(k, f"components.{k}"): _component(ctx, k, v) for k, v in comp_raw.items()}
    for cname, comp in components.items():  # compressor state: shapes follow the component they serve
        if isinstance(comp, CompressorState):
            where = f"components.{cname}"
            target = _ref(ctx, comp.compresses, f"{where}.compresses", components, "component")
            try:
                components[cname] = comp.resolve(components[target], where)
            except KvcalcError as exc:
                raise KvcalcError(f"{ctx.path}: {exc}") from None
    return components


def _layer_kinds(ctx: _Ctx, raw: Any, components: dict[str, CacheSpec]) -> dict[str, tuple[str, ...]]:
    kinds_raw = ctx.mapping(raw, "layer_kinds")
    if not kinds_raw:
        raise ctx.err("layer_kinds", "must declare at least one layer kind")
    kinds: dict[str, tuple[str, ...]] = {}
    for kname, comps in kinds_raw.items():
        where = f"layer_kinds.{kname}"
        ctx.name(kname, where)
        if not isinstance(comps, list):  # [] is a layer that holds no cache (an MLP-only layer)
            raise ctx.err(where, "must be a list of component names ([] for a layer that holds no cache)")
        for j, c in enumerate(comps):
            _ref(ctx, c, f"{where}[{j}]", components, "component")
        if len(set(comps)) != len(comps):
            raise ctx.err(where, "lists a component twice")
        kinds[kname] = tuple(comps)
    return kinds


def _mtp(ctx: _Ctx, data: dict, kinds: dict[str, tuple[str, ...]]) -> tuple[str, ...]:
    if "mtp" not in data:
        return ()
    m = ctx.mapping(data["mtp"], "mtp")
    ctx.keys(m, "mtp", {"layers", "kind", "source", "note"}, ["layers", "kind"])
    ctx.note_source(m, "mtp")
    n = ctx.integer(m["layers"], "mtp.layers", minimum=0)
    if n > MAX_LAYERS:
        raise ctx.err("mtp.layers", f"more than {MAX_LAYERS:,} layers")
    return (_ref(ctx, m["kind"], "mtp.kind", kinds, "layer kind"),) * n


def _used_precisions(ctx: _Ctx, data: dict, components: dict[str, CacheSpec], kinds: dict[str, tuple[str, ...]],
                     layers: tuple[str, ...], mtp: tuple[str, ...]) -> tuple[dict[str, Precision], str]:
    """Every layer kind used; the precisions, each giving a format for every role the used components store
    in; the default precision among them."""
    used = {c for k in set(layers) | set(mtp) for c in kinds[k]}
    roles = {components[c].storage for c in used
             if components[c].per_token or (isinstance(components[c], RecurrentState) and components[c].dtype is None)}
    unused = [k for k in kinds if k not in set(layers) | set(mtp)]
    if unused:
        raise ctx.err(f"layer_kinds.{unused[0]}", "declared but used by no layer")
    idle = [c for c in components if c not in used]
    if idle:  # it would be stored in no layer, so no precision is checked for it: refused like an unused kind
        raise ctx.err(f"components.{idle[0]}", "declared but used by no layer kind")
    precisions = _precisions(ctx, data["precisions"], roles, {c: comp for c, comp in components.items() if c in used})
    default = ctx.name(data["default_precision"], "default_precision")
    if default not in precisions:
        raise ctx.err("default_precision", f"{quote(default)} is not among precisions ({', '.join(precisions)})")
    return precisions, default


def parse_model(data: Any, path: str) -> ModelSpec:
    ctx = _Ctx(path)
    name, sources, max_context = _header(ctx, data)
    components = _components(ctx, data["components"])
    kinds = _layer_kinds(ctx, data["layer_kinds"], components)
    layers = _layers(ctx, data["layers"], kinds)
    mtp = _mtp(ctx, data, kinds)
    precisions, default = _used_precisions(ctx, data, components, kinds, layers, mtp)
    weights = _weights(ctx, data["weights"]) if "weights" in data else None
    return ModelSpec(
        weights=weights,
        name=name,
        display_name=data.get("display_name", name),
        description=data.get("description", ""),
        notes=data.get("notes", ""),
        path=path,
        sources=sources,
        max_context=max_context,
        architecture=_architecture(ctx, data),
        gguf_architecture=_architecture(ctx, data, "gguf_architecture", "llama.cpp's architecture name such as gemma3"),
        rope_scaling=_rope_scaling(ctx, data),
        multimodal=_multimodal(ctx, data),
        context_fields=_context_fields(ctx, data),
        original_max_position_embeddings=(ctx.integer(data["original_max_position_embeddings"],
                                                      "original_max_position_embeddings")
                                          if "original_max_position_embeddings" in data else None),
        precisions=precisions,
        default_precision=default,
        components=components,
        layer_kinds=kinds,
        layers=layers,
        mtp_layers=mtp,
        provenance=ctx.provenance,
    )


# ---- lookup --------------------------------------------------------------------------------------------
_CACHE: dict[str, ModelSpec] = {}  # shipped configs only: a file by path is read again each time (it may change)


def as_model(model, what: str = "model") -> ModelSpec:
    """A ModelSpec as given, or loaded from a name or path (str or os.PathLike); anything else is refused."""
    return model if isinstance(model, ModelSpec) else load_model(model, what)


def load_model(name_or_path: str, what: str = "model") -> ModelSpec:
    """A shipped config by name (``deepseek-v4-pro``), any YAML file by path, or a Hugging Face
    ``config.json`` (or a folder holding one: imported by :mod:`kvcalc.config.hf`). ``what`` names the
    argument in error messages."""
    if not isinstance(name_or_path, (str, os.PathLike)) or isinstance(name_or_path, bytes):
        raise KvcalcError(f"{what}: expected a model name or a path, got {type(name_or_path).__name__}", param=what)
    key = os.fspath(name_or_path)
    if not isinstance(key, str):
        raise KvcalcError(f"{what}: expected a model name or a path, got {type(key).__name__}", param=what)
    if key in _CACHE:
        return _CACHE[key]
    candidate = Path(key)
    if not key.strip():
        raise KvcalcError(f"{what}: empty model name", param=what)
    if "\x00" in key or any(len(part) > 255 for part in candidate.parts) or len(key) > 4096:
        raise KvcalcError(f"{what}: {quote(key)} is neither a model name nor a usable path (too long)", param=what)
    try:
        return _load_model(key, candidate, what)
    except OSError as exc:  # the file system refused the path (permissions, a FIFO, ...)
        raise KvcalcError(f"{what}: cannot read {quote(key)}: {exc.strerror or exc}", param=what) from None


def _load_model(key: str, candidate: Path, what: str) -> ModelSpec:
    from .gguf import is_gguf_path

    if is_gguf_path(key):
        if not candidate.exists():
            raise KvcalcError(f"{what}: no such GGUF file {quote(key)}", param=what)
        return load_gguf(candidate, what=what)
    looks_like_path = key.endswith((".yaml", ".yml", ".json")) or "/" in key or os.sep in key
    if not looks_like_path:  # a shipped name wins over a same-named file here, and case does not matter
        name = shipped_name(key)
        if name is not None:
            if candidate.exists():
                import sys

                print(f"kvcalc: note: {what}: {quote(key)} is the shipped config {name}; the file ./{key} here was "
                      f"not read (write ./{key} to read it)", file=sys.stderr)
            model = parse_model(load_yaml(config_path(name)), str(config_path(name)))
            _CACHE[key] = model
            return model
    if key.endswith(".json") or (candidate.is_dir() and (candidate / "config.json").is_file()):
        if not candidate.exists():
            raise KvcalcError(f"{what}: no such config file {quote(key)}", param=what)
        return load_hf(candidate)
    if key.endswith((".yaml", ".yml")) or candidate.exists() or "/" in key:
        path = candidate
        if path.is_dir():
            raise KvcalcError(f"{what}: {quote(key)} is a directory, not a config file", param=what)
        if not path.exists():  # a device or a FIFO (`<(...)`) is read, bounded (yamlio.load_yaml)
            raise KvcalcError(f"{what}: no such config file {quote(key)}", param=what)
    else:
        path = config_path(key)
        if not path.is_file():
            names = config_names()
            close = difflib.get_close_matches(key, names, n=3, cutoff=0.5)
            hint = f"; closest: {', '.join(close)}" if close else ""
            raise KvcalcError(f"{what}: unknown model {quote(key)}{hint} (`kvcalc models` lists all)", param=what)
    model = parse_model(load_yaml(path), str(path))
    if not looks_like_path and path == config_path(key):  # a shipped config by its name
        _CACHE[key] = model
    return model


def load_gguf(path: str | Path, name: str | None = None, what: str = "model") -> ModelSpec:
    """The ModelSpec of a GGUF file (its llama.cpp hyperparameters in ``spec.gguf``, its tensors in
    ``spec.gguf_weights``), through the same loader as YAML files."""
    from dataclasses import replace

    from .gguf import read_gguf

    hp, cfg, weights = read_gguf(path, name, what)
    return replace(parse_model(cfg, os.fspath(path)), gguf=hp, gguf_weights=weights)


def load_hf(path: str | Path, name: str | None = None) -> ModelSpec:
    """The ModelSpec of a config.json (or a directory holding one), through the same loader as YAML files."""
    from .hf import import_config, read_config  # imported on the fly: only a config.json needs the importer

    data, file = read_config(path)
    return parse_model(import_config(data, file, name), file)
