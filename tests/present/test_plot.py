"""kvcalc plot: PNG and SVG files from the exact figures; matplotlib only when a plot is asked for."""

import subprocess
import sys

import pytest

pytest.importorskip("matplotlib")


def test_memory_vs_context_png_and_svg(cli, tmp_path):
    png, svg = tmp_path / "m.png", tmp_path / "m.svg"
    r = cli("plot", "deepseek-v3.2", "deepseek-v4-pro", "-p", "fp8", "--gpu", "h200", "-c", "4k..1M", "-o", str(png))
    assert r.code == 0, r.err
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    r = cli("plot", "deepseek-v3.2", "deepseek-v4-pro", "-p", "fp8", "--gpu", "h200", "-c", "4k..1M", "-o", str(svg))
    assert r.code == 0
    text = svg.read_text()
    assert text.startswith("<?xml") and "DeepSeek-V4-Pro fp8" in text and "NVIDIA H200" in text
    # deterministic SVG: the same command twice gives the same bytes
    again = tmp_path / "m2.svg"
    cli("plot", "deepseek-v3.2", "deepseek-v4-pro", "-p", "fp8", "--gpu", "h200", "-c", "4k..1M", "-o", str(again))
    assert again.read_bytes() == svg.read_bytes()


def test_layers_chart(cli, tmp_path):
    out = tmp_path / "l.svg"
    r = cli("plot", "deepseek-v3.2", "deepseek-v4-pro", "-p", "fp8", "--layers", "--at", "1M", "-o", str(out))
    assert r.code == 0, r.err
    text = out.read_text()
    # the panel titles carry the exact totals: V4-Pro fp8 at 1M = 5,299,115,008 B = 4.94 GiB
    assert "4.94 GiB per sequence" in text and "compressed entries" in text and "fixed state" in text


def test_refusals(cli, tmp_path):
    r = cli("plot", "llama-3.1-8b", "-o", str(tmp_path / "x.jpg"))
    assert r.code == 2 and r.err.startswith("kvcalc: error: --output:") and ".png or .svg" in r.err
    # every command that writes makes a missing folder (kvcalc.safewrite), plot too; a folder at the path is refused
    r = cli("plot", "llama-3.1-8b", "-c", "1k..8k", "--points", "3", "-o", str(tmp_path / "no-such-dir" / "x.png"))
    assert r.code == 0 and (tmp_path / "no-such-dir" / "x.png").stat().st_size > 0
    (tmp_path / "d.png").mkdir()
    r = cli("plot", "llama-3.1-8b", "-c", "1k..8k", "--points", "3", "-o", str(tmp_path / "d.png"))
    assert r.code == 2 and "--output: cannot write" in r.err and "it is a folder" in r.err


def test_without_matplotlib_one_line(tmp_path):
    code = ("import sys; sys.modules['matplotlib'] = None; from kvcalc.cli import main; "
            f"main(['plot', 'llama-3.1-8b', '-o', {str(tmp_path / 'x.png')!r}])")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.strip() == "kvcalc: error: plot needs matplotlib: pip install 'kvcalc[plot]'"


def test_plot_json_gives_the_numbers_drawn(cli, tmp_path):
    r = cli("plot", "deepseek-v4-pro", "-c", "4k,1M", "--gpu", "h200", "-o", str(tmp_path / "m.png"), "--json")
    assert r.code == 0, r.err
    d = r.json()
    assert d["chart"] == "memory_vs_context" and d["format"] == "png" and d["context_tokens"] == [4096, 1 << 20]
    # V4-Pro bf16 at 4,096 tokens, by hand: window 61 x 128 x 1,024; c4a 30 x 1,024 entries x (1,024 + 256);
    # c128a 31 x 32 x 1,024; state 30 x (64 + 16) KiB + 31 x 512 KiB
    at_4k = 61 * 128 * 1024 + 30 * 1024 * 1280 + 31 * 32 * 1024 + 30 * 80 * 1024 + 31 * 512 * 1024
    # max_context: the config's max_position_embeddings, 1,048,576 (deepseek-kv-facts.md section 1)
    assert d["series"] == [{"model": "deepseek-v4-pro", "precision": "bf16", "max_context": 1_048_576,
                            "bytes_per_sequence": [at_4k, 10_353_082_368]}]
    assert d["gpus"][0]["key"] == "h200"
    r = cli("plot", "deepseek-v4-pro", "-p", "fp8", "--layers", "--at", "1M", "-o", str(tmp_path / "l.svg"), "--json")
    panel = r.json()["panels"][0]
    # a c4a layer (layer 2 is c4a, layer 0 c128a) at fp8: 262,144 entries x 584 B compressed, 262,144 x 68 B indexer
    roles = panel["bytes_by_role"]
    assert roles["compressed entries"][2] == 262_144 * 584 and roles["indexer"][2] == 262_144 * 68
    assert roles["indexer"][0] == 0 and roles["compressed entries"][0] == 8192 * 584
    assert sum(sum(v) for v in roles.values()) == panel["per_sequence_bytes"]


def test_plot_decode_draws_read_next_to_stored(cli, tmp_path):
    # default models: V3.2, V4-Pro, V4-Flash and the 61-layer GQA8 baseline
    r = cli("plot", "--decode", "-p", "fp8", "-c", "4k,1M", "-o", str(tmp_path / "d.svg"), "--json")
    assert r.code == 0, r.err
    d = r.json()
    s = {x["model"]: x for x in d["series"]}
    assert list(s) == ["deepseek-v3.2", "deepseek-v4-pro", "deepseek-v4-flash", "gqa8-hd128-l61"]
    # V4-Pro fp8 at 1M reads 30 x 18,580,480 + 31 x 5,383,168 B (tests/test_decode.py works them out)
    assert s["deepseek-v4-pro"]["read_bytes_per_token"][1] == 30 * 18_580_480 + 31 * 5_383_168
    # a dense GQA reads what it stores: 61 layers x 1M x 8 KV heads x 128 x 2 (K, V) x 1 B
    g = s["gqa8-hd128-l61"]
    assert g["read_bytes_per_token"] == g["stored_bytes"] and g["stored_bytes"][1] == 61 * (1 << 20) * 8 * 128 * 2
    r = cli("plot", "--decode", "--layers", "-o", str(tmp_path / "x.svg"))
    assert r.code == 2 and "--decode: draws read and stored bytes" in r.err
