"""Reading an engine's start-up log: the pieces every engine's log reader shares.

An engine that prints its KV-cache figures at start-up gives a :class:`LogReader`: the patterns of the lines
it prints, how they set the plan's model, context, precision and settings, and the rows that compare each
logged figure with the plan. ``kvcalc check-log`` (:mod:`kvcalc.checklog`) is the same for every engine.
"""

from __future__ import annotations

import bisect
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
    engine_lines: bool = False  # the log holds a line of this engine's (a start line, or any figure read)
    records: list = field(default_factory=list)  # an engine's repeated lines (llama.cpp: each cache's), in order


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


def word(literal: str, rest: str, flags: int = 0) -> re.Pattern:
    """``\\b<literal><rest>`` (the literal starting a word) written literal-first, ``<literal>(?<!\\w<literal>)<rest>``:
    the same matches, but the regex engine can skip ahead to the literal when it searches a whole log, where a
    leading ``\\b`` makes it try every position (64 MiB: 2 s a pattern)."""
    lit = re.escape(literal)
    return re.compile(f"{lit}(?<!\\w{lit}){rest}", flags)

class After:
    """The pattern ``<first><rest>``, where ``rest`` starts with ``.*`` or ``.*?``, searched in two steps: the first
    match of ``first`` on a line, then ``rest`` from its end to the end of the line. The same matches (from the
    first ``first`` of a line ``rest`` reaches every place a later one would, ``.`` stopping at the line's end),
    but a line holding ``first`` a thousand times without the rest costs one pass, not a thousand (the regex
    engine tries ``rest`` from each: a 64 KiB line of "server_args" took seconds a pattern)."""

    def __init__(self, first: str, rest: str, flags: int = 0):
        if not rest.startswith(".*"):
            raise ValueError(f"After: rest must start with .* or .*?, got {rest[:20]!r}")
        self.first, self.rest = re.compile(first, flags), re.compile(rest, flags)
        self.pattern = first + rest

    def search(self, string: str, pos: int = 0, endpos: int | None = None) -> "_AfterMatch | None":
        endpos = len(string) if endpos is None else min(endpos, len(string))
        while pos <= endpos:
            m = self.first.search(string, pos, endpos)
            if m is None:
                return None
            end = string.find("\n", m.end(), endpos)
            end = endpos if end < 0 else end
            r = self.rest.match(string, m.end(), end)
            if r is not None:
                return _AfterMatch(string, m.start(), r)
            pos = end + 1
        return None

    def finditer(self, string: str):
        pos = 0
        while (m := self.search(string, pos)) is not None:
            yield m
            pos = max(m.end(), m.start() + 1)


