"""Context lists and ranges as the command line takes them (``4k,8k``, ``4k..1M``, ``1k..64k:1k``)."""

from __future__ import annotations

import re
from typing import Iterable

import numpy as np

from ..errors import KvcalcError, quote
from ..estimate import MAX_CONTEXTS as MAX_POINTS  # more is a typo, not a sweep (the core's limit for one call)
from ..units import parse_tokens

_RANGE = re.compile(r"^\s*([^.:\s]+)\s*\.\.\s*([^.:\s]+)\s*(?::\s*(\S+))?\s*$")


def parse_contexts(specs: Iterable[str], points: int = 64, flag: str = "--context") -> np.ndarray:
    """Context lengths from ``4k,8k`` lists, ``4k..1M`` ranges (``points`` values, geometric, both ends kept,
    duplicates after rounding dropped) and ``1k..64k:1k`` ranges with a step. Sorted, unique, int64."""
    if isinstance(points, bool) or not isinstance(points, int) or not 2 <= points <= MAX_POINTS:
        raise KvcalcError(f"points: must be an integer from 2 to {MAX_POINTS:,}, got {quote(points)}", param="points")
    parts: list[np.ndarray] = []
    for spec in specs:
        for item in str(spec).split(","):
            if not item.strip():
                continue
            m = _RANGE.match(item)
            if not m:
                parts.append(np.array([parse_tokens(item.strip(), flag)], dtype=np.int64))
                continue
            lo, hi = parse_tokens(m.group(1), flag), parse_tokens(m.group(2), flag)
            if hi < lo:
                raise KvcalcError(f"{flag}: range {quote(item.strip())} runs backwards ({lo:,} > {hi:,})")
            if m.group(3) is not None:
                step = parse_tokens(m.group(3), flag)
                n = (hi - lo) // step + 1
                if n > MAX_POINTS:
                    raise KvcalcError(f"{flag}: range {quote(item.strip())} has {n:,} points; at most {MAX_POINTS:,}")
                parts.append(np.arange(lo, hi + 1, step, dtype=np.int64))
            else:
                vals = np.rint(np.geomspace(lo, hi, points)).astype(np.int64)
                vals[0], vals[-1] = lo, hi
                parts.append(vals)
    if not parts:
        raise KvcalcError(f"{flag}: give at least one context length")
    out = np.unique(np.concatenate(parts))
    if out.size > MAX_POINTS:
        raise KvcalcError(f"{flag}: {out.size:,} contexts; at most {MAX_POINTS:,}")
    return out
