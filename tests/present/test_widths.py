"""Every table-printing command at 60, 80 and 200 columns ($COLUMNS, as a terminal sets it): no line passes the
console's width (but a single word that cannot be broken, such as a long path or URL, which the wrapper keeps
whole), and every column a 200-column console shows is, on a narrower one, either in a table's header or named
in the line under the table ('Not shown at 80 columns: ...; widen the terminal (104+ columns), ...'), and
shows again at the width that line gives. Commands run in-process; verify renders stored results (its run
needs torch: tests/verify run it for real)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from kvcalc import textout

FIXTURES = Path(__file__).parent / "fixtures"

COMMANDS = {
    "decode-v4-pro": ["decode", "deepseek-v4-pro", "-p", "fp8"],
    "estimate-headline": ["estimate", "-c", "1M"],
    "estimate-llama": ["estimate", "llama-3.1-8b", "-c", "1M"],
    "estimate-v4-pro": ["estimate", "deepseek-v4-pro", "-c", "1M", "-p", "fp8"],
    "estimate-hybrid": ["estimate", "qwen3-next-80b-a3b", "-c", "1M"],
    "estimate-summary-batch-vs": ["estimate", "deepseek-v4-pro", "deepseek-v4-flash", "-c", "4k,1M", "-b", "1000",
                                  "--vs", "deepseek-v3.2"],
    "estimate-by-layer": ["estimate", "deepseek-v4-flash", "--by-layer", "-c", "1M"],
    "compare": ["compare", "deepseek-v3.2", "deepseek-v4-pro", "-c", "4k,1M"],
    "capacity-vllm": ["capacity", "deepseek-v4-pro", "--gpu", "h200", "--tp", "8", "-c", "1M", "-p", "fp8"],
    "capacity-vllm-bf16": ["capacity", "deepseek-v4-pro", "--gpu", "h200", "--tp", "8", "-c", "512k"],
    "capacity-side-by-side": ["capacity", "deepseek-v4-pro", "--gpu", "h200", "--tp", "8", "-c", "1M", "-p", "fp8",
                              "--engine", "vllm,sglang,exact"],
    "capacity-sglang-v4": ["capacity", "deepseek-v4-pro", "--gpu", "h200", "--tp", "8", "-c", "1M", "-p", "fp8",
                           "--engine", "sglang"],
    "capacity-sglang-llama": ["capacity", "llama-3.1-8b", "--gpu", "h200", "-c", "128k", "--engine", "sglang"],
    "capacity-given-pool-reverse": ["capacity", "llama-3.1-8b", "--kv-memory", "40GiB", "-c", "8k",
                                    "--concurrency", "4"],
    "sweep": ["sweep", "llama-3.1-8b", "-c", "1k,1M"],
    "claims": ["claims"],
    "models": ["models"],
    "gpus": ["gpus"],
    "show-v4-flash": ["show", "deepseek-v4-flash"],
    "show-hybrid": ["show", "qwen3-next-80b-a3b"],
    "show-llama": ["show", "llama-3.1-8b"],
    "check-log-vllm": ["check-log", "tests/fixtures/logs/synthetic-0.33-llama-3.1-8b.log"],
    "check-log-sglang": ["check-log", "tests/fixtures/logs/synthetic-sglang-0.5.23-llama-3.1-8b.log"],
    # verify: the CLI in-process, its run replaced by a stored result of the same command (made with --json)
    "verify-vllm": ["verify", "llama-3.1-8b", "-c", "1k", "--fill", "none"],
    "verify-sglang": ["verify", "llama-3.1-8b", "-c", "1k", "--fill", "none", "--engine", "sglang"],
    "verify-vllm-v4": ["verify", "deepseek-v4-flash", "-c", "1k", "--fill", "none"],
    "verify-sglang-v4": ["verify", "deepseek-v4-flash", "-c", "8k", "--fill", "none", "--engine", "sglang"],
}
VERIFY_RESULTS = {
    "verify-vllm": "verify-llama-3.1-8b-1k-none-vllm.json",
    "verify-sglang": "verify-llama-3.1-8b-1k-none-sglang.json",
    "verify-vllm-v4": "verify-deepseek-v4-flash-1k-none-vllm.json",
    "verify-sglang-v4": "verify-deepseek-v4-flash-8k-none-sglang.json",
}
NARROW = (60, 80)
WIDE = 200

NOT_SHOWN = re.compile(r"Not shown at (\d+) columns: (.*?); widen the terminal \((\d+)\+ columns\), "
                       r"set COLUMNS=(\d+), or use --json\.")


def _norm(text: str) -> str:
    return " ".join(text.split())


def _parts(header: str) -> set[str]:
    """A header and the headers a compact table stacked into it ('id / claim', 'published' over 'tolerance')."""
    return {_norm(header)} | {_norm(p) for p in re.split(r"\n| / ", header)}


def _run(cli, monkeypatch, name: str, width: int):
    """(stdout, the tables printed) for a command at a console ``width`` columns wide."""
    monkeypatch.setenv("COLUMNS", str(width))
    tables = []
    table = textout.Console.table

    def spy(self, t):
        tables.append(t)
        return table(self, t)

    monkeypatch.setattr(textout.Console, "table", spy)
    if name in VERIFY_RESULTS:
        from kvcalc.verify.result import VerifyResult

        stored = VerifyResult.from_json(json.loads((FIXTURES / VERIFY_RESULTS[name]).read_text()))
        monkeypatch.setattr("kvcalc.verify.run", lambda *args, **kwargs: stored)
    r = cli(*COMMANDS[name])
    assert r.code == 0, (name, width, r.err)
    return r.out, tables


def _header_blocks(out: str) -> list[set[str]]:
    """The words of each rendered table's header: the lines above its rule, up to the blank line."""
    lines = out.splitlines()
    blocks = []
    for i, line in enumerate(lines):
        if line.strip() and set(line.strip()) == {textout.RULE}:
            words, j = set(), i - 1
            while j >= 0 and lines[j].strip():
                words |= set(lines[j].split())
                j -= 1
            blocks.append(words)
    return blocks


