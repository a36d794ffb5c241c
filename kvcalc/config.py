"""YAML architecture config -> ModelSpec, strictly.

Unknown keys, missing keys, wrong types and impossible values are errors that name the file and the field.
Any value may be written plainly or as ``{value: ..., source: "..."}``; the sources are kept for ``show``.
The format is documented in docs/config-format.md.
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import KvcalcError
from .formats import StorageFormat, get_format
from .paths import configs_dir
from .specs import (CACHE_KINDS, CacheSpec, CompressorState, RecurrentState, required_fields,
                    spec_fields)
from .yamlio import load_yaml

FORMAT_VERSION = 1

TOP_KEYS = {
    "kvcalc": "config format version (1)",
    "name": "model name used on the command line",
    "display_name": "human name",
    "description": "one line on the architecture",
    "sources": "mapping of short source names to URLs / citations",
    "notes": "free text",
    "max_context": "max_position_embeddings (tokens)",
    "precisions": "precision name -> {role: storage format}",
    "default_precision": "precision used when none is asked for",
    "components": "component name -> cache spec",
    "layer_kinds": "layer kind -> list of component names",
    "layers": "the layer layout (list of kinds / patterns, or select + kinds)",
    "mtp": "multi-token-prediction layers {layers: N, kind: K}",
    "weights": "parameter counts by storage dtype {params: {dtype: N}, expert_params: {dtype: N}, source}",
}

#: bytes per weight parameter by storage dtype, as exact fractions (numerator, denominator): block scales
#: included (fp8_block128: one fp32 scale per 128 x 128 block; mxfp4: one ue8m0 per 32; nvfp4: one e4m3
#: per 16)
WEIGHT_DTYPES: dict[str, tuple[int, int]] = {
    "fp32": (4, 1), "bf16": (2, 1), "fp16": (2, 1), "fp8": (1, 1), "int8": (1, 1),
    "fp8_block128": (128 * 128 + 4, 128 * 128), "mxfp4": (17, 32), "nvfp4": (9, 16),
}


@dataclass(frozen=True)
class Weights:
    """The model's weights: parameter counts by storage dtype; ``experts`` are the routed experts of a
    mixture-of-experts model (expert parallelism shards them), ``dense`` everything else."""

    dense: dict[str, int]
    experts: dict[str, int]
    source: str = ""

    @staticmethod
    def _bytes(params: dict[str, int]) -> int:
        total = 0
        for dtype, n in params.items():
            num, den = WEIGHT_DTYPES[dtype]
            total += -(-n * num // den)
        return total

    @property
    def dense_bytes(self) -> int:
        return self._bytes(self.dense)

    @property
    def expert_bytes(self) -> int:
        return self._bytes(self.experts)

    @property
    def total_bytes(self) -> int:
        return self.dense_bytes + self.expert_bytes

    @property
    def params(self) -> int:
        return sum(self.dense.values()) + sum(self.experts.values())
REQUIRED_TOP = ("kvcalc", "name", "precisions", "default_precision", "components", "layer_kinds", "layers")


@dataclass(frozen=True)
class Precision:
    name: str
    formats: dict[str, StorageFormat]  # role -> format
    source: str = ""


@dataclass(frozen=True)
class ModelSpec:
    name: str
    display_name: str
    description: str
    path: str
    sources: dict[str, str]
    max_context: int | None
    precisions: dict[str, Precision]
    default_precision: str
    components: dict[str, CacheSpec]
    layer_kinds: dict[str, tuple[str, ...]]  # kind -> component names
    layers: tuple[str, ...]  # kind of each main layer, index = layer number
    mtp_layers: tuple[str, ...] = ()
    weights: Weights | None = None
    provenance: dict[str, str] = field(default_factory=dict, compare=False)

    def precision(self, name: str | None, what: str = "precision") -> Precision:
        name = name or self.default_precision
        try:
            return self.precisions[name]
        except KeyError:
            raise KvcalcError(
                f"{what}: model {self.name} has no precision {name!r}; it declares: "
                f"{', '.join(self.precisions)}", param=what
            ) from None

    def kind_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for k in self.layers:
            counts[k] = counts.get(k, 0) + 1
        return counts

    def layout_text(self) -> str:
        """'30 c4a + 31 c128a' in the order kinds first appear... sorted by kind order in layer_kinds."""
        counts = self.kind_counts()
        return " + ".join(f"{counts[k]} {k}" for k in self.layer_kinds if k in counts)


# ---- value helpers -------------------------------------------------------------------------------------
#: Integers beyond this are typos (no model has a 2^40-wide head or 2^40 layers of anything).
MAX_INT = 1 << 40
#: Parameter counts beyond this (10^15) are typos.
MAX_PARAMS = 10**15
#: No architecture has more layers than this; a bigger layout is a typo that would take minutes to expand.
MAX_LAYERS = 10_000


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
            raise self.err(where, f"must be an integer, got {_typename(value)} {value!r}")
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
            raise self.err(where, f"must be true or false, got {value!r}")
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
            more = f"; did you mean {hint[0]!r}?" if hint else f"; allowed: {', '.join(sorted(map(str, allowed)))}"
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


MAX_TEXT = 65_536  # characters in one free-text field (description, source, note): a page, not a book


def _typename(value: Any) -> str:
    return {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean", type(None): "nothing"}.get(
        type(value), type(value).__name__
    )


def _ref(ctx: _Ctx, value: Any, where: str, known, what: str) -> str:
    """A reference to a declared name (layer kind, component)."""
    if not isinstance(value, str) or value not in known:
        hint = difflib.get_close_matches(value, list(known), n=1) if isinstance(value, str) else []
        more = f"; did you mean {hint[0]!r}?" if hint else f"; declared: {', '.join(known)}"
        raise ctx.err(where, f"unknown {what} {value!r}{more}")
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
            f"unknown cache kind {kind!r}" + (f"; did you mean {hint[0]!r}?" if hint else f"; one of: {', '.join(CACHE_KINDS)}"),
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
                if fmt.group_size or fmt.rope_value_bytes is not None:
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
                raise ctx.err(f"layers.select[{i}]", f"value {v!r} has no entry in layers.kinds (keys: {list(mapping)})")
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
    ctx.keys(data, "weights", {"params", "expert_params", "source", "note"}, ["params"])
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
    return Weights(dense=out[0], experts=out[1], source=source)


def parse_model(data: Any, path: str) -> ModelSpec:
    ctx = _Ctx(path)
    if not isinstance(data, dict):
        raise ctx.err("", f"the top level must be a mapping, got {_typename(data)}")
    ctx.keys(data, "", TOP_KEYS, REQUIRED_TOP)
    version = data["kvcalc"]
    if version != FORMAT_VERSION or isinstance(version, bool):
        raise ctx.err("kvcalc", f"unsupported config format version {version!r}; this kvcalc reads {FORMAT_VERSION}")
    name = ctx.name(data["name"], "name")
    for key in ("display_name", "description", "notes"):
        if key in data:
            ctx.text(data[key], key)
    sources_raw = data.get("sources", {})
    if not isinstance(sources_raw, dict):
        raise ctx.err("sources", f"must be a mapping of names to citations, got {_typename(sources_raw)}")
    sources = {str(k): ctx.text(v, f"sources.{k}") for k, v in sources_raw.items()}
    max_context = ctx.integer(data["max_context"], "max_context") if "max_context" in data else None

    comp_raw = ctx.mapping(data["components"], "components")
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

    kinds_raw = ctx.mapping(data["layer_kinds"], "layer_kinds")
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

    layers = _layers(ctx, data["layers"], kinds)

    mtp: tuple[str, ...] = ()
    if "mtp" in data:
        m = ctx.mapping(data["mtp"], "mtp")
        ctx.keys(m, "mtp", {"layers", "kind", "source", "note"}, ["layers", "kind"])
        ctx.note_source(m, "mtp")
        n = ctx.integer(m["layers"], "mtp.layers", minimum=0)
        if n > MAX_LAYERS:
            raise ctx.err("mtp.layers", f"more than {MAX_LAYERS:,} layers")
        mtp = (_ref(ctx, m["kind"], "mtp.kind", kinds, "layer kind"),) * n

    used = {c for k in set(layers) | set(mtp) for c in kinds[k]}
    roles = {components[c].storage for c in used
             if components[c].per_token or (isinstance(components[c], RecurrentState) and components[c].dtype is None)}
    unused = [k for k in kinds if k not in set(layers) | set(mtp)]
    if unused:
        raise ctx.err(f"layer_kinds.{unused[0]}", "declared but used by no layer")
    precisions = _precisions(ctx, data["precisions"], roles, {c: comp for c, comp in components.items() if c in used})
    default = ctx.name(data["default_precision"], "default_precision")
    if default not in precisions:
        raise ctx.err("default_precision", f"{default!r} is not among precisions ({', '.join(precisions)})")

    weights = _weights(ctx, data["weights"]) if "weights" in data else None
    return ModelSpec(
        weights=weights,
        name=name,
        display_name=data.get("display_name", name),
        description=data.get("description", ""),
        path=path,
        sources=sources,
        max_context=max_context,
        precisions=precisions,
        default_precision=default,
        components=components,
        layer_kinds=kinds,
        layers=layers,
        mtp_layers=mtp,
        provenance=ctx.provenance,
    )


# ---- lookup --------------------------------------------------------------------------------------------
def config_names() -> list[str]:
    return sorted(p.stem for p in configs_dir().glob("*.yaml"))


_CACHE: dict[str, ModelSpec] = {}


def as_model(model, what: str = "model") -> ModelSpec:
    """A ModelSpec as given, or loaded from a name or path (str or os.PathLike); anything else is refused."""
    return model if isinstance(model, ModelSpec) else load_model(model, what)


def load_model(name_or_path: str, what: str = "model") -> ModelSpec:
    """A shipped config by name (``deepseek-v4-pro``), any YAML file by path, or a Hugging Face
    ``config.json`` (or a folder holding one: imported by :mod:`kvcalc.importhf`). ``what`` names the
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
        raise KvcalcError(f"{what}: {key[:60]!r}... is neither a model name nor a usable path (too long)", param=what)
    try:
        return _load_model(key, candidate, what)
    except OSError as exc:  # the file system refused the path (permissions, a FIFO, ...)
        raise KvcalcError(f"{what}: cannot read {key[:200]!r}: {exc.strerror or exc}", param=what) from None


