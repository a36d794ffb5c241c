"""Plain-text tables and wrapped lines for the command line, on the standard library alone.

The look is the one kvcalc has always printed (rich's ``SIMPLE_HEAD`` box): a title, a blank line, the
header, a rule, the rows, a blank line; cells padded by one space and separated by one more; a blank line
between sections. Doing it here instead of through rich keeps rich's import (about 25 ms) and its layout
pass (about 10 ms) out of a 0.14 s ``kvcalc estimate``.

Layout: every column gets its natural width (its longest line). When the table is wider than the console,
the widest text columns give up characters, never below their longest word, so a number or a name is never
split (a ``no_wrap`` column keeps its cells whole and may only wrap its header between words). When even that
is too wide, the columns a renderer marked ``drop`` are left out, lowest ``drop`` first, until the table fits
(a column marked ``hide_below`` is left out on any console narrower than that, whatever the fit: the compact
tables); :class:`Console` then prints one line naming them (:func:`left_out_line`), so nothing goes missing
silently. A table whose remaining columns are still too wide is printed at that width and the terminal wraps
its lines. No line ends in padding, so piped output carries no trailing spaces. Styles (bold totals, a
green pass, a red MISS) are ANSI codes, only on a terminal and never when ``NO_COLOR`` is set. Widths count
characters: East Asian wide characters in a config's names would misalign a column (not worth a wcwidth
table here).
"""

from __future__ import annotations

import os
import sys

_CODES = {"bold": "1", "italic": "3", "green": "32", "red": "31", "bold red": "1;31"}


def paint(text: str, style: str | None, color: bool) -> str:
    """``text`` in ``style`` as ANSI codes when ``color`` (a terminal), else as it is."""
    return f"\x1b[{_CODES[style]}m{text}\x1b[0m" if color and style in _CODES and text else text


class PipeClosed(BrokenPipeError):
    """The reader went away (``kvcalc ... | head``). Raised without an errno, so click's own EPIPE handling
    (which exits 1) lets it through to ``kvcalc.cli.main``, which stops quietly with exit 0."""


def write(text: str) -> None:
    """Write to the current stdout; a closed pipe becomes :class:`PipeClosed`."""
    try:
        sys.stdout.write(text)
    except BrokenPipeError:
        raise PipeClosed() from None
RULE = "\u2500"


class Styled(str):
    """A table cell or line with a style (``bold``, ``green``, ``bold red``); it is its text everywhere else."""

    style: str | None = None

    def __new__(cls, text: str, style: str | None = None) -> "Styled":
        obj = super().__new__(cls, text)
        obj.style = style
        return obj


def wrap(line: str, width: int) -> list[str]:
    """``line`` broken at spaces into pieces of at most ``width`` characters (a longer word stays whole and
    overflows). The first piece keeps its indentation and inner spacing. Linear in the length of the line: it
    walks an index instead of slicing the rest off at every break."""
    out: list[str] = []
    width, n, start = max(1, width), len(line), 0
    while n - start > width:
        cut = line.rfind(" ", start, start + width + 1)
        if cut < 0 or not line[start:cut].strip():  # no break before the width: break after the long word
            j = start
            while j < n and line[j] == " ":
                j += 1
            cut = line.find(" ", j)
            if cut < 0:
                break
        out.append(line[start:cut].rstrip(" "))
        start = cut
        while start < n and line[start] == " ":
            start += 1
    if start < n or not out:  # trailing spaces leave no empty piece behind
        out.append(line[start:].rstrip(" "))
    return out


def _words(text: str) -> int:
    return max((len(w) for w in text.split()), default=0)


def _lines(text: str) -> list[str]:
    return text.splitlines() or [""]


