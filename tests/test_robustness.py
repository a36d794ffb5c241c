"""Hostile and odd input: one line on stderr, exit 2, never a traceback, and fast (issue 9's classes)."""

import subprocess
import sys
from pathlib import Path

import pytest

import kvcalc

ROOT = Path(__file__).resolve().parents[1]
LLAMA = (ROOT / "kvcalc" / "data" / "configs" / "llama-3.1-8b.yaml").read_text()


def _one_line_exit_2(r, start="kvcalc: error: "):
    assert r.code == 2, (r.code, r.err)
    assert r.err.startswith(start) and r.err.count("\n") == 1, r.err
    assert "Traceback" not in r.err


def test_a_model_name_too_long_for_the_file_system(cli):
    _one_line_exit_2(cli("estimate", "a" * 300))
    _one_line_exit_2(cli("estimate", "a/" + "b" * 300 + ".yaml"))


def test_a_context_beyond_pythons_int_conversion_limit(cli):
    r = cli("estimate", "-c", "9" * 5000)
    _one_line_exit_2(r)
    assert "5,000 digits" in r.err


@pytest.mark.parametrize("text, fragment", [
    ("kvcalc: !!bool 1\n", "explicitly tagged value"),
    ("kvcalc: !!int 12abc\n", "explicitly tagged value"),
])
def test_explicit_yaml_tags_with_bad_values(cli, tmp_path, text, fragment):
    f = tmp_path / "t.yaml"
    f.write_text(text)
    r = cli("estimate", str(f))
    _one_line_exit_2(r)
    assert fragment in r.err


def test_dates_stay_text(cli, tmp_path):
    # a date (explicit or implicit, valid or not) is kept as the text written: a config has no date fields
    from kvcalc.yamlio import load_yaml

    f = tmp_path / "t.yaml"
    f.write_text("a: !!timestamp 2001-13-45\nb: 2026-04-24\n")
    assert load_yaml(f) == {"a": "2001-13-45", "b": "2026-04-24"}


@pytest.mark.parametrize("value", ["!!set {a: null}", "!!binary aGVsbG8=", "!!omap [a: 1]", "!!pairs [a: 1]",
                                   "[!!set {a: null}]", "{x: !!set {a: null}}"])
def test_non_json_values_are_refused_where_they_stand(cli, tmp_path, value):
    # a set inside a list would reach a dict lookup as an unhashable value: every such tag is refused at load
    f = tmp_path / "t.yaml"
    f.write_text(LLAMA.replace("layers:\n  - pattern: [full]", f"layers:\n  - pattern: [full]\n# {value}") +
                 f"\nnotes_for_test: {value}\n")
    r = cli("estimate", str(f))
    _one_line_exit_2(r)
    assert "values are not allowed in a kvcalc config" in r.err and "t.yaml:" in r.err


def test_a_set_where_a_list_belongs(cli, tmp_path):
    f = tmp_path / "t.yaml"
    f.write_text("kvcalc: 1\nname: x\nprecisions: {bf16: {kv: bf16}}\ndefault_precision: bf16\n"
                 "components: {kv: {cache: full_attention, kv_heads: 1, head_dim: 8}}\nlayer_kinds: {g: [kv]}\n"
                 "layers: {select: !!set {a: null}, kinds: {a: g}}\n")
    _one_line_exit_2(cli("estimate", str(f)))


def test_an_alias_bomb_is_refused_without_expanding_it(cli, tmp_path):
    # 9**8 = 43 million elements if expanded; the error must name the field and not print the value
    bomb = ('description: [&a ["x","x","x","x","x","x","x","x","x"], &b [*a,*a,*a,*a,*a,*a,*a,*a,*a], '
            '&c [*b,*b,*b,*b,*b,*b,*b,*b,*b], &d [*c,*c,*c,*c,*c,*c,*c,*c,*c], &e [*d,*d,*d,*d,*d,*d,*d,*d,*d], '
            '&f [*e,*e,*e,*e,*e,*e,*e,*e,*e], &g [*f,*f,*f,*f,*f,*f,*f,*f,*f], &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]]\n')
    f = tmp_path / "b.yaml"
    f.write_text("\n".join(bomb if line.startswith("description:") else line for line in LLAMA.splitlines()) + "\n")
    r = cli("estimate", str(f))
    _one_line_exit_2(r)
    assert "its aliases expand to more than 1,000,000 values" in r.err and len(r.err) < 300


@pytest.mark.parametrize("field", ["max_context", "    kv_heads", "  bf16", "name"])
def test_an_alias_bomb_anywhere_is_refused_before_anything_reads_it(cli, tmp_path, field):
    # the same bomb where a value is formatted into a message (an integer field's repr) or looked up: refused
    # at load, by counting the composed nodes (9 + 9 x 9 + ... shared, 9**8 + ... expanded)
    import re

    bomb = "[&a [x, x, x, x, x, x, x, x, x]" + "".join(
        f", &{n} [" + ", ".join([f"*{p}"] * 9) + "]" for p, n in zip("abcdefg", "bcdefgh")) + "]"
    text = re.sub(rf"^{field}:.*$", f"{field}: {bomb}", LLAMA, count=1, flags=re.M)
    assert text != LLAMA
    f = tmp_path / "b.yaml"
    f.write_text(text)
    r = cli("show", str(f))
    _one_line_exit_2(r)
    assert "its aliases expand to more than 1,000,000 values" in r.err


