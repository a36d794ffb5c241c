"""The CLI as a user runs it: headline, per-model breakdown, JSON, compare, models, show."""

import json
import os
import shutil
import subprocess
import sys

import pytest

from configcases import one_line_error, write

M = 1 << 20


def test_headline_tells_the_story(cli):
    r = cli("estimate", "--context", "1M")
    assert r.code == 0, r.err
    for name in ("deepseek-v3.2", "gqa8-hd128-l61", "deepseek-v4-pro", "gqa8-hd128-l43", "deepseek-v4-flash"):
        assert name in r.out
    assert "83.88 GiB" in r.out  # 1408 x 61 x 1M
    assert "Basis: complete" in r.out and "binary units" in r.out
    assert "163,840" in r.err  # V3.2 beyond its max context: a visible warning


def test_headline_json_has_ratios(cli):
    r = cli("estimate", "--context", "1M", "--basis", "article", "--json")
    assert r.code == 0
    rows = {(d["model"], d["precision"]): d for d in r.json()}
    pro = rows[("deepseek-v4-pro", "bf16")]
    assert pro["total_bytes"] == 30 * ((128 + M // 4) * 1024 + (M // 4) * 256) + 31 * (128 + M // 128) * 1024
    assert pro["reference"]["model"] == "deepseek-v3.2"
    assert round(1 / pro["reference"]["ratio"], 1) == 8.7
    assert rows[("deepseek-v3.2", "bf16")]["total_bytes"] == 1408 * 61 * M


def test_mtp_reference_is_counted_alike(cli):
    # V3.2 against itself must be 100% whether or not the MTP layer is counted
    r = cli("estimate", "--context", "1M", "--mtp", "--json")
    rows = {(d["model"], d["precision"]): d for d in r.json()}
    v32 = rows[("deepseek-v3.2", "bf16")]
    assert v32["reference"]["ratio"] == 1.0
    assert v32["per_sequence_bytes"] == 1408 * 62 * M  # 61 layers + the MTP layer


def test_single_model_breakdown(cli):
    r = cli("estimate", "deepseek-v4-pro", "-c", "1M", "-p", "fp8")
    assert r.code == 0
    row = next(line.split() for line in r.out.splitlines() if "c4_entries" in line)
    # 1M / 4 = 262,144 entries x 584 B = 146 MiB per layer; x 30 layers = 4.28 GiB
    assert row[1:] == ["L//4", "fp8_ds_mla_v4", "262,144", "584", "146.00", "MiB", "4.28", "GiB"]
    # per sequence, complete: 30 x (128 + 262,144) x 584 + 30 x 262,144 x 68 + 31 x (128 + 8,192) x 584
    #                         + state 30 x (64 + 16) KiB + 31 x 512 KiB
    total = 30 * (128 + 262144) * 584 + 30 * 262144 * 68 + 31 * (128 + 8192) * 584 + 30 * 80 * 1024 + 31 * 512 * 1024
    assert f"({total:,} B)" in r.out
    assert "Basis: complete" in r.out and "MTP layer not counted" in r.out


def test_by_layer_lists_every_layer(cli):
    r = cli("estimate", "deepseek-v4-flash", "-c", "128k", "--by-layer", "--mtp")
    assert r.code == 0
    rows = [line.split() for line in r.out.splitlines()]
    indices = [row[0] for row in rows if row and row[0].isdigit() and len(row) > 2 and row[1] in ("swa", "c4a", "c128a")]
    assert indices == [str(i) for i in range(43)]  # the 43 main layers, in order
    assert any(row[:3] == ["43", "(MTP)", "swa"] for row in rows)


def test_json_fields(cli):
    r = cli("estimate", "deepseek-v4-pro", "llama-3.1-8b", "-c", "128k,1M", "--json", "--batch", "2")
    assert r.code == 0
    data = r.json()
    assert [(d["model"], d["context_tokens"]) for d in data] == [
        ("deepseek-v4-pro", 131072), ("deepseek-v4-pro", M), ("llama-3.1-8b", 131072), ("llama-3.1-8b", M)]
    for d in data:
        for key in ("model", "context_tokens", "precision", "basis", "total_bytes", "layers"):
            assert key in d
        assert d["total_bytes"] == 2 * d["per_sequence_bytes"]
        for layer in d["layers"]:
            assert set(layer) >= {"index", "kind", "bytes"}
    llama = data[2]
    assert llama["per_sequence_bytes"] == 131072 * 131072  # 128 KiB per token x 128k tokens
    assert llama["warnings"] == []
    assert data[3]["warnings"] and "131,072" in data[3]["warnings"][0]


def test_precision_all(cli):
    r = cli("estimate", "deepseek-v3.2", "-p", "all", "-c", "1000", "--json")
    assert {d["precision"]: d["per_sequence_bytes"] for d in r.json()} == {
        "bf16": 1408 * 61 * 1000, "fp8": (656 + 132) * 61 * 1000}


def test_compare(cli):
    r = cli("compare", "deepseek-v3.2", "deepseek-v4-pro", "-c", "1M", "--basis", "article", "-p", "bf16", "--json")
    assert r.code == 0
    d = r.json()
    assert round(1 / d["ratio_b_over_a"][0], 1) == 8.7
    r = cli("compare", "deepseek-v4-pro", "deepseek-v4-pro", "-p", "bf16", "--precision-b", "fp8", "--json")
    assert r.code == 0
    d = r.json()
    state = 30 * 80 * 1024 + 31 * 512 * 1024  # compressor state, the same in both precisions (fp32)
    bf16 = 30 * ((128 + M // 4) * 1024 + (M // 4) * 256) + 31 * (128 + M // 128) * 1024 + state
    fp8 = 30 * ((128 + M // 4) * 584 + (M // 4) * 68) + 31 * (128 + M // 128) * 584 + state
    assert (d["a"][0]["precision"], d["a"][0]["per_sequence_bytes"]) == ("bf16", bf16)
    assert (d["b"][0]["precision"], d["b"][0]["per_sequence_bytes"]) == ("fp8", fp8)
    assert d["ratio_b_over_a"] == [fp8 / bf16]


STATE_ONLY = """
kvcalc: 1
name: ssm
precisions: {fp32: {}}
default_precision: fp32
components: {s: {cache: state, shape: [16, 64, 128], dtype: fp32}}
layer_kinds: {ssm: [s]}
layers: [{pattern: [ssm], layers: 4}]
"""


def test_zero_byte_reference(tmp_path, cli):
    path = write(tmp_path, STATE_ONLY)
    r = cli("compare", path, path, "--basis", "article")
    assert r.code == 0, r.err
    r = cli("compare", path, path, "--basis", "article", "--json")
    d = json.loads(r.out)  # strict JSON: no NaN
    assert d["ratio_b_over_a"] == [None]
    # the complete basis counts the state: 4 layers x 16 x 64 x 128 x 4 B
    r = cli("estimate", path, "-c", "1M", "--json")
    assert r.json()[0]["total_bytes"] == 4 * 16 * 64 * 128 * 4


def test_models_and_show(cli):
    r = cli("models")
    assert r.code == 0 and "deepseek-v4-pro" in r.out and "30 c4a + 31 c128a" in r.out
    r = cli("show", "deepseek-v4-pro")
    assert r.code == 0 and "0-1 c128a; 2-59 (c4a, c128a) x 29; 60 c4a" in r.out
    row = next(line.split() for line in r.out.splitlines() if line.split()[:1] == ["c4_entries"])
    assert row[1:] == ["compressed_mla", "L//4", "1,024", "584"]  # bf16 512 x 2 B; fp8_ds_mla_v4
    r = cli("show", "deepseek-v4-flash", "--json")
    d = r.json()
    assert d["components"]["c4_entries"]["entry_bytes"] == {"bf16": 1024, "fp8": 584}
    assert d["layer_list"][:3] == ["swa", "swa", "c4a"] and len(d["layer_list"]) == 43


def test_usage_errors_exit_2(cli):
    for args, fragment in ((("estimate", "-c", "abc"), "--context"), (("estimate", "--basis", "paged"), "--basis"),
                           (("estimate", "--batch", "0"), "--batch"),
                           (("estimate", "deepseek-v4-pro", "--basis", "article", "--mtp"), "--mtp"),
                           (("compare", "deepseek-v4-pro"), "compare takes two models"),
                           (("sweep", "llama-3.1-8b", "--nope"), "No such option"),
                           (("estimate", "deepseek-v4-pro", "--frobnicate"), "--frobnicate")):
        r = cli(*args)
        assert r.code == 2, args
        lines = r.err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("kvcalc: error: ") and fragment in lines[0], r.err


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["estimate", "deepseek-v4-pro", "--frobnicate"], "No such option: --frobnicate"),
        (["check-log"], "Missing argument 'FILE'"),
        (["compare", "deepseek-v4-pro"], "compare takes two models"),
        (["frob"], "No such command 'frob'"),
        (["estimate", "--batch", "1.5"], "--batch"),
        (["models", "extra"], "unexpected extra argument"),
        (["show", "deepseek-v4-pro", "--precision", "fp8"], "No such option: --precision"),
        (["estimate", "llama-3.1-8b", "--context", "1,048,576"], "ambiguous"),
        (["estimate", "llama-3.1-8b", "--vs", "nosuch"], "--vs: unknown model"),
        (["compare", "deepseek-v3.2", "gpt-oss-120b", "-p", "bf16", "--precision-b", "fp9"], "--precision-b"),
        (["estimate", "/tmp"], "is a directory"),
        (["claims", "--file", ""], "--file: empty path"),
        (["estimate", "llama-3.1-70b", "-c", "1M", "--batch", "100000000000"], "--batch"),
        (["estimate", "llama-3.1-70b", "-c", "1M", "--batch", "10000000000000000000"], "--batch"),
        (["estimate", "llama-3.1-70b", "-c", "4G", "--batch", "100000"], "exceeds 8 EiB"),
    ],
)
def test_usage_errors_are_one_line(cli, args, fragment):
    one_line_error(cli(*args), fragment)


def test_help_states_binary_units(cli):
    r = cli("estimate", "--help")
    assert r.code == 0 and "1,048,576" in r.out


def test_console_script_runs():
    # the `kvcalc` entry point that pip installs beside this interpreter
    script = shutil.which("kvcalc", path=os.path.dirname(sys.executable)) or shutil.which("kvcalc")
    assert script, "the kvcalc console script is not installed"
    out = subprocess.run([script, "estimate", "llama-3.1-8b", "-c", "1k", "--json"],
                         capture_output=True, text=True, check=True).stdout
    assert '"per_sequence_bytes": 134217728' in out  # 131,072 B x 1024 tokens


def test_config_text_is_printed_verbatim(tmp_path, cli):
    # brackets in sources must not be eaten as console markup
    path = tmp_path / "m.yaml"
    path.write_text(
        "kvcalc: 1\nname: m\ndescription: 'see [1] and [b]bold[/b]'\n"
        "precisions: {bf16: {kv: bf16, source: 'paper [2]'}}\ndefault_precision: bf16\n"
        "components: {kv: {cache: full_attention, kv_heads: 1, head_dim: 8}}\n"
        "layer_kinds: {full: [kv]}\nlayers: [full]\n"
    )
    r = cli("show", str(path))
    assert r.code == 0
    assert "see [1] and [b]bold[/b]" in r.out and "paper [2]" in r.out


def test_the_safety_net_uses_no_private_typer_module():
    """click's errors are recognised by their public API, so the CLI works whether typer vendors click or not;
    a private import (typer._click) broke every command on typer < 0.27."""
    import ast
    from pathlib import Path

    import kvcalc.cli as C

    tree = ast.parse(Path(C.__file__).read_text())
    mods = [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module]
    mods += [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    assert not [m for m in mods if m.startswith(("typer.", "click"))], mods


def test_an_unexpected_exception_is_one_line(monkeypatch, capsys):
    import kvcalc.cli as C

    def boom(*a, **k):
        raise ZeroDivisionError("planted")

    monkeypatch.setattr(C.app, "__call__", boom, raising=False)
    monkeypatch.setattr(C, "app", boom)
    monkeypatch.delenv("KVCALC_DEBUG", raising=False)
    assert C._run(["estimate"]) == 1
    err = capsys.readouterr().err
    assert err == "kvcalc: internal error: ZeroDivisionError: planted (KVCALC_DEBUG=1 shows the traceback)\n"


def test_ctrl_c_exits_130(monkeypatch):
    import typer

    import kvcalc.cli as C

    def interrupted(*a, **k):
        raise typer.Abort()

    monkeypatch.setattr(C, "app", interrupted)
    assert C._run(["estimate"]) == 130


def test_version(cli):
    import re
    from pathlib import Path

    r = cli("--version")
    version = re.search(r'^version = "([^"]+)"', (Path(__file__).parents[2] / "pyproject.toml").read_text(), re.M)
    assert r.code == 0 and r.out == f"kvcalc {version.group(1)} (plans vLLM 0.33.0, SGLang 0.5.23, llama.cpp 0c1e57098, TensorRT-LLM 1.1)\n"


def test_name_conventions(cli, tmp_path, monkeypatch):
    # case-insensitive shipped names
    r = cli("estimate", "LLaMA-3.1-8B", "-c", "1k", "--json")
    assert r.code == 0 and r.json()[0]["model"] == "llama-3.1-8b"
    # a same-named file in the current folder does not hide the shipped config, and the CLI says so
    from kvcalc.config import _CACHE

    monkeypatch.chdir(tmp_path)
    (tmp_path / "llama-3.1-8b").write_text("not a config")
    _CACHE.clear()  # a fresh process, as on the command line
    r = cli("estimate", "llama-3.1-8b", "-c", "1k", "--json")
    assert r.code == 0 and "the file ./llama-3.1-8b here was not read" in r.err
    # Unicode digits are not token counts; -h is help; schema accepts --json
    for ctx in ("\u0661\u0662\u0668", "\uff11\uff12\uff18k"):
        r = cli("estimate", "-c", ctx)
        assert r.code == 2 and "is not a token count" in r.err
    assert cli("estimate", "-h").code == 0
    assert cli("schema", "--json").json()["$schema"].startswith("https://json-schema.org")
    # the error prefix is said once
    r = cli("estimate", "--bogus")
    assert r.err.startswith("kvcalc: error: estimate: ") and r.err.count("kvcalc: error") == 1


def test_compare_one_unit_per_column(cli):
    # V4-Pro fp8 holds less than 1 GiB at 128k, so its whole column is in MiB, 1M included: 5,299,115,008 B
    # (the published 1M total) / 2**20 = 5,053.63 MiB, not "4.94 GiB"
    r = cli("compare", "deepseek-v3.2", "deepseek-v4-pro", "-c", "128k,1M", "-p", "fp8")
    assert r.code == 0
    assert "B: deepseek-v4-pro (MiB)" in r.out and "A: deepseek-v3.2 (GiB)" in r.out
    assert "5,053.63" in r.out and "GiB " not in r.out.split("\n\n")[1]


def test_shell_completion_is_offered(cli):
    r = cli("--help")
    assert r.code == 0 and "--install-completion" in r.out and "--version" in r.out


@pytest.mark.parametrize("argv", [
    ["estimate", "--context", "1M"], ["estimate", "deepseek-v4-pro", "-c", "1M"], ["estimate", "deepseek-v4-flash",
    "--by-layer"], ["compare", "deepseek-v3.2", "deepseek-v4-pro"], ["show", "deepseek-v4-flash"],
    ["show", "qwen3-next-80b-a3b"], ["models"], ["claims"], ["gpus"],
    ["capacity", "deepseek-v4-pro", "--gpu", "h200", "--tp", "8", "-p", "fp8"],
    ["capacity", "llama-3.1-8b", "--kv-memory", "40GiB", "-c", "8k", "--concurrency", "4"],
    ["check-log", "tests/fixtures/logs/synthetic-0.33-llama-3.1-8b.log"],
])
def test_every_default_table_reads_at_80_columns(cli, monkeypatch, argv):
    # issue 9.5: an 80-column terminal; detail may move under a table, but no line may pass column 80,
    # and no line may end in padding
    monkeypatch.setenv("COLUMNS", "80")
    r = cli(*argv)
    assert r.code == 0, r.err
    lines = r.out.splitlines()
    assert lines and max(len(line) for line in lines) <= 80, max(lines, key=len)
    assert not any(line.endswith(" ") for line in lines)


def test_usage_lines_name_arguments_without_braces(cli):
    # issue 9.5: typer 0.28 writes required arguments as {MODEL}; kvcalc's usage says MODEL
    import typer

    from kvcalc.cli import app

    names = sorted(typer.main.get_command(app).commands)
    assert {"compare", "check-log", "import-hf", "sweep", "plot", "estimate"} <= set(names)
    for name in names:
        r = cli(name, "--help")
        usage = next(line for line in r.out.splitlines() if line.startswith("Usage:"))
        assert "{" not in usage and "}" not in usage, usage
    assert "Usage: kvcalc compare [OPTIONS] [A] [B]" in cli("compare", "--help").out  # or --hf for either
    assert "Usage: kvcalc check-log [OPTIONS] FILE" in cli("check-log", "--help").out  # required: no braces
    assert "Usage: kvcalc sweep [OPTIONS] [MODEL...]" in cli("sweep", "--help").out  # or --hf


def test_every_command_offers_json(cli, tmp_path):
    # issue 9.5: --json on every command
    import typer
    import yaml

    from kvcalc.cli import app

    for name in sorted(typer.main.get_command(app).commands):
        assert "--json" in cli(name, "--help").out, name
    # import-hf --json is the YAML's content; sweep --json is --format json; report --check --json lists
    r = cli("import-hf", "tests/fixtures/hf/qwen3-8b.json")
    j = cli("import-hf", "tests/fixtures/hf/qwen3-8b.json", "--json")
    assert j.json() == {"output": None, "config": yaml.safe_load(r.out)}
    out = tmp_path / "q.yaml"
    j = cli("import-hf", "tests/fixtures/hf/qwen3-8b.json", "-o", str(out), "--json")
    assert j.json()["output"] == str(out) and yaml.safe_load(out.read_text()) == j.json()["config"]
    assert cli("sweep", "llama-3.1-8b", "-c", "1k", "--json").json() == \
        cli("sweep", "llama-3.1-8b", "-c", "1k", "--format", "json").json()
    d = cli("report", "--check", "--json").json()
    assert d["match"] is True and d["stale"] == [] and "headline.txt" in d["checked"]


@pytest.mark.parametrize("argv", [["show", "nemotron-h-56b"], ["estimate", "deepseek-v4-pro", "--by-layer"],
                                  ["sweep", "llama-3.1-8b", "-c", "1..200000:1"]])
def test_a_closed_pipe_is_a_quiet_exit_0(argv):
    # `kvcalc ... | head -1` under `set -o pipefail`: kvcalc's own exit status must be 0 and stderr silent
    import subprocess
    import sys

    p = subprocess.Popen([sys.executable, "-m", "kvcalc", *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.readline()
    p.stdout.close()  # the reader goes away with most of the output unread
    err = p.stderr.read().decode()
    assert p.wait(timeout=60) == 0, err
    assert "Traceback" not in err and "error" not in err