class Table:
    """Columns, then rows of text cells. ``render(width)`` gives the lines; it keeps nothing of a console but
    what the last render left out (``left_out``: the headers) and the width that shows every column
    (``full_width``)."""

    def __init__(self, title: str | None = None, see_also: str | None = None) -> None:
        self.title = title
        #: another way to see every column, for the line naming those left out ('use --json')
        self.see_also = see_also
        self.columns: list[dict] = []
        self.rows: list[tuple[tuple[str, ...], str | None, bool]] = []
        self.left_out: list[str] = []
        self.full_width = 0

    def add_column(self, header: str, justify: str = "left", no_wrap: bool = False,
                   max_width: int | None = None, drop: int | None = None, hide_below: int | None = None) -> None:
        """``drop``: the column may be left out when the table does not fit even wrapped (lowest first; equal
        ones right to left); ``hide_below``: left out on consoles narrower than this."""
        self.columns.append({"header": header, "right": justify == "right", "no_wrap": no_wrap,
                             "max_width": max_width, "drop": drop, "hide_below": hide_below})

    def add_row(self, *cells: str, style: str | None = None, end_section: bool = False) -> None:
        if len(cells) != len(self.columns):
            raise ValueError(f"a row of {len(cells)} cells in a table of {len(self.columns)} columns")
        self.rows.append((tuple(cells), style, end_section))

    def _measure(self) -> tuple[list[int], list[int]]:
        """Each column's natural width (its longest line) and the least it may give way to (its longest word,
        or its longest cell when ``no_wrap``)."""
        natural, least = [], []
        for k, col in enumerate(self.columns):
            cells = [col["header"], *(row[0][k] for row in self.rows)]
            full = max(len(line) for cell in cells for line in _lines(cell))
            if col["no_wrap"]:  # the cells stay whole; a header of several words may still wrap
                low = max([_words(col["header"])] + [len(line) for row in self.rows for line in _lines(row[0][k])])
            else:
                low = max(1, max(_words(cell) for cell in cells))
                if col["max_width"]:
                    full = max(low, min(full, col["max_width"]))
            natural.append(full)
            least.append(low)
        return natural, least

    @staticmethod
    def _shrink(natural: list[int], least: list[int], width: int) -> list[int]:
        widths = list(natural)
        excess = sum(widths) + 3 * len(widths) + 1 - width
        while excess > 0:  # lower the widest text columns together, level by level (a few passes, not excess)
            slack = [k for k in range(len(widths)) if widths[k] > least[k]]
            if not slack:
                break
            top = max(widths[k] for k in slack)
            at_top = [k for k in slack if widths[k] == top]
            level = max([widths[k] for k in slack if widths[k] < top] + [least[k] for k in at_top])
            step = min(top - level, excess // len(at_top))
            if step == 0:  # fewer characters to give than columns at the top: one each, left to right
                for k in at_top[:excess]:
                    widths[k] -= 1
                break
            for k in at_top:
                widths[k] -= step
            excess -= step * len(at_top)
        return widths

    def widths(self, width: int) -> list[int]:
        """Column widths for a console ``width`` characters wide, every column kept (see the module's layout
        rule)."""
        return self._shrink(*self._measure(), width)

    def least_width(self) -> int:
        """The narrowest console that shows every column (wrapped as far as it may be)."""
        least = self._measure()[1]
        return sum(least) + 3 * len(least) - 1

    def layout(self, width: int) -> tuple[list[int], list[int]]:
        """The columns kept on a console ``width`` wide and their widths; sets ``left_out`` and ``full_width``.
        A table fits when its rows do (two spaces, the columns, three spaces between them); its rule reaches one
        character past the last column where the console has room for it."""
        natural, least = self._measure()
        n = len(self.columns)
        self.full_width = max([sum(least) + 3 * n - 1]
                              + [c["hide_below"] for c in self.columns if c["hide_below"]])
        keep = [k for k, c in enumerate(self.columns) if not (c["hide_below"] and width < c["hide_below"])]
        while True:
            widths = self._shrink([natural[k] for k in keep], [least[k] for k in keep], width)
            droppable = [k for k in keep if self.columns[k]["drop"] is not None]
            if sum(widths) + 3 * len(widths) - 1 <= width or not droppable or len(keep) == 1:
                break
            keep.remove(min(droppable, key=lambda k: (self.columns[k]["drop"], -k)))
        self.left_out = [" ".join(self.columns[k]["header"].split()) or f"column {k + 1}"
                         for k in range(n) if k not in keep]
        return keep, widths

    def render(self, width: int, color: bool = False) -> list[str]:
        keep, widths = self.layout(width)
        columns = [self.columns[k] for k in keep]

        def block(cells, style: str | None) -> list[str]:
            cells = [cells[k] for k in keep]
            parts = [[piece for line in _lines(cell) for piece in wrap(line, w)] for cell, w in zip(cells, widths)]
            height = max(len(p) for p in parts)
            out = []
            for i in range(height):
                cols = []
                for k, (p, w) in enumerate(zip(parts, widths)):
                    text = p[i] if i < len(p) else ""
                    pad = " " * (w - len(text))
                    cell_style = getattr(cells[k], "style", None) or style
                    cols.append(pad + paint(text, cell_style, color) if columns[k]["right"]
                                else paint(text, cell_style, color) + pad)
                out.append(("  " + "   ".join(cols)).rstrip())
            return out

        lines = []
        if self.title:
            lines += [paint(piece, "italic", color) for piece in wrap(self.title, width)]
        lines.append("")
        lines += block([c["header"] for c in self.columns], "bold")
        rule = sum(widths) + 3 * len(widths) - 1  # as long as the rows are wide; from column 2 it ends one past
        lines.append(" " + RULE * (width - 1 if rule == width else rule))  # them, never past the console
        for n, (cells, style, end_section) in enumerate(self.rows):
            lines += block(cells, style)
            if end_section and n < len(self.rows) - 1:
                lines.append("")
        lines.append("")
        return lines


def left_out_line(width: int, headers: list[str], full_width: int, see_also: str | None = None) -> str:
    """The line under a table that left columns out: which, and how to see them ('Not shown at 80 columns:
    format, per layer; widen the terminal (104+ columns), set COLUMNS=120, or use --json.')."""
    ways = [f"widen the terminal ({full_width}+ columns)", f"set COLUMNS={max(full_width, 120)}"]
    ways += [see_also] if see_also else []
    return (f"Not shown at {width} columns: {', '.join(headers)}; {', '.join(ways[:-1])}"
            f"{',' if len(ways) > 2 else ''} or {ways[-1]}.")


def _env_width() -> int | None:
    """$COLUMNS if it is a sane number (40 to 1,000 after clamping), else None."""
    try:
        return max(40, min(int(os.environ["COLUMNS"]), 1000))
    except (KeyError, ValueError):
        return None


class Console:
    """Where the command line prints: the current ``sys.stdout`` (so redirection and test runners see it),
    ``width`` columns wide. On a terminal the width is $COLUMNS or the terminal's; elsewhere $COLUMNS or
    120, so piped output does not depend on the window it was typed in."""

    def __init__(self, width: int | None = None, color: bool | None = None) -> None:
        self._width = width
        self._color = color

    @property
    def file(self):
        return sys.stdout

    def _tty(self) -> bool:
        try:
            return self.file.isatty()
        except (AttributeError, ValueError):
            return False

    @property
    def width(self) -> int:
        if self._width is not None:
            return self._width
        env = _env_width()
        if env is not None:
            return env
        if self._tty():
            try:
                return max(40, os.get_terminal_size(self.file.fileno()).columns)
            except (OSError, AttributeError, ValueError):
                return 80
        return 120

    @property
    def color(self) -> bool:
        if self._color is not None:
            return self._color
        return self._tty() and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"

    def print(self, text: str = "", style: str | None = None) -> None:
        """``text`` wrapped at the console's width, each line in ``style`` on a terminal."""
        width, color = self.width, self.color
        out = []
        for line in _lines(str(text)):
            for piece in wrap(line, width):
                out.append(paint(piece, style, color))
        write("\n".join(out) + "\n")

    def table(self, table: Table) -> list[str]:
        """Print ``table`` at the console's width, then the line naming any column it left out; returns their
        headers (``table.left_out``)."""
        width = self.width
        write("\n".join(table.render(width, self.color)) + "\n")
        if table.left_out:
            self.print(left_out_line(width, table.left_out, table.full_width, table.see_also))
        return table.left_out
