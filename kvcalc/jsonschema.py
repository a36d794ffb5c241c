"""JSON Schema building blocks (draft 2020-12), shared by the output schemas (:mod:`kvcalc.present.schemas`) and
the engines, whose own figures carry their schema (``EngineFigures.schema``). No imports: plain dictionaries."""

from __future__ import annotations

STR = {"type": "string"}
BOOL = {"type": "boolean"}
NUM = {"type": "number"}
INT = {"type": "integer"}
COUNT = {"type": "integer", "minimum": 0}  # bytes, blocks, tokens, entries: whole and never negative
POS = {"type": "integer", "minimum": 1}
SCALAR = {"type": ["string", "number", "boolean", "null"]}


def null(schema: dict) -> dict:
    """``schema`` or null."""
    if isinstance(schema.get("type"), str):
        return dict(schema, type=[schema["type"], "null"])
    return {"anyOf": [schema, {"type": "null"}]}


def arr(items: dict, min_items: int = 0) -> dict:
    out = {"type": "array", "items": items}
    if min_items:
        out["minItems"] = min_items
    return out


def mapping(values: dict, min_props: int = 0) -> dict:
    """An object whose keys are data (model, role, precision or engine names), every value ``values``."""
    out = {"type": "object", "additionalProperties": values}
    if min_props:
        out["minProperties"] = min_props
    return out


def obj(props: dict, optional=(), extra: bool = False, description: str | None = None) -> dict:
    """An object with these properties, every one required unless named in ``optional``; closed unless
    ``extra`` (an engine adds keys)."""
    out = {"type": "object", "properties": props, "required": [k for k in props if k not in optional],
           "additionalProperties": extra}
    if description:
        out["description"] = description
    return out


def ref(name: str) -> dict:
    return {"$ref": f"#/$defs/{name}"}


