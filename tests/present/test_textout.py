"""kvcalc.textout: the command line's tables and wrapped lines. Expected lines are written out by hand."""

import io

from kvcalc.textout import Console, Styled, Table, left_out_line, wrap


def _table():
    t = Table("Title")
    t.add_column("name")
    t.add_column("bytes", justify="right", no_wrap=True)
    t.add_row("alpha", "1,024")
    t.add_row("b", "7", end_section=True)
    t.add_row("total", "1,031", style="bold")
    return t


def test_layout_by_hand():
    # edge + pad = 2 spaces; columns 5 wide ('alpha', 'bytes'/'1,024'), 3 spaces between;
    # the rule spans 5 + 5 + 3 x 2 - 1 = 15 characters after one space; a blank line ends a section and the table
    assert _table().render(80) == [
        "Title",
        "",
        "  name    bytes",
        " " + "\u2500" * 15,
        "  alpha   1,024",
        "  b           7",
        "",
        "  total   1,031",
        "",
    ]


def test_narrow_console_wraps_text_columns_at_words_never_numbers():
    t = Table()
    t.add_column("what")
    t.add_column("bytes", justify="right", no_wrap=True)
    t.add_row("one two three four", "123,456,789")
    # natural width 18 + 11 + 3 x 2 + 1 = 36; at 30 the text column gives up 6 characters (18 -> 12)
    assert t.widths(30) == [12, 11]
    assert t.render(30) == ["",
        "  what                 bytes",
        " " + "\u2500" * 28,
        "  one two        123,456,789",
        "  three four",
        "",
    ]
    # narrower than the longest word plus the number: printed at that width, the terminal wraps
    assert t.widths(10) == [5, 11]


def test_widest_columns_shrink_together():
    t = Table()
    for h in ("a", "b"):
        t.add_column(h)
    t.add_row("x " * 20, "y " * 10)  # natural 39 and 19 characters
    # 39 + 19 + 7 = 65 > 40: 25 characters to give; the first column gives 20 down to the second's 19,
    # then both give, left first
    assert t.widths(40) == [16, 17] or t.widths(40) == [17, 16]
    assert sum(t.widths(40)) + 7 == 40


def test_max_width_and_multiline_cells():
    t = Table()
    t.add_column("caches", max_width=8)
    t.add_column("n", justify="right")
    t.add_row("kv indexer state", "1\n22")
    assert t.render(80) == ["",
        "  caches      n",  # 'caches' capped at 8 (its longest word, 'indexer', is 7); 'n' is 2 wide ('22')
        " " + "\u2500" * 15,  # 8 + 2 + 3 x 2 - 1
        "  kv          1",
        "  indexer    22",
        "  state",
        "",
    ]


def test_wrap_by_hand():
    assert wrap("  hello world this is", 10) == ["  hello", "world this", "is"]
    assert wrap("x" * 12 + " ab", 5) == ["x" * 12, "ab"]
    assert wrap("short", 80) == ["short"]
    assert wrap("", 5) == [""]
    assert wrap("a  b", 1) == ["a", "b"]
    assert wrap("a  ", 1) == ["a"] and wrap("short  ", 80) == ["short"]  # no trailing spaces, no empty piece


def test_wrap_is_linear_not_quadratic():
    # 10 MB of words into 80-column lines: slicing the rest off at every break would copy ~600 GB
    line = "word " * 2_000_000
    pieces = wrap(line, 80)
    assert len(pieces) == 125_000 and all(len(p) <= 80 for p in pieces)


def test_colour_only_on_a_terminal_and_never_with_no_color(monkeypatch):
    class Tty(io.StringIO):
        def isatty(self):
            return True

    out = Tty()
    monkeypatch.setattr("sys.stdout", out)
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    monkeypatch.setenv("COLUMNS", "80")
    con = Console()
    t = Table()
    t.add_column("result")
    t.add_row(Styled("MISS", "bold red"))
    con.table(t)
    con.print("done", style="bold")
    assert "\x1b[1;31mMISS\x1b[0m" in out.getvalue() and "\x1b[1mdone\x1b[0m" in out.getvalue()
    monkeypatch.setenv("NO_COLOR", "1")
    out.seek(0)
    out.truncate()
    con.table(t)
    assert "\x1b" not in out.getvalue() and "MISS" in out.getvalue()
    monkeypatch.setattr("sys.stdout", io.StringIO())  # a pipe: no colour whatever the environment says
    monkeypatch.delenv("NO_COLOR")
    assert Console().color is False


