"""A log is untrusted input: every number is bounded, divisors must be positive, and a huge log or line costs
one scan. Each class ends in one line and exit 2 naming the file, the line and the figure (or a correct answer);
the classes are pinned for both engines' readers."""

from pathlib import Path

import pytest

from kvcalc.engines import get_engine

LOGS = Path(__file__).parents[1] / "fixtures" / "logs"
VLLM = (LOGS / "synthetic-0.33-llama-3.1-8b.log").read_text()
SGLANG = (LOGS / "synthetic-sglang-0.5.23-llama-3.1-8b.log").read_text()


def _one_line(r):
    assert r.code == 2, (r.code, r.err)
    assert r.err.count("\n") == 1 and r.err.startswith("kvcalc: error:") and "internal error" not in r.err


@pytest.mark.parametrize("old, new, figure", [
    ("tensor_parallel_size=1", "tensor_parallel_size=0", "tp: 0 is out of range (from 1"),
    ("tensor_parallel_size=1", "tensor_parallel_size=1, block_size=0", "block_size: 0 is out of range (from 1"),
    ("max_seq_len=131072", "max_seq_len=0", "max_model_len: 0 is out of range (from 1"),
    ("Available KV cache memory: ", "Available KV cache memory: " + "9" * 300 + "0", "available_gib: a number of 3"),
    ("GPU KV cache size: ", "GPU KV cache size: " + "9" * 400 + "0", "cache_tokens: a number of 4"),
    ("memory: 20.00 GiB", "memory: 9" + "0" * 15 + " GiB", "available_gib: 9000000000000000 is out of range"),
])
def test_vllm_numbers_out_of_bounds(cli, tmp_path, old, new, figure):
    assert old in VLLM
    f = tmp_path / "v.log"
    f.write_text(VLLM.replace(old, new, 1))
    r = cli("check-log", str(f))
    _one_line(r)
    line = next(i for i, s in enumerate(VLLM.replace(old, new, 1).splitlines(), 1) if new in s)
    assert f"{f}:{line}: {figure}" in r.err


@pytest.mark.parametrize("old, new, figure", [
    ("'tp_size': 1", "'tp_size': 0", "tp: 0 is out of range"),
    ("'page_size': 1", "'page_size': 0", "page_size: 0 is out of range"),
    ("#tokens: ", "#tokens: " + "1" * 50, "kv_tokens: a number of 5"),
    ("context_len=131072", "context_len=" + "9" * 20, "context_len: a number of 20 digits"),
])
def test_sglang_numbers_out_of_bounds(cli, tmp_path, old, new, figure):
    assert old in SGLANG, old
    f = tmp_path / "s.log"
    f.write_text(SGLANG.replace(old, new, 1))
    r = cli("check-log", str(f))
    _one_line(r)
    assert figure in r.err and f"{f}:" in r.err


def test_a_huge_line_is_searched_only_in_its_first_64_kib():
    # a 3 MB line of junk holding a hint (and a figure past 64 KiB) before the real lines: the junk line's
    # figure is not read (only its first 65,536 characters are searched), the real one is, with its line number
    reader = get_engine("vllm").logs
    junk = "GPU KV cache size: " + "x" * (3 << 20) + " # GPU blocks: 7"
    facts = reader.parse(junk + "\n" + VLLM)
    assert "gpu_blocks" not in facts.values
    want = next(i for i, s in enumerate(VLLM.splitlines(), 2) if "GPU KV cache size:" in s)
    assert facts.lines["cache_tokens"] == want
    # the same figures as without the junk line, one line further down
    plain = reader.parse(VLLM)
    assert facts.values == plain.values
    assert {k: v - 1 for k, v in facts.lines.items()} == plain.lines


def test_every_pattern_has_a_hint_that_its_matches_contain():
    # the parse searches only lines holding a hint: a pattern without one, or with a hint its own matches
    # need not contain, would silently never match
    for name in ("vllm", "sglang"):
        reader = get_engine(name).logs
        assert set(reader.hints) == set(reader.patterns), name
        for text in (VLLM, SGLANG, *(p.read_text() for p in LOGS.glob("*.log"))):
            for line in text.splitlines():
                for key, pat in reader.patterns.items():
                    if pat.search(line):
                        hint = reader.hints[key]
                        assert any(h in line for h in ((hint,) if isinstance(hint, str) else hint)), \
                            (name, key, line[:80])


def test_a_log_with_figures_but_no_token_count_compares_nothing_it_cannot(cli, tmp_path):
    # found by scripts/fuzz.py: an SGLang log whose only recognised figure is a V4 pool line, read for a model
    # that is not V4, and a K size without the #tokens it follows from: nothing to compare, no crash
    f = tmp_path / "s.log"
    f.write_text("[x] DSV4 pool sizes: full=1024, swa=256\n"
                 "[x] KV Cache is allocated. K size: 1.00 GB, V size: 1.00 GB\n")
    r = cli("check-log", str(f), "-m", "gemma-3-27b", "--json")
    assert r.code == 0, r.err
    assert r.json()["verdict"] == "nothing to compare"
