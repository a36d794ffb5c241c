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

from ..errors import quote


@dataclass
class LogFacts:
    values: dict = field(default_factory=dict)
    lines: dict = field(default_factory=dict)  # field -> 1-based line number
    ranks: dict = field(default_factory=dict)  # rank kind ("dp", "pp") -> the rank whose lines were read
    notes: list = field(default_factory=list)  # what the reader chose: which run, which ranks
    source: str = "log"  # the log's name in messages


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

#: bounds on what a log may say: characters of a line searched, digits of a number, the largest value
MAX_LINE = 1 << 16
MAX_DIGITS = 18
MAX_VALUE = 1e15


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

    #: the plain text every line a pattern matches contains: only lines holding one are searched
    hints: dict[str, str] = {}
    #: the least value each integer figure may take (a divisor: a tensor-parallel size, a block size)
    minimums: dict[str, int] = {}

    #: the line that starts an engine run (its plain text): a log of several runs (a crash and a restart) is read
    #: on the first run that holds a KV figure, since figures of different runs do not belong together
    run_start: str = ""
    #: a process prefix's rank of each kind ("dp": data-parallel, "pp": pipeline stage), group 1 its number:
    #: where a log holds lines of several ranks of a kind, only the lowest rank's (and untagged lines) are read
    rank_tags: dict[str, re.Pattern] = {}
    #: the engine may log its start line twice for one start (SGLang's offline Engine(): entrypoints/engine.py
    #: logs server_args in __init__ and again in _launch_subprocesses)
    run_start_twice: bool = False

    def parse(self, text: str, source: str = "log") -> LogFacts:
        """The first occurrence of each figure in the first run that holds one (a restart's second set would be
        a different run), from the lowest rank of each tagged kind.

        A log is untrusted input: only lines holding a pattern's hint are searched (one pass over the text for
        all hints, so a huge log costs one scan), each up to its first MAX_LINE characters; a number longer
        than MAX_DIGITS digits, below its figure's minimum or beyond MAX_VALUE is refused with its line."""
        ranks = self._lowest_ranks(text)
        starts = self._run_starts(text)
        cuts = [0] + [text.rfind("\n", 0, at) + 1 for at in starts[1:]] + [len(text)]
        facts, newlines, prev = LogFacts(), 0, 0
        for i, (lo, hi) in enumerate(zip(cuts, cuts[1:])):
            newlines += text.count("\n", prev, lo)  # the runs go in order: one pass over the text in all
            prev = lo
            facts = self._parse_span(text, lo, hi, source, ranks, newlines)
            if self.recognises(facts):
                if len(cuts) > 2:
                    facts.notes.append(f"the log holds {len(cuts) - 1:,} engine starts; read run {i + 1:,}, from line "
                                       f"{newlines + 1:,} (the first with KV figures)")
                break
        facts.source = source
        facts.ranks = {kind: low for kind, (low, _) in ranks.items()}
        for kind, (low, n) in ranks.items():
            if n > 1:
                facts.notes.append(f"the log holds lines of {n} {kind.upper()} ranks; read {kind.upper()}{low}'s")
        return facts

    def _run_starts(self, text: str) -> list[int]:
        """Where each engine run starts: every ``run_start``; with ``run_start_twice``, less the second of a pair
        that repeats its start line word for word with no KV figure between them."""
        if not self.run_start:
            return []
        found = [m.start() for m in re.finditer(re.escape(self.run_start), text)]
        if not self.run_start_twice:
            return found
        hints = {self.hints[k] for k in self.figures if k in self.hints}
        out, first = [], None  # first: the start line of a kept start that may still be repeated once

        def line(at: int) -> str:
            end = text.find("\n", at)
            return text[at:end if end >= 0 else len(text)][:MAX_LINE]

        for at in found:
            this = line(at)
            if first is not None and this == first and not any(text.find(h, out[-1], at) >= 0 for h in hints):
                first = None  # the repeat of one start: at most once
                continue
            out.append(at)
            first = this
        return out

    def _lowest_ranks(self, text: str) -> dict[str, tuple[int, int]]:
        """Each tagged kind's lowest rank in the log and how many ranks it names."""
        out = {}
        for kind, pat in self.rank_tags.items():
            seen = {int(m.group(1)) for m in pat.finditer(text) if len(m.group(1)) <= 6}
            if seen:
                out[kind] = (min(seen), len(seen))
        return out

    def _other_rank(self, line: str, ranks: dict) -> bool:
        for kind, (low, _) in ranks.items():
            m = self.rank_tags[kind].search(line)
            if m and int(m.group(1)[:7]) != low:
                return True
        return False

    def _parse_span(self, text: str, lo: int, hi: int, source: str, ranks: dict, newlines: int) -> LogFacts:
        """The figures of text[lo:hi]; ``newlines``: the line breaks before ``lo``."""
        facts = LogFacts()
        todo = dict(self.patterns)
        hint_of = self.hints  # every pattern has one (tests/engines/test_hostile_logs.py)
        scan = re.compile("|".join(re.escape(h) for h in sorted(set(hint_of.values()), key=len, reverse=True)))
        last_start, pos = -1, lo
        for hit in scan.finditer(text, lo, hi):
            start = text.rfind("\n", 0, hit.start()) + 1
            if start == last_start:
                continue
            last_start = start
            end = text.find("\n", hit.start())
            line = text[start:(end if end >= 0 else len(text))][:MAX_LINE]
            newlines += text.count("\n", pos, start)  # the hits come in order: one pass in all
            pos, no = start, newlines + 1
            if ranks and self._other_rank(line, ranks):
                continue
            for key in [k for k in todo if hint_of[k] in line]:
                m = todo[key].search(line)
                if m:
                    facts.values[key] = self._value(key, m.group(1), f"{source}:{no}")
                    facts.lines[key] = no
                    del todo[key]
            if not todo:
                break
        return facts

    def _value(self, key: str, raw: str, where: str):
        """A logged figure within bounds, or a one-line refusal naming where it stands."""
        from ..errors import KvcalcError

        if key not in self.ints and key not in self.floats:
            return raw
        digits = raw.replace(",", "")
        if len(digits) > MAX_DIGITS:
            raise KvcalcError(f"{where}: {key}: a number of {len(digits):,} digits is not a figure an engine "
                              "logs; the log is damaged or not an engine's", param="file")
        try:
            val = int(digits) if key in self.ints else float(digits)
        except ValueError:
            raise KvcalcError(f"{where}: {key}: {quote(raw)} is not a number", param="file") from None
        low = self.minimums.get(key, 0)
        if not math.isfinite(val) or not low <= val <= MAX_VALUE:
            raise KvcalcError(f"{where}: {key}: {raw[:40]} is out of range (from {low} to {MAX_VALUE:.0e}); the "
                              "log is damaged or not an engine's", param="file")
        return val

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

    def settings(self, facts: LogFacts, given: dict, spec=None) -> tuple[Any, dict]:
        """The engine's settings for the plan of ``spec`` (user values override the log's) and the JSON of those
        used."""
        raise NotImplementedError

    def compare(self, facts: LogFacts, plan) -> list[Row]:
        raise NotImplementedError

    def check(self, facts: LogFacts, source: str) -> None:
        """Refuse a log whose run kvcalc cannot plan (one line naming the line and why)."""

    def notes(self, facts: LogFacts, plan) -> list[str]:
        """What the reader assumed or chose beyond the figures (shown under the table)."""
        return []

    def stage_plan(self, facts: LogFacts, plans: list):
        """With pipeline stages: the plan the logged figures are of (by default the stage with the largest
        blocks, the one whose block count the engine keeps)."""
        return max(plans, key=lambda p: p.bytes_per_block)