class _AfterMatch:
    def __init__(self, string: str, start: int, rest: re.Match):
        self.string, self._start, self._rest = string, start, rest

    def start(self) -> int:
        return self._start

    def end(self) -> int:
        return self._rest.end()

    def group(self, n: int = 0) -> str:
        return self.string[self._start:self._rest.end()] if n == 0 else self._rest.group(n)


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
    patterns: dict[str, "re.Pattern | After"] = {}
    ints: frozenset[str] = frozenset()
    floats: frozenset[str] = frozenset()
    #: at least one of these must be in a log for it to be this engine's
    figures: tuple[str, ...] = ()
    model_hint: str = "NAME"  # what --model takes where the log's model matches no config
    looked_for: str = ""  # the KV lines named when the log has the engine's lines but none of these
    #: the engine's context defaults to the model's max_position_embeddings when the log does not say
    context_defaults_to_model: bool = False
    nothing_note = ("the log has no figure kvcalc can compare (it needs the pool, the block count or the token count "
                    "together with max_model_len)")

    #: the plain text every line a pattern matches contains (or a tuple of texts, one of which it contains): only
    #: lines holding one are searched, and only the stretch of the log from the first to the last of them
    hints: dict[str, str | tuple[str, ...]] = {}
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
        a different run), from the lowest rank of each tagged kind; with no run holding one, the last run's.

        A log is untrusted input, up to 64 MiB in one string, so nothing here looks at it line by line in Python:
        each pattern is searched over the whole text by the regex engine (from the first to the last line holding
        its hint, which ``str.find`` locates), and only the lines it matches are then read as before: up to their
        first MAX_LINE characters, the hint in them, the rank tag of theirs. A number longer than MAX_DIGITS
        digits, below its figure's minimum or beyond MAX_VALUE is refused with its line (in the run read)."""
        ranks = self._lowest_ranks(text)
        scan = _Scan(self, text, ranks)
        starts = self._run_starts(text)
        cuts = [0] + scan.line_starts(starts[1:]) + [len(text)]
        run = len(cuts) - 2  # no run with a figure: the last run's lines, as a run-by-run read ends on
        if run > 0:
            first = scan.first_of(self.figures, 0, len(text))
            if first is not None:
                run = bisect.bisect_right(cuts, first) - 1
        facts = scan.facts(cuts[run], cuts[run + 1], source)
        if len(cuts) > 2 and self.recognises(facts):
            facts.notes.append(f"the log holds {len(cuts) - 1:,} engine starts; read run {run + 1:,}, from line "
                               f"{scan.line_number(cuts[run]):,} (the first with KV figures)")
        facts.source = source
        facts.engine_lines = bool(facts.values) or bool(starts)
        facts.ranks = {kind: low for kind, (low, _) in ranks.items()}
        for kind, (low, n) in ranks.items():
            if n > 1:
                facts.notes.append(f"the log holds lines of {n} {kind.upper()} ranks; read {kind.upper()}{low}'s")
        return facts

    def _run_starts(self, text: str) -> list[int]:
        """Where each engine run starts: every ``run_start``; with ``run_start_twice``, less the second of a pair
        that repeats its start line word for word (up to MAX_LINE characters from the start) with no KV figure
        between them. The two logs of one start are two lines: a start on the same line as the one before is
        never its repeat (so a line of a million starts costs no million comparisons of 64 KiB)."""
        if not self.run_start:
            return []
        found = [m.start() for m in re.finditer(re.escape(self.run_start), text)]
        if not self.run_start_twice:
            return found
        hints = {h for k in self.figures if k in self.hints for h in _alternatives(self.hints[k])}
        out, first, end = [], None, -1  # first: (place, length, line end) of a kept start that may be repeated once
        for at in found:
            if at > end:  # several starts on one line share its end: found once
                end = text.find("\n", at)
                end = len(text) if end < 0 else end
            length = min(end, at + MAX_LINE) - at
            if (first is not None and at > first[2] and length == first[1]
                    and text.startswith(text[first[0]:first[0] + length], at)
                    and not any(text.find(h, out[-1], at) >= 0 for h in hints)):
                first = None  # the repeat of one start: at most once
                continue
            out.append(at)
            first = (at, length, end)
        return out

    def _lowest_ranks(self, text: str) -> dict[str, tuple[int, int]]:
        """Each tagged kind's lowest rank in the log and how many ranks it names."""
        out = {}
        for kind, pat in self.rank_tags.items():
            seen = {int(g) for g in set(pat.findall(text)) if len(g) <= 6}
            if seen:
                out[kind] = (min(seen), len(seen))
        return out

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
        return max(plans, key=lambda p: p.unit_bytes)


def _alternatives(hint: str | tuple[str, ...]) -> tuple[str, ...]:
    return (hint,) if isinstance(hint, str) else tuple(hint)


def _long_lines(text: str) -> list[int]:
    """Where each line longer than MAX_LINE characters starts: the lines a search over the whole text can read
    differently from the parse, which reads their first MAX_LINE characters. One pass: each step looks at the
    next MAX_LINE + 1 characters and jumps past the last line break in them."""
    out, pos, n = [], 0, len(text)
    while n - pos > MAX_LINE:
        q = text.rfind("\n", pos, pos + MAX_LINE + 1)
        if q >= 0:
            pos = q + 1
            continue
        out.append(pos)
        q = text.find("\n", pos + MAX_LINE)
        if q < 0:
            break
        pos = q + 1
    return out


