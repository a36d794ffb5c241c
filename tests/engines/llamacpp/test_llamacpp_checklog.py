"""`kvcalc check-log` on llama.cpp's own start-up logs.

The logs in tests/fixtures/logs/llamacpp/ are llama.cpp's (llama-cpp-python 0.3.36, llama.cpp 0c1e57098, CPU
build) loading the synthetic GGUFs of tests/fixtures/gguf/ with the context parameters in cases.json
(scripts/audit/llamacpp_logs.py wrote them; only tensor-loading lines were dropped). Every figure they print was
computed by llama.cpp; kvcalc must read them and agree with every one.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from kvcalc.checklog import check_log
from kvcalc.errors import KvcalcError

ROOT = Path(__file__).resolve().parents[3]
LOGS = ROOT / "tests" / "fixtures" / "logs" / "llamacpp"
CASES = json.loads((LOGS / "cases.json").read_text())["cases"]


def _check(case: str, text: str | None = None, **kw):
    c = CASES[case]
    text = (LOGS / f"{case}.log").read_text() if text is None else text
    return check_log(text, f"{case}.log", model=kw.pop("model", str(ROOT / c["gguf"])), **kw)


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_llama_cpp_log_agrees(case):
    r = _check(case)
    assert r.engine == "llama.cpp"
    assert r.verdict == "agrees", [(x.figure, x.logged, x.kvcalc) for x in r.rows if x.agrees is False]
    text = (LOGS / f"{case}.log").read_text()
    # every size line llama.cpp printed was compared: one "size" row per cache line
    size_lines = len(re.findall(r"llama_kv_cache: size =|llama_memory_recurrent: size =", text))
    assert size_lines >= 1
    assert sum(1 for x in r.rows if x.figure.endswith(": size") and x.agrees) == size_lines
    buffer_lines = len(re.findall(r"(KV|RS) buffer size =", text))
    assert sum(1 for x in r.rows if x.figure.endswith(" buffer") and x.agrees) == buffer_lines


def test_log_figures_by_hand():
    """llama-gqa: 4 layers, 2 KV heads of 64 (n_embd_k_gqa 128), f16, -c 4096, one sequence: K = 4096 cells x 4
    layers x 128 x 2 B = 4,194,304 B = 4.00 MiB, V the same, the buffer 8.00 MiB."""
    r = _check("llama-gqa-c4096")
    rows = {x.figure: x for x in r.rows}
    assert rows["KV cache: K (f16)"].logged.lo == 4.00 == 4096 * 4 * 128 * 2 / 2**20
    assert rows["KV cache: V (f16)"].kvcalc.lo == 4.00
    assert rows["KV cache: CPU buffer"].logged.lo == 8.00
    assert rows["KV cache: cells"].logged.lo == 4096 and rows["KV cache: layers"].logged.lo == 4
    assert r.context_tokens == 4096 and r.precision == "f16"
    assert r.settings["ctx_size"] == 4096 and r.settings["parallel"] == 1


def test_the_log_sets_the_plan():
    """n_seq_max 4, one unified stream, q8_0 K and V, flash attention on: all from the log's own lines."""
    r = _check("llama-gqa-np4-unified-q8")
    assert r.precision == "q8_0"
    assert r.settings["kv_unified"] is True and r.settings["parallel"] == 4
    assert r.settings["cache_type_k"] == r.settings["cache_type_v"] == "q8_0"
    assert r.settings["flash_attn"] == "on"
    # -c 10000 is padded to 10240 (llama-context.cpp GGML_PAD(n_ctx, 256)): the log says so and kvcalc agrees
    rows = {x.figure: x for x in r.rows}
    assert rows["n_ctx"].logged.lo == 10240 == rows["n_ctx"].kvcalc.lo


def test_swa_and_recurrent_caches_are_read_apart():
    r = _check("gemma3-swa-np2")
    figures = [x.figure for x in r.rows]
    assert "KV cache: cells created" in figures and "SWA KV cache: cells created" in figures
    rows = {x.figure: x for x in r.rows}
    # gemma3-swa: n_swa 64, not unified, n_ubatch 256: GGML_PAD(min(n_ctx_seq, 64 + 256), 256) = 512 SWA cells
    assert rows["SWA KV cache: cells"].logged.lo == 512
    r = _check("jamba-np2")
    rows = {x.figure: x for x in r.rows}
    assert rows["recurrent state: cells"].logged.lo == 2  # one row a sequence (mem_size = n_seq_max)
    assert r.verdict == "agrees"


def test_found_without_engine_and_needs_the_model():
    text = (LOGS / "mamba2.log").read_text()
    with pytest.raises(KvcalcError, match=r"the plan needs the model: the log's 'mamba2.gguf'.*FILE\.gguf"):
        check_log(text, "mamba2.log")


def test_an_edited_figure_differs():
    """One figure changed by hand (K 4.00 -> 4.25 MiB): that row, and only it, differs."""
    text = (LOGS / "llama-gqa-c4096.log").read_text()
    bad = text.replace("K (f16):    4.00 MiB", "K (f16):    4.25 MiB", 1)
    assert bad != text
    r = _check("llama-gqa-c4096", bad)
    assert r.verdict == "differs"
    assert [x.figure for x in r.rows if x.agrees is False] == ["KV cache: K (f16)"]