def test_a_recursive_alias_is_refused(cli, tmp_path):
    f = tmp_path / "r.yaml"
    f.write_text(LLAMA.replace("name: llama-3.1-8b", "name: &n [*n]"))
    r = cli("estimate", str(f))
    _one_line_exit_2(r)
    assert "an alias refers to the value that contains it" in r.err


def test_a_huge_text_field_is_refused(cli, tmp_path):
    f = tmp_path / "d.yaml"
    lines = [f'description: "{"x" * 100_000}"' if line.startswith("description:") else line
             for line in LLAMA.splitlines()]
    f.write_text("\n".join(lines) + "\n")
    r = cli("show", str(f))
    _one_line_exit_2(r)
    assert "100,000 characters" in r.err


def test_claims_with_numbers_beyond_floats(cli, tmp_path):
    text = (ROOT / "kvcalc" / "data" / "claims.yaml").read_text().replace("published: 1408", "published: 1" + "0" * 400, 1)
    f = tmp_path / "c.yaml"
    f.write_text(text)
    r = cli("claims", "--file", str(f))
    _one_line_exit_2(r)
    assert "below 1e300" in r.err and len(r.err) < 300


@pytest.mark.parametrize("bad", [None, 3.5, float("nan"), b"llama-3.1-8b", ["llama-3.1-8b"], {"a": 1}])
def test_api_model_argument_types(bad):
    with pytest.raises(kvcalc.KvcalcError, match="^model: expected a model name or a path"):
        kvcalc.estimate(bad, 1024)


def test_api_accepts_a_path():
    e = kvcalc.estimate(ROOT / "kvcalc" / "data" / "configs" / "llama-3.1-8b.yaml", 1024)
    assert int(e.per_sequence[0]) == 1024 * 32 * 2 * 8 * 128 * 2


def test_compact_json_for_many_contexts(cli):
    ctx = ",".join(str(i) for i in range(1, 3001))
    r = cli("estimate", "llama-3.1-8b", "-c", ctx, "--json", "--compact")
    assert r.code == 0
    (obj,) = r.json()
    assert obj["context_tokens"][:3] == [1, 2, 3] and len(obj["per_sequence_bytes"]) == 3000
    assert obj["per_sequence_bytes"][2999] == 3000 * 32 * 4096  # 32 layers x 4,096 B per token
    assert obj["kinds"]["full"]["layers"] == 32
    _one_line_exit_2(cli("estimate", "llama-3.1-8b", "--compact"))


def test_by_layer_over_ten_thousand_layers(cli, tmp_path):
    f = tmp_path / "l.yaml"
    f.write_text("kvcalc: 1\nname: deep\nprecisions: {bf16: {kv: bf16}}\ndefault_precision: bf16\n"
                 "components: {kv: {cache: full_attention, kv_heads: 1, head_dim: 8}}\nlayer_kinds: {g: [kv]}\n"
                 "layers: [{pattern: [g], layers: 10000}]\n")
    r = cli("estimate", str(f), "-c", "10", "--by-layer")
    assert r.code == 0
    rows = [line.split() for line in r.out.splitlines() if line.strip()[:1].isdigit()]
    assert len(rows) == 10_000 and rows[-1][0] == "9999" and rows[-1][3] == "320"  # 10 x 2 x 8 x 2 B


def test_console_script_has_no_traceback_for_a_planted_bug():
    code = ("import sys, kvcalc.present.estimate\n"
            "def boom(*a, **k): raise RuntimeError('planted')\n"
            "sys.modules['kvcalc.present.estimate'].render_kinds = boom\n"
            "import kvcalc.cli as C; C.main(['estimate', 'llama-3.1-8b', '-c', '1k'])")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert r.stderr == "kvcalc: internal error: RuntimeError: planted (KVCALC_DEBUG=1 shows the traceback)\n"


@pytest.mark.parametrize("argv", [
    ["check-log", "a\x00b"], ["estimate", "a\x00b.yaml"], ["estimate", "a\x00b.json"], ["import-hf", "a\x00b"],
    ["claims", "--file", "a\x00b"], ["sweep", "llama-3.1-8b", "-c", "1k", "-o", "a\x00b"],
    ["import-hf", "tests/fixtures/hf/kimi-k2.json", "-o", "a\x00b.yaml"],
])
def test_a_nul_byte_in_a_path(cli, argv):
    # found by scripts/fuzz.py: the OS refuses such a path with ValueError, not OSError
    _one_line_exit_2(cli(*argv))


def test_a_count_is_checked_before_anything_is_built_from_it(cli):
    # a range of 2M contexts is refused from its count (2,097,152), not after building it; the API the same for
    # a sequence with a length and for an endless generator (it reads at most 1,000,001 values)
    import itertools

    import kvcalc

    r = cli("sweep", "llama-3.1-8b", "-c", "1..2M:1")
    _one_line_exit_2(r)
    assert "has 2,097,152 points; at most 1,000,000" in r.err
    with pytest.raises(kvcalc.KvcalcError, match="^context: 2,000,000 contexts at once"):
        kvcalc.estimate("llama-3.1-8b", range(1, 2_000_001))
    with pytest.raises(kvcalc.KvcalcError, match="^context: more than 1,000,000 contexts at once"):
        kvcalc.estimate("llama-3.1-8b", itertools.count(1))
