"""Safe YAML reading with duplicate-key detection and one-line errors naming the file."""

from __future__ import annotations

from pathlib import Path

import yaml

from .errors import KvcalcError, quote

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
                None, None, f"duplicate key {quote(key)}", key_node.start_mark
            )
        seen.add(key)
    return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _refuse_tag(loader, node):
    """Sets, binary blobs and ordered pairs are not values a config holds (they are not JSON either): refused
    where they stand, so no later lookup meets an unhashable or unprintable value."""
    raise yaml.constructor.ConstructorError(
        None, None, f"{node.tag.rsplit(':', 1)[-1]} values are not allowed in a kvcalc config (plain mappings, "
        "lists, strings, numbers and booleans only)", node.start_mark)


def _timestamp_as_text(loader, node):
    """A date or time stays the text it was written as (a config has no date fields; `2026-04-24` in a source
    is text)."""
    return str(node.value)


for _tag in ("set", "binary", "omap", "pairs"):
    _StrictLoader.add_constructor(f"tag:yaml.org,2002:{_tag}", _refuse_tag)
_StrictLoader.add_constructor("tag:yaml.org,2002:timestamp", _timestamp_as_text)


#: values a document may hold once its aliases are expanded; a kvcalc config holds a few thousand (10,000
#: layers at most), so this only refuses alias bombs (a 600-byte file of nested aliases expands to 10^9 values)
MAX_YAML_VALUES = 1_000_000


def _check_expansion(root, path) -> None:
    """Refuse a document whose aliases expand past MAX_YAML_VALUES values, or refer to themselves, before
    anything is built from it (the composed nodes share aliased subtrees; nothing is expanded here)."""
    size: dict[int, int] = {}
    stack = [(root, False)]
    open_ = set()
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            open_.discard(key)
            kids = _children(node)
            size[key] = 1 + sum(size[id(k)] for k in kids)
            if size[key] > MAX_YAML_VALUES:
                raise KvcalcError(f"{path}: its aliases expand to more than {MAX_YAML_VALUES:,} values; not a "
                                  "kvcalc config (an alias bomb?)")
            continue
        if key in size:
            continue
        if key in open_:
            raise KvcalcError(f"{path}: an alias refers to the value that contains it (a recursive structure); "
                              "not a kvcalc config")
        open_.add(key)
        stack.append((node, True))
        stack.extend((k, False) for k in _children(node) if id(k) not in size)


def _children(node) -> list:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [x for pair in node.value for x in pair]
    return []


def load_yaml(path: Path):
    """Parse ``path`` with safe loading; any problem becomes a KvcalcError naming the file."""
    from .inputs import read_text

    text = read_text(path, None, MAX_YAML_BYTES)  # bounded whatever the path names (/dev/zero, a FIFO)
    try:
        loader = _StrictLoader(text)
        try:
            node = loader.get_single_node()
            if node is None:
                return None
            _check_expansion(node, path)
            return loader.construct_document(node)
        finally:
            loader.dispose()
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(path)
        problem = " ".join((getattr(exc, "problem", None) or str(exc)).split())
        if len(problem) > 200:  # the parser echoes what it read (a tag, a key): bounded like any quoted value
            problem = f"{problem[:200]}… ({len(problem):,} characters)"
        raise KvcalcError(f"{where}: malformed YAML: {problem}") from None
    except (ValueError, TypeError, KeyError, OverflowError, RecursionError) as exc:
        # a safe constructor rejecting an explicit tag's value (`!!bool 1`, `!!timestamp 2001-13-45`, ...)
        detail = " ".join(str(exc).split())[:120]
        raise KvcalcError(f"{path}: malformed YAML: an explicitly tagged value cannot be read ({type(exc).__name__}: "
                          f"{detail})") from None