def _load_model(key: str, candidate: Path, what: str) -> ModelSpec:
    looks_like_path = key.endswith((".yaml", ".yml", ".json")) or "/" in key or os.sep in key
    if not looks_like_path:  # a shipped name wins over a same-named file here, and case does not matter
        shipped = {n.lower(): n for n in config_names()}
        name = shipped.get(key.lower())
        if name is not None:
            if candidate.exists():
                import sys

                print(f"kvcalc: note: {what}: {key!r} is the shipped config {name}; the file ./{key} here was "
                      f"not read (write ./{key} to read it)", file=sys.stderr)
            model = parse_model(load_yaml(configs_dir() / f"{name}.yaml"), str(configs_dir() / f"{name}.yaml"))
            _CACHE[key] = model
            return model
    if key.endswith(".json") or (candidate.is_dir() and (candidate / "config.json").is_file()):
        from .importhf import load_hf  # a Hugging Face config.json, imported on the fly

        if not candidate.exists():
            raise KvcalcError(f"{what}: no such config file {key!r}", param=what)
        model = load_hf(candidate)
        _CACHE[key] = model
        return model
    if key.endswith((".yaml", ".yml")) or candidate.exists() or "/" in key:
        path = candidate
        if path.is_dir():
            raise KvcalcError(f"{what}: {key!r} is a directory, not a config file", param=what)
        if not path.is_file():
            raise KvcalcError(f"{what}: no such config file {key!r}", param=what)
    else:
        path = configs_dir() / f"{key}.yaml"
        if not path.is_file():
            names = config_names()
            close = difflib.get_close_matches(key, names, n=3, cutoff=0.5)
            hint = f"; closest: {', '.join(close)}" if close else ""
            raise KvcalcError(f"{what}: unknown model {key!r}{hint} (`kvcalc models` lists all)", param=what)
    model = parse_model(load_yaml(path), str(path))
    _CACHE[key] = model
    return model


