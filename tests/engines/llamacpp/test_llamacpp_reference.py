"""kvcalc's llama.cpp engine held to llama.cpp itself.

The fixture (tests/fixtures/engine-ref/llamacpp-0.3.36.json) was written by scripts/audit/llamacpp_reference.py:
llama.cpp 0c1e57098 (llama-cpp-python 0.3.36, built from source) loaded 26 synthetic GGUFs (every architecture
family kvcalc plans) and made a context for each case of a grid (contexts 1 to 32k, 1 and 4 sequences, unified or
not, every cache type for K and V, flash attention auto / on / off, swa_full both ways, two batch sizes, n_rs_seq;
and llama-cpp-python's Llama() for its defaults). Every figure it records is llama.cpp's own: the cparams after
construction, each cache's cells, layers, tensor widths and bytes read from its objects, each buffer's size, its
refusal words, its log lines. Here kvcalc reads the same GGUFs (metadata-only copies in tests/fixtures/gguf) and
must give every one of those figures exactly.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvcalc.config.gguf.hparams import load_hparams
from kvcalc.config.gguf.reader import read_header
from kvcalc.engines.llamacpp import layout as L
from kvcalc.engines.llamacpp.engine import Settings
from kvcalc.engines.llamacpp.ggml import CACHE_TYPES
from kvcalc.engines.llamacpp.launch import launch
from kvcalc.errors import KvcalcError

ROOT = Path(__file__).resolve().parents[3]
FIXTURE = json.loads((ROOT / "tests/fixtures/engine-ref/llamacpp-0.3.36.json").read_text())
LOG = FIXTURE["log_lines"]
DEFAULTS = FIXTURE["input_defaults"]
MODELS = sorted(FIXTURE["models"])
_CACHES: dict = {}


def caches_of(model: str) -> L.ModelCaches:
    if model not in _CACHES:
        path = ROOT / FIXTURE["models"][model]["gguf_fixture"]
        _CACHES[model] = L.from_gguf(load_hparams(read_header(path)))
    return _CACHES[model]


def _cases(model: str, kind: str) -> list[dict]:
    out = []
    for c in FIXTURE["cases"]:
        if c["model"] != model:
            continue
        inp = c["inputs"]
        frontend = "frontend" in inp
        if kind == "grid" and not frontend and not inp.get("no_alloc"):
            out.append(c)
        elif kind == "frontend" and frontend:
            out.append(c)
    return out


def _context(mc, inp):
    return L.context_params(mc, n_ctx=inp["n_ctx"], n_seq_max=inp["n_seq_max"], kv_unified=inp["kv_unified"],
                            n_batch=inp["n_batch"], n_ubatch=inp["n_ubatch"], flash_attn=inp["flash_attn"],
                            swa_full=inp["swa_full"], type_k=CACHE_TYPES[inp["type_k"]],
                            type_v=CACHE_TYPES[inp["type_v"]], n_rs_seq=inp["n_rs_seq"])


def _one(values):
    return values[0] if len(set(values)) == 1 else values


def _compare(c: dict, mc, cp, caches) -> list[str]:
    bad = []
    want = c["cparams"]
    got = {"n_ctx": cp.n_ctx, "n_ctx_seq": cp.n_ctx_seq, "n_batch": cp.n_batch, "n_ubatch": cp.n_ubatch,
           "flash_attn": cp.flash_attn != "disabled", "n_seq_max": cp.n_seq_max, "kv_unified": cp.kv_unified}
    bad += [f"cparams.{k}: llama.cpp {want[k]}, kvcalc {v}" for k, v in got.items() if k in want and want[k] != v]
    if len(c["caches"]) != len(caches):
        return bad + [f"{len(c['caches'])} caches, kvcalc {len(caches)}"]
    for w, g in zip(c["caches"], caches):
        mine = {"cells": g.cells, "layers": list(g.layers), "buffer_bytes": g.memory_bytes}
        if g.kind == "recurrent":
            mine.update(r_bytes=g.r_bytes, s_bytes=g.s_bytes)
        else:
            ks = [t.ne0 for t in g.tensors if t.side == "k"]
            vs = [t.ne0 for t in g.tensors if t.side == "v"]  # none for MLA: K is the latent
            mine.update(n_stream=cp.n_stream, k_bytes=g.k_bytes, v_bytes=g.v_bytes, v_trans=g.v_trans,
                        type_k=cp.type_k.name if ks else None, type_v=cp.type_v.name if vs else None,
                        k_ne0=_one(ks) if ks else [], v_ne0=_one(vs) if vs else [])
        bad += [f"{w['role']}.{k}: llama.cpp {w[k]}, kvcalc {v}" for k, v in mine.items() if k in w and w[k] != v]
    if c["context_bytes"] != sum(g.memory_bytes for g in caches):
        bad.append(f"context bytes: llama.cpp {c['context_bytes']}, kvcalc {sum(g.memory_bytes for g in caches)}")
    mine = [x for x in L.log_lines(mc, cp, caches) if not (x.startswith("llama_context: ") and " = " in x)]
    theirs = [LOG[i] for i in c["log"] if LOG[i].startswith(("llama_kv_cache", "llama_memory_recurrent",
                                                              "llama_context: n_ctx_seq"))]
    if mine != theirs:
        bad.append(f"log lines differ:\n  llama.cpp {theirs}\n  kvcalc    {mine}")
    return bad


@pytest.mark.parametrize("model", MODELS)
def test_every_grid_case_matches_llama_cpp(model):
    """Every case llama.cpp ran for this GGUF: the same context, caches, bytes, buffers and log lines; the same
    refusals (in llama.cpp's words); and a refusal where llama.cpp aborted."""
    mc = caches_of(model)
    cases = _cases(model, "grid")
    assert len(cases) >= 60, model  # the grid reached this model
    problems = []
    ran = refused = aborted = 0
    for c in cases:
        inp = {**DEFAULTS, **c["inputs"]}
        try:
            cp = _context(mc, inp)
            caches = L.allocate(mc, cp)
        except KvcalcError as exc:
            if c.get("crashed"):
                aborted += 1
            elif c["ok"]:
                problems.append(f"case {c['id']} {c['inputs']}: llama.cpp ran it, kvcalc refused: {exc}")
            else:
                refused += 1
                words = c["refusal"][0].split(": ", 1)[1]
                if words not in str(exc):
                    problems.append(f"case {c['id']}: llama.cpp said {words!r}, kvcalc {exc}")
            continue
        if c.get("crashed") or not c["ok"]:
            problems.append(f"case {c['id']} {c['inputs']}: llama.cpp {'aborted' if c.get('crashed') else 'refused'}"
                            f" ({(c.get('abort') or c.get('refusal'))[0][:120]}), kvcalc planned it")
            continue
        ran += 1
        problems += [f"case {c['id']} {c['inputs']}: {p}" for p in _compare(c, mc, cp, caches)]
    assert not problems, "\n".join(problems[:10])
    assert ran >= 40, (model, ran)


def test_the_grid_covers_what_it_claims():
    """The fixture's coverage, counted: every model, refusals of each kind, aborts, the n_rs_seq rows."""
    cases = [c for c in FIXTURE["cases"] if "frontend" not in c["inputs"]]
    assert len(FIXTURE["models"]) == 26 and len(cases) >= 5000
    words = {c["refusal"][0].split(": ", 1)[1] for c in cases if c.get("refusal")}
    assert any(w.startswith("quantized V cache requires") for w in words)
    assert any(w.startswith("model does not support different K") for w in words)
    assert any("does not divide n_embd_head_k" in w for w in words)
    assert sum(1 for c in cases if c.get("crashed")) >= 400
    assert {{**DEFAULTS, **c["inputs"]}["n_ctx"] for c in cases} >= {1, 256, 300, 4096, 32768}
    assert {{**DEFAULTS, **c["inputs"]}["type_v"] for c in cases} >= set(CACHE_TYPES)


@pytest.mark.parametrize("model", MODELS)
def test_llama_cpp_python_defaults(model):
    """llama-cpp-python's Llama(**kwargs) (its own defaults: n_ctx 512, n_batch 512, flash attention off,
    swa_full on): kvcalc's llama-cpp-python front end gives the same context and caches."""
    mc = caches_of(model)
    for c in _cases(model, "frontend"):
        kw = c["inputs"]["llama_kwargs"]
        s = Settings(frontend="llama-cpp-python", ctx_size=kw.get("n_ctx"),
                     flash_attn={True: "on", False: "off"}.get(kw.get("flash_attn")),
                     cache_type_k=kw.get("type_k"), cache_type_v=kw.get("type_v"))
        ln = launch(s, n_ctx_train=mc.n_ctx_train)
        try:
            cp = L.context_params(mc, n_ctx=ln.n_ctx, n_seq_max=ln.n_seq_max, kv_unified=ln.kv_unified,
                                  n_batch=ln.n_batch, n_ubatch=ln.n_ubatch, flash_attn=ln.flash_attn,
                                  swa_full=ln.swa_full, type_k=ln.type_k, type_v=ln.type_v)
        except KvcalcError as exc:
            assert not c["ok"], (c["id"], str(exc))
            continue
        assert c["ok"], (c["id"], "llama.cpp refused it")
        assert not _compare(c, mc, cp, L.allocate(mc, cp)), c["id"]


@pytest.mark.parametrize("model", MODELS)
def test_hparams_as_llama_cpp_loaded_them(model):
    """Per layer, the widths, windows and recurrent flags llama.cpp resolved from the GGUF (its hparams)."""
    want = FIXTURE["models"][model]["hparams"]
    hp = load_hparams(read_header(ROOT / FIXTURE["models"][model]["gguf_fixture"]))
    assert [lay.k_width for lay in hp.layers] == want["n_embd_k_gqa"]
    assert [lay.v_width for lay in hp.layers] == want["n_embd_v_gqa"]
    assert [int(lay.swa) for lay in hp.layers] == want["is_swa"]
    assert [int(lay.recurrent) for lay in hp.layers] == want["is_recr"]
    assert [int(hp.has_kv(i)) for i in range(len(hp.layers))] == want["has_kv"]
    assert (hp.n_embd_r, hp.n_embd_s, hp.mla, hp.n_ctx_train) == (want["n_embd_r"], want["n_embd_s"],
                                                                 want["is_mla"], want["n_ctx_train"])
    assert hp.n_layer_nextn == want["n_layer_nextn"]
    if hp.swa_type:
        assert hp.n_swa == want["n_swa"] and want["swa_type"] in (1, 2)


@pytest.mark.parametrize("model", MODELS)
def test_weights_are_the_bytes_llama_cpp_maps(model):
    """The GGUF's tensor bytes (llama.cpp's model size) and the range it maps on the CPU (its CPU_Mapped model
    buffer), NextN tensors left out as llama.cpp ignores them."""
    pytest.importorskip("gguf")
    from kvcalc.config.gguf.tensors import read_weights

    m = FIXTURE["models"][model]
    h = read_header(ROOT / m["gguf_fixture"])
    hp = load_hparams(h)
    w = read_weights(h, len(hp.layers), hp.n_layer)
    assert w.nbytes == m["llama_model_size"]
    assert w.mapped() == m["model_buffers"]["CPU_Mapped"]
    assert not w.complete and h.data_offset == m["gguf_data_offset"]