def test_another_model_differs():
    r = _check("llama-gqa-c4096", model=str(ROOT / "tests/fixtures/gguf/llamacpp-qwen2-mqa.gguf"))
    assert r.verdict == "differs"


def test_a_gpu_log():
    """A CUDA build's lines: the layers offloaded and the CUDA0 buffers set the plan's devices (llama-gqa's 8.00 MiB
    of K and V are a multiple of 128 B: CUDA's alignment adds nothing)."""
    text = (LOGS / "llama-gqa-c4096.log").read_text()
    gpu = text.replace("llama_kv_cache:        CPU KV buffer size", "llama_kv_cache:      CUDA0 KV buffer size")
    gpu = gpu.replace("load_tensors:   CPU_Mapped model buffer", "load_tensors: offloaded 5/5 layers to GPU\n"
                      "load_tensors:   CPU_Mapped model buffer")
    r = _check("llama-gqa-c4096", gpu)
    assert r.settings["n_gpu_layers"] == 5 and r.settings["no_kv_offload"] is False
    rows = {x.figure: x for x in r.rows}
    assert rows["KV cache: CUDA0 buffer"].agrees
    # the same log with the cache kept on the CPU (--no-kv-offload): read as such
    cpu_kv = text.replace("load_tensors:   CPU_Mapped model buffer", "load_tensors: offloaded 5/5 layers to GPU\n"
                          "load_tensors:   CPU_Mapped model buffer")
    r = _check("llama-gqa-c4096", cpu_kv)
    assert r.settings["no_kv_offload"] is True
    assert {x.figure: x for x in r.rows}["KV cache: CPU buffer"].agrees


@pytest.mark.parametrize("edit, words", [
    (lambda t: t.replace("CPU KV buffer size", "Metal KV buffer size"), r"'Metal' KV buffer: kvcalc plans"),
    (lambda t: re.sub(r"llama_context: n_ctx +=.*\n", "", t), r"no 'llama_context: n_ctx' line"),
])
def test_refused_in_one_line(edit, words):
    text = edit((LOGS / "llama-gqa-c4096.log").read_text())
    with pytest.raises(KvcalcError, match=words) as e:
        _check("llama-gqa-c4096", text)
    assert "\n" not in str(e.value)


def test_older_recurrent_line():
    """llama.cpp before n_rs_seq printed the state line without 'N rs_seq' (and no P): still read."""
    text = (LOGS / "mamba2.log").read_text()
    old = re.sub(r" seqs +0 rs_seq\)(.*), P \(f32\): +[\d.]+ MiB", r" seqs)\1", text)
    assert old != text
    r = _check("mamba2", old)
    assert r.verdict == "agrees"
    assert any(x.figure == "recurrent state: size" and x.agrees for x in r.rows)


def test_cli_exit_codes(tmp_path):
    from typer.testing import CliRunner

    from kvcalc.cli import app

    c = CASES["gpt-oss-q4"]
    ok = CliRunner().invoke(app, ["check-log", str(LOGS / "gpt-oss-q4.log"), "--model", str(ROOT / c["gguf"]),
                                  "--json"])
    assert ok.exit_code == 0, ok.output
    out = json.loads(ok.output)
    assert out["verdict"] == "agrees" and out["precision"] == "q4_0"
    bad = tmp_path / "bad.log"
    text = (LOGS / "gpt-oss-q4.log").read_text()
    edited = text.replace("cells,   2 layers", "cells,   3 layers", 1)
    assert edited != text
    bad.write_text(edited)
    r = CliRunner().invoke(app, ["check-log", str(bad), "--model", str(ROOT / c["gguf"])])
    assert r.exit_code == 1 and "DIFFERS" in r.output


def test_seqs_streams_and_the_architecture_are_compared():
    """Found in review: the size line's S/T seqs, the recurrent line's rs_seq and the log's architecture were read
    but never compared."""
    text = (LOGS / "gemma3-swa-np2.log").read_text()
    bad = text.replace(" 2/2 seqs", " 0/0 seqs")
    assert bad != text
    r = _check("gemma3-swa-np2", bad)
    assert r.verdict == "differs"
    assert {x.figure for x in r.rows if x.agrees is False} == {"KV cache: seqs", "KV cache: streams",
                                                               "SWA KV cache: seqs", "SWA KV cache: streams"}
    text = (LOGS / "jamba-np2.log").read_text()
    bad = text.replace("0 rs_seq)", "9 rs_seq)")
    assert bad != text
    assert [x.figure for x in _check("jamba-np2", bad).rows if x.agrees is False] == ["recurrent state: rs_seq"]
    r = _check("jamba-np2", model=str(ROOT / "tests/fixtures/gguf/llamacpp-gemma3-swa.gguf"))
    assert any(x.figure == "architecture" and x.agrees is False for x in r.rows)


def test_a_yaml_whose_architecture_does_not_match_its_layers(cli, tmp_path):
    out = tmp_path / "g.yaml"
    assert cli("import-gguf", str(ROOT / "tests/fixtures/gguf/llamacpp-gemma3-swa.gguf"), "-o", str(out)).code == 0
    out.write_text(out.read_text().replace("gguf_architecture: {value: gemma3", "gguf_architecture: {value: mamba"))
    r = cli("capacity", str(out), "--engine", "llama.cpp", "--kv-memory", "1000000000", "-c", "1000")
    assert r.code == 2 and "keeps recurrent state only, but the config has attention layers" in r.err