def _check_fits(out: str, width: int, name: str) -> None:
    for line in out.splitlines():
        assert len(line) <= width or " " not in line.strip(), f"{name} at {width}: {len(line)} > {width}: {line!r}"
        assert not line.endswith(" "), f"{name} at {width}: trailing space: {line!r}"


def _shown(out: str, tables, width: int, name: str) -> set[str]:
    """The headers shown in the printed tables; checks each against the rendered header's words."""
    blocks = _header_blocks(out)
    assert len(blocks) == len(tables), (name, width)
    shown = set()
    for words, t in zip(blocks, tables):
        for col in t.columns:
            if _norm(col["header"]) in t.left_out:
                continue
            assert set(col["header"].split()) <= words, (name, width, col["header"], words)
            shown |= _parts(col["header"])
    return shown


@pytest.mark.parametrize("name", COMMANDS)
def test_tables_fit_and_name_what_they_leave_out(cli, monkeypatch, name):
    out, tables = _run(cli, monkeypatch, name, WIDE)
    _check_fits(out, WIDE, name)
    assert "Not shown" not in out and not any(t.left_out for t in tables), name
    wide = {_norm(c["header"]) for t in tables for c in t.columns} - {""}
    need = 0
    for width in NARROW:
        out, tables = _run(cli, monkeypatch, name, width)
        _check_fits(out, width, name)
        shown = _shown(out, tables, width, name)
        lines = NOT_SHOWN.findall(_norm(out))
        named = {h for _, names, _, _ in lines for h in names.split(", ")}
        assert all(int(at) == width and int(cols) >= int(full) for at, _, full, cols in lines), lines
        assert named == {h for t in tables for h in t.left_out}, (name, width, named)
        missing = {h for h in wide if h not in shown and h not in named}
        assert not missing, f"{name} at {width}: columns dropped without a word: {sorted(missing)}"
        need = max([need] + [int(full) for _, _, full, _ in lines])
    if need:  # at the width the line gives, every column shows
        out, tables = _run(cli, monkeypatch, name, need)
        _check_fits(out, need, name)
        assert "Not shown" not in out and not any(t.left_out for t in tables), (name, need)


def test_the_issue_commands_say_what_80_columns_leave_out(cli, monkeypatch):
    out, _ = _run(cli, monkeypatch, "estimate-llama", 80)
    assert ("Not shown at 80 columns: format, B/entry, per layer; widen the terminal (104+ columns), set "
            "COLUMNS=120, or use --json.") in _norm(out)
    out, _ = _run(cli, monkeypatch, "capacity-vllm", 80)
    assert "Not shown at 80 columns: layers, block, page B;" in _norm(out)
    assert "group 0: layers 0..60 step 2; blocks of 64 tokens, pages 1,160,640 B" in out  # moved under the table
