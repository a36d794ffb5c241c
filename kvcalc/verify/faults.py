"""Faults a test plants in verify, to see that its checks catch them (never set outside the tests): pages (token
pools: rows of the first pool) allocated beyond the plan, and one byte written where nothing may be (the null
block; token pools: the padding page). They live here, not in :func:`kvcalc.verify.verify`'s signature."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass


@dataclass
class Faults:
    extra_pages: int = 0  # allocate this many blocks (token pools: rows of the first buffer) more than planned
    stray_write: bool = False  # after the fill, write one byte into the null block (token pools: the padding page)


#: the faults in force (none, but inside :func:`planted`)
ACTIVE = Faults()


@contextlib.contextmanager
def planted(extra_pages: int = 0, stray_write: bool = False):
    """``with planted(extra_pages=1): verify(...)``: the faults for the calls inside, none after."""
    ACTIVE.extra_pages, ACTIVE.stray_write = extra_pages, stray_write
    try:
        yield ACTIVE
    finally:
        ACTIVE.extra_pages, ACTIVE.stray_write = 0, False
