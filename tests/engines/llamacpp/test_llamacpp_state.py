"""llama.cpp's sequence state (llama_state_seq_get_size, llama_state_seq_save_file, llama-server's slot file) held
to llama.cpp itself: tests/fixtures/engine-ref/llamacpp-0.3.36-state.json holds what llama.cpp 0c1e57098 returned and
wrote for 1,020 contexts of the 26 synthetic GGUFs (scripts/audit/llamacpp_state_reference.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvcalc.config.gguf.hparams import load_hparams
from kvcalc.config.gguf.reader import read_header
from kvcalc.engines.llamacpp import layout as L
from kvcalc.engines.llamacpp import state as S
from kvcalc.engines.llamacpp.ggml import CACHE_TYPES

ROOT = Path(__file__).resolve().parents[3]
FIXTURE = json.loads((ROOT / "tests/fixtures/engine-ref/llamacpp-0.3.36-state.json").read_text())
MODELS = sorted({c["model"] for c in FIXTURE["cases"]})
_MC: dict = {}


def _mc(model: str) -> L.ModelCaches:
    if model not in _MC:
        _MC[model] = L.from_gguf(load_hparams(read_header(ROOT / f"tests/fixtures/gguf/llamacpp-{model}.gguf")))
    return _MC[model]


def _cp(mc, p):
    return L.context_params(mc, n_ctx=p["n_ctx"], n_seq_max=p["n_seq_max"], kv_unified=p["kv_unified"],
                            n_batch=p["n_batch"], n_ubatch=p["n_ubatch"], flash_attn=p["flash_attn"],
                            swa_full=p["swa_full"], type_k=CACHE_TYPES[p["type_k"]], type_v=CACHE_TYPES[p["type_v"]])


def _tokens(case: dict, seq: int) -> int:
    """The tokens decoded into ``seq``: every step's that names it (alone or among others, a shared prefix)."""
    return sum(st["tokens"] for st in case["steps"]
               if st["seq"] == seq or (isinstance(st["seq"], list) and seq in st["seq"]))


@pytest.mark.parametrize("model", MODELS)
def test_every_sequence_state_matches_llama_cpp(model):
    checked = 0
    for c in FIXTURE["cases"]:
        if c["model"] != model or not c["ok"]:
            continue
        mc = _mc(model)
        cp = _cp(mc, c["params"])
        for s, rec in c["seqs"].items():
            n = _tokens(c, int(s))
            assert n == rec["tokens_decoded"]
            assert S.seq_get_size(mc, cp, n) == rec["seq_bytes"], (c["id"], s)
            assert S.save_file_bytes(mc, cp, n) == rec["file_bytes"], (c["id"], s)
            assert S.server_file_bytes(mc, cp, n) == rec["file_bytes_server"], (c["id"], s)
            checked += 1
    assert checked >= 15  # every model: 5 token counts x at least 3 cache configurations


def test_the_fixture_covers_what_it_claims():
    ok = [c for c in FIXTURE["cases"] if c["ok"]]
    assert len(FIXTURE["cases"]) == 1020 and len(ok) == 985
    assert len(MODELS) == 26
    seen = {(c["params"]["type_k"], c["params"]["type_v"], c["params"]["flash_attn"]) for c in ok}
    assert {("f16", "f16", "disabled"), ("f16", "f16", "enabled"), ("q8_0", "q8_0", "enabled"),
            ("q8_0", "f16", "disabled")} <= seen
    assert {c["params"]["kv_unified"] for c in ok if c["params"]["n_seq_max"] == 2} == {True, False}
    assert {_tokens(c, 0) for c in ok} >= {0, 1, 5, 64, 300}


def test_state_by_hand():
    """llama-gqa (4 layers, K and V of 128 f16 values: 256 B a row), 300 tokens, one sequence, one stream:
    n_stream 4 + cell count 4 + 300 cells x (pos 4 + n_seq_id 4 + seq id 4) + v_trans 4 + n_layer 4 + 8 rows of
    layers x (type 4 + row size 8 + 300 x 256) = 618,112 B; get_size adds 8; llama-server's file adds
    12 + 4 x (300 + 4)."""
    mc = _mc("llama-gqa")
    cp = _cp(mc, {"n_ctx": 1024, "n_seq_max": 1, "kv_unified": False, "n_batch": 512, "n_ubatch": 512,
                  "flash_attn": "enabled", "swa_full": True, "type_k": "f16", "type_v": "f16"})
    mem = 4 + 4 + 300 * 12 + 8 + 8 * (12 + 300 * 256)
    assert mem == 618_112 == S.state_bytes(mc, cp, 300)
    assert S.seq_get_size(mc, cp, 300) == 618_120
    assert S.server_file_bytes(mc, cp, 300) == 12 + 4 * 304 + 618_112 == 619_340
    # mamba (2 layers, n_embd_r 384, n_embd_s 2,048, f32): one state row whatever the tokens
    mc = _mc("mamba")
    cp = _cp(mc, {"n_ctx": 1024, "n_seq_max": 1, "kv_unified": False, "n_batch": 512, "n_ubatch": 512,
                  "flash_attn": "enabled", "swa_full": True, "type_k": "f16", "type_v": "f16"})
    per = 4 + 8 + 8 + 2 * (12 + 384 * 4) + 2 * (12 + 2048 * 4)
    assert per == 19_524 == S.state_bytes(mc, cp, 1) == S.state_bytes(mc, cp, 300)
    assert S.state_bytes(mc, cp, 0) == 4 + 8 + 4 * 12


def test_a_window_keeps_its_cells():
    assert S.window_cells("standard", 64, 300) == 64 and S.window_cells("standard", 64, 5) == 5
    # chunked (llama4): the tokens of the chunk holding the last position: 300 tokens in chunks of 128 -> 44
    assert S.window_cells("chunked", 128, 300) == 300 - 2 * 128 == 44 and S.window_cells("chunked", 128, 256) == 128
    assert S.window_cells(None, None, 300) == 300


def test_transfer_is_the_slot_file(cli):
    """kvcalc transfer --engine llama.cpp moves llama-server's slot file: for gemma3-swa at 300 tokens, one stream,
    f16, the fixture's llama.cpp-written server file."""
    rec = next(c for c in FIXTURE["cases"] if c["model"] == "gemma3-swa" and c["ok"] and _tokens(c, 0) == 300
               and c["params"]["n_seq_max"] == 1 and c["params"]["type_k"] == "f16"
               and c["params"]["flash_attn"] == "enabled")
    r = cli("transfer", str(ROOT / "tests/fixtures/gguf/llamacpp-gemma3-swa.gguf"), "-c", "300", "--engine",
            "llama.cpp", "--ctx-size", "1024", "--parallel", "1", "--json")
    assert r.code == 0, r.err
    d = json.loads(r.out)
    assert d["transfer_bytes"] == rec["seqs"]["0"]["file_bytes_server"]
    assert [g["units"] for g in d["groups"]] == [300, 64]  # every token in the full cache, the window's 64
    r = cli("transfer", str(ROOT / "tests/fixtures/gguf/llamacpp-gemma3-swa.gguf"), "-c", "300", "--engine",
            "llama.cpp", "--link", "pcie5-x16")
    assert r.code == 0 and "saved to a llama-server slot file and restored" in r.out
