"""What every renderer shares: tables, token counts, ratios."""

from __future__ import annotations

from ..textout import Table
from ..units import tokens_text

#: consoles narrower than this (an 80-column terminal) get the compact tables: detail moves under the table,
#: and a line under it names the columns left out (textout.Table's hide_below)
NARROW_BELOW = 104


def table(title: str | None = None) -> Table:
    """A table for the command line: a column it leaves out on a narrow console is named under it, with the
    ways to see it (every command prints its figures with --json)."""
    return Table(title, see_also="use --json")


def ctx_text(n: int, unit: bool = True) -> str:
    """'1,048,576 (1M) tokens'; without the unit for table cells under a 'context' header."""
    text = tokens_text(n)
    if not unit:
        return text
    return f"{text} token" if n == 1 else f"{text} tokens"

def factor(r: float) -> str:
    """A factor as people read one: '12.45x' at or above 1, '1/12.45' below it (never '0.08x')."""
    r = float(r)
    if r <= 0:
        return "-"
    return f"{r:.2f}x" if r >= 1 else f"1/{1 / r:.2f}"


def ratio(value: float, ref: float) -> str:
    """Share of the reference and the factor: '11.50% (1/8.70)', '290.91% (2.91x)'; '-' for a zero reference."""
    if float(ref) == 0:
        return "-"
    r = float(value) / float(ref)
    if r == 1:
        return "100.00%"
    return f"{r:.2%} " + (f"(1/{1 / r:.2f})" if r < 1 else f"({r:.2f}x)")
