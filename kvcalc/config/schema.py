"""The config format's top-level keys, its version, the value limits the loader enforces, and a JSON Schema
built from the same tables (docs/config-format.md documents the format)."""

from __future__ import annotations

from ..specs import CACHE_KINDS, required_fields, spec_fields
from .model import WEIGHT_DTYPES

FORMAT_VERSION = 1

TOP_KEYS = {
    "kvcalc": "config format version (1)",
    "name": "model name used on the command line",
    "display_name": "human name",
    "description": "one line on the architecture",
    "sources": "mapping of short source names to URLs / citations",
    "notes": "free text",
    "max_context": "max_position_embeddings (tokens)",
    "rope_scaling": "config.json rope_scaling {type, factor, original_max_position_embeddings}: engines derive their "
                    "longest context from it and max_context (vLLM and SGLang by different rules)",
    "context_fields": ("config.json's other context-length fields ({model_max_length: N, seq_length: N, ...}, filled "
                       "by import-hf): vLLM takes the smallest with max_context, model_max_length overriding; SGLang "
                       "the first of max_sequence_length, seq_length, max_seq_len, model_max_length"),
    "original_max_position_embeddings": ("config.json's own original_max_position_embeddings, for a LongRoPE model "
                                         "(vLLM defaults max_model_len to it; the limit stays the derived one)"),
    "architecture": "the Hugging Face architecture class (config.json architectures[0]); engines that choose pools "
                    "by architecture (SGLang's split sliding-window pools, its Mamba cache strategy) read it",
    "gguf_architecture": ("llama.cpp's architecture (a GGUF's general.architecture, written by import-gguf): the "
                          "llama.cpp engine plans by it where no Hugging Face class is named"),
    "multimodal": ("present for a multimodal checkpoint (config.json has a text_config or a vision_config): "
                   "{text_config, vision_config: whether it has them, vision_num_hidden_layers, vision_hidden_size} as vision_config "
                   "states them (null: not stated); "
                   "SGLang lowers its memory fraction by the vision tower's size"),
    "precisions": "precision name -> {role: storage format}",
    "default_precision": "precision used when none is asked for",
    "components": "component name -> cache spec",
    "layer_kinds": "layer kind -> list of component names",
    "layers": "the layer layout (list of kinds / patterns, or select + kinds)",
    "mtp": "multi-token-prediction layers {layers: N, kind: K}",
    "weights": ("parameter counts by storage dtype {params: {dtype: N}, expert_params: {dtype: N}, "
                "routing: {experts: E, per_token: k}, source}"),
}

#: config.json fields besides max_position_embeddings that engines read a context length from (vLLM 0.33
#: model_arch_config_convertor.py derive_max_model_len_and_key, SGLang 0.5.23 hf_transformers CONTEXT_LENGTH_KEYS)
CONTEXT_FIELDS = ("n_positions", "max_seq_len", "seq_length", "model_max_length", "max_target_positions",
                  "max_sequence_length", "max_seq_length", "seq_len")

REQUIRED_TOP = ("kvcalc", "name", "precisions", "default_precision", "components", "layer_kinds", "layers")

#: Integers beyond this are typos (no model has a 2^40-wide head or 2^40 layers of anything).
MAX_INT = 1 << 40
#: Parameter counts beyond this (10^15) are typos.
MAX_PARAMS = 10**15
MAX_EXPERTS = 1_000_000
#: No architecture has more layers than this; a bigger layout is a typo that would take minutes to expand.
MAX_LAYERS = 10_000
MAX_TEXT = 65_536  # characters in one free-text field (description, source, note): a page, not a book


def _rope_schema(sourced, integer) -> dict:
    return {"type": "object", "additionalProperties": False, "required": ["type"],
            "properties": {"type": {"type": "string", "minLength": 1},
                           "factor": sourced({"type": "number", "exclusiveMinimum": 0}),
                           "original_max_position_embeddings": sourced(integer),
                           "source": {"type": "string"}, "note": {"type": "string"}}}


def _weights_schema(sourced) -> dict:
    """The weights block: parameter counts by dtype, and a mixture of experts' routing."""
    return {"type": "object", "additionalProperties": False, "required": ["params"], "properties": {
        "params": {"type": "object", "propertyNames": {"enum": sorted(WEIGHT_DTYPES)},
                   "additionalProperties": sourced({"type": "integer", "minimum": 1, "maximum": MAX_PARAMS})},
        "expert_params": {"type": "object", "propertyNames": {"enum": sorted(WEIGHT_DTYPES)},
                          "additionalProperties": sourced({"type": "integer", "minimum": 1,
                                                           "maximum": MAX_PARAMS})},
        "routing": {"type": "object", "additionalProperties": False, "required": ["experts", "per_token"],
                    "properties": {
                        "experts": sourced({"type": "integer", "minimum": 1, "maximum": MAX_EXPERTS}),
                        "per_token": sourced({"type": "integer", "minimum": 1, "maximum": MAX_EXPERTS}),
                        "source": {"type": "string"}, "note": {"type": "string"}}},
        "source": {"type": "string"}, "note": {"type": "string"}}}


def json_schema() -> dict:
    """A JSON Schema for the config format, built from the same tables the loader enforces (for editors and
    other tools; the loader's own checks go further: cross-references, ratios, format fit)."""
    # one piece: the schema is one literal, key by key as the format's table lists them
    from ..formats import FORMATS

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
            "rope_scaling": _rope_schema(sourced, integer),
            "architecture": sourced({"type": "string", "minLength": 1}),
            "gguf_architecture": sourced({"type": "string", "minLength": 1}),
            "original_max_position_embeddings": sourced(integer),
            "context_fields": {"type": "object", "additionalProperties": False, "properties": {
                **{k: integer for k in CONTEXT_FIELDS}, "source": {"type": "string"}, "note": {"type": "string"}}},
            "multimodal": {"type": "object", "additionalProperties": False, "required": ["text_config", "vision_config"],
                           "properties": {
                "text_config": {"type": "boolean"}, "vision_config": {"type": "boolean"},
                "vision_num_hidden_layers": {"anyOf": [{"type": "null"}, integer]},
                "vision_hidden_size": {"anyOf": [{"type": "null"}, integer]},
                "source": {"type": "string"}, "note": {"type": "string"}}},
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
            "weights": _weights_schema(sourced),
            "mtp": {"type": "object", "additionalProperties": False, "required": ["layers", "kind"], "properties": {
                "layers": sourced({"type": "integer", "minimum": 0, "maximum": MAX_LAYERS}), "kind": {"type": "string"},
                "source": {"type": "string"}, "note": {"type": "string"}}},
        },
    }
