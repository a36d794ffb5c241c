"""verify --engine llama.cpp: llama.cpp itself made each planned context (scripts/audit/llamacpp_verify.py ran
llama-cpp-python 0.3.36 over the 26 synthetic GGUFs and five launches each; reports/verify/llamacpp-0.3.36.json holds
what it measured: the context's parameters, llama_model_size, llama_state_seq_get_size after a 16-token prompt, and
its cache log lines). Every kvcalc must plan the same contexts and agree with every figure llama.cpp gave."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from kvcalc.config import load_model
from kvcalc.engines.llamacpp import real
from kvcalc.errors import KvcalcError

ROOT = Path(__file__).resolve().parents[3]
REPORT = json.loads((ROOT / "reports/verify/llamacpp-0.3.36.json").read_text())
MODELS = sorted({c["model"] for c in REPORT["cases"]})


@pytest.mark.parametrize("model", MODELS)
def test_llama_cpp_made_what_kvcalc_plans(model):
    spec = load_model(str(ROOT / f"tests/fixtures/gguf/llamacpp-{model}.gguf"))
    for c in (c for c in REPORT["cases"] if c["model"] == model):
        if "planned_refusal" in c:
            with pytest.raises(KvcalcError) as e:
                real.planned(spec, c["context"], settings=c["settings"], cpu_build=True)
            assert str(e.value) == c["planned_refusal"]
            continue
        p, _ = real.planned(spec, c["context"], settings=c["settings"], cpu_build=True)
        rows = real.compare(p, c["measured"], f"{model}: {c['launch']}")
        bad = [(r.figure, r.logged.lo, r.kvcalc.lo) for r in rows if r.agrees is False]
        assert not bad, (c["launch"], bad)
        exact = [r for r in rows if r.logged.unit == "B" or r.figure.startswith("n_")]
        assert len(exact) >= 7  # n_ctx, n_ctx_seq, n_batch, n_ubatch, n_seq_max, model size, sequence state


def test_the_report_covers_what_it_claims():
    s = REPORT["summary"]
    assert (s["cases"], s["agree"], s["differ"], s["refused_by_llama_cpp"]) == (130, 128, 0, 0)
    assert len(MODELS) == 26 and REPORT["llama_cpp_python"] == "0.3.36"
    launches = {c["launch"] for c in REPORT["cases"]}
    assert any("ollama" in x for x in launches) and any("C API" in x for x in launches)
    # the two refusals are llama.cpp's own words (head size 48 and a q8_0 K: llama_init_from_model)
    refused = [c["planned_refusal"] for c in REPORT["cases"] if "planned_refusal" in c]
    assert refused and all("does not divide n_embd_head_k=48" in x for x in refused)


def test_verify_without_llama_cpp_python_says_how_to_get_it(cli, monkeypatch):
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # import llama_cpp raises ImportError
    r = cli("verify", str(ROOT / "reports/../tests/fixtures/gguf/llamacpp-llama-gqa.gguf"), "--engine", "llama.cpp")
    assert r.code == 2 and r.err.count("\n") == 1
    assert "metadata-only GGUF" in r.err  # the file is checked first: this one holds no tensor data


def test_verify_refusals_in_one_line(cli, monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "llama_cpp", None)
    r = cli("verify", "llama-3.1-8b", "--engine", "llama.cpp")
    assert r.code == 2 and "loads a GGUF file" in r.err and r.err.count("\n") == 1
    # a whole GGUF (the metadata-only fixture padded with its zero data): the missing package is named
    src = ROOT / "tests/fixtures/gguf/llamacpp-llama-gqa.gguf"
    size = json.loads((ROOT / "tests/fixtures/engine-ref/llamacpp-0.3.36.json").read_text())["models"]["llama-gqa"][
        "gguf_file_size"]
    whole = tmp_path / "llama-gqa.gguf"
    with open(whole, "wb") as f:
        f.write(src.read_bytes())
        f.truncate(size)
    r = cli("verify", str(whole), "--engine", "llama.cpp")
    assert r.code == 2 and "install llama-cpp-python (pip install 'kvcalc[llamacpp]'" in r.err
    r = cli("verify", str(whole), "--engine", "llama.cpp", "--batch", "2")
    assert r.code == 2 and "--batch" in r.err and "--parallel" in r.err


def test_a_changed_measurement_differs():
    c = next(c for c in REPORT["cases"] if c["model"] == "jamba" and "measured" in c)
    spec = load_model(str(ROOT / "tests/fixtures/gguf/llamacpp-jamba.gguf"))
    p, _ = real.planned(spec, c["context"], settings=c["settings"], cpu_build=True)
    for key, bump in (("seq_state_bytes", 4), ("n_ctx_seq", 256), ("model_size", 32)):
        m = dict(c["measured"], **{key: c["measured"][key] + bump})
        assert [r.agrees for r in real.compare(p, m)].count(False) == 1, key
