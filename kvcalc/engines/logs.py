"""Reading an engine's start-up log: the pieces every engine's log reader shares.

An engine that prints its KV-cache figures at start-up gives a :class:`LogReader`: the patterns of the lines
it prints, how they set the plan's model, context, precision and settings, and the rows that compare each
logged figure with the plan. ``kvcalc check-log`` (:mod:`kvcalc.checklog`) is the same for every engine.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any


@dataclass
class LogFacts:
    values: dict = field(default_factory=dict)
    lines: dict = field(default_factory=dict)  # field -> 1-based line number


@dataclass(frozen=True)
class Quantity:
    """A figure as logged or as planned: one value (``hi`` None) or a range ``lo .. hi``, in ``unit``
    ('' a count, 'tokens', 'GiB', 'B', 'x' a concurrency, '%', 'blocks'). ``collapse``: a range whose ends
    read alike is shown as one value. ``each``: bytes per item, ``pages``: (real, padded) page bytes; both
    for context. ``lo`` None: no value (``missing`` says why, or none is shown)."""

    lo: float | int | None
    hi: float | int | None = None
    unit: str = ""
    collapse: bool = False
    each: int | None = None
    pages: tuple[int, int] | None = None
    missing: str = ""


NOTHING = Quantity(None)


@dataclass(frozen=True)
class Row:
    figure: str
    logged: Quantity
    kvcalc: Quantity
    agrees: bool | None  # None: shown for information
    line: int | None = None


class LogReader:
    """One engine's start-up log lines. Subclasses set the patterns and the engine-specific steps."""

    engine: str = ""
    patterns: dict[str, re.Pattern] = {}
    ints: frozenset[str] = frozenset()
    floats: frozenset[str] = frozenset()
    #: at least one of these must be in a log for it to be this engine's
    figures: tuple[str, ...] = ()
    looked_for: str = ""  # the lines named when none is found
    #: the engine's context defaults to the model's max_position_embeddings when the log does not say
    context_defaults_to_model: bool = False
    nothing_note = ("the log has no figure kvcalc can compare (it needs the pool, the block count or the token count "
                    "together with max_model_len)")

    def parse(self, text: str) -> LogFacts:
        """The first occurrence of each figure (a restart's second set would be a different run)."""
        facts = LogFacts()
        for no, line in enumerate(text.splitlines(), 1):
            for key, pat in self.patterns.items():
                if key in facts.values:
                    continue
                m = pat.search(line)
                if not m:
                    continue
                raw = m.group(1)
                try:
                    val = int(raw.replace(",", "")) if key in self.ints else (
                        float(raw) if key in self.floats else raw)
                except ValueError:
                    continue
                if isinstance(val, float) and not math.isfinite(val):
                    continue
                facts.values[key] = val
                facts.lines[key] = no
        return facts

    def recognises(self, facts: LogFacts) -> bool:
        return any(k in facts.values for k in self.figures)

    # engine-specific steps ---------------------------------------------------------------------------------
    def model_id(self, facts: LogFacts) -> str | None:
        return facts.values.get("model_id")

    def version(self, facts: LogFacts) -> str | None:
        return facts.values.get("version")

    def context(self, facts: LogFacts) -> int | None:
        raise NotImplementedError

    def kv_dtype(self, facts: LogFacts) -> str | None:
        return facts.values.get("kv_cache_dtype")

    def precision_for(self, spec, dtype: str | None) -> str | None:
        raise NotImplementedError

    def tp(self, facts: LogFacts) -> int:
        return facts.values.get("tp", 1)

    def settings(self, facts: LogFacts, given: dict) -> tuple[Any, dict]:
        """The engine's settings for the plan (user values override the log's) and the JSON of those used."""
        raise NotImplementedError

    def compare(self, facts: LogFacts, plan) -> list[Row]:
        raise NotImplementedError
