"""Safe YAML reading with duplicate-key detection and one-line errors naming the file."""

from __future__ import annotations

from pathlib import Path

import yaml

from .errors import KvcalcError

_Base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
MAX_YAML_BYTES = 16 << 20


class _StrictLoader(_Base):  # type: ignore[misc, valid-type]
    """yaml's safe loader, refusing duplicate keys instead of silently keeping the last."""


def _construct_mapping(loader, node, deep=False):
    seen = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        if isinstance(key, (list, dict, set)):
            raise yaml.constructor.ConstructorError(
                None, None, "a mapping key must be a plain value, not a list or mapping", key_node.start_mark
            )
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark
            )
        seen.add(key)
    return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def load_yaml(path: Path):
    """Parse ``path`` with safe loading; any problem becomes a KvcalcError naming the file."""
    try:
        if Path(path).stat().st_size > MAX_YAML_BYTES:
            raise KvcalcError(f"{path}: larger than {MAX_YAML_BYTES >> 20} MiB; not a kvcalc config")
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise KvcalcError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:  # ValueError: a NUL byte in the path
        raise KvcalcError(f"{str(path)[:200]!r}: cannot read: {exc}") from None
    try:
        return yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(path)
        problem = getattr(exc, "problem", None) or str(exc)
        raise KvcalcError(f"{where}: malformed YAML: {problem}") from None
    except (ValueError, TypeError, KeyError, OverflowError, RecursionError) as exc:
        # a safe constructor rejecting an explicit tag's value (`!!bool 1`, `!!timestamp 2001-13-45`, ...)
        detail = " ".join(str(exc).split())[:120]
        raise KvcalcError(f"{path}: malformed YAML: an explicitly tagged value cannot be read ({type(exc).__name__}: "
                          f"{detail})") from None