# ---- JSON Schema -----------------------------------------------------------------------------------------
def json_schema() -> dict:
    """A JSON Schema for the config format, built from the same tables the loader enforces (for editors and
    other tools; the loader's own checks go further: cross-references, ratios, format fit)."""
    from .formats import FORMATS

    def sourced(schema: dict) -> dict:
        return {"anyOf": [schema, {"type": "object", "properties": {"value": schema, "source": {"type": "string"},
                                                                    "note": {"type": "string"}},
                                   "required": ["value"], "additionalProperties": False}]}

    integer = {"type": "integer", "minimum": 1, "maximum": MAX_INT}
    json_types = {"int": sourced(integer), "int | None": sourced(integer), "bool": sourced({"type": "boolean"}),
                  "str": {"type": "string", "minLength": 1}, "str | None": {"type": "string", "minLength": 1},
                  "tuple[int, ...]": sourced({"type": "array", "items": integer, "minItems": 1})}
    components = []
    for kind, cls in CACHE_KINDS.items():
        types = spec_fields(cls)
        if not cls.per_token:
            types.pop("storage", None)
        props = {k: json_types[t] for k, t in types.items()}
        if "rope_dim" in props:
            props["rope_dim"] = sourced(dict(integer, minimum=0))
        for key in ("dtype", "ssm_dtype"):
            if key in props:
                props[key] = {"enum": sorted(FORMATS)}
        props.update(cache={"const": kind}, source={"type": "string"}, note={"type": "string"})
        components.append({"type": "object", "properties": props, "additionalProperties": False,
                           "required": ["cache", *sorted(required_fields(cls) - {"storage"})]})
    layer_item = {"anyOf": [{"type": "string"}, {"type": "object", "properties": {
        "pattern": {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}, "minItems": 1}]},
        "layers": sourced({"type": "integer", "minimum": 1, "maximum": MAX_LAYERS}), "source": {"type": "string"},
        "note": {"type": "string"}},
        "required": ["pattern", "layers"], "additionalProperties": False}]}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "kvcalc model config (format version 1)",
        "type": "object",
        "additionalProperties": False,
        "required": list(REQUIRED_TOP),
        "properties": {
            "kvcalc": {"const": FORMAT_VERSION},
            "name": {"type": "string", "minLength": 1},
            "display_name": {"type": "string"},
            "description": {"type": "string"},
            "notes": {"type": "string"},
            "sources": {"type": "object", "additionalProperties": {"type": "string"}},
            "max_context": sourced(integer),
            "precisions": {"type": "object", "minProperties": 1, "additionalProperties": {
                "type": "object", "additionalProperties": {"enum": sorted(FORMATS)},
                "properties": {"source": {"type": "string"}, "note": {"type": "string"}}}},
            "default_precision": {"type": "string"},
            "components": {"type": "object", "minProperties": 1, "additionalProperties": {"anyOf": components}},
            "layer_kinds": {"type": "object", "minProperties": 1,
                            "additionalProperties": {"type": "array", "items": {"type": "string"}}},
            "layers": {"anyOf": [
                {"type": "array", "items": layer_item, "minItems": 1},
                {"type": "object", "additionalProperties": False, "required": ["select", "kinds"], "properties": {
                    "select": sourced({"anyOf": [{"type": "array", "minItems": 1, "maxItems": MAX_LAYERS,
                                                  "items": {"type": ["integer", "string"]}},
                                                 {"type": "string", "minLength": 1, "maxLength": MAX_LAYERS}]}),
                    "kinds": {"type": "object", "additionalProperties": {"type": "string"}},
                    "source": {"type": "string"}, "note": {"type": "string"}}},
            ]},
            "weights": {"type": "object", "additionalProperties": False, "required": ["params"], "properties": {
                "params": {"type": "object", "propertyNames": {"enum": sorted(WEIGHT_DTYPES)},
                           "additionalProperties": sourced({"type": "integer", "minimum": 1, "maximum": MAX_PARAMS})},
                "expert_params": {"type": "object", "propertyNames": {"enum": sorted(WEIGHT_DTYPES)},
                                  "additionalProperties": sourced({"type": "integer", "minimum": 1,
                                                                   "maximum": MAX_PARAMS})},
                "source": {"type": "string"}, "note": {"type": "string"}}},
            "mtp": {"type": "object", "additionalProperties": False, "required": ["layers", "kind"], "properties": {
                "layers": sourced({"type": "integer", "minimum": 0, "maximum": MAX_LAYERS}), "kind": {"type": "string"},
                "source": {"type": "string"}, "note": {"type": "string"}}},
        },
    }