def test_width_from_columns_or_120_for_a_pipe(monkeypatch):
    monkeypatch.setattr("sys.stdout", io.StringIO())
    monkeypatch.delenv("COLUMNS", raising=False)
    assert Console().width == 120
    monkeypatch.setenv("COLUMNS", "80")
    assert Console().width == 80
    monkeypatch.setenv("COLUMNS", "5")
    assert Console().width == 40
    monkeypatch.setenv("COLUMNS", "wide")
    assert Console().width == 120


def test_printed_lines_wrap_at_the_width_and_carry_no_trailing_spaces(monkeypatch):
    out = io.StringIO()
    monkeypatch.setattr("sys.stdout", out)
    Console(width=40).print("Basis: complete: 30 c4a + 31 c128a; MTP layer not counted; exact bytes")
    assert out.getvalue() == "Basis: complete: 30 c4a + 31 c128a; MTP\nlayer not counted; exact bytes\n"


def test_narrow_terminal_never_truncates_numbers(cli, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    r = cli("estimate", "--context", "1M")
    assert r.code == 0
    assert "…" not in r.out
    assert "83.88 GiB" in r.out and "290.91% (2.91x)" in r.out and "fp8_ds_mla_v4" in r.out


def _wide_table(**marks):
    """'name' (never left out), 'a' and 'b' (marked as given), 'n' (a figure): rows of 2 + 4 + 8 + 8 + 5 + 3 x 3
    = 36 characters."""
    t = Table()
    t.add_column("name")
    t.add_column("a", no_wrap=True, **marks.get("a", {}))
    t.add_column("b", no_wrap=True, **marks.get("b", {}))
    t.add_column("n", justify="right", no_wrap=True)
    t.add_row("alfa", "aaaaaaaa", "bbbbbbbb", "1,024")
    return t


def test_columns_marked_drop_go_lowest_first_until_the_table_fits():
    t = _wide_table(a={"drop": 2}, b={"drop": 1})
    assert t.render(40)[1] == "  name   a          b              n" and t.left_out == [] and t.full_width == 36
    # at 30, 'b' (drop 1) goes; what is left (2 + 4 + 8 + 5 + 2 x 3 = 25) fits, its rule one past the rows
    assert t.render(30) == ["",
        "  name   a              n",
        " " + "\u2500" * 25,
        "  alfa   aaaaaaaa   1,024",
        "",
    ]
    assert t.left_out == ["b"] and t.full_width == 36
    t.render(20)  # then 'a': 'name' and 'n' were never marked
    assert t.left_out == ["a", "b"]
    t.render(10)  # nothing more may go: printed too wide, the terminal wraps it
    assert t.left_out == ["a", "b"]


def test_hide_below_leaves_a_column_out_whatever_the_fit():
    t = _wide_table(a={"hide_below": 104})
    assert t.render(120)[1] == "  name   a          b              n" and t.left_out == []
    assert t.render(80)[1] == "  name   b              n" and t.left_out == ["a"]
    assert t.full_width == 104  # the width that shows every column


def test_a_tight_table_fills_the_console_and_its_rule_stops_there():
    t = _wide_table(b={"drop": 1})
    lines = t.render(36)  # rows exactly 36 wide: the rule, one past them elsewhere, stops at the console's edge
    assert t.left_out == [] and max(len(line) for line in lines) == 36 and lines[2] == " " + "\u2500" * 35
    assert t.render(35) and t.left_out == ["b"]


def test_console_names_the_columns_it_left_out(monkeypatch):
    out = io.StringIO()
    monkeypatch.setattr("sys.stdout", out)
    t = _wide_table(a={"hide_below": 104})
    t.see_also = "use --json"
    assert Console(width=80).table(t) == ["a"]
    assert out.getvalue().splitlines()[-2:] == [
        "Not shown at 80 columns: a; widen the terminal (104+ columns), set COLUMNS=120,",
        "or use --json.",
    ]
    assert left_out_line(80, ["format", "per layer"], 131) == (
        "Not shown at 80 columns: format, per layer; widen the terminal (131+ columns) or set COLUMNS=131.")
    out.truncate(0)
    out.seek(0)
    assert Console(width=120).table(t) == [] and "Not shown" not in out.getvalue()
