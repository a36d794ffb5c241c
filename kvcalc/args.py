"""Checks for the Python API's arguments: every public function refuses a bad argument with kvcalc's own
error naming the parameter (never a TypeError from deep inside), whatever the type: lists, sets, mappings,
bytes, arrays and masked arrays included."""

from __future__ import annotations

import sys
from typing import Any

from .errors import KvcalcError, quote


def _kind(value: Any) -> str:
    if type(value).__name__ == "MaskedArray":
        return "a masked array"
    return {dict: "a mapping", list: "a list", tuple: "a tuple", set: "a set", frozenset: "a set", str: "a string",
            bytes: "bytes", bool: "a boolean", type(None): "nothing"}.get(type(value), type(value).__name__)


def name(value: Any, param: str, *, optional: bool = False, choices=None) -> str | None:
    """A name (a precision, a basis, an engine): a string; None where ``optional``."""
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise KvcalcError(f"{param}: must be a name (a string), got {_kind(value)}", param=param)
    if choices is not None and value not in choices:
        raise KvcalcError(f"{param}: {quote(value)} is not one of: {', '.join(choices)}", param=param)
    return value


def flag(value: Any, param: str) -> bool:
    """True or False (numpy's bool too): "yes", 1 or a list are refused, not taken as true."""
    np = sys.modules.get("numpy")
    if isinstance(value, bool) or (np is not None and isinstance(value, np.bool_)):
        return bool(value)
    raise KvcalcError(f"{param}: must be True or False, got {_kind(value)}", param=param)


def integer(value: Any, param: str, low: int, high: int, *, optional: bool = False) -> int | None:
    """A whole number from ``low`` to ``high`` (numpy integers too; booleans and floats refused)."""
    if value is None and optional:
        return None
    np = sys.modules.get("numpy")
    ok = isinstance(value, int) or (np is not None and isinstance(value, np.integer))
    if isinstance(value, bool) or not ok or not low <= int(value) <= high:
        shown = f"{int(value):,}" if ok and not isinstance(value, bool) else _kind(value)
        raise KvcalcError(f"{param}: must be an integer from {low:,} to {high:,}, got {shown}", param=param)
    return int(value)


def instance(value: Any, param: str, cls, what: str, *, optional: bool = False):
    if value is None and optional:
        return None
    if not isinstance(value, cls):
        raise KvcalcError(f"{param}: must be {what}, got {_kind(value)}", param=param)
    return value