class _Scan:
    """One log's text, searched pattern by pattern over the whole of it (see LogReader.parse). A line qualifies
    for a key as it did line by line: its first MAX_LINE characters hold the key's hint and match its pattern,
    and they name no rank other than the lowest of each tagged kind."""

    def __init__(self, reader: "LogReader", text: str, ranks: dict):
        self.reader, self.text = reader, text
        self.long = _long_lines(text)
        self._counted = (0, 0)  # (position, line breaks before it): line numbers counted on from the last
        self._hints: dict = {}  # (hint, lo, hi) -> its first and last place there, or None
        self._keys = {k: (_alternatives(reader.hints[k]), p) for k, p in reader.patterns.items()}
        self._tags = [(reader.rank_tags[kind], low) for kind, (low, _) in ranks.items()]

    def line_starts(self, positions: list[int]) -> list[int]:
        """The start of the line holding each of ``positions`` (in order), each found back to the one before."""
        out, prev, start = [], 0, 0
        for at in positions:
            r = self.text.rfind("\n", prev, at)
            start = r + 1 if r >= 0 else start
            out.append(start)
            prev = at
        return out

    def line_number(self, pos: int) -> int:
        at, n = self._counted
        if pos < at:
            at, n = 0, 0
        n += self.text.count("\n", at, pos)
        self._counted = (pos, n)
        return n + 1

    def _end(self, at: int, hi: int) -> int:
        end = self.text.find("\n", at, hi)
        return hi if end < 0 else end

    def _read(self, key: str, start: int, end: int):
        """The match of ``key`` on the line text[start:end] as the line-by-line parse read it, or None (here for
        every line a pattern matches: a log of a million other-rank figure lines calls it a million times)."""
        line = self.text[start:min(end, start + MAX_LINE)]
        alts, pat = self._keys[key]
        for h in alts:
            if h in line:
                break
        else:
            return None
        for tag, low in self._tags:  # a line whose first tag of a kind names a rank other than the lowest
            m = tag.search(line)
            if m and int(m.group(1)[:7]) != low:
                return None
        return pat.search(line)

    def _hint(self, hint: str, lo: int, hi: int) -> tuple[int, int] | None:
        """Where ``hint`` first and last stands in text[lo:hi] (None: nowhere); found once for the keys sharing it."""
        if (hint, lo, hi) not in self._hints:
            a = self.text.find(hint, lo, hi)
            self._hints[hint, lo, hi] = None if a < 0 else (a, self.text.rfind(hint, lo, hi))
        return self._hints[hint, lo, hi]

    def first(self, key: str, lo: int, hi: int) -> tuple[int, Any] | None:
        """The first line of text[lo:hi] (``lo`` a line start, ``hi`` one or the end) that qualifies for ``key``:
        (its start, the match). The pattern runs over the lines from the first to the last holding the hint,
        those longer than MAX_LINE left out, and no pattern can cross a line break (tests/engines/
        test_log_scan.py), so no search runs past a short line or into a long one; a line it matches is then read
        alone, and so is each long line, by its first MAX_LINE characters, as the line-by-line parse read it."""
        text = self.text
        spans = [s for s in (self._hint(h, lo, hi) for h in _alternatives(self.reader.hints[key])) if s is not None]
        if not spans:
            return None
        a, b = min(s[0] for s in spans), max(s[1] for s in spans)
        r = text.rfind("\n", lo, a)
        pos = r + 1 if r >= 0 else lo
        stop = self._end(b, hi)
        for long in self.long[bisect.bisect_left(self.long, pos):bisect.bisect_left(self.long, stop)] + [None]:
            found = self._search(key, pos, stop if long is None else long, hi)
            if found is not None or long is None:
                return found
            end = self._end(long, hi)
            got = self._read(key, long, end)
            if got is not None:
                return long, got
            pos = end + 1
        return None

    def _search(self, key: str, pos: int, stop: int, hi: int) -> tuple[int, Any] | None:
        """The first line of the short lines in text[pos:stop] that qualifies for ``key``."""
        text, pat = self.text, self.reader.patterns[key]
        while pos <= stop:
            m = pat.search(text, pos, stop)
            if m is None:
                return None
            r = text.rfind("\n", pos, m.start())
            start = r + 1 if r >= 0 else pos
            end = self._end(m.start(), hi)
            got = self._read(key, start, end)
            if got is not None:
                return start, got
            pos = end + 1
        return None

    def first_of(self, keys, lo: int, hi: int) -> int | None:
        """The start of the first line of text[lo:hi] that qualifies for any of ``keys``."""
        found = [f[0] for f in (self.first(k, lo, hi) for k in keys) if f is not None]
        return min(found) if found else None

    def facts(self, lo: int, hi: int, source: str) -> LogFacts:
        """Each key's first qualifying line in text[lo:hi], its value read (and bounded) in the order of the lines
        and, on one line, of the patterns: the first bad number refused is the one the line-by-line parse met."""
        order = {k: i for i, k in enumerate(self.reader.patterns)}
        hits = sorted(((f[0], order[k], k, f[1]) for k in self.reader.patterns
                       for f in [self.first(k, lo, hi)] if f is not None))
        facts = LogFacts()
        for start, _, key, m in hits:
            no = self.line_number(start)
            facts.values[key] = self.reader._value(key, m.group(1), f"{source}:{no}")
            facts.lines[key] = no
        return facts
